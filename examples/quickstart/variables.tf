variable "kubeconfig" {
  description = "The kubeconfig of the cluster to run in. make quickstart passes the local test cluster's."
  type        = string
}

variable "image" {
  description = "An image with python3 and ansible-core that the cluster's nodes have. The local test cluster has kubeplay.test/ee:v1; AWX users would use quay.io/ansible/awx-ee."
  type        = string
  default     = "kubeplay.test/ee:v1"
}
