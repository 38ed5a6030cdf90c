#!/usr/bin/env bash
# run.sh - kubeplay's main job on the local test cluster: build the provider,
# point a CLI configuration of its own at it (dev_overrides: no registry, no
# terraform init), and apply or destroy examples/quickstart.
#
#   tools/quickstart/run.sh apply     (make quickstart; the cluster must be up)
#   tools/quickstart/run.sh destroy   (make quickstart-destroy)
#
# The provider build and the CLI configuration live under <cache>/quickstart.
# The state lives beside the cluster's own (etcd data, PKI), which is
# machine-wide: another clone of the repository, or CI on this machine, finds
# the record of what the quickstart made in that cluster. Objects a lost state
# left behind are imported before the apply (adopt), so a rerun never stops at
# "Already Exists". It touches no other Terraform configuration.
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
cluster_state=${KUBEPLAY_CLUSTER_DIR:-/var/lib/kubeplay-testcluster}
statefile=${cluster_state%/}/quickstart.tfstate
# A state an earlier version kept in the cache moves beside the cluster.
if [ ! -e "$statefile" ] && [ -s "$work/terraform.tfstate" ]; then
  mv "$work/terraform.tfstate" "$statefile"
fi
state=(-state="$statefile")
vars=(-var "kubeconfig=$kubeconfig")

# adopt imports each of the quickstart's catalog objects that the state does not
# hold but the cluster does (a state lost with a clone, or an apply killed
# before it wrote the state). An object that does not exist is left to create.
adopt() {
  local held addr id out
  held=$("${tf[@]}" state list "${state[@]}" 2>/dev/null || true)
  for pair in kubeplay_credential.local=quickstart kubeplay_container_group.quickstart=quickstart \
              kubeplay_node_label.small=quickstart-small; do
    addr=${pair%%=*} id=${pair#*=}
    grep -qxF "$addr" <<<"$held" && continue
    if out=$("${tf[@]}" import -input=false "${state[@]}" "${vars[@]}" "$addr" "$id" 2>&1); then
      echo "quickstart: adopted $addr ($id), left by an earlier apply whose state is gone"
    elif ! grep -q "non-existent remote object" <<<"$out"; then
      printf '%s\n' "$out" >&2
      echo "quickstart: cannot adopt $addr ($id); see above" >&2
      return 1
    fi
  done
}

case "$action" in
apply)
  adopt
  "${tf[@]}" apply -auto-approve -input=false "${state[@]}" "${vars[@]}" -compact-warnings
  echo
  echo "== the run's record in the state =="
  "${tf[@]}" output "${state[@]}" -raw status | sed 's/^/status: /'; echo
  "${tf[@]}" output "${state[@]}" -raw pod | sed 's/^/pod:    /'; echo
  echo "host stats:"
  "${tf[@]}" output "${state[@]}" -raw recap | sed 's/^/  /'; echo
  echo "output:"
  "${tf[@]}" output "${state[@]}" -raw output | sed 's/^/  | /'
  ms=$(( ($(date +%s%N) - start) / 1000000 ))
  printf '\nquickstart: built and applied in %d.%01d s. The pod is gone; the run is a record in %s.\n' \
    $((ms / 1000)) $((ms % 1000 / 100)) "$statefile"
  echo "Run it again with: make quickstart        Remove everything it made with: make quickstart-destroy"
  ;;
destroy)
  "${tf[@]}" destroy -auto-approve -input=false "${state[@]}" "${vars[@]}" -compact-warnings
  ;;
*)
  echo "usage: $0 apply|destroy" >&2; exit 2 ;;
esac
