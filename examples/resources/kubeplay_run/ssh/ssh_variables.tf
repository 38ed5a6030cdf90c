variable "deploy_key" {
  description = "An SSH private key that the targets accept."
  type        = string
  sensitive   = true
  ephemeral   = true
}

variable "vault_password" {
  description = "The password of the vaulted content without a vault id."
  type        = string
  sensitive   = true
  ephemeral   = true
}

variable "prod_vault_password" {
  description = "The password of the vault id prod."
  type        = string
  sensitive   = true
  ephemeral   = true
}
