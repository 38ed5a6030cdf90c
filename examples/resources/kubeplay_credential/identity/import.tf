# Terraform 1.12 and later: a credential is identified by its name in the catalog namespace.
import {
  to = kubeplay_credential.awx
  identity = {
    name = "awx"
  }
}
