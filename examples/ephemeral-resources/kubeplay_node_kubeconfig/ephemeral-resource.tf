# The held namespace node whose kubeconfig the first example
# (ephemeral-resource-basic.tf) issues, and a run that gets it.
# var.image defaults to kubeplay.test/ee:v1, which exists only in this
# repository's local test cluster: elsewhere, set it to an image with
# python3 and ansible-core that your nodes can pull.
resource "kubeplay_container_group" "staging" {
  name             = "staging"
  namespace        = "staging-runs"
  manage_namespace = true
  image            = var.image
}

resource "kubeplay_node_label" "sandbox" {
  name = "sandbox"
  type = "namespace"
}

# A namespace held for a team: it stays until destroyed.
resource "kubeplay_node" "team" {
  name            = "team-sandbox"
  container_group = kubeplay_container_group.staging.name
  node_label      = kubeplay_node_label.sandbox.name
}

# Handed on through a write-only attribute: a run that is not on the node
# gets it as a secret environment variable (redacted from its output).
resource "kubeplay_run" "handoff" {
  container_group = kubeplay_container_group.staging.name
  command = ["sh", "-c", <<-EOT
    printf '%s\n' "$NODE_KUBECONFIG" > /tmp/node.kubeconfig
    grep -q 'namespace: team-sandbox' /tmp/node.kubeconfig && echo "got a kubeconfig for team-sandbox"
  EOT
  ]
  env_wo = { NODE_KUBECONFIG = ephemeral.kubeplay_node_kubeconfig.team.kubeconfig }
}
