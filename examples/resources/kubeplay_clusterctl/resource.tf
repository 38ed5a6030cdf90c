# airshipctl's Clusterctl phases of a plan that turns an ephemeral
# (bootstrap) cluster into a self-managed target cluster: Cluster API on the
# ephemeral cluster, then on the target cluster, then the move of the
# cluster's objects to the target, which then manages itself. The providers'
# components come from a local copy of a release, as airshipctl's repository
# does; nothing is downloaded.

resource "kubeplay_credential" "target" {
  name          = "target-cluster"
  kind          = "kubeconfig"
  kubeconfig_wo = var.target_kubeconfig
}

# clusterctl requires cert-manager's API before it installs providers:
# airshipctl installs cert-manager in an earlier phase, and so does this.
resource "kubeplay_phase" "cert_manager_ephemeral" {
  name      = "cert-manager-ephemeral"
  documents = [file(var.cert_manager_manifests)]
}

resource "kubeplay_phase" "cert_manager_target" {
  name      = "cert-manager-target"
  cluster   = kubeplay_credential.target.name
  documents = [file(var.cert_manager_manifests)]
}

locals {
  core_provider = {
    name       = "cluster-api"
    type       = "CoreProvider"
    version    = var.capi_version
    components = file(var.core_components)
    metadata   = file(var.core_metadata)
  }
}

# clusterctl-init-ephemeral
resource "kubeplay_clusterctl" "init_ephemeral" {
  name       = "clusterctl-init-ephemeral"
  action     = "init"
  providers  = [local.core_provider]
  variables  = var.ephemeral_variables
  depends_on = [kubeplay_phase.cert_manager_ephemeral]
  timeouts {
    create = "10m"
  }
}

# clusterctl-init-target
resource "kubeplay_clusterctl" "init_target" {
  name       = "clusterctl-init-target"
  action     = "init"
  cluster    = kubeplay_credential.target.name
  providers  = [local.core_provider]
  variables  = var.target_variables
  depends_on = [kubeplay_phase.cert_manager_target]
  timeouts {
    create = "10m"
  }
}

# clusterctl-move: the Cluster API objects of target-infra go from the
# ephemeral cluster to the target.
resource "kubeplay_clusterctl" "move" {
  name       = "clusterctl-move"
  action     = "move"
  to_cluster = kubeplay_credential.target.name
  namespace  = "target-infra"
  depends_on = [kubeplay_clusterctl.init_ephemeral, kubeplay_clusterctl.init_target]
}
