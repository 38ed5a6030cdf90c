variable "kubeconfig" {
  description = "The path of a kubeconfig file for the ephemeral cluster, for example the local test cluster's .cache/testcluster/kubeconfig."
  type        = string
}

variable "catalog_namespace" {
  description = "The namespace that stores kubeplay's definitions (credentials, phase inventories)."
  type        = string
  default     = "kubeplay-system"
}

variable "target_kubeconfig" {
  description = "The content of the target cluster's kubeconfig, with embedded certificates (for the local test cluster's second cluster, .cache/testcluster/kubeconfig2 with its files inlined)."
  type        = string
  sensitive   = true
  ephemeral   = true
}

variable "capi_version" {
  description = "The Cluster API release the components are of."
  type        = string
  default     = "v1.14.2"
}

variable "core_components" {
  description = "The path of the release's core-components.yaml."
  type        = string
}

variable "core_metadata" {
  description = "The path of the release's metadata.yaml."
  type        = string
}

variable "cert_manager_manifests" {
  description = "The path of cert-manager's manifests (at least its CustomResourceDefinitions, which clusterctl checks for)."
  type        = string
}

variable "ephemeral_variables" {
  description = "Values of the components' $${VAR} placeholders on the ephemeral cluster."
  type        = map(string)
  default     = {}
}

variable "target_variables" {
  description = "Values of the components' $${VAR} placeholders on the target cluster."
  type        = map(string)
  default     = {}
}
