#!/usr/bin/env bash
# overhead_check.sh BUILD [TRANSPORT] [ROUNDS] — weft-bench's own overhead
# (issue 17): its 8-byte put (half a round trip) and fetch-add (full) against
# bench/weft_bench (Google Benchmark) for the same operations, alternating in
# one run so host load hits both. weft_bench's p50 times 1 iteration in 16
# alone (one clock read inside), as weft-bench times every iteration: those
# are compared like with like; its mean is the whole loop's time / n, with
# no clock read per iteration, and is printed beside weft-bench's mean of
# per-iteration samples. The ratio per round is weft-bench / weft_bench; the
# summary is the median over rounds. Prints uptime before and after.
# Exit status 1 if a run fails, 2 for bad arguments.
set -u -o pipefail
BUILD=${1:-}
TRANSPORT=${2:-shm}
ROUNDS=${3:-5}
if [ -z "$BUILD" ] || [ ! -x "$BUILD/tools/weft-bench" ] || [ ! -x "$BUILD/bench/weft_bench" ]; then
    echo "usage: overhead_check.sh BUILD [shm|ucx] [ROUNDS] (BUILD has tools/weft-bench and bench/weft_bench)" >&2
    exit 2
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
echo "uptime before: $(uptime)"
for r in $(seq 1 "$ROUNDS"); do
    "$BUILD/tools/weft-run" -n 2 --timeout 120 --transport "$TRANSPORT" "$BUILD/bench/weft_bench" \
        --benchmark_filter="^$TRANSPORT/(put_pingpong|fadd_latency)/" --benchmark_min_time=1 \
        --benchmark_format=json >"$out/gb.$r.json" 2>"$out/gb.$r.err" || { cat "$out/gb.$r.err" >&2; exit 1; }
    "$BUILD/tools/weft-run" -n 2 --timeout 120 --transport "$TRANSPORT" "$BUILD/tools/weft-bench" -t put,fadd \
        -m 8:8 -i 1000000 -x 10000 --json "$out/wb.$r.json" >/dev/null 2>"$out/wb.$r.err" ||
        { cat "$out/wb.$r.err" >&2; exit 1; }
done
echo "uptime after: $(uptime)"
python3 - "$out" "$ROUNDS" "$TRANSPORT" <<'PY'
import json, statistics, sys
out, rounds, transport = sys.argv[1], int(sys.argv[2]), sys.argv[3]
pairs = {'put': 'put_pingpong', 'fadd': 'fadd_latency'}
rows = {op: {'gb_p50': [], 'gb_mean': [], 'wb_median': [], 'wb_mean': []} for op in pairs}
for r in range(1, rounds + 1):
    gb = {b['name'].split('/')[1]: b for b in json.load(open('%s/gb.%d.json' % (out, r)))['benchmarks']}
    wb = {row['op']: row for row in json.load(open('%s/wb.%d.json' % (out, r)))['rows']}
    for op, name in pairs.items():
        rows[op]['gb_p50'].append(gb[name]['p50_ns'])
        rows[op]['gb_mean'].append(gb[name]['mean_ns'])
        rows[op]['wb_median'].append(wb[op]['median_us'] * 1000)
        rows[op]['wb_mean'].append(wb[op]['mean_us'] * 1000)
print('| %s, %d rounds | weft_bench p50 ns | weft-bench median ns | ratio (median of rounds) | weft_bench mean ns | weft-bench mean ns | ratio |' % (transport, rounds))
print('|---|---|---|---|---|---|---|')
for op, v in rows.items():
    med = lambda k: statistics.median(v[k])
    r50 = statistics.median([a / b for a, b in zip(v['wb_median'], v['gb_p50'])])
    rmean = statistics.median([a / b for a, b in zip(v['wb_mean'], v['gb_mean'])])
    print('| %s (%s) | %.1f | %.1f | %.2f | %.1f | %.1f | %.2f |' % (op, 'half round trip' if op == 'put' else 'full round trip',
          med('gb_p50'), med('wb_median'), r50, med('gb_mean'), med('wb_mean'), rmean))
print()
print('per round (weft_bench p50 / weft-bench median, ns):')
for op, v in rows.items():
    print('  %s: %s' % (op, ', '.join('%.1f/%.1f' % (a, b) for a, b in zip(v['gb_p50'], v['wb_median']))))
PY
