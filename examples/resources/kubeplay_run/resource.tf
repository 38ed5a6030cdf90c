# A provisioned service account, in a namespace that this phase makes.
resource "kubeplay_phase" "runs_namespace" {
  name      = "ansible-runs-namespace"
  documents = [yamlencode({ apiVersion = "v1", kind = "Namespace", metadata = { name = "ansible-runs" } })]
}

resource "kubeplay_credential" "runner" {
  name      = "runner"
  kind      = "service_account"
  namespace = kubeplay_phase.runs_namespace.objects[0].name
}

# var.image: an image with python3 and ansible-core, as in the first example.
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

# A playbook with its roles, inventory and variables, in a pod shaped by the
# label. A change of what runs, or of a trigger, runs it again.
resource "kubeplay_run" "site" {
  container_group = kubeplay_container_group.default.name
  node_label      = kubeplay_node_label.large.name

  playbook = file("${path.module}/site.yml")
  # The roles/ directory beside the playbook, shipped with it.
  files      = { for f in fileset(path.module, "roles/**") : f => file("${path.module}/${f}") }
  inventory  = file("${path.module}/inventory.ini")
  extra_vars = { release = "2026.11", replicas = 3 }

  # Write-only: in neither the plan nor the state (see Secrets below).
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

# Placement: the first group with room, by priority ("default" has none,
# which counts as 0). A plain command, for images without Ansible.
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
