# An airshipctl plan as three phases: the ephemeral cluster's infrastructure,
# the target cluster's, and a workload. depends_on orders them, so
# `terraform plan` shows the whole phase plan and `terraform apply` runs it.

resource "kubeplay_credential" "target" {
  name          = "target-cluster"
  kind          = "kubeconfig"
  kubeconfig_wo = var.target_kubeconfig
}

# workload01's kubeconfig comes from the target cluster, which provisioned it
# with Cluster API (airship's cluster map: parent target-cluster, dynamic
# kubeconfig): the Secret target-infra/workload01-kubeconfig there. Apply
# waits while the cluster is still being provisioned.
resource "kubeplay_credential" "workload" {
  name               = "workload01"
  kind               = "cluster_api"
  parent             = kubeplay_credential.target.name
  cluster_name       = "workload01"
  cluster_namespace  = "target-infra"
  kubeconfig_timeout = "30m"
  depends_on         = [kubeplay_phase.initinfra_target]
}

# initinfra-ephemeral: on the provider's own (ephemeral) cluster, a
# namespace and a CustomResourceDefinition.
resource "kubeplay_phase" "initinfra_ephemeral" {
  name = "initinfra-ephemeral"
  documents = [
    file("${path.module}/ephemeral/namespace.yaml"),
    file("${path.module}/ephemeral/crds.yaml"),
  ]
  timeouts {
    create = "10m"
  }
}

# initinfra-target: a kustomization rendered as airshipctl renders bundles.
# Its namespace, target-infra, already exists (Cluster API's, holding
# workload01's kubeconfig): adopt takes it over.
resource "kubeplay_phase" "initinfra_target" {
  name             = "initinfra-target"
  cluster          = kubeplay_credential.target.name
  kustomization    = "${path.module}/target/initinfra"
  inventory_policy = "adopt"
  depends_on       = [kubeplay_phase.initinfra_ephemeral]
}

# workload: on workload01; waits for the migration Job to succeed, not just
# to start. The Job's image is var.image, which defaults to kubeplay.test/ee:v1:
# that image exists only in this repository's local test cluster, so elsewhere
# set it to an image with python3 that workload01's nodes can pull.
resource "kubeplay_phase" "workload" {
  name    = "workload"
  cluster = kubeplay_credential.workload.name
  documents = [<<-EOT
    apiVersion: v1
    kind: Namespace
    metadata:
      name: shop
    ---
    apiVersion: batch/v1
    kind: Job
    metadata:
      name: migrate
      namespace: shop
    spec:
      backoffLimit: 0
      template:
        spec:
          restartPolicy: Never
          terminationGracePeriodSeconds: 1
          containers:
          - name: migrate
            image: ${var.image}
            imagePullPolicy: IfNotPresent
            command: ["python3", "-c", "print('shop schema migrated to 1.4.2')"]
            resources:
              requests: { cpu: 100m, memory: 64Mi }
    ---
    # Kept in the bundle for other tools, never applied.
    apiVersion: airshipit.org/v1alpha1
    kind: KubernetesApply
    metadata:
      name: kubernetes-apply
      labels:
        airshipit.org/deploy-k8s: "false"
    EOT
  ]
  wait_conditions = [{
    api_version = "batch/v1"
    kind        = "Job"
    jsonpath    = "{.status.succeeded}"
    value       = "1"
  }]
  prune = true
  timeouts {
    create = "15m"
    update = "15m"
  }
}
