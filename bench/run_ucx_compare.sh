#!/usr/bin/env bash
# run_ucx_compare.sh BEFORE_BUILD AFTER_BUILD [ROUNDS] [OUT_DIR] — two builds'
# UCX lanes against ucx_perftest, interleaved (issue 14): each round runs
# bench/run_all.sh on BEFORE, then on AFTER, so host load hits both; every
# ratio is weft / ucx_perftest from the same run_all.sh run, and the summary
# is the median over rounds. uptime is printed before and after.
set -u -o pipefail
BEFORE=${1:?usage: run_ucx_compare.sh BEFORE_BUILD AFTER_BUILD [ROUNDS] [OUT_DIR]}
AFTER=${2:?usage: run_ucx_compare.sh BEFORE_BUILD AFTER_BUILD [ROUNDS] [OUT_DIR]}
ROUNDS=${3:-3}
OUT=${4:-/tmp/ucx-compare-$(date +%Y%m%d-%H%M%S)}
HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$OUT"
echo "uptime before: $(uptime)" | tee "$OUT/uptime.txt"
for r in $(seq 1 "$ROUNDS"); do
    for side in before after; do
        build=$BEFORE
        [ $side = after ] && build=$AFTER
        echo "== round $r $side: $HERE/run_all.sh $build $OUT/$side-$r" >&2
        bash "$HERE/run_all.sh" "$build" "$OUT/$side-$r" > "$OUT/$side-$r.log" 2>&1 || echo "round $r $side: run_all.sh reported a failure" >&2
    done
done
echo "uptime after: $(uptime)" | tee -a "$OUT/uptime.txt"
python3 "$HERE/ucx_compare_report.py" "$OUT" "$ROUNDS" | tee "$OUT/table.md"
