# With the group of the first example (action-basic.tf).

# On demand: terraform apply -invoke=action.kubeplay_run.rotate_logs
# Terraform shows the pod starting, each output line as it comes, then the
# play recap and the status. Nothing is recorded in the state.
action "kubeplay_run" "rotate_logs" {
  config {
    container_group = kubeplay_container_group.ops.name
    playbook        = <<-YAML
      - hosts: all
        gather_facts: false
        tasks:
          - name: Rotate the logs
            ansible.builtin.debug:
              msg: "rotating logs of {{ release }}"
    YAML
    extra_vars      = { release = var.release }
    timeouts {
      invoke = "10m"
    }
  }
}

# From a resource's lifecycle: a smoke test after each create or update of
# the release, and a drain before it is destroyed (Terraform 1.16).
resource "terraform_data" "release" {
  input = var.release

  lifecycle {
    action_trigger {
      events  = [after_create, after_update]
      actions = [action.kubeplay_run.smoke_test]
      # A failed smoke test is a warning; the default, halt, fails the apply.
      on_failure = continue
    }
    action_trigger {
      events  = [before_destroy]
      actions = [action.kubeplay_run.drain]
    }
  }
}

action "kubeplay_run" "smoke_test" {
  config {
    container_group = kubeplay_container_group.ops.name
    command         = ["sh", "-c", "echo smoke testing release ${var.release}"]
  }
}

action "kubeplay_run" "drain" {
  config {
    container_group = kubeplay_container_group.ops.name
    command         = ["sh", "-c", "echo draining release ${var.release}"]
  }
}
