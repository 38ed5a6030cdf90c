# Read a node label another workspace manages.
data "kubeplay_node_label" "fedora" {
  name = "pod-fedora"
}

output "fedora_template" {
  value = data.kubeplay_node_label.fedora.rendered_template
}
