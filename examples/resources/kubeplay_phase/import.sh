# A phase is imported by its name (its inventory is the ConfigMap
# kubeplay-phase-<name> in the catalog namespace), or by <credential>/<name>
# for a phase on another cluster. The documents cannot be recovered: the
# first plan after an import shows them being applied.
terraform import kubeplay_phase.workload workload01/workload
