# The connection this example uses; the documentation shows resource*.tf only.
# Run the directory with: terraform apply -var kubeconfig=PATH (variables.tf
# lists the other settings).

terraform {
  required_version = ">= 1.11"
  required_providers {
    kubeplay = {
      source = "kubeplay/kubeplay"
    }
  }
}

provider "kubeplay" {
  config_path       = var.kubeconfig
  catalog_namespace = var.catalog_namespace
}
