# Terraform 1.12 and later: a phase is identified by its name and, for a phase on
# another cluster, the credential it applies with (leave cluster out for the
# provider's own cluster).
import {
  to = kubeplay_phase.workload
  identity = {
    name    = "workload"
    cluster = "workload01"
  }
}
