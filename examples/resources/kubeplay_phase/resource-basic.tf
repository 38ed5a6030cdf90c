# Applies its documents server-side on the provider's cluster, waits until
# they are ready, and deletes them when it is destroyed.
resource "kubeplay_phase" "team" {
  name      = "team-apps"
  documents = [yamlencode({ apiVersion = "v1", kind = "Namespace", metadata = { name = "team-apps" } })]
}
