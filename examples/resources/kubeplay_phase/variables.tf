variable "kubeconfig" {
  description = "The path of a kubeconfig file for the cluster to use, for example the local test cluster's .cache/testcluster/kubeconfig."
  type        = string
}

variable "catalog_namespace" {
  description = "The namespace that stores kubeplay's definitions (credentials, container groups, node labels, phase inventories)."
  type        = string
  default     = "kubeplay-system"
}

variable "image" {
  description = "An image with python3 and ansible-core that the cluster's nodes can pull. The default, kubeplay.test/ee:v1, exists only in this repository's local test cluster (make cluster-up); elsewhere set another, such as quay.io/ansible/awx-ee:latest."
  type        = string
  default     = "kubeplay.test/ee:v1"
}

variable "target_kubeconfig" {
  description = <<-EOT
    The content of the target cluster's kubeconfig, with embedded certificates (for the local test cluster,
    the file .cache/testcluster/kubeconfig). The target cluster must hold workload01's kubeconfig, as Cluster API
    writes it: a Secret workload01-kubeconfig, key value, in namespace target-infra. Without Cluster API, make it
    with: kubectl create namespace target-infra && kubectl -n target-infra create secret generic
    workload01-kubeconfig --from-file=value=KUBECONFIG_FILE
  EOT
  type        = string
  sensitive   = true
  ephemeral   = true
}
