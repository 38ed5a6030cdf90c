# Read a container group another workspace manages.
data "kubeplay_container_group" "awx" {
  name = "awx"
}

output "awx_run_pod" {
  value = data.kubeplay_container_group.awx.rendered_pod
}
