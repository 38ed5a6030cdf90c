# AWX's kubernetes_bearer_token credential. The token is write-only: it is
# stored in the catalog Secret, never in the plan or the state.
resource "kubeplay_credential" "awx" {
  name            = "awx"
  kind            = "bearer_token"
  host            = var.host
  bearer_token_wo = var.awx_token
  ca_cert         = var.cluster_ca
  namespace       = "awx-runs"

  # Bump to send a new token: Terraform cannot see changes of write-only values.
  bearer_token_wo_version = 1
}

# A kubeconfig and one of its contexts.
resource "kubeplay_credential" "staging" {
  name                  = "staging"
  kind                  = "kubeconfig"
  kubeconfig_wo         = file(var.staging_kubeconfig)
  kubeconfig_wo_version = 1
  context               = var.staging_context
}

# A service account is provisioned in a namespace that exists: this phase
# makes it first, and deletes it after the credential on destroy.
resource "kubeplay_phase" "ci_namespace" {
  name      = "ci-namespace"
  documents = [yamlencode({ apiVersion = "v1", kind = "Namespace", metadata = { name = "ci-runs" } })]
}

# A service account with the pod-manager Role, and a kubeconfig for a CI system.
resource "kubeplay_credential" "runner" {
  name              = "runner"
  kind              = "service_account"
  namespace         = kubeplay_phase.ci_namespace.objects[0].name
  export_kubeconfig = true
}

output "runner_kubeconfig" {
  value     = kubeplay_credential.runner.exported_kubeconfig
  sensitive = true
}
