output "credential_name" {
  description = "The name of the credential the groups' runs use, for data \"kubeplay_credential\" in other workspaces."
  value       = kubeplay_credential.this.name
}

output "group_names" {
  description = "The name of each container group, by its key in var.groups: what other workspaces give data \"kubeplay_container_group\" and a run's container_group."
  value       = { for k, g in kubeplay_container_group.this : k => g.name }
}

output "namespaces" {
  description = "The namespace each group's run pods are created in, by its key in var.groups."
  value       = { for k, g in kubeplay_container_group.this : k => g.namespace }
}

output "node_label_names" {
  description = "The name of each node label, by its key in var.node_labels: what other workspaces give data \"kubeplay_node_label\" and a run's node_label."
  value       = { for k, l in kubeplay_node_label.this : k => l.name }
}
