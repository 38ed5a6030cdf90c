# Find the run pods of container group "awx", live and orphaned: a result
# reads "run 3f2a9c0d1e4b5a67 (orphaned, Failed, 2h)". Runs cannot be
# imported: use this to find what a killed Terraform or provider left
# behind, then delete it with kubectl or let the group's next run remove it.
list "kubeplay_run" "awx" {
  provider = kubeplay
  config {
    container_group = "awx"
  }
}
