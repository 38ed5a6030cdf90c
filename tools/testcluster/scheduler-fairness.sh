#!/usr/bin/env bash
# scheduler-fairness.sh - does a pod that waits for room on the full node get a slot that
# frees while other pods are created? (up.sh sets the scheduler's backoff to 1 s for this.)
# Fills the node with 8 pods of 250m CPU (the node has 2 CPUs), adds pod w, then:
#   A  ten times, 2 s apart: deletes the oldest running pod and creates one bound to the node
#      (it takes the freed room unless the scheduler gives it to w first);
#   B  for up to 120 s, every 3 s: creates a pod, waits 3 s, deletes the oldest running pod.
# Prints how many freed slots w missed. Uses the namespace sched-fairness and deletes it.
set -euo pipefail
: "${KUBECONFIG:=${KUBEPLAY_CACHE_DIR:-$(dirname "$0")/../../.cache}/testcluster/kubeconfig}"
export KUBECONFIG
ns=sched-fairness
k() { kubectl -n "$ns" "$@"; }
pod() { # pod NAME [NODE]
  k apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Pod
metadata: {name: $1}
spec:
  ${2:+nodeName: $2}
  terminationGracePeriodSeconds: 0
  containers: [{name: c, image: kubeplay.test/ee:v1, command: [sleep, infinity], resources: {requests: {cpu: 250m}}}]
EOF
}
oldest() { k get pods --field-selector=status.phase=Running --sort-by=.metadata.creationTimestamp -o name | grep /p | head -1; }
placed() { [ -n "$(k get pod w -o jsonpath='{.spec.nodeName}')" ]; }
kubectl create namespace "$ns" >/dev/null
trap 'kubectl delete namespace "$ns" --wait=true >/dev/null' EXIT
for i in $(seq 1 8); do pod "p$i"; done
k wait --for=condition=PodScheduled pod --all --timeout=60s >/dev/null
node=$(kubectl get nodes -o jsonpath='{.items[0].metadata.name}')
pod w
n=8 missed=0
for _ in $(seq 1 10); do
  placed && break
  k delete "$(oldest)" --wait=true >/dev/null
  n=$((n + 1)) && pod "p$n" "$node"
  sleep 2
  placed || missed=$((missed + 1))
done
start=$(date +%s)
until placed || [ $(($(date +%s) - start)) -ge 120 ]; do
  n=$((n + 1)) && pod "p$n"
  sleep 3
  k delete "$(oldest)" --wait=false >/dev/null
  sleep 0.5
  placed || missed=$((missed + 1))
done
if placed; then
  echo "w got room after missing $missed freed slots"
else
  echo "w still pending after missing $missed freed slots ($(($(date +%s) - start)) s of B)"
  exit 1
fi
