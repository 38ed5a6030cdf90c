#!/usr/bin/env bash
# fuzz.sh - run every fuzz target of the repository for FUZZTIME each (default 10s),
# FUZZJOBS targets at a time (default 1), each with one worker. make test-all runs
# it briefly, two at a time; for the long run:
#   FUZZTIME=10m tools/fuzz.sh
# A crash fails the script; the input is written under the package's
# testdata/fuzz/<Target>/, which then becomes a regression test: commit it.
#
# Each package's instrumented test binary is built once (into FUZZBIN, a
# directory of the cache; make test-all's prewarm builds them there while
# phase 1 runs) and run once per target, as `go test -fuzz` runs it: go test
# would link it again for every target, and linking was most of a 5 s
# target's cost.
set -euo pipefail
cd "$(dirname "$0")/.."
FUZZTIME=${FUZZTIME:-10s}
FUZZJOBS=${FUZZJOBS:-1}
FUZZBIN=${FUZZBIN:-${KUBEPLAY_CACHE_DIR:-.cache}/fuzzbin}
results=$(mktemp -d)
trap 'rm -rf "$results"' EXIT
mkdir -p "$FUZZBIN"
FUZZBIN=$(cd "$FUZZBIN" && pwd)
fuzzcache=$(go env GOCACHE)/fuzz
module=$(go list -m)

# fuzzbin PKG: builds PKG's instrumented test binary into FUZZBIN when it is
# missing or older than what go would build now (go test -c relinks only then).
fuzzbin() {
  local bin
  bin="$FUZZBIN/$(tr / _ <<<"${1#./}").test"
  go test -c -fuzz=. -o "$bin" "$1" >&2 || return 1
  echo "$bin"
}

fuzz_one() { # fuzz_one PKG BIN TARGET: writes the target's report to $results
  local pkg=$1 bin=$2 target=$3 start out execs attempt report dir importpath
  start=$(date +%s)
  report="$results/$(tr / _ <<<"${pkg#./}").$target"
  dir=$PWD/${pkg#./}
  importpath=$module/${pkg#./}
  for attempt in 1 2 3; do
    # The flags go test passes: the corpus it keeps between runs lives in the
    # build cache's fuzz directory, per package.
    if out=$(cd "$dir" && "$bin" -test.run '^$' -test.fuzz "^${target}\$" -test.fuzztime "$FUZZTIME" \
      -test.parallel 1 -test.timeout 10m -test.paniconexit0 -test.fuzzcachedir "$fuzzcache/$importpath" 2>&1); then
      execs=$(grep -o 'execs: [0-9]*' <<<"$out" | tail -1 || true)
      echo "fuzz $pkg $target: ok in $(( $(date +%s) - start ))s (${execs:-no progress line})" >"$report.ok"
      return
    fi
    # Go's engine sometimes ends a short run on its own deadline while it
    # minimizes an input: no failing input is written. Anything else, or a
    # third such end, fails.
    if [ "$attempt" -lt 3 ] && grep -q 'context deadline exceeded' <<<"$out" && ! grep -q 'Failing input written' <<<"$out"; then
      echo "fuzz $pkg $target: the fuzzing engine hit its own deadline, with no failing input; again" >>"$report.retries"
      continue
    fi
    { echo "fuzz $pkg $target: FAILED"; echo "$out" | tail -40; } >"$report.failed"
    return
  done
}

# `fuzz.sh build` only builds the binaries (make test-all's prewarm).
pkgs=$(grep -rl --include='*_test.go' '^func Fuzz' internal | xargs -n1 dirname | sort -u | sed 's|^|./|')
if [ "${1:-}" = build ]; then
  for pkg in $pkgs; do fuzzbin "$pkg" >/dev/null; done
  exit 0
fi

running=0
for pkg in $pkgs; do
  bin=$(fuzzbin "$pkg")
  for target in $(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' "$pkg"/*_test.go); do
    if [ "$running" -ge "$FUZZJOBS" ]; then
      wait -n || true
      running=$((running - 1))
    fi
    fuzz_one "$pkg" "$bin" "$target" &
    running=$((running + 1))
  done
done
wait

status=0
for f in "$results"/*; do
  cat "$f"
  case $f in *.failed) status=1 ;; esac
done
exit $status
