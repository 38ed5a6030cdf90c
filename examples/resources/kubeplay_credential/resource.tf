# AWX's kubernetes_bearer_token credential. The token is write-only: it is
# stored in the catalog Secret, never in the plan or the state.
resource "kubeplay_credential" "awx" {
  name         = "awx"
  kind         = "bearer_token"
  host         = "https://k8s.example.com:6443"
  bearer_token = var.awx_token
  ca_cert      = file("${path.module}/ca.crt")
  namespace    = "awx-runs"

  # Bump to send a new token: Terraform cannot see changes of write-only values.
  secret_version = "1"
}

# A kubeconfig and one of its contexts.
resource "kubeplay_credential" "staging" {
  name       = "staging"
  kind       = "kubeconfig"
  kubeconfig = file("${path.module}/staging.kubeconfig")
  context    = "staging-admin"
}

# The provider's own connection.
resource "kubeplay_credential" "self" {
  name = "self"
  kind = "provider"
}

# A service account with the pod-manager Role, and a kubeconfig for a CI system.
resource "kubeplay_credential" "runner" {
  name              = "runner"
  kind              = "service_account"
  namespace         = "ci-runs"
  export_kubeconfig = true
}

output "runner_kubeconfig" {
  value     = kubeplay_credential.runner.exported_kubeconfig
  sensitive = true
}

variable "awx_token" {
  type      = string
  sensitive = true
  ephemeral = true
}
