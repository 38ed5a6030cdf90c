resource "kubeplay_credential" "kubespray" {
  name          = "kubespray"
  kind          = "kubeconfig"
  kubeconfig_wo = var.kubeconfig # write-only
  context       = "admin-cluster.local"
}

resource "kubeplay_container_group" "main" {
  name                = "main"
  credential          = kubeplay_credential.kubespray.name
  namespace           = "nodepool-main"
  manage_namespace    = true
  max_concurrent_runs = 10
  max_cores           = "8"

  default_label_cpu    = "1"
  default_label_memory = 1024
}

resource "kubeplay_node_label" "namespace" {
  name = "kubernetes-namespace"
  type = "namespace"
}

resource "kubeplay_node_label" "fedora" {
  name        = "pod-fedora"
  image       = "registry.example.com/fedora-ansible:40"
  memory      = 2048
  python_path = "/usr/bin/python3"
}

resource "kubeplay_run" "job" {
  container_group = kubeplay_container_group.main.name
  node_label      = kubeplay_node_label.fedora.name
  playbook        = file("${path.module}/job.yml")
}

variable "kubeconfig" {
  description = "The kubeconfig of Nodepool's launcher (its ~/.kube/config), as text."
  type        = string
  sensitive   = true
  ephemeral   = true
}
