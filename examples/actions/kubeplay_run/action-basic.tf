# terraform apply -invoke=action.kubeplay_run.hello runs the playbook in a
# pod of the group and shows its output as it comes; the state records
# nothing. var.image is an image with python3 and ansible-core that your
# nodes can pull, such as quay.io/ansible/awx-ee:latest (the default,
# kubeplay.test/ee:v1, exists only in this repository's local test cluster).
resource "kubeplay_container_group" "ops" {
  name             = "ops"
  namespace        = "ops-runs"
  manage_namespace = true
  image            = var.image
}

action "kubeplay_run" "hello" {
  config {
    container_group = kubeplay_container_group.ops.name
    playbook        = <<-YAML
      - hosts: localhost
        gather_facts: false
        tasks:
          - ansible.builtin.debug:
              msg: Hello from an ephemeral pod
    YAML
  }
}
