# A node label is imported by its name in the catalog namespace.
terraform import kubeplay_node_label.fedora pod-fedora
