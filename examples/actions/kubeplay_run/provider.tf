# The connection this example uses; the documentation shows action*.tf only.
# Run the directory with: terraform apply -var kubeconfig=PATH (variables.tf
# lists the other settings). Actions need Terraform 1.14, their
# before_destroy and after_destroy events 1.16.

terraform {
  required_version = ">= 1.16"
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
