#!/usr/bin/env bash
# fuzz.sh - run every fuzz target of the repository for FUZZTIME each (default 10s),
# one after the other. make test-all runs it briefly; for the long run:
#   FUZZTIME=10m tools/fuzz.sh
# A crash fails the script; go test writes the input under the package's
# testdata/fuzz/<Target>/, which then becomes a regression test: commit it.
set -euo pipefail
cd "$(dirname "$0")/.."
FUZZTIME=${FUZZTIME:-10s}
status=0
while IFS= read -r file; do
  pkg=./$(dirname "$file")
  for target in $(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' "$file"); do
    start=$(date +%s)
    for attempt in 1 2 3; do
      if out=$(go test "$pkg" -run '^$' -fuzz "^${target}\$" -fuzztime "$FUZZTIME" -parallel 1 2>&1); then
        execs=$(grep -o 'execs: [0-9]*' <<<"$out" | tail -1 || true)
        echo "fuzz $pkg $target: ok in $(( $(date +%s) - start ))s (${execs:-no progress line})"
        break
      fi
      # Go's engine sometimes ends a short run on its own deadline while it
      # minimizes an input: no failing input is written. Anything else, or a
      # third such end, fails.
      if [ "$attempt" -lt 3 ] && grep -q 'context deadline exceeded' <<<"$out" && ! grep -q 'Failing input written' <<<"$out"; then
        echo "fuzz $pkg $target: the fuzzing engine hit its own deadline, with no failing input; again"
        continue
      fi
      echo "fuzz $pkg $target: FAILED"; echo "$out" | tail -40; status=1
      break
    done
  done
done < <(grep -rl --include='*_test.go' '^func Fuzz' internal | sort)
exit $status
