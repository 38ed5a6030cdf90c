# A pod held for debugging, as Zuul's autohold keeps a node: it lives until
# it is destroyed, and runs can use it one after another. var.image is an
# image with python3 and ansible-core that your nodes can pull, such as
# quay.io/ansible/awx-ee:latest (the default, kubeplay.test/ee:v1, exists
# only in this repository's local test cluster).
resource "kubeplay_container_group" "ci" {
  name             = "ci"
  namespace        = "ci-nodes"
  manage_namespace = true
  image            = var.image
}

resource "kubeplay_node" "debug" {
  name            = "debug"
  container_group = kubeplay_container_group.ci.name
}
