# A run from a project directory: the playbook, a role, inventories (INI and
# a constructed plugin configuration), group_vars, ansible.cfg, a binary file
# and a requirements.yml that installs a collection, all shipped from
# ./ansible as they are on disk. The state keeps each file's hash, not its
# content; changing any file replaces the run, and the plan names the file.

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

resource "kubeplay_credential" "local" {
  name = "project-example"
  kind = "provider"
}

# var.image defaults to kubeplay.test/ee:v1, which exists only in this
# repository's local test cluster: elsewhere, set it to an image with
# python3 and ansible-core that your nodes can pull.
resource "kubeplay_container_group" "deploy" {
  name             = "project-example"
  credential       = kubeplay_credential.local.name
  namespace        = var.namespace
  manage_namespace = true
  image            = var.image
}

resource "kubeplay_run" "site" {
  name            = "site"
  container_group = kubeplay_container_group.deploy.name

  project_dir    = "${path.module}/ansible"
  project_ignore = ["*.bak", "scratch/"]
  playbook_path  = "site.yml"
  # Several -i, in order: the constructed configuration groups the hosts of
  # the INI inventory before it.
  inventories = ["inventories/hosts.ini", "inventories/groups.constructed.yml"]
  limit       = ["frontend"]

  extra_vars = { release = "2026.11", tool_sha1 = filesha1("${path.module}/ansible/files/tool.bin") }
}

output "status" {
  value = kubeplay_run.site.status
}

output "project_hash" {
  description = "Changes with any shipped file of ./ansible."
  value       = kubeplay_run.site.project_hash
}
