#!/usr/bin/env bash
# testacc.sh - every test, acceptance tests included, against the local cluster
# (make testacc; make test-all adds --checks). Most acceptance tests share the
# cluster and run in parallel; the GNUmakefile's lists say which do not:
#
#   prebuild what the jobs build from the Go module proxy, when missing (see
#            prebuild below), before any test;
#   phase 1  at once:
#              parallel      all packages but TERRAFORM_PKGS on the first
#                            Terraform (on PATH), -parallel TESTACC_PARALLEL,
#                            but for the two lists;
#              early         TESTACC_EARLY of each of TERRAFORM_PKGS (the tests
#                            that take turns on the Cluster API lock) and
#                            TESTACC_LONGEST (long tests that mostly wait), in
#                            a process of its own started first, so that
#                            neither ends the phase; then TESTACC_SECOND_ALONE
#                            (the soak, the API server restarts), on the
#                            second cluster, which the lock's tests use;
#              <pkg>         each of TERRAFORM_PKGS likewise, in a job of its own;
#              next-<pkg>    TESTACC_NEXT_RUN of each of TERRAFORM_PKGS on
#                            TERRAFORM_NEXT, -parallel TESTACC_PARALLEL;
#              tofu-<pkg>    TESTACC_TOFU_RUN of each of TERRAFORM_PKGS on
#                            OpenTofu (OPENTOFU), -parallel TESTACC_PARALLEL;
#              pw-<test>     each test of TESTACC_PROCESSWIDE in a go test
#                            process of its own (it sets environment variables
#                            or the working directory), on the first
#                            Terraform, then on TERRAFORM_NEXT when
#                            TESTACC_NEXT_RUN matches it;
#            Transparent huge pages are on for all memory meanwhile (TESTACC_THP).
#            Across all of them at most TESTACC_SLOTS tests use the cluster at
#            once (acctest.Parallel and ProcessWide take turns on file locks).
#   phase 2  TESTACC_DISRUPTIVE but TESTACC_SECOND_ALONE: the tests that
#            stop a kubelet or fill the node, after the rest: first
#            TESTACC_FIRST_DISRUPTIVE (the first cluster's node) beside
#            TESTACC_SECOND_DISRUPTIVE (the second cluster's kubelet), then
#            the others (none today) one at a time; beside them TESTACC_LATE,
#            tests that need no cluster but much CPU (with --checks,
#            docs-check, lint and fuzz run beside them: they use the CPU while
#            those tests wait for the cluster).
#
# Each job's output goes to $LOGS/<job>.log and is printed when its phase ends,
# followed by a summary: each job's time and result, and the slowest tests.
# Run by make, which sets the variables; ^C stops the jobs this script started.
set -uo pipefail
cd "$(dirname "$0")/.."

: "${TESTACC_DISRUPTIVE:?}" "${TESTACC_LATE:?}" "${TESTACC_PROCESSWIDE:?}" "${TESTACC_NEXT_RUN:?}" "${TERRAFORM_NEXT:?}"
: "${TESTACC_TOFU_RUN:?}" "${OPENTOFU:?}" "${OPENTOFU_RC:?}"
: "${TESTACC_FIRST_DISRUPTIVE:?}" "${TESTACC_SECOND_DISRUPTIVE:?}" "${TESTACC_SECOND_ALONE:?}" "${TESTACC_EARLY:?}" "${TESTACC_LONGEST:?}"
TESTACC_PARALLEL=${TESTACC_PARALLEL:-8}
export KUBEPLAY_TEST_SLOTS=${TESTACC_SLOTS:-8}
TEST_TIMEOUT=${TEST_TIMEOUT:-70m}
TERRAFORM_PKGS=${TERRAFORM_PKGS:-./internal/provider}
LOGS=${LOGS:-${KUBEPLAY_CACHE_DIR:-.cache}/test-logs}
checks=0
[ "${1:-}" = --checks ] && checks=1

rm -rf "$LOGS" && mkdir -p "$LOGS"
export TF_ACC=1
jobs_run=()
pids=()

# The cluster is started once, before the jobs, so that they do not race to.
tools/testcluster/up.sh >"$LOGS/cluster-up.log" 2>&1 || { cat "$LOGS/cluster-up.log"; exit 1; }
CLUSTER_DIR=$(cd "${KUBEPLAY_CACHE_DIR:-.cache}/testcluster" && pwd)

# release_pod_memory: a pod's memory cgroup stays in the kernel after the kubelet removes it
# (a dying cgroup) while page cache that its containers read or wrote is still charged to it:
# about 550 a make test-all here. The kernel walks them all in reclaim and in its memory
# statistics, so each run left the next slower (the suite's CPU grew from 1,573 to 2,257 s over
# six runs, with 2,491 memory cgroups, 29 of them live). Dropping the clean page cache frees them.
# Root only; TESTACC_DROP_CACHES=0 skips it.
memcgs() { awk '$1 == "memory" {print $3}' /proc/cgroups; }
release_pod_memory() {
  [ "${TESTACC_DROP_CACHES:-1}" = 1 ] && [ -w /proc/sys/vm/drop_caches ] || return 0
  local before
  before=$(memcgs)
  sync && echo 1 >/proc/sys/vm/drop_caches || return 0
  echo "testacc: page cache dropped, memory cgroups $before -> $(memcgs)"
}

# thp_set: phase 1 runs with transparent huge pages for all anonymous memory (TESTACC_THP=always,
# as root; TESTACC_THP= leaves the setting alone). Its CPU is the bound, and on this machine kind
# (a paravirtualised kernel, half the CPU in the kernel) page faults are a large part of it: a
# `terraform plan` took 3,925 minor faults and 149 ms of CPU with THP at madvise, 1,613 and 103 ms
# at always; a provider test, 10.1 CPU-s and 7.9 (means of three). The soak, which bounds the
# provider's resident memory, runs in phase 1 too: its peak VmHWM was 76 MiB at always, 71 to 78
# at madvise. thp_restore puts back what was there before phase 2, and on exit. What it
# puts back is kept in THP_SAVED too: a run killed by SIGKILL runs no trap, and the next restores it.
THP=/sys/kernel/mm/transparent_hugepage/enabled
THP_SAVED=${KUBEPLAY_CACHE_DIR:-.cache}/testacc-thp-saved
thp_orig=
thp_set() {
  [ -n "${TESTACC_THP:-}" ] && [ -w "$THP" ] || return 0
  thp_orig=$(sed -E 's/.*\[([a-z]+)\].*/\1/' "$THP")
  [ "$thp_orig" = "$TESTACC_THP" ] && { thp_orig=; return 0; }
  echo "$thp_orig" >"$THP_SAVED"
  echo "$TESTACC_THP" >"$THP" && echo "testacc: transparent huge pages $thp_orig -> $TESTACC_THP"
}
thp_restore() {
  [ -n "$thp_orig" ] || return 0
  echo "$thp_orig" >"$THP" && echo "testacc: transparent huge pages back to $thp_orig" && rm -f "$THP_SAVED"
  thp_orig=
}
if [ -s "$THP_SAVED" ] && [ -w "$THP" ]; then
  thp_orig=$(cat "$THP_SAVED")
  echo "testacc: an earlier run was killed before it restored transparent huge pages"
  thp_restore
fi
trap thp_restore EXIT

# descendants PID: PID's children, theirs, and so on.
descendants() {
  local c
  for c in $(ps -o pid= --ppid "$1"); do
    echo "$c"
    descendants "$c"
  done
}

# stop_jobs, on ^C or TERM: stops every process this script started (the jobs' shells, the
# test binaries and the terraform and tofu processes they run; the clusters' daemons are not
# among them), then sweeps the local clusters: a test process stopped by a signal runs none of
# its tests' clean-ups, so the namespaces, CRDs and cluster roles they made would be left.
prewarm_pid=
run_start=
stop_jobs() {
  local -a tree
  mapfile -t tree < <(descendants $$)
  [ ${#tree[@]} -gt 0 ] && kill "${tree[@]}" 2>/dev/null
  wait
  [ -n "$run_start" ] || return 0
  if [ -n "${KUBEPLAY_TEST_KUBECONFIG:-}" ] && [ "$KUBEPLAY_TEST_KUBECONFIG" != "$CLUSTER_DIR/kubeconfig" ]; then
    echo "testacc: the tests ran against $KUBEPLAY_TEST_KUBECONFIG, not swept: what the stopped tests made there since $run_start is left"
    return 0
  fi
  local -a kcs=()
  local f
  for f in "$CLUSTER_DIR/kubeconfig" "$CLUSTER_DIR/kubeconfig2"; do [ -f "$f" ] && kcs+=("$f"); done
  [ ${#kcs[@]} -gt 0 ] || return 0
  echo "testacc: stopped; sweeping what the tests made since $run_start from ${kcs[*]}"
  "$TESTBIN/sweep" -since "$run_start" "${kcs[@]}"
}
trap 'stop_jobs; exit 130' INT TERM

logged() { # logged NAME COMMAND...: COMMAND's output to $LOGS/NAME.log, "exit seconds" to NAME.rc
  local name=$1 start
  shift
  start=$(date +%s)
  "$@" >"$LOGS/$name.log" 2>&1
  echo "$? $(($(date +%s) - start))" >"$LOGS/$name.rc"
}

job() { # job NAME COMMAND...: starts COMMAND in the background
  local name=$1
  shift
  jobs_run+=("$name")
  logged "$name" "$@" &
  pids+=($!)
  echo "testacc: $name started: $*"
}

phase_end() { # waits for the phase's jobs and prints their logs
  wait "${pids[@]}"
  pids=()
  local name
  for name in "$@"; do
    echo "==================== $name ===================="
    cat "$LOGS/$name.log"
  done
}

# Test binaries live in the cache, not in $LOGS, which each run empties: go test -c links
# one again only when what it links changed, where go test links every package's each time
# (about 55 CPU-seconds of links a warm run saves).
TESTBIN=${TESTBIN:-${KUBEPLAY_CACHE_DIR:-.cache}/testbin}

# testbin PKG: builds PKG's test binary into $TESTBIN (a no-op when it is up to date), so
# that the jobs that run it do not each compile and link it.
testbin() {
  local bin
  bin="$TESTBIN/$(tr / _ <<<"$1").test"
  if ! grep -qxF "$bin" "$LOGS/built" 2>/dev/null; then
    go test -c -o "$bin" "$1" >&2 || return 1
    echo "$bin" >>"$LOGS/built"
  fi
  echo "$bin"
}

# runbin PKG ARGS...: PKG's test binary in PKG's directory, as go test runs it.
runbin() {
  local bin dir
  bin=$(testbin "$1") && dir=$(go list -f '{{.Dir}}' "$1") || return 1
  shift
  rundir "$bin" "$dir" "$@"
}

# rundir BIN DIR ARGS...: a test binary in its package's directory, with go test's flags.
rundir() {
  local bin=$1 dir=$2
  shift 2
  (cd "$dir" && "$bin" -test.paniconexit0 -test.count=1 -test.v -test.timeout "$TEST_TIMEOUT" "$@")
}

# serial RUN SKIP PKG...: the tests RUN matches and SKIP does not of each PKG in turn, as
# go test -p 1 -run RUN -skip SKIP runs them (an empty SKIP skips none).
serial() {
  local re=$1 skip=$2 pkg status=0
  shift 2
  for pkg in "$@"; do
    if runbin "$pkg" -test.run "$re" -test.skip "$skip"; then printf 'ok  \t%s\n' "$pkg"; else
      printf 'FAIL\t%s\n' "$pkg"
      status=1
    fi
  done
  return $status
}

# packages ARGS...: every package but TERRAFORM_PKGS, as go test -p 4 ./... runs them: their
# test binaries built into $TESTBIN/pkg (linked only when changed), four run at a time, each
# one's output kept apart and printed when it ends, then "ok" or "FAIL" and the package.
packages() {
  local dir="$TESTBIN/pkg" status=0 running=0 path pkgdir out listed
  local -a outs=()
  mkdir -p "$dir" "$LOGS/pkg"
  # Only packages with test files: $dir may still hold the binary of one whose tests were removed.
  # shellcheck disable=SC2086 # one package per word
  listed=$(go list -f '{{if or .TestGoFiles .XTestGoFiles}}{{.ImportPath}} {{.Dir}}{{end}}' ./... |
    grep -v -F -f <(go list -f '{{.ImportPath}} ' $TERRAFORM_PKGS)) || return 1
  # shellcheck disable=SC2046 # one package per word
  go test -c -o "$dir/" $(cut -d' ' -f1 <<<"$listed") || return 1
  while read -r path pkgdir; do
    out="$LOGS/pkg/${path##*/}.log"
    outs+=("$out")
    (
      if rundir "$dir/${path##*/}.test" "$pkgdir" "$@" >"$out" 2>&1; then printf 'ok  \t%s\n' "$path" >>"$out"; else
        printf 'FAIL\t%s\n' "$path" >>"$out"
        exit 1
      fi
    ) &
    running=$((running + 1))
    if [ "$running" -ge 4 ]; then
      wait -n || status=1
      running=$((running - 1))
    fi
  done <<<"$listed"
  while [ "$running" -gt 0 ]; do
    wait -n || status=1
    running=$((running - 1))
  done
  cat "${outs[@]}"
  return $status
}

# next_terraform: builds Terraform 1.16.0 when it is not built yet (prebuild, below, before
# any test; the passes that run it check again, under the lock).
next_terraform() { flock "$LOGS/terraform-next.lock" make --no-print-directory terraform-next; }

# next_pass PKG ARGS...: runbin on TERRAFORM_NEXT.
next_pass() { next_terraform && TF_ACC_TERRAFORM_PATH="$TERRAFORM_NEXT" runbin "$@"; }

# opentofu: builds OpenTofu as next_terraform builds Terraform 1.16.0.
opentofu() { flock "$LOGS/opentofu.lock" make --no-print-directory opentofu; }

# tofu_pass PKG ARGS...: runbin on OpenTofu, whose provider addresses default to its own
# registry's host, with an empty CLI configuration (see OPENTOFU_RC).
tofu_pass() {
  opentofu && TF_ACC_TERRAFORM_PATH="$OPENTOFU" TF_ACC_PROVIDER_HOST=registry.opentofu.org \
    TF_CLI_CONFIG_FILE="$OPENTOFU_RC" runbin "$@"
}

# processwide PKG TEST: TEST on the first Terraform, then on the second when
# TESTACC_NEXT_RUN matches it (one after the other: the examples' names are
# literal).
processwide() {
  local status=0
  runbin "$1" -test.run "^$2\$" || status=1
  if grep -Eq "$TESTACC_NEXT_RUN" <<<"$2"; then
    echo "---- $2 on $TERRAFORM_NEXT"
    next_pass "$1" -test.run "^$2\$" || status=1
  fi
  return $status
}

# disruptive PKG...: TESTACC_DISRUPTIVE of each PKG but TESTACC_SECOND_ALONE (phase 1's). The
# tests that disrupt only the first cluster's node and those that disrupt only the second's run
# first, the two lists beside each other (the second's output kept apart and printed after the
# first's); then the rest, one at a time.
disruptive() {
  local status=0 second="$LOGS/disruptive-second.log" pid
  serial "$TESTACC_SECOND_DISRUPTIVE" "" "$@" >"$second" 2>&1 &
  pid=$!
  serial "$TESTACC_FIRST_DISRUPTIVE" "" "$@" || status=1
  wait "$pid" || status=1
  cat "$second"
  serial "$TESTACC_DISRUPTIVE" "$TESTACC_FIRST_DISRUPTIVE|$TESTACC_SECOND_DISRUPTIVE|$TESTACC_SECOND_ALONE" "$@" || status=1
  return $status
}

# early PKG...: TESTACC_EARLY and TESTACC_LONGEST of each PKG, then TESTACC_SECOND_ALONE of the
# disruptive packages (the soak, the API server restarts), in phase 1. Those disrupt the second
# cluster and use nothing else; phase 1's other users of the second cluster are TESTACC_EARLY's
# tests, and the Cluster API lock, which all of them take, keeps them apart anyway. After them,
# they run beside the rest of phase 1, at the default GOGC (the soak bounds the providers'
# resident memory).
early() {
  local status=0 pkg
  for pkg in "$@"; do
    runbin "$pkg" -test.parallel "$TESTACC_PARALLEL" -test.run "$TESTACC_EARLY|$TESTACC_LONGEST" \
      -test.skip "$TESTACC_DISRUPTIVE|$TESTACC_PROCESSWIDE" || status=1
  done
  echo "---- TESTACC_SECOND_ALONE"
  # shellcheck disable=SC2086 # one package per word
  (unset GOGC && serial "$TESTACC_SECOND_ALONE" "" $disruptive_pkgs) || status=1
  return $status
}

# The packages whose tests TESTACC_DISRUPTIVE may name: those that call acctest.Disruptive.
disruptive_pkgs=$(grep -rl --include='*_test.go' 'acctest\.Disruptive(' internal | xargs -n1 dirname | sort -u | sed 's|^|./|')
# tests_matching RE: "PKG TEST" lines of the tests RE matches, from the test files'
# declarations: go test -list would link and start every package's test binary for this (18 s),
# before any test began.
tests_matching() {
  grep -rE --include='*_test.go' '^func Test[A-Za-z0-9_]+\(t \*testing\.T\)' internal |
    sed -E 's|^(.*)/[^/]*_test\.go:func (Test[A-Za-z0-9_]+)\(.*|./\1 \2|' | awk -v re="$1" '$2 ~ re' | sort -u
}
processwide_tests=$(tests_matching "$TESTACC_PROCESSWIDE")
late_pkgs=$(tests_matching "$TESTACC_LATE" | cut -d' ' -f1 | sort -u)

mkdir -p "$TESTBIN/provider"
# The provider that tests running terraform as separate processes install (dev_overrides):
# built once here rather than once per test process (and linked only when it changed).
go build -o "$TESTBIN/provider/terraform-provider-kubeplay" . || exit 1
KUBEPLAY_TEST_PROVIDER_DIR=$(cd "$TESTBIN/provider" && pwd) && export KUBEPLAY_TEST_PROVIDER_DIR
# What stop_jobs sweeps with, built before any test can need it.
go build -o "$TESTBIN/sweep" ./internal/acctest/sweep || exit 1
while read -r pkg; do
  testbin "$pkg" >/dev/null || exit 1
done < <({ echo "$TERRAFORM_PKGS $disruptive_pkgs $late_pkgs" | tr ' ' '\n'; cut -d' ' -f1 <<<"$processwide_tests"; } | grep . | sort -u)

# prebuild: what the jobs build from the Go module proxy (Terraform 1.16.0, OpenTofu,
# GoReleaser, the Cluster API manager; with --checks the linters and the docs generator) and the
# compiles of the release test's build (-trimpath, CGO_ENABLED=0), before any test starts, beside each other at
# normal priority. Warm, each finds its output and returns in well under a second. Cold, these
# builds ran beside phase 1's tests: with the CPU saturated, the niced downloads timed out
# ("TLS handshake timeout": Terraform 1.16.0 was not built, so neither pass that needs it ran)
# and the builds at normal priority starved containerd (pod sandboxes took up to 224 s to start,
# SSH targets missed their 3 minutes and the provider job passed its 30-minute timeout). A
# failed step runs once more (a download can fail on a passing network error).
prebuild() {
  local -a steps=(
    "next_terraform"
    "opentofu"
    "make --no-print-directory goreleaser"
    "tools/testcluster/capi.sh build"
    # TestAccRelease_install's goreleaser builds the provider with -trimpath and CGO_ENABLED=0:
    # other compile keys than ours (without CGO_ENABLED=0 this compiled none of them).
    "env CGO_ENABLED=0 go build -trimpath -o /dev/null ."
  )
  [ "$checks" = 1 ] && steps+=("make --no-print-directory tools")
  local step status=0 pid
  local -a spids=()
  for step in "${steps[@]}"; do
    # shellcheck disable=SC2086 # a step is a command line of plain words
    ( $step || { echo "prebuild: $step failed; once more in 5 s"; sleep 5; $step; } ) &
    spids+=($!)
  done
  for pid in "${spids[@]}"; do wait "$pid" || status=1; done
  return $status
}

# prewarm: each fuzzed package's instrumented test binary, which phase 2's fuzz job runs, built
# during phase 1 at the lowest CPU priority, since phase 1's tests mostly wait on pods (every
# package instrumented, the standard library included, so a cold cache compiles the whole
# dependency tree again: about 11 of the 14 minutes the fuzz job took cold). It needs nothing
# from the network. Warm, it is cache hits.
prewarm() {
  nice -n 19 tools/fuzz.sh build || return 1
}
logged prebuild prebuild
jobs_run+=(prebuild)
read -r rc took <"$LOGS/prebuild.rc"
echo "testacc: prebuild (Terraform 1.16.0, OpenTofu, GoReleaser, the Cluster API manager$([ "$checks" = 1 ] && echo ", make tools")): ${took}s, exit $rc"
[ "$rc" = 0 ] || { cat "$LOGS/prebuild.log"; exit 1; }

if [ "$checks" = 1 ]; then
  jobs_run+=(prewarm)
  logged prewarm prewarm &
  prewarm_pid=$!
  echo "testacc: prewarm started (nice 19): fuzz builds"
fi

release_pod_memory
phase_start=$(date +%s)
# What stop_jobs sweeps: the objects made from here on (the API server runs on this host's clock).
run_start=$(date -u +%Y-%m-%dT%H:%M:%SZ)
phase1=()
# Phase 1 is CPU-bound: its processes trade memory for less garbage collection (TESTACC_GOGC).
export GOGC=${TESTACC_GOGC:-100}
thp_set
# TESTACC_EARLY and TESTACC_LONGEST first: the former's turns on the Cluster API lock are a chain
# of about five minutes, and the latter mostly wait; in the provider's process either began in the
# phase's last minutes in some runs (see the GNUmakefile). Asking first, they get slots first.
# shellcheck disable=SC2086 # one package per word
job early early $TERRAFORM_PKGS && phase1+=(early)
# The packages of TERRAFORM_PKGS (the provider's, the longest by far) each in a job of their own
# from the binary built above, started at once: in go test ./... the provider's began only
# when a slot of -p freed, and was linked a second time.
job parallel packages -test.parallel "$TESTACC_PARALLEL" \
  -test.skip "$TESTACC_DISRUPTIVE|$TESTACC_LATE|$TESTACC_PROCESSWIDE" && phase1+=(parallel)
for pkg in $TERRAFORM_PKGS; do
  job "$(basename "$pkg")" runbin "$pkg" -test.parallel "$TESTACC_PARALLEL" \
    -test.skip "$TESTACC_DISRUPTIVE|$TESTACC_PROCESSWIDE|$TESTACC_EARLY|$TESTACC_LONGEST" && phase1+=("$(basename "$pkg")")
  job "next-$(basename "$pkg")" next_pass "$pkg" -test.parallel "$TESTACC_PARALLEL" \
    -test.run "$TESTACC_NEXT_RUN" -test.skip "$TESTACC_DISRUPTIVE|$TESTACC_PROCESSWIDE" && phase1+=("next-$(basename "$pkg")")
  job "tofu-$(basename "$pkg")" tofu_pass "$pkg" -test.parallel "$TESTACC_PARALLEL" \
    -test.run "$TESTACC_TOFU_RUN" -test.skip "$TESTACC_DISRUPTIVE|$TESTACC_PROCESSWIDE" && phase1+=("tofu-$(basename "$pkg")")
done
while read -r pkg test; do
  [ -n "$test" ] || continue
  job "pw-$test" processwide "$pkg" "$test" && phase1+=("pw-$test")
done <<<"$processwide_tests"
phase_end "${phase1[@]}"
phase1_took=$(($(date +%s) - phase_start))
thp_restore

release_pod_memory
phase_start=$(date +%s)
phase2=()
unset GOGC
# shellcheck disable=SC2086 # one package per word
job disruptive disruptive $disruptive_pkgs && phase2+=(disruptive)
# shellcheck disable=SC2086 # one package per word
job late serial "$TESTACC_LATE" "" $late_pkgs && phase2+=(late)
if [ "$checks" = 1 ]; then
  # The checks need the tools: when phase 1 ended first, the rest of the prewarm gets the CPU now.
  wait "$prewarm_pid"
  prewarm_pid=
  echo "==================== prewarm ===================="
  cat "$LOGS/prewarm.log"
  # The checks at nice 10: the disruptive tests and fuzz bound the phase, and the checks, which
  # have no time bounds, only have to end before them.
  job docs-check nice -n 10 make --no-print-directory docs-check && phase2+=(docs-check)
  job lint nice -n 10 make --no-print-directory lint && phase2+=(lint)
  # The fuzz targets search for a fixed time each (51 targets, 5 s each), so how many run at
  # once sets the job's time: two at a time took 168 to 182 s, three 119 to 131 s, longer than
  # the disruptive tests once the API server restarts left phase 2; four, within them.
  job fuzz nice -n 10 make --no-print-directory fuzz FUZZJOBS=4 && phase2+=(fuzz)
fi
phase_end "${phase2[@]}"
phase2_took=$(($(date +%s) - phase_start))

status=0
echo "==================== summary ===================="
echo "phase 1 (parallel): ${phase1_took}s; phase 2 (disruptive$([ "$checks" = 1 ] && echo ", docs-check, lint, fuzz")): ${phase2_took}s"
for name in "${jobs_run[@]}"; do
  read -r rc took <"$LOGS/$name.rc"
  passed=$(grep -c -- '^--- PASS' "$LOGS/$name.log")
  skipped=$(grep -c -- '^--- SKIP' "$LOGS/$name.log")
  failed=$(grep -c -- '^--- FAIL' "$LOGS/$name.log")
  printf '%-42s %-6s %5ss  top-level tests: %s passed, %s skipped, %s failed\n' "$name" \
    "$([ "$rc" = 0 ] && echo ok || echo FAILED)" "$took" "$passed" "$skipped" "$failed"
  [ "$rc" = 0 ] || status=1
done
echo "slowest tests:"
grep -h -- '^--- \(PASS\|FAIL\)' "$LOGS"/*.log | sed -E 's/^--- (PASS|FAIL): ([^ ]+) \(([0-9.]+)s\)/\3s \2 \1/' | sort -rn | head -10
# Why each failed test failed, at the end where a CI log's tail shows it: the
# last lines that test printed (go test -v names the test before its lines).
for log in "$LOGS"/*.log; do
  grep -q -- '^--- FAIL' "$log" || continue
  awk -v job="$(basename "$log" .log)" -v keep=30 '
    /^=== (RUN|CONT|NAME|PAUSE) / { cur = $3; sub(/\/.*/, "", cur); next }
    /^--- (PASS|FAIL|SKIP): / { cur = $3; sub(/\/.*/, "", cur); if ($2 == "FAIL:" && $3 !~ /\//) failed[cur] = 1; next }
    /^    / && cur != "" { n[cur]++; line[cur, n[cur]] = substr($0, 1, 400) }
    END {
      for (t in failed) {
        print "==================== " t " (" job ") ===================="
        for (i = (n[t] > keep ? n[t] - keep + 1 : 1); i <= n[t]; i++) print line[t, i]
      }
    }' "$log"
done
grep -h -- '^--- FAIL' "$LOGS"/*.log
exit $status
