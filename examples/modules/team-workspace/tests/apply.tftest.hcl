# Against a cluster: the platform team's module is applied first, as its
# own workspace would, then this workspace reads its group and label from
# the shared catalog and runs its playbook there. terraform test destroys
# them in reverse order when the file ends. The harness passes the cluster's
# kubeconfig, and a catalog namespace and name of the test run's own:
#
#   terraform get    # or terraform init, with a provider from a registry
#   terraform test -filter=tests/apply.tftest.hcl \
#     -var kubeconfig_path=$KUBECONFIG -var catalog_namespace=kp-test-1234 \
#     -var name=kp-test-1234 -var image=kubeplay.test/ee:v1

# Hands the harness's values to this file.
run "setup" {
  module {
    source = "../kubeplay-platform/tests/setup"
  }
}

# The connection, one catalog for both workspaces, under an alias that the
# runs below are given: the setup run, which it depends on, must not get it
# (Terraform 1.16 would see a cycle).
provider "kubeplay" {
  alias             = "cluster"
  config_path       = run.setup.kubeconfig_path
  catalog_namespace = run.setup.catalog_namespace
}

run "platform" {
  providers = {
    kubeplay = kubeplay.cluster
  }

  module {
    source = "../kubeplay-platform"
  }

  variables {
    name  = run.setup.name
    image = run.setup.image
    groups = {
      small = { max_concurrent_runs = 2, max_forks = 4, warm_pods = 1, pod_pending_timeout = "2m" }
    }
    node_labels = {
      tiny = { cpu = "100m", memory = 128 }
    }
  }
}

run "team_run" {
  providers = {
    kubeplay = kubeplay.cluster
  }

  variables {
    container_group = run.platform.group_names["small"]
    node_label      = run.platform.node_label_names["tiny"]
    team            = "payments"
  }

  assert {
    condition     = kubeplay_run.deploy.status == "successful"
    error_message = "The run ended ${kubeplay_run.deploy.status}: ${kubeplay_run.deploy.output}"
  }
  assert {
    condition     = kubeplay_run.deploy.host_counts.changed == 1 && kubeplay_run.deploy.host_counts.failed == 0 && kubeplay_run.deploy.host_count == 1
    error_message = "localhost changed, and nothing failed."
  }
  assert {
    condition     = strcontains(kubeplay_run.deploy.output, "payments deployed release 2026.11")
    error_message = "The playbook got the team's variables."
  }
  assert {
    condition     = output.pod_namespace == var.container_group && data.kubeplay_container_group.platform.max_forks == 4
    error_message = "The data source read the platform's group from the shared catalog."
  }
}
