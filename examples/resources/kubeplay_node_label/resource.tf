# A pod label: requests, limits (a missing limit falls back to the request),
# a GPU, labels templated over the run, and the Terraform workspace, which
# only the configuration knows (terraform.workspace). A label only stores a pod
# template: no pod starts until a run uses it, so nothing pulls its image
# here (a run would need the image on the nodes, and a GPU node).
resource "kubeplay_node_label" "fedora" {
  name              = "pod-fedora"
  image             = "docker.io/fedora:40"
  image_pull_policy = "IfNotPresent"
  cpu               = "1"
  memory            = 2048
  cpu_limit         = "2"
  gpu               = "1"
  gpu_resource      = "nvidia.com/gpu"
  env = [
    { name = "LANG", value = "C.UTF-8" },
  ]
  node_selector = { "kubernetes.io/arch" = "amd64" }
  volumes       = yamlencode([{ name = "cache", emptyDir = {} }])
  volume_mounts = yamlencode([{ name = "cache", mountPath = "/cache" }])
  labels        = { team = "ci", workspace = terraform.workspace }
  dynamic_labels = {
    "kubeplay.io/run" = "{run.id}"
    run               = "${terraform.workspace}-{run.name}"
  }
  python_path = "/usr/bin/python3"
}

# Nodepool's recommended custom spec, used verbatim: the first container
# hosts the run's shell. Stored only, like the label above.
resource "kubeplay_node_label" "custom" {
  name = "custom-pod"
  spec = <<-EOT
    containers:
      - name: custom-pod
        image: ubuntu:jammy
        imagePullPolicy: IfNotPresent
        command: ["/bin/sh", "-c"]
        args: ["while true; do sleep 30; done;"]
  EOT
}

# A namespace label: each run gets a fresh namespace with a service account.
resource "kubeplay_node_label" "namespace" {
  name = "kubernetes-namespace"
  type = "namespace"
}
