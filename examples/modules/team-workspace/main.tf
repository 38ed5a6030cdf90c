# A team's workspace that runs its playbooks in a container group that the
# platform team's workspace (the kubeplay-platform module) manages. It
# manages no group, label or credential: it reads them from the catalog that
# both workspaces' providers name, and can change none of them.

terraform {
  required_version = ">= 1.11"
  required_providers {
    kubeplay = {
      source = "kubeplay/kubeplay"
    }
  }
}

# The same cluster and catalog_namespace as the platform's workspace (and,
# when it sets one, the same catalog_key): that is what shares the catalog.
provider "kubeplay" {
  config_path       = var.kubeconfig_path
  catalog_namespace = var.catalog_namespace
}

data "kubeplay_container_group" "platform" {
  name = var.container_group
}

data "kubeplay_node_label" "size" {
  count = var.node_label == null ? 0 : 1

  name = var.node_label
}

resource "kubeplay_run" "deploy" {
  name            = "${var.team}-deploy"
  container_group = data.kubeplay_container_group.platform.name
  node_label      = one(data.kubeplay_node_label.size[*].name)
  forks           = var.forks

  playbook   = file("${path.module}/deploy.yml")
  extra_vars = { team = var.team, release = var.release }

  # A new release runs the playbook again.
  triggers = { release = var.release }

  lifecycle {
    precondition {
      condition     = var.forks <= coalesce(data.kubeplay_container_group.platform.max_forks, var.forks)
      error_message = "The run's forks (${var.forks}) exceed the max_forks of container group ${var.container_group}: lower forks, or ask the platform team for a larger group."
    }
  }
}
