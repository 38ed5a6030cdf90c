variable "kubeconfig_path" {
  description = "The path of a kubeconfig file for the cluster that holds the platform's catalog."
  type        = string
}

variable "catalog_namespace" {
  description = "The platform's catalog namespace: the catalog_namespace of the workspace that applied the kubeplay-platform module."
  type        = string
  default     = "kubeplay-system"
}

variable "container_group" {
  description = "The name of the platform's container group to run in, one of the module's group_names."
  type        = string

  validation {
    condition     = can(regex("^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$", var.container_group))
    error_message = "The container group must be a group's name: a lowercase RFC 1123 label of at most 63 characters."
  }
}

variable "node_label" {
  description = "The name of one of the platform's node labels (the module's node_label_names) that shapes the run's pod; null runs the group's own pod."
  type        = string
  default     = null
}

variable "team" {
  description = "The team's name, which names the run and reaches the playbook as the variable team."
  type        = string

  validation {
    condition     = can(regex("^[a-z0-9]([-a-z0-9]{0,30}[a-z0-9])?$", var.team))
    error_message = "The team must be a lowercase RFC 1123 label of at most 32 characters."
  }
}

variable "release" {
  description = "The release the playbook deploys; a change runs the playbook again."
  type        = string
  default     = "2026.11"
}

variable "forks" {
  description = "Ansible's forks for the run, at most the group's max_forks."
  type        = number
  default     = 2

  validation {
    condition     = var.forks >= 1 && floor(var.forks) == var.forks
    error_message = "The forks must be a whole number of at least 1."
  }
}
