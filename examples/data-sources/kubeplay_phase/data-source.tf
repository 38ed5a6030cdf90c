# Read the inventory of a phase that another workspace applies, for example
# to check that the target cluster's infrastructure is in place.
data "kubeplay_phase" "initinfra_target" {
  name    = "initinfra-target"
  cluster = "target-cluster"
}

output "target_infra_objects" {
  value = [for o in data.kubeplay_phase.initinfra_target.objects : "${o.kind} ${o.namespace}/${o.name}"]
}
