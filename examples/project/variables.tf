variable "kubeconfig" {
  description = "The kubeconfig of the cluster to run in."
  type        = string
}

variable "image" {
  description = "An image with python3 and ansible-core that the cluster's nodes can pull. The default, kubeplay.test/ee:v1, exists only in this repository's local test cluster (make cluster-up); elsewhere set another, such as quay.io/ansible/awx-ee:latest."
  type        = string
  default     = "kubeplay.test/ee:v1"
}

variable "catalog_namespace" {
  description = "The namespace that stores kubeplay's definitions."
  type        = string
  default     = "kubeplay-system"
}

variable "namespace" {
  description = "The namespace the container group creates for its runs."
  type        = string
  default     = "kubeplay-project-example"
}
