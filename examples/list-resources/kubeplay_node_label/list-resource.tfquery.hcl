# Find every node label in the catalog.
list "kubeplay_node_label" "all" {
  provider         = kubeplay
  include_resource = true
}
