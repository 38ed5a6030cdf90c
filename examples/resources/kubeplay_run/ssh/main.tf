# With the example usage (resource.tf), which declares the container group.

variable "deploy_key" {
  type      = string
  sensitive = true
  ephemeral = true
}

variable "vault_password" {
  type      = string
  sensitive = true
  ephemeral = true
}

variable "prod_vault_password" {
  type      = string
  sensitive = true
  ephemeral = true
}

resource "kubeplay_run" "servers" {
  container_group = kubeplay_container_group.default.name
  playbook        = file("${path.module}/servers.yml")
  inventory       = file("${path.module}/servers.ini")

  # Loaded into an ssh-agent for the run's life; the key files are deleted
  # before the playbook starts.
  ssh_private_keys_wo = [var.deploy_key]
  # `ssh-keyscan -t ed25519 web1.example.com >> known_hosts`, checked first.
  ssh_known_hosts = file("${path.module}/known_hosts")

  # Vaulted files and variables (`!vault |`) decrypt during the run.
  vault_password_wo  = var.vault_password
  vault_passwords_wo = { prod = var.prod_vault_password }

  # Write-only values do not replace a run: change a trigger to run again
  # with new ones.
  triggers = { key_version = "2" }
}
