# Read a credential that another workspace manages.
data "kubeplay_credential" "awx" {
  name = "awx"
}

output "awx_can_run_pods" {
  value = data.kubeplay_credential.awx.can_run_pods
}
