#!/usr/bin/env bash
# fuzz.sh - run every fuzz target of the repository for FUZZTIME each (default 10s),
# FUZZJOBS targets at a time (default 1), each with one worker. make test-all runs
# it briefly, two at a time; for the long run:
#   FUZZTIME=10m tools/fuzz.sh
# A crash fails the script; go test writes the input under the package's
# testdata/fuzz/<Target>/, which then becomes a regression test: commit it.
set -euo pipefail
cd "$(dirname "$0")/.."
FUZZTIME=${FUZZTIME:-10s}
FUZZJOBS=${FUZZJOBS:-1}
results=$(mktemp -d)
trap 'rm -rf "$results"' EXIT

fuzz_one() { # fuzz_one PKG TARGET: writes the target's report to $results
  local pkg=$1 target=$2 start out execs attempt report
  start=$(date +%s)
  report="$results/$(tr / _ <<<"${pkg#./}").$target"
  for attempt in 1 2 3; do
    if out=$(go test "$pkg" -run '^$' -fuzz "^${target}\$" -fuzztime "$FUZZTIME" -parallel 1 2>&1); then
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

running=0
while IFS= read -r file; do
  pkg=./$(dirname "$file")
  for target in $(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' "$file"); do
    if [ "$running" -ge "$FUZZJOBS" ]; then
      wait -n || true
      running=$((running - 1))
    fi
    fuzz_one "$pkg" "$target" &
    running=$((running + 1))
  done
done < <(grep -rl --include='*_test.go' '^func Fuzz' internal | sort)
wait

status=0
for f in "$results"/*; do
  cat "$f"
  case $f in *.failed) status=1 ;; esac
done
exit $status
