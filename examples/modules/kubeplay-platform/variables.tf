variable "name" {
  description = "The prefix of every definition and namespace the module makes: the credential is called name, each group and its namespace name-<group>, each node label name-<label>. Unique in the catalog namespace, and its namespaces unique on the cluster."
  type        = string

  validation {
    condition     = can(regex("^[a-z0-9]([-a-z0-9]{0,38}[a-z0-9])?$", var.name))
    error_message = "The name must be a lowercase RFC 1123 label of at most 40 characters (lowercase letters, digits and '-', starting and ending with a letter or digit), so that name-<group> stays within 63."
  }
}

variable "image" {
  description = "The run image of every group: an image with python3 and ansible-core that the cluster's nodes can pull. The local test cluster's kubeplay.test/ee:v1 exists only there."
  type        = string
  default     = "quay.io/ansible/awx-ee:latest"

  validation {
    condition     = length(trimspace(var.image)) > 0 && !can(regex("\\s", var.image))
    error_message = "The image must be a non-empty image reference without whitespace, such as quay.io/ansible/awx-ee:latest."
  }
}

variable "groups" {
  description = "The container groups to make, by a short name of at most 22 characters. Each gets a namespace of its own, since a group's max_concurrent_runs is a ResourceQuota that counts every pod of its namespace. max_concurrent_runs (at least 1) bounds the group's run pods, warm pods included; max_forks bounds the Ansible forks of its live runs; warm_pods (at most max_concurrent_runs) keeps pods started ahead of runs; pod_pending_timeout bounds a run's wait for its pod; a lower priority is tried first by runs that name several groups."
  type = map(object({
    max_concurrent_runs = number
    max_forks           = optional(number)
    warm_pods           = optional(number, 0)
    pod_pending_timeout = optional(string, "5m")
    priority            = optional(number)
  }))

  validation {
    condition     = length(var.groups) > 0
    error_message = "Define at least one group: workspaces have nowhere to run without one."
  }
  validation {
    condition     = alltrue([for k in keys(var.groups) : can(regex("^[a-z0-9]([-a-z0-9]{0,20}[a-z0-9])?$", k))])
    error_message = "Each group's key must be a lowercase RFC 1123 label of at most 22 characters: it becomes part of the group's and its namespace's names."
  }
  validation {
    condition     = alltrue([for g in values(var.groups) : g.max_concurrent_runs >= 1 && floor(g.max_concurrent_runs) == g.max_concurrent_runs])
    error_message = "Each group's max_concurrent_runs must be a whole number of at least 1."
  }
  validation {
    condition     = alltrue([for g in values(var.groups) : g.max_forks == null ? true : g.max_forks >= 1 && floor(g.max_forks) == g.max_forks])
    error_message = "Each group's max_forks, when set, must be a whole number of at least 1."
  }
  validation {
    condition     = alltrue([for g in values(var.groups) : g.warm_pods >= 0 && g.warm_pods <= g.max_concurrent_runs && floor(g.warm_pods) == g.warm_pods])
    error_message = "Each group's warm_pods must be a whole number from 0 to its max_concurrent_runs: warm pods count against the group's quota, and more would leave no room for runs."
  }
  validation {
    condition     = alltrue([for g in values(var.groups) : can(regex("^([0-9]+(\\.[0-9]+)?(ms|s|m|h))+$", g.pod_pending_timeout))])
    error_message = "Each group's pod_pending_timeout must be a duration such as 90s, 5m or 1h30m."
  }
}

variable "node_labels" {
  description = "Node labels that shape the pods of runs that name them, by a short name of at most 22 characters: a CPU request (a quantity such as 250m) and a memory request in MiB, which are also their limits."
  type = map(object({
    cpu    = string
    memory = number
  }))
  default = {}

  validation {
    condition     = alltrue([for k in keys(var.node_labels) : can(regex("^[a-z0-9]([-a-z0-9]{0,20}[a-z0-9])?$", k))])
    error_message = "Each node label's key must be a lowercase RFC 1123 label of at most 22 characters: it becomes part of the label's name."
  }
  validation {
    condition     = alltrue([for l in values(var.node_labels) : can(regex("^([0-9]+m|[0-9]+(\\.[0-9]+)?)$", l.cpu))])
    error_message = "Each node label's cpu must be a CPU quantity such as 250m, 1 or 1.5."
  }
  validation {
    condition     = alltrue([for l in values(var.node_labels) : l.memory >= 16 && floor(l.memory) == l.memory])
    error_message = "Each node label's memory must be a whole number of MiB, at least 16."
  }
}

variable "team_labels" {
  description = "Labels put on every run pod of the module's groups, such as an owning team or a cost center."
  type        = map(string)
  default     = {}
}
