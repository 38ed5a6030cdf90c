# Plan-only tests with a mocked provider: no cluster, no credentials, a few
# seconds. They check what the module derives from its inputs, and that its
# validations refuse what they should.

mock_provider "kubeplay" {}

variables {
  name  = "platform"
  image = "kubeplay.test/ee:v1"
  groups = {
    small = { max_concurrent_runs = 2, max_forks = 10, warm_pods = 1 }
    large = { max_concurrent_runs = 4, pod_pending_timeout = "10m", priority = 10 }
  }
  node_labels = {
    small = { cpu = "100m", memory = 128 }
  }
  team_labels = { team = "platform" }
}

run "names_and_namespaces" {
  command = plan

  assert {
    condition     = output.group_names == { small = "platform-small", large = "platform-large" }
    error_message = "Each group is named after the module's name and its key."
  }
  assert {
    condition     = output.namespaces == { small = "platform-small", large = "platform-large" }
    error_message = "Each group has a namespace of its own, named as the group."
  }
  assert {
    condition     = output.node_label_names == { small = "platform-small" }
    error_message = "Each node label is named after the module's name and its key."
  }
  assert {
    condition     = output.credential_name == "platform"
    error_message = "The credential is named as the module."
  }
}

run "group_settings" {
  command = plan

  assert {
    condition     = alltrue([for g in kubeplay_container_group.this : g.credential == "platform" && g.manage_namespace && g.image == "kubeplay.test/ee:v1"])
    error_message = "Every group runs with the module's credential and image, in a namespace it manages."
  }
  assert {
    condition     = kubeplay_container_group.this["small"].max_concurrent_runs == 2 && kubeplay_container_group.this["small"].max_forks == 10 && kubeplay_container_group.this["small"].warm_pods == 1
    error_message = "The small group's limits and warm pods are those of var.groups."
  }
  assert {
    condition     = kubeplay_container_group.this["large"].max_forks == null && kubeplay_container_group.this["large"].warm_pods == 0 && kubeplay_container_group.this["large"].pod_pending_timeout == "10m"
    error_message = "The large group's optional settings take var.groups' defaults and values."
  }
  assert {
    condition     = kubeplay_container_group.this["small"].labels == tomap({ team = "platform", "kubeplay.example/platform" = "platform" })
    error_message = "Run pods carry the team's labels and the platform's."
  }
}

run "refuses_a_bad_name" {
  command = plan

  variables {
    name = "Platform_A"
  }

  expect_failures = [var.name]
}

run "refuses_warm_pods_beyond_the_quota" {
  command = plan

  variables {
    groups = { small = { max_concurrent_runs = 1, warm_pods = 2 } }
  }

  expect_failures = [var.groups]
}

run "refuses_a_bad_timeout" {
  command = plan

  variables {
    groups = { small = { max_concurrent_runs = 1, pod_pending_timeout = "five minutes" } }
  }

  expect_failures = [var.groups]
}

run "refuses_a_bad_cpu" {
  command = plan

  variables {
    node_labels = { small = { cpu = "a lot", memory = 128 } }
  }

  expect_failures = [var.node_labels]
}
