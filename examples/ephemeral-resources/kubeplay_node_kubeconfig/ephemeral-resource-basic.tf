# A kubeconfig for the service account of held namespace node
# kubeplay_node.team, with a token for 30 minutes, issued afresh for each plan
# and apply and kept in neither: pass it to a write-only attribute or another
# provider's configuration.
ephemeral "kubeplay_node_kubeconfig" "team" {
  node_id = kubeplay_node.team.id
  ttl     = "30m"
}
