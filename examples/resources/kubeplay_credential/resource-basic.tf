# The provider's own connection, for container groups and phases to use by
# name. Apply records who it connects as and whether it may run pods
# (username, can_run_pods).
resource "kubeplay_credential" "self" {
  name = "self"
  kind = "provider"
}
