# Connect with a kubeconfig file, as the hashicorp/kubernetes provider does.
provider "kubeplay" {
  config_path = var.kubeconfig

  # Where kubeplay keeps its definitions (credentials, container groups, node
  # labels); kubeplay-system unless set.
  catalog_namespace = var.catalog_namespace
}
