variable "kubeconfig" {
  description = "The path of a kubeconfig file for the cluster to use, for example the local test cluster's .cache/testcluster/kubeconfig."
  type        = string
}

variable "catalog_namespace" {
  description = "The namespace that stores kubeplay's definitions (credentials, container groups, node labels, phase inventories)."
  type        = string
  default     = "kubeplay-system"
}

variable "host" {
  description = "The https URL of the API server the awx credential connects to, for example https://127.0.0.1:16443 for the local test cluster."
  type        = string
}

variable "cluster_ca" {
  description = "The PEM certificate of the CA that signed that API server's certificate (a kubeconfig's certificate-authority-data, base64-decoded)."
  type        = string
}

variable "awx_token" {
  description = "A bearer token for that API server, for example from `kubectl create token SERVICE_ACCOUNT`. Ephemeral: it reaches the catalog Secret, never the plan or the state."
  type        = string
  sensitive   = true
  ephemeral   = true
}

variable "staging_kubeconfig" {
  description = "The path of the kubeconfig file the staging credential stores. Its certificates and keys must be embedded (client-certificate-data), not file paths."
  type        = string
}

variable "staging_context" {
  description = "The context of that kubeconfig the staging credential uses, for example kubeplay-testcluster on the local test cluster."
  type        = string
}
