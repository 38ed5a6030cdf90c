# A credential is imported by its name in the catalog namespace.
terraform import kubeplay_credential.awx awx
