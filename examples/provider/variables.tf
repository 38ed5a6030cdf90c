variable "kubeconfig" {
  description = "The path of a kubeconfig file for the cluster to use, for example the local test cluster's .cache/testcluster/kubeconfig."
  type        = string
}

variable "catalog_namespace" {
  description = "The namespace that stores kubeplay's definitions (credentials, container groups, node labels, phase inventories)."
  type        = string
  default     = "kubeplay-system"
}

variable "cluster_endpoint" {
  description = "The API server's https URL, for the token and eks blocks, for example https://127.0.0.1:16443 for the local test cluster."
  type        = string
}

variable "cluster_ca" {
  description = "The PEM certificate of the CA that signed the API server's certificate."
  type        = string
}

variable "cluster_token" {
  description = "A bearer token for the API server, for example from `kubectl create token SERVICE_ACCOUNT`."
  type        = string
  sensitive   = true
}
