# Terraform 1.12 and later: a container group is identified by its name in the catalog namespace.
import {
  to = kubeplay_container_group.awx
  identity = {
    name = "awx"
  }
}
