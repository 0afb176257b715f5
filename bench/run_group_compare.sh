#!/usr/bin/env bash
# Process groups side by side (bench/RESULTS.md "Process groups"): weft's
# bench/group_bench and the same loop on PMIx groups (bench/pmix/pmix_group.c)
# under PRRTE's prterun, at 2, 4, 8 and 16 ranks (SIZES), interleaved, in one run.
#   [SIZES="2 4 8 16"] bench/run_group_compare.sh BUILD_DIR [ROUNDS] [REPS]
# The anchors (OpenPMIx + PRRTE master, ../shared/anchors) are built once
# into $WEFT_ANCHORS_PREFIX (default ~/.cache/weft-anchors, about 6 minutes);
# without the anchors folder the PMIx side is skipped with the reason.
set -euo pipefail
build=$(cd "${1:?usage: run_group_compare.sh BUILD_DIR [ROUNDS] [REPS]}" && pwd)
rounds=${2:-3}
reps=${3:-200}
here=$(cd "$(dirname "$0")" && pwd)
anchors=${WEFT_ANCHORS:-$here/../../shared/anchors}
prefix=${WEFT_ANCHORS_PREFIX:-$HOME/.cache/weft-anchors}
pmix_bin=""
if [ -x "$anchors/build-pmix-prrte.sh" ] || [ -f "$anchors/build-pmix-prrte.sh" ]; then
  if [ ! -x "$prefix/bin/prterun" ]; then
    echo "building OpenPMIx + PRRTE into $prefix (once)"
    bash "$anchors/build-pmix-prrte.sh" "$prefix" "$(mktemp -d)"
  fi
  pmix_bin=$(mktemp -d)/pmix_group
  cc -O2 -o "$pmix_bin" "$here/pmix/pmix_group.c" -I"$prefix/include" -L"$prefix/lib" -Wl,-rpath,"$prefix/lib" -lpmix
else
  echo "SKIP: PMIx side: no anchors at $anchors (set WEFT_ANCHORS)"
fi
echo "uptime before: $(uptime)"
for round in $(seq 1 "$rounds"); do
  for n in ${SIZES:-2 4 8 16}; do
    echo "round $round, $n ranks"
    "$build/tools/weft-run" --transport shm -n "$n" "$build/bench/group_bench" --reps "$reps" | grep RESULT
    if [ -n "$pmix_bin" ]; then
      "$prefix/bin/prterun" --allow-run-as-root --map-by :OVERSUBSCRIBE -n "$n" "$pmix_bin" "$reps" 2>&1 |
        grep RESULT
    fi
  done
done
echo "uptime after: $(uptime)"
