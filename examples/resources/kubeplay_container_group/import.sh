# A container group is imported by its name in the catalog namespace.
terraform import kubeplay_container_group.awx awx
