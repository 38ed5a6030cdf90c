# Find the container groups whose name starts with "awx", with their settings,
# and write configuration that imports them:
#   terraform query -generate-config-out=generated.tf && terraform apply
list "kubeplay_container_group" "awx" {
  provider         = kubeplay
  include_resource = true
  config {
    name_prefix = "awx"
  }
}
