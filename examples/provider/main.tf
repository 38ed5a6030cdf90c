# The documentation shows provider*.tf. This file makes the directory runnable:
# each provider block connects through a credential of kind "provider",
# which records the identity the API server saw.
#
# The eks block runs `aws eks get-token`: on a cluster that is not EKS, put
# on PATH an `aws` that prints an ExecCredential for that cluster (the
# acceptance test does, with a service account's token).

terraform {
  required_version = ">= 1.11"
  required_providers {
    kubeplay = {
      source = "kubeplay/kubeplay"
    }
  }
}

resource "kubeplay_credential" "kubeconfig" {
  name = "via-kubeconfig"
  kind = "provider"
}

resource "kubeplay_credential" "token" {
  provider = kubeplay.token
  name     = "via-token"
  kind     = "provider"
}

resource "kubeplay_credential" "eks" {
  provider = kubeplay.eks
  name     = "via-exec"
  kind     = "provider"
}

output "identities" {
  description = "Who each provider block connected as."
  value = {
    kubeconfig = kubeplay_credential.kubeconfig.username
    token      = kubeplay_credential.token.username
    exec       = kubeplay_credential.eks.username
  }
}
