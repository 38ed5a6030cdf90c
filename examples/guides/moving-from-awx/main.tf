resource "kubeplay_credential" "prod" {
  name                    = "k8s-prod"
  kind                    = "bearer_token"
  host                    = "https://k8s.example.com:6443"
  bearer_token_wo         = var.k8s_token # write-only
  bearer_token_wo_version = 1             # bump to send a new token
  ca_cert                 = var.k8s_ca_cert
  verify_ssl              = true
  namespace               = "awx-runs"
}

resource "kubeplay_container_group" "runners" {
  name                = "runners"
  credential          = kubeplay_credential.prod.name
  namespace           = "awx-runs"
  image               = "quay.io/ansible/awx-ee:24.6.1"
  max_concurrent_runs = 10
  max_forks           = 50

  # Only what differs from the default pod; containers merge by name.
  pod_spec_override = yamlencode({
    spec = {
      serviceAccountName = "default"
      containers = [{
        name      = "worker"
        resources = { requests = { cpu = "500m", memory = "512Mi" } }
      }]
    }
  })
}

# A job template launched on the group.
resource "kubeplay_run" "site" {
  container_group = kubeplay_container_group.runners.name
  playbook        = file("${path.module}/site.yml")
  files           = { "roles/web/tasks/main.yml" = file("${path.module}/roles/web/tasks/main.yml") }
  inventory       = file("${path.module}/inventory.ini")
  extra_vars      = { release = "2026.11" }
  limit           = ["web"]
  forks           = 10

  timeouts {
    create = "20m"
  }
}

variable "k8s_token" {
  type      = string
  sensitive = true
  ephemeral = true
}

variable "k8s_ca_cert" {
  description = "The PEM certificate of the CA that signed the API server's certificate."
  type        = string
}
