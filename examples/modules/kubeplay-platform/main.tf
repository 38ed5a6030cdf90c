# The connection the groups' runs use: the calling workspace's provider
# connection. A platform that runs in another cluster would use a
# bearer_token or kubeconfig credential here instead.
resource "kubeplay_credential" "this" {
  name        = var.name
  kind        = "provider"
  description = "Runs of the ${var.name} platform, through the provider's connection."
}

resource "kubeplay_node_label" "this" {
  for_each = var.node_labels

  name   = "${var.name}-${each.key}"
  cpu    = each.value.cpu
  memory = each.value.memory
  labels = merge(var.team_labels, { "kubeplay.example/platform" = var.name })
}

# One group per entry, each with a namespace of its own that it creates and
# deletes with itself: a group's max_concurrent_runs is a ResourceQuota, which
# counts every pod of the namespace.
resource "kubeplay_container_group" "this" {
  for_each = var.groups

  name             = "${var.name}-${each.key}"
  credential       = kubeplay_credential.this.name
  namespace        = "${var.name}-${each.key}"
  manage_namespace = true
  image            = var.image

  max_concurrent_runs = each.value.max_concurrent_runs
  max_forks           = each.value.max_forks
  warm_pods           = each.value.warm_pods
  pod_pending_timeout = each.value.pod_pending_timeout
  priority            = each.value.priority

  labels = merge(var.team_labels, { "kubeplay.example/platform" = var.name })
}
