# var.image: an image with python3 and ansible-core that your nodes can pull,
# such as quay.io/ansible/awx-ee:latest (the default, kubeplay.test/ee:v1,
# exists only in this repository's local test cluster).
resource "kubeplay_container_group" "example" {
  name             = "example"
  namespace        = "example-runs"
  manage_namespace = true
  image            = var.image
}

resource "kubeplay_run" "hello" {
  container_group = kubeplay_container_group.example.name
  playbook        = <<-YAML
    - hosts: localhost
      gather_facts: false
      tasks:
        - ansible.builtin.debug:
            msg: Hello from an ephemeral pod
  YAML
}
