# kubeplay's main job in one file: a playbook runs in an ephemeral pod of a
# container group, its result lands in the state, and the pod is gone.
#
# `make quickstart` at the repository's root applies this against the local
# test cluster; `make quickstart-destroy` removes what it made.

terraform {
  required_version = ">= 1.11"
  required_providers {
    kubeplay = {
      source = "kubeplay/kubeplay"
    }
  }
}

provider "kubeplay" {
  config_path       = var.kubeconfig
  catalog_namespace = var.catalog_namespace
}

# The provider's own connection runs the playbooks. Other kinds: a bearer
# token (AWX), a kubeconfig, a provisioned service account, or a Cluster API
# cluster's kubeconfig.
resource "kubeplay_credential" "local" {
  name        = "quickstart"
  kind        = "provider"
  description = "The local test cluster, through the provider's kubeconfig."
}

# Where runs execute: a namespace of its own, at most two runs at a time,
# enforced by a ResourceQuota for every Terraform process.
# var.image defaults to kubeplay.test/ee:v1, which exists only in this
# repository's local test cluster: elsewhere, set it to an image with
# python3 and ansible-core that your nodes can pull.
resource "kubeplay_container_group" "quickstart" {
  name                = "quickstart"
  credential          = kubeplay_credential.local.name
  namespace           = var.namespace
  manage_namespace    = true
  image               = var.image
  max_concurrent_runs = 2
}

# A pod template merged over the group's pod, as a Nodepool label.
resource "kubeplay_node_label" "small" {
  name   = "quickstart-small"
  image  = var.image
  cpu    = "500m"
  memory = 256
  labels = { purpose = "quickstart" }
}

resource "kubeplay_run" "hello" {
  name            = "hello"
  container_group = kubeplay_container_group.quickstart.name
  node_label      = kubeplay_node_label.small.name

  playbook   = file("${path.module}/site.yml")
  inventory  = file("${path.module}/inventory.ini")
  extra_vars = { greeting = "Hello from an ephemeral pod", release = "2026.11" }
}

output "status" {
  description = "successful, failed, error or canceled."
  value       = kubeplay_run.hello.status
}

output "host_counts" {
  description = "How many hosts ended ok, changed, failed or unreachable (and with rescued or ignored failures)."
  value       = kubeplay_run.hello.host_counts
}

output "host_stats" {
  description = "The play recap of each host that failed or was unreachable."
  value       = kubeplay_run.hello.host_stats
}

output "recap" {
  description = "The play recap as text: the hosts counted by how they ended, then a line per host that failed or was unreachable."
  value = join("\n", concat(
    ["hosts: ${join(", ", [for k, v in kubeplay_run.hello.host_counts : "${k}=${v}"])}"],
    [for host, s in kubeplay_run.hello.host_stats : "${host}: ${join(", ", [for k, v in s : "${k}=${v}"])}"],
  ))
}

output "pod" {
  description = "The pod the playbook ran in; it was deleted when the run ended."
  value       = "${kubeplay_run.hello.pod_name} on node ${kubeplay_run.hello.node_name}"
}

output "output" {
  description = "The last lines of the playbook's output, with secrets redacted."
  value       = kubeplay_run.hello.output
}
