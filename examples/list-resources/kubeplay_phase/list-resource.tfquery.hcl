# Find the phases applied to the cluster of the "staging" credential. An
# imported phase lists its recorded objects; its documents or kustomization
# are not stored, so add them to the generated block.
list "kubeplay_phase" "staging" {
  provider = kubeplay
  config {
    cluster = "staging"
  }
}
