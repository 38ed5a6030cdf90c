# Find the credentials another configuration defined, and write configuration
# that imports them:
#   terraform query -generate-config-out=generated.tf && terraform apply
# A bearer_token or kubeconfig credential's secret is write-only and never
# listed: add bearer_token_wo or kubeconfig_wo to its generated block before
# the apply, or ValidateConfig refuses the block.
list "kubeplay_credential" "all" {
  provider         = kubeplay
  include_resource = true
}
