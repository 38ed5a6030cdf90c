output "status" {
  description = "How the run ended: successful, failed, error or canceled."
  value       = kubeplay_run.deploy.status
}

output "host_counts" {
  description = "How many hosts ended ok, changed, failed or unreachable."
  value       = kubeplay_run.deploy.host_counts
}

output "recap" {
  description = "The run's hosts counted by how they ended, as one line."
  value       = "hosts: ${join(", ", [for k, v in kubeplay_run.deploy.host_counts : "${k}=${v}"])}"
}

output "pod_namespace" {
  description = "The namespace the run's pod ran in: the platform group's."
  value       = data.kubeplay_container_group.platform.namespace
}
