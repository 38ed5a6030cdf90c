# With the example usage (resource.tf), which declares the container group,
# and its site.yml.

variable "release" {
  description = "The release to deploy: a new one replaces the run."
  type        = string
}

resource "terraform_data" "release" {
  input = var.release
}

resource "kubeplay_run" "deploy" {
  container_group = kubeplay_container_group.default.name
  playbook        = file("${path.module}/site.yml")

  lifecycle {
    replace_triggered_by = [terraform_data.release]
  }
}
