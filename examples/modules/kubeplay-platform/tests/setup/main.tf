# What the harness that runs the apply tests passes on the command line
# (terraform test -var ...), handed to the test file as outputs: a test
# file's own variables blocks would take precedence over -var, and the
# module itself has no business declaring a kubeconfig.

# It uses no provider, but names kubeplay's source, so that no CLI looks for
# a hashicorp/kubeplay for this run.
terraform {
  required_providers {
    kubeplay = {
      source = "kubeplay/kubeplay"
    }
  }
}

variable "kubeconfig_path" {
  description = "The path of the kubeconfig of the cluster the tests apply to."
  type        = string
}

variable "catalog_namespace" {
  description = "A catalog namespace of the test run's own, so that runs on one cluster do not meet."
  type        = string
}

variable "name" {
  description = "A prefix of the test run's own for the module's definitions and namespaces."
  type        = string
}

variable "image" {
  description = "The run image, one the cluster's nodes can pull."
  type        = string
  default     = "quay.io/ansible/awx-ee:latest"
}

output "kubeconfig_path" {
  value = var.kubeconfig_path
}

output "catalog_namespace" {
  value = var.catalog_namespace
}

output "name" {
  value = var.name
}

output "image" {
  value = var.image
}
