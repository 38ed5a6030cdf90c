# Apply tests against a cluster: they make the module's definitions, check
# them, and destroy them when the file ends. The harness passes the
# cluster's kubeconfig, and a catalog namespace and name of the test run's
# own, so that test runs in parallel on one cluster do not meet:
#
#   terraform get    # or terraform init, with a provider from a registry
#   terraform test -filter=tests/apply.tftest.hcl \
#     -var kubeconfig_path=$KUBECONFIG -var catalog_namespace=kp-test-1234 \
#     -var name=kp-test-1234 -var image=kubeplay.test/ee:v1

# Hands the harness's values to this file (see tests/setup/main.tf).
run "setup" {
  module {
    source = "./tests/setup"
  }
}

# The connection, under an alias that the runs below are given: the setup
# run, which it depends on, must not get it (Terraform 1.16 would see a
# cycle).
provider "kubeplay" {
  alias             = "cluster"
  config_path       = run.setup.kubeconfig_path
  catalog_namespace = run.setup.catalog_namespace
}

variables {
  groups = {
    small = { max_concurrent_runs = 2, max_forks = 4, warm_pods = 1, pod_pending_timeout = "2m" }
  }
  node_labels = {
    tiny = { cpu = "100m", memory = 128 }
  }
}

run "platform" {
  providers = {
    kubeplay = kubeplay.cluster
  }

  variables {
    name  = run.setup.name
    image = run.setup.image
  }

  assert {
    condition     = kubeplay_credential.this.can_run_pods
    error_message = "The credential may run pods: ${jsonencode(kubeplay_credential.this.missing_permissions)} missing."
  }
  assert {
    condition     = kubeplay_container_group.this["small"].warm_revision != "" && kubeplay_container_group.this["small"].owner_id != null
    error_message = "The group was made with warm pods and an owner id."
  }
  assert {
    condition     = strcontains(kubeplay_node_label.this["tiny"].rendered_template, "cpu: 100m")
    error_message = "The node label requests 100m of CPU."
  }
}

# A change of a limit updates the group in place (name, namespace and
# credential are the attributes whose change replaces it): runs that name it,
# in this workspace or another, are not replaced.
run "raise_the_limits" {
  providers = {
    kubeplay = kubeplay.cluster
  }

  variables {
    name  = run.setup.name
    image = run.setup.image
    groups = {
      small = { max_concurrent_runs = 3, max_forks = 6, warm_pods = 1, pod_pending_timeout = "2m" }
    }
  }

  assert {
    condition     = kubeplay_container_group.this["small"].max_concurrent_runs == 3 && kubeplay_container_group.this["small"].max_forks == 6
    error_message = "The group's limits are the new ones."
  }
  assert {
    condition     = output.group_names == { small = "${var.name}-small" } && output.namespaces == { small = "${var.name}-small" }
    error_message = "The group's name and namespace, which other workspaces use, did not change."
  }
}
