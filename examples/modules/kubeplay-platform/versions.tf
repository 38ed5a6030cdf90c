# A reusable module configures no provider: the workspace that calls it
# does, and its provider's catalog_namespace is where the module's
# definitions are stored, and where other workspaces read them.
terraform {
  required_version = ">= 1.11"
  required_providers {
    kubeplay = {
      source = "kubeplay/kubeplay"
    }
  }
}
