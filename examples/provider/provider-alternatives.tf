# Other ways to connect. The alias only lets these sit beside the kubeconfig
# block (provider.tf); a configuration that connects one way needs none.

# An explicit host and bearer token, for example a service account's.
provider "kubeplay" {
  alias                  = "token"
  host                   = var.cluster_endpoint
  token                  = var.cluster_token
  cluster_ca_certificate = var.cluster_ca
  catalog_namespace      = var.catalog_namespace
}

# An explicit host with a credential plugin; client-go runs it again when
# its token expires, so long runs keep working.
provider "kubeplay" {
  alias                  = "eks"
  host                   = var.cluster_endpoint
  cluster_ca_certificate = var.cluster_ca
  catalog_namespace      = var.catalog_namespace
  exec {
    api_version = "client.authentication.k8s.io/v1"
    command     = "aws"
    args        = ["eks", "get-token", "--cluster-name", "prod"]
  }
}
