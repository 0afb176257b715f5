#!/usr/bin/env bash
# clean_finalize_test.sh WEFT_RUN LAUNCH_HELPER RANKS:RUNS... — a clean job
# (barriers, an allreduce, finalize) must exit 0 and log no ERROR line, run
# after run. The transport comes from the environment (WEFT_TRANSPORT,
# UCX_TLS). Each run is bounded by weft-run --timeout: a hang is a failure.
set -uo pipefail
run=$1 helper=$2
shift 2
out=$(mktemp)
trap 'rm -f "$out"' EXIT
failed=0 total=0
for spec in "$@"; do
  n=${spec%%:*} runs=${spec##*:}
  for i in $(seq 1 "$runs"); do
    total=$((total + 1))
    "$run" --timeout 120 -n "$n" "$helper" coll >"$out" 2>&1
    rc=$?
    errors=$(grep -c "ERROR" "$out")
    if [ $rc -ne 0 ] || [ "$errors" -ne 0 ]; then
      failed=$((failed + 1))
      echo "clean_finalize_test: $n ranks, run $i: exit $rc, $errors ERROR line(s):"
      grep "ERROR" "$out" | head -20
      [ $rc -eq 124 ] && echo "clean_finalize_test: the job hung (weft-run --timeout)"
    fi
  done
done
if [ $failed -ne 0 ]; then
  echo "clean_finalize_test: $failed of $total clean runs failed or logged errors" >&2
  exit 1
fi
echo "clean_finalize_test: $total clean runs, no error"
