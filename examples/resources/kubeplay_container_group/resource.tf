# An AWX-style container group with a namespace of its own and a capacity
# the cluster enforces for every Terraform process.
# var.image defaults to kubeplay.test/ee:v1, which exists only in this
# repository's local test cluster: elsewhere, set it to an image with
# python3 and ansible-core that your nodes can pull.
resource "kubeplay_container_group" "awx" {
  name             = "awx"
  credential       = kubeplay_credential.awx.name
  namespace        = "awx-runs"
  manage_namespace = true
  image            = var.image

  max_concurrent_runs = 10
  max_cores           = "8"
  max_ram             = 16384
  max_forks           = 50

  # The Pod Security Standard run pods must meet, checked at plan; the
  # managed namespace is labelled so the API server enforces it too.
  pod_security_level = "baseline"

  # Merged over the default pod: the first container is "worker".
  pod_spec_override = yamlencode({
    spec = {
      containers = [{
        name = "worker"
        env  = [{ name = "ANSIBLE_FORCE_COLOR", value = "0" }]
      }]
    }
  })

  labels = { team = "platform" }
}

# A Nodepool-style pool: node labels that set no resources get these.
resource "kubeplay_container_group" "pool" {
  name             = "main"
  namespace        = "ci-runs"
  manage_namespace = true
  image            = var.image

  # Nodepool's min-ready: two pods of the group's own run pod are kept
  # started, so a run claims one instead of waiting for its pod.
  warm_pods = 2

  default_label_cpu          = "500m"
  default_label_memory       = 1024
  default_label_cpu_limit    = "2"
  default_label_memory_limit = 2048
  max_resources              = { "requests.nvidia.com/gpu" = "2" }
  pod_pending_timeout        = "10m"
  launch_retries             = 5
  priority                   = 10
}

resource "kubeplay_credential" "awx" {
  name = "awx"
  kind = "provider"
}
