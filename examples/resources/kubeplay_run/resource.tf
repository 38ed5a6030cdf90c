# A service account with the pod-manager Role runs the playbooks. It is
# provisioned in a namespace that exists: this phase makes it first.
resource "kubeplay_phase" "runs_namespace" {
  name      = "ansible-runs-namespace"
  documents = [yamlencode({ apiVersion = "v1", kind = "Namespace", metadata = { name = "ansible-runs" } })]
}

resource "kubeplay_credential" "runner" {
  name      = "runner"
  kind      = "service_account"
  namespace = kubeplay_phase.runs_namespace.objects[0].name
}

# var.image defaults to kubeplay.test/ee:v1, which exists only in this
# repository's local test cluster: elsewhere, set it to an image with
# python3 and ansible-core that your nodes can pull.
resource "kubeplay_container_group" "default" {
  name       = "default"
  namespace  = kubeplay_credential.runner.namespace
  credential = kubeplay_credential.runner.name
  image      = var.image
}

# A bigger pod for heavy playbooks, merged over the group's pod.
resource "kubeplay_node_label" "large" {
  name         = "large"
  image        = var.image
  cpu          = "500m"
  memory       = 1024
  memory_limit = 2048
  labels       = { size = "large" }
}

# Runs the playbook in an ephemeral pod of the group, records the result and
# deletes the pod. Changing any input, or a trigger, runs it again.
resource "kubeplay_run" "site" {
  container_group = kubeplay_container_group.default.name
  node_label      = kubeplay_node_label.large.name

  playbook = file("${path.module}/site.yml")
  # The roles/ directory beside the playbook, shipped with it.
  files      = { for f in fileset(path.module, "roles/**") : f => file("${path.module}/${f}") }
  inventory  = file("${path.module}/inventory.ini")
  extra_vars = { release = "2026.11", replicas = 3 }

  # Secrets: delivered inside the exec stream, never in the pod spec, an argv,
  # the plan or the state, and redacted from the recorded output.
  extra_vars_wo = jsonencode({ db_password = var.db_password })
  env_wo        = { API_TOKEN = var.api_token }

  limit = ["web"]
  forks = 10

  triggers = {
    release = "2026.11"
  }

  timeouts {
    create = "20m"
  }
}

# A plain command, for images without Ansible. ignore_failure records a
# failure without failing the apply.
resource "kubeplay_run" "smoke" {
  container_group = kubeplay_container_group.default.name
  command         = ["sh", "-c", "uname -sr && df -h /tmp"]
  ignore_failure  = true
}

# Placement, as AWX's ordered instance groups and Nodepool's pool priority:
# the run goes to the first group with room for it when it starts (a free
# run slot under max_concurrent_runs, room for its forks under max_forks),
# trying the groups by priority, lower first, then in the list's order; when
# all are full it waits on all of them. container_group records where it
# ran, and its destroy_playbook runs there. Here "default" (no priority
# counts as 0) comes before "overflow" (priority 10).
resource "kubeplay_container_group" "overflow" {
  name       = "overflow"
  namespace  = kubeplay_credential.runner.namespace
  credential = kubeplay_credential.runner.name
  image      = var.image
  priority   = 10
}

resource "kubeplay_run" "placed" {
  container_groups = [kubeplay_container_group.overflow.name, kubeplay_container_group.default.name]
  command          = ["sh", "-c", "echo placed"]
}

# A namespace label: the run gets a namespace of its own, with a service
# account the playbook reaches through KUBECONFIG (kubernetes.core reads
# K8S_AUTH_KUBECONFIG). The namespace is deleted when the run ends. This
# needs a credential that may create namespaces and RBAC objects: this group
# has none, so it uses the provider's connection.
resource "kubeplay_node_label" "scratch" {
  name   = "scratch"
  type   = "namespace"
  labels = { purpose = "integration-test" }
}

resource "kubeplay_container_group" "admin" {
  name             = "admin"
  namespace        = "ansible-admin-runs"
  manage_namespace = true
  image            = var.image
}

resource "kubeplay_run" "integration" {
  container_group = kubeplay_container_group.admin.name
  node_label      = kubeplay_node_label.scratch.name
  playbook        = file("${path.module}/integration.yml")
}

output "site_status" {
  value = kubeplay_run.site.status
}

output "site_recap" {
  value = kubeplay_run.site.host_stats
}

output "integration_namespace" {
  description = "The namespace the integration run got; it is gone now."
  value       = kubeplay_run.integration.run_namespace
}
