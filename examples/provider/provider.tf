# Use a kubeconfig file, as the hashicorp/kubernetes provider does.
provider "kubeplay" {
  config_path    = "~/.kube/config"
  config_context = "prod"

  # Where kubeplay keeps its definitions (credentials, container groups, node labels).
  catalog_namespace = "kubeplay-system"
}

# Or an explicit host with a credential plugin; client-go runs it again when
# its token expires, so long runs keep working.
provider "kubeplay" {
  alias                  = "eks"
  host                   = var.cluster_endpoint
  cluster_ca_certificate = var.cluster_ca
  exec {
    api_version = "client.authentication.k8s.io/v1"
    command     = "aws"
    args        = ["eks", "get-token", "--cluster-name", "prod"]
  }
}

variable "cluster_endpoint" {
  type = string
}

variable "cluster_ca" {
  type = string
}
