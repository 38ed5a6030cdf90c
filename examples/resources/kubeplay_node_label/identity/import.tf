# Terraform 1.12 and later: a node label is identified by its name in the catalog namespace.
import {
  to = kubeplay_node_label.fedora
  identity = {
    name = "pod-fedora"
  }
}
