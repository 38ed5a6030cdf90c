#!/usr/bin/env bash
# run.sh - kubeplay's main job on the local test cluster: build the provider,
# point a CLI configuration of its own at it (dev_overrides: no registry, no
# terraform init), and apply or destroy examples/quickstart.
#
#   tools/quickstart/run.sh apply     (make quickstart; the cluster must be up)
#   tools/quickstart/run.sh destroy   (make quickstart-destroy)
#
# Everything it writes lives under <cache>/quickstart; the state too, so the
# example directory stays clean. It touches no other Terraform configuration.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cache=${KUBEPLAY_CACHE_DIR:-$root/.cache}
work=$cache/quickstart
kubeconfig=$cache/testcluster/kubeconfig
action=${1:-apply}

[ -s "$kubeconfig" ] || { echo "quickstart: no kubeconfig at $kubeconfig: run make cluster-up first" >&2; exit 1; }
mkdir -p "$work/bin"

start=$(date +%s%N)
(cd "$root" && go build -o "$work/bin/terraform-provider-kubeplay" .)
cat > "$work/terraformrc" <<RC
provider_installation {
  dev_overrides {
    "kubeplay/kubeplay" = "$work/bin"
  }
  direct {}
}
RC
export TF_CLI_CONFIG_FILE=$work/terraformrc TF_IN_AUTOMATION=1
tf=(terraform -chdir="$root/examples/quickstart")
state=(-state="$work/terraform.tfstate")
vars=(-var "kubeconfig=$kubeconfig")

case "$action" in
apply)
  "${tf[@]}" apply -auto-approve -input=false "${state[@]}" "${vars[@]}" -compact-warnings
  echo
  echo "== the run's record in the state =="
  "${tf[@]}" output "${state[@]}" -raw status | sed 's/^/status: /'; echo
  "${tf[@]}" output "${state[@]}" -raw pod | sed 's/^/pod:    /'; echo
  echo "host stats:"
  "${tf[@]}" output "${state[@]}" -json host_stats | python3 -c 'import json,sys; [print("  %s: %s" % (h, ", ".join("%s=%s" % kv for kv in sorted(s.items())))) for h, s in sorted(json.load(sys.stdin).items())]'
  echo "output:"
  "${tf[@]}" output "${state[@]}" -raw output | sed 's/^/  | /'
  ms=$(( ($(date +%s%N) - start) / 1000000 ))
  printf '\nquickstart: built and applied in %d.%01d s. The pod is gone; the run is a record in %s.\n' \
    $((ms / 1000)) $((ms % 1000 / 100)) "$work/terraform.tfstate"
  echo "Run it again with: make quickstart        Remove everything it made with: make quickstart-destroy"
  ;;
destroy)
  "${tf[@]}" destroy -auto-approve -input=false "${state[@]}" "${vars[@]}" -compact-warnings
  ;;
*)
  echo "usage: $0 apply|destroy" >&2; exit 2 ;;
esac
