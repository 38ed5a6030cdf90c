# clusterctl init on the provider's cluster: Cluster API's core provider from
# a local copy of its release (nothing is downloaded), after cert-manager,
# which clusterctl requires. variables.tf, beside resource.tf, declares the
# variables.
resource "kubeplay_phase" "cert_manager" {
  name      = "cert-manager"
  documents = [file(var.cert_manager_manifests)]
}

resource "kubeplay_clusterctl" "init" {
  name   = "clusterctl-init"
  action = "init"
  providers = [{
    name       = "cluster-api"
    type       = "CoreProvider"
    version    = var.capi_version
    components = file(var.core_components)
    metadata   = file(var.core_metadata)
  }]
  depends_on = [kubeplay_phase.cert_manager]
}
