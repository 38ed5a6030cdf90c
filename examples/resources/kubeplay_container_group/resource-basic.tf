# Where runs execute: a namespace that the group creates, and deletes with
# it, through the provider's connection; runs use AWX's execution
# environment, the default image.
resource "kubeplay_container_group" "team" {
  name             = "team"
  namespace        = "team-runs"
  manage_namespace = true
}
