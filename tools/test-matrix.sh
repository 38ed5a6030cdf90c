#!/usr/bin/env bash
# test-matrix.sh - the acceptance tests of runs, container groups, node labels, phases and
# credentials (TESTACC_MATRIX_RUN) on each Kubernetes version of K8S_MATRIX, one version after
# the other, on the newest Terraform (TERRAFORM_NEXT) so that none skips (make test-matrix).
# Each version's components are built when missing and the local cluster is restarted at that
# version (tools/testcluster/lib.sh: each version keeps an etcd data directory of its own); at
# the end, whatever happened, the cluster is started again at the default version, with its
# objects as they were. Logs: $LOGS/<version>.log.
set -uo pipefail
cd "$(dirname "$0")/.."

: "${TESTACC_MATRIX_RUN:?}" "${TESTACC_DISRUPTIVE:?}" "${TESTACC_PROCESSWIDE:?}" "${TERRAFORM_NEXT:?}"
K8S_MATRIX=${K8S_MATRIX:-v1.30.14 v1.32.4 v1.37.2}
TESTACC_PARALLEL=${TESTACC_PARALLEL:-8}
TEST_TIMEOUT=${TEST_TIMEOUT:-30m}
LOGS=${LOGS:-${KUBEPLAY_CACHE_DIR:-.cache}/test-logs/matrix}
rm -rf "$LOGS" && mkdir -p "$LOGS"

restore() {
  echo "test-matrix: starting the cluster again at the default version"
  env -u KUBEPLAY_K8S_VERSION tools/testcluster/up.sh >"$LOGS/restore.log" 2>&1 || cat "$LOGS/restore.log"
}
trap restore EXIT
trap 'exit 130' INT TERM

status=0
summary=()
for v in $K8S_MATRIX; do
  start=$(date +%s)
  echo "==================== Kubernetes $v ===================="
  if ! KUBEPLAY_K8S_VERSION=$v tools/testcluster/up.sh >"$LOGS/$v-up.log" 2>&1; then
    tail -n 30 "$LOGS/$v-up.log"
    summary+=("$(printf '%-10s FAILED  cluster did not start (log: %s)' "$v" "$LOGS/$v-up.log")")
    status=1
    continue
  fi
  up=$(($(date +%s) - start))
  grep -E 'build done|built |cluster up in|already up' "$LOGS/$v-up.log"
  # The tests' own up.sh call must find this version running, not restart the default one. On the
  # newest Terraform, so that the action's and import-by-identity's tests run too.
  KUBEPLAY_K8S_VERSION=$v TF_ACC=1 TF_ACC_TERRAFORM_PATH="$TERRAFORM_NEXT" go test -count=1 -v -timeout "$TEST_TIMEOUT" -parallel "$TESTACC_PARALLEL" \
    -run "$TESTACC_MATRIX_RUN" -skip "$TESTACC_DISRUPTIVE|$TESTACC_PROCESSWIDE" ./internal/provider >"$LOGS/$v.log" 2>&1
  rc=$?
  took=$(($(date +%s) - start))
  passed=$(grep -c -- '^--- PASS' "$LOGS/$v.log")
  skipped=$(grep -c -- '^--- SKIP' "$LOGS/$v.log")
  failed=$(grep -c -- '^--- FAIL' "$LOGS/$v.log")
  grep -- '^--- FAIL' "$LOGS/$v.log"
  [ "$rc" = 0 ] || { tail -n 40 "$LOGS/$v.log"; status=1; }
  summary+=("$(printf '%-10s %-6s %5ss (cluster %ss)  top-level tests: %s passed, %s skipped, %s failed' "$v" \
    "$([ "$rc" = 0 ] && echo ok || echo FAILED)" "$took" "$up" "$passed" "$skipped" "$failed")")
done
echo "==================== summary ===================="
printf '%s\n' "${summary[@]}"
exit $status
