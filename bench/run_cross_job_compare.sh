#!/usr/bin/env bash
# run_cross_job_compare.sh BUILD_DIR [OUT_DIR] — what a communicator across
# jobs costs: bench/coll_weft's tests on N ranks launched as one job (the
# world communicator) and as two jobs of N/2 (a process group over both as
# the communicator, --span-jobs: message schedules only, docs/groups.md
# "Communicators across jobs"), the two one right after the other in each
# round, on shm. Prints uptime before and after, and per test the median
# over the rounds of mean and p50, with the ratio across-jobs / one job.
#
# Environment: RANKS ("4"; even), ROUNDS (3), ITERS (20000), WARMUP (1000),
# BW_ITERS (200), BUDGET_MS (3000), RUN_TIMEOUT (180 s per run).
set -u -o pipefail

BUILD=${1:?usage: run_cross_job_compare.sh BUILD_DIR [OUT_DIR]}
BUILD=$(cd "$BUILD" && pwd)
OUT=${2:-$BUILD/bench/cross-job-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$OUT"
RANKS=${RANKS:-4}
ROUNDS=${ROUNDS:-3}
RUN_TIMEOUT=${RUN_TIMEOUT:-180}
RUN="$BUILD/tools/weft-run"
BENCH="$BUILD/bench/coll_weft"
ARGS=(--iters "${ITERS:-20000}" --warmup "${WARMUP:-1000}" --bw-iters "${BW_ITERS:-200}"
      --budget-ms "${BUDGET_MS:-3000}")
for f in "$RUN" "$BENCH"; do
    [ -x "$f" ] || { echo "run_cross_job_compare.sh: $f not built" >&2; exit 1; }
done
if [ $((RANKS % 2)) -ne 0 ] || [ "$RANKS" -lt 2 ]; then
    echo "run_cross_job_compare.sh: RANKS=$RANKS must be even" >&2
    exit 2
fi
half=$((RANKS / 2))
: > "$OUT/results.txt"
echo "uptime before: $(uptime)" | tee "$OUT/machine.txt"
for round in $(seq 1 "$ROUNDS"); do
    for lane in one-job across-jobs; do
        if [ "$lane" = one-job ]; then
            cmd=("$RUN" --timeout "$RUN_TIMEOUT" --transport shm -n "$RANKS" "$BENCH" "${ARGS[@]}")
        else
            cmd=("$RUN" --timeout "$RUN_TIMEOUT" --transport shm -n "$half" "$BENCH" --span-jobs "${ARGS[@]}"
                 : -n "$half" "$BENCH" --span-jobs "${ARGS[@]}")
        fi
        echo "${cmd[*]}" >> "$OUT/commands.txt"
        if ! timeout $((RUN_TIMEOUT + 20)) "${cmd[@]}" > "$OUT/$lane-r$round.log" 2>&1; then
            echo "run_cross_job_compare.sh: $lane round $round failed (see $OUT/$lane-r$round.log)" >&2
            exit 1
        fi
        grep '^RESULT' "$OUT/$lane-r$round.log" | sed "s/^RESULT /RESULT lane=$lane /" >> "$OUT/results.txt"
    done
done
echo "uptime after: $(uptime)" | tee -a "$OUT/machine.txt"
python3 - "$OUT/results.txt" "$RANKS" <<'EOF' | tee "$OUT/table.md"
import collections, statistics, sys
vals = collections.defaultdict(list)
order = []
for line in open(sys.argv[1]):
    f = dict(kv.split("=", 1) for kv in line.split()[1:])
    key = (f["lane"], f["test"], f["stat"])
    vals[key].append(float(f["value"]))
    if f["test"] not in order:
        order.append(f["test"])
print(f"| test, {sys.argv[2]} ranks | stat | one job | across jobs | across / one |")
print("|---|---|---|---|---|")
for test in order:
    for stat in ("mean", "p50", "bw"):
        one, across = vals.get(("one-job", test, stat)), vals.get(("across-jobs", test, stat))
        if not one or not across:
            continue
        a, b = statistics.median(one), statistics.median(across)
        fmt = (lambda v: f"{v:.2f} GB/s") if stat == "bw" else (lambda v: f"{v:.0f} ns")
        ratio = a / b if stat == "bw" else b / a  # > 1: slower across jobs
        print(f"| {test} | {stat} | {fmt(a)} | {fmt(b)} | {ratio:.2f} |")
EOF
