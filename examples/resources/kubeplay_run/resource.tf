# A service account with the pod-manager Role runs the playbooks.
resource "kubeplay_credential" "runner" {
  name      = "runner"
  kind      = "service_account"
  namespace = "ansible-runs"
}

resource "kubeplay_container_group" "default" {
  name       = "default"
  namespace  = "ansible-runs"
  credential = kubeplay_credential.runner.name
  image      = "quay.io/ansible/awx-ee:latest"
}

# A bigger pod for heavy playbooks, merged over the group's pod.
resource "kubeplay_node_label" "large" {
  name         = "large"
  image        = "quay.io/ansible/awx-ee:latest"
  cpu          = "2"
  memory       = 4096
  memory_limit = 8192
  labels       = { size = "large" }
}

# Runs the playbook in an ephemeral pod of the group, records the result and
# deletes the pod. Changing any input, or a trigger, runs it again.
resource "kubeplay_run" "site" {
  container_group = kubeplay_container_group.default.name
  node_label      = kubeplay_node_label.large.name

  playbook = file("${path.module}/site.yml")
  files = {
    "roles/web/tasks/main.yml" = file("${path.module}/roles/web/tasks/main.yml")
  }
  inventory  = file("${path.module}/inventory.ini")
  extra_vars = { release = "2026.11", replicas = 3 }

  # Secrets: delivered inside the exec stream, never in the pod spec, an argv,
  # the plan or the state, and redacted from the recorded output.
  extra_vars_wo = jsonencode({ db_password = var.db_password })
  env_wo        = { API_TOKEN = var.api_token }

  limit = "web"
  forks = 10

  triggers = {
    release = "2026.11"
  }

  timeouts = {
    create = "20m"
  }
}

# A plain command, for images without Ansible.
resource "kubeplay_run" "smoke" {
  container_group = kubeplay_container_group.default.name
  command         = ["sh", "-c", "curl -fsS https://example.com/healthz"]
  ignore_failure  = true
}

# A namespace label: the run gets a namespace of its own, with a service
# account the playbook reaches through KUBECONFIG (kubernetes.core reads
# K8S_AUTH_KUBECONFIG). The namespace is deleted when the run ends. This
# needs a credential that may create namespaces and RBAC objects.
resource "kubeplay_node_label" "scratch" {
  name   = "scratch"
  type   = "namespace"
  labels = { purpose = "integration-test" }
}

resource "kubeplay_container_group" "admin" {
  name      = "admin"
  namespace = "ansible-admin-runs"
  image     = "quay.io/ansible/awx-ee:latest"
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

variable "db_password" {
  type      = string
  sensitive = true
  ephemeral = true
}

variable "api_token" {
  type      = string
  sensitive = true
  ephemeral = true
}
