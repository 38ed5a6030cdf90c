variable "kubeconfig" {
  description = "The kubeconfig of the cluster to run in. make quickstart passes the local test cluster's."
  type        = string
}

variable "image" {
  description = "An image with python3 and ansible-core that the cluster's nodes can pull. The default, kubeplay.test/ee:v1, exists only in this repository's local test cluster (make cluster-up); elsewhere set another, such as quay.io/ansible/awx-ee:latest."
  type        = string
  default     = "kubeplay.test/ee:v1"
}

variable "catalog_namespace" {
  description = "The namespace that stores kubeplay's definitions; the provider creates it when missing."
  type        = string
  default     = "kubeplay-system"
}

variable "namespace" {
  description = "The namespace the container group creates for its runs, and deletes with the group."
  type        = string
  default     = "kubeplay-quickstart"
}
