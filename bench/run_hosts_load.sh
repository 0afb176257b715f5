#!/usr/bin/env bash
# run_hosts_load.sh [BUILD_DIR] [SECONDS] — no false suspicion under an
# alltoall at full load (issue 19): mp_hosts' Hosts.NoFalseSuspicionUnderAlltoall
# (checked 64 KiB alltoalls back to back, every rank busy) across simulated
# hosts (weft-run --hosts, UCX over tcp between them), for SECONDS (default
# 60) per layout, with HOGS busy loops (default 4) beside it so the machine
# is loaded past its cores. A live rank declared failed fails the run.
# Layouts: LAYOUTS="HOSTSxRANKS ..." (default "2x4 2x8 4x8"). Prints each
# layout's rounds and verdict, and the load before and after.
set -uo pipefail
build=$(cd "${1:-build}" && pwd)
seconds=${2:-60}
hogs=${HOGS:-4}
[ "$(id -u)" = 0 ] || { echo "SKIP: simulated hosts need root"; exit 77; }
pids=()
trap 'kill "${pids[@]}" 2>/dev/null' EXIT
echo "uptime before: $(uptime)"
for ((i = 0; i < hogs; i++)); do
  (while :; do :; done) &
  pids+=($!)
done
rc=0
for layout in ${LAYOUTS:-2x4 2x8 4x8}; do
  hosts=${layout%x*} ranks=${layout#*x}
  out=$(MP_HOSTS=$hosts MP_ALLTOALL_SECONDS=$seconds GTEST_FILTER=Hosts.NoFalseSuspicionUnderAlltoall \
        WEFT_TIMEOUT_MS=60000 timeout $((seconds + 120)) "$build/tools/weft-run" --timeout $((seconds + 100)) \
        --hosts "$hosts" -n "$ranks" "$build/tests/mp/mp_hosts" 2>&1)
  status=$?
  line=$(grep -m1 '\[hosts\] alltoall' <<<"$out")
  declared=$(grep -c 'declared failed\|was declared' <<<"$out")
  echo "$hosts hosts x $((ranks / hosts)) ranks, $hogs hogs: exit $status, ${line:-no summary line}, failure lines: $declared"
  echo "  load now: $(uptime | sed 's/.*load average: //')"
  [ "$status" = 0 ] || { rc=1; grep -E 'FAILED|error|declared' <<<"$out" | head -5; }
done
kill "${pids[@]}" 2>/dev/null
echo "uptime after: $(uptime)"
exit $rc
