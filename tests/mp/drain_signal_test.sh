#!/usr/bin/env bash
# weft-run --drain-on SIGUSR1: a signal to the launcher drains the job and
# the launcher prints the result. Usage: drain_signal_test.sh WEFT_RUN MP_DRAIN [RANKS]
set -euo pipefail
run=$1 bin=$2 n=${3:-4}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
WEFT_TEST_SIGNAL_DRAIN=1 GTEST_FILTER='DrainSignal.*' "$run" --timeout 120 --drain-on SIGUSR1 -n "$n" "$bin" >"$out" 2>&1 &
launcher=$!
# Wait until every rank is in its loop, then ask.
for _ in $(seq 600); do
  [ "$(grep -c '\] ready' "$out" || true)" -ge 1 ] && break
  sleep 0.1
done
sleep 0.3
kill -USR1 "$launcher"
rc=0
wait "$launcher" || rc=$?
cat "$out"
if [ "$rc" != 0 ]; then echo "FAIL: weft-run exited $rc"; exit 1; fi
grep -q 'weft-run: drain 1: success' "$out" || { echo "FAIL: no drain report from weft-run"; exit 1; }
grep -q 'PASSED' "$out" || { echo "FAIL: the job did not pass"; exit 1; }
echo "OK: drained from outside the job"
