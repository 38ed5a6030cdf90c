resource "kubeplay_credential" "target" {
  name          = "target-cluster"
  kind          = "kubeconfig"
  kubeconfig_wo = var.target_kubeconfig # write-only
}

# workload01's kubeconfig comes from its parent, target-cluster.
resource "kubeplay_credential" "workload01" {
  name               = "workload01"
  kind               = "cluster_api"
  parent             = kubeplay_credential.target.name
  cluster_name       = "workload01"
  cluster_namespace  = "default"
  kubeconfig_timeout = "30m"
  depends_on         = [kubeplay_phase.initinfra_target]
}

resource "kubeplay_phase" "initinfra_target" {
  name          = "initinfra-target"
  cluster       = kubeplay_credential.target.name
  kustomization = "${path.module}/target/initinfra"
  prune         = false
  timeouts {
    create = "2000s"
    update = "2000s"
  }
}

resource "kubeplay_phase" "workload" {
  name          = "workload"
  cluster       = kubeplay_credential.workload01.name
  kustomization = "${path.module}/workload01/apps"
  prune         = false
  timeouts {
    create = "2000s"
    update = "2000s"
  }
}

variable "target_kubeconfig" {
  type      = string
  sensitive = true
  ephemeral = true
}
