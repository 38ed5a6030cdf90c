# Two runs in the held node: they take turns, and the second sees what the
# first left in the pod outside its run directory.
resource "kubeplay_run" "prepare" {
  container_group = kubeplay_container_group.ci.name
  node            = kubeplay_node.debug.name
  command         = ["sh", "-c", "date > /tmp/prepared-at"]
}

resource "kubeplay_run" "check" {
  container_group = kubeplay_container_group.ci.name
  node            = kubeplay_node.debug.name
  command         = ["cat", "/tmp/prepared-at"]
  depends_on      = [kubeplay_run.prepare]
}

# For an Ansible elsewhere that reaches the node with kubectl exec.
output "debug_node_inventory" {
  value = kubeplay_node.debug.inventory
}

# A namespace node, as Nodepool's namespace labels give Zuul: a namespace
# with a service account that lives until it is destroyed. Runs on it get a
# pod of their own with a kubeconfig for that namespace, and take turns.
resource "kubeplay_node_label" "sandbox" {
  name = "sandbox"
  type = "namespace"
}

resource "kubeplay_node" "sandbox" {
  name            = "ci-sandbox"
  container_group = kubeplay_container_group.ci.name
  node_label      = kubeplay_node_label.sandbox.name
}

resource "kubeplay_run" "in_sandbox" {
  container_group = kubeplay_container_group.ci.name
  node            = kubeplay_node.sandbox.name
  command         = ["sh", "-c", "echo \"working in namespace $KUBEPLAY_NAMESPACE\""]
}
