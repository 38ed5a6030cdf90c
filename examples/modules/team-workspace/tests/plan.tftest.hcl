# Tests with a mocked provider: no cluster, a few seconds. The platform's
# group is mocked as the data source would read it from the catalog, and the
# run's result as an apply would record it.

mock_provider "kubeplay" {}

variables {
  kubeconfig_path = "unused-by-the-mock"
  container_group = "platform-small"
  node_label      = "platform-tiny"
  team            = "payments"
}

override_data {
  target = data.kubeplay_container_group.platform
  values = {
    namespace           = "platform-small"
    max_concurrent_runs = 2
    max_forks           = 4
  }
}

run "runs_in_the_platform_group" {
  command = plan

  assert {
    condition     = kubeplay_run.deploy.container_group == "platform-small" && kubeplay_run.deploy.node_label == "platform-tiny"
    error_message = "The run goes to the platform's group, in a pod of its node label."
  }
  assert {
    condition     = kubeplay_run.deploy.name == "payments-deploy" && kubeplay_run.deploy.triggers == tomap({ release = "2026.11" })
    error_message = "The run is named after the team, and a release change runs it again."
  }
  assert {
    condition     = output.pod_namespace == "platform-small"
    error_message = "The run's namespace is the one the platform's group reports."
  }
}

run "without_a_node_label" {
  command = plan

  variables {
    node_label = null
  }

  assert {
    condition     = kubeplay_run.deploy.node_label == null
    error_message = "Without var.node_label the run uses the group's own pod."
  }
}

run "refuses_more_forks_than_the_group_allows" {
  command = plan

  variables {
    forks = 8
  }

  expect_failures = [kubeplay_run.deploy]
}

run "recap_of_a_successful_run" {
  override_resource {
    target = kubeplay_run.deploy
    values = {
      status      = "successful"
      host_counts = { ok = 0, changed = 1, failed = 0, unreachable = 0, rescued = 0, ignored = 0 }
    }
  }

  assert {
    condition     = output.status == "successful"
    error_message = "The status output is the run's."
  }
  assert {
    condition     = output.recap == "hosts: changed=1, failed=0, ignored=0, ok=0, rescued=0, unreachable=0"
    error_message = "The recap counts the hosts by how they ended: ${output.recap}"
  }
}
