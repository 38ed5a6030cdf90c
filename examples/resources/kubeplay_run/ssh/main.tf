# With the example usage (resource.tf), which declares the container group;
# ssh_variables.tf declares the secrets, as ephemeral variables.

resource "kubeplay_run" "servers" {
  container_group = kubeplay_container_group.default.name
  playbook        = file("${path.module}/servers.yml")
  inventory       = file("${path.module}/servers.ini")

  ssh_private_keys_wo = [var.deploy_key]
  # `ssh-keyscan -t ed25519 web1.example.com >> known_hosts`, checked first.
  ssh_known_hosts = file("${path.module}/known_hosts")

  # Vaulted files and variables (`!vault |`) decrypt during the run.
  vault_password_wo  = var.vault_password
  vault_passwords_wo = { prod = var.prod_vault_password }

  # Bump to run again with new keys or passwords.
  triggers = { key_version = "2" }
}
