#!/usr/bin/env bash
# overhead_check.sh BUILD [TRANSPORT] [ROUNDS] — weft-bench's own overhead
# (issue 17): its 8-byte put (half a round trip) and fetch-add (full) against
# bench/weft_bench (Google Benchmark) for the same operations, alternating in
# one run so host load hits both. Like with like: weft_bench's p50 times 1
# iteration in 16 alone (a clock read before and after it, the others
# untimed), so weft-bench runs with --sample-every 16 for the compared
# median. weft-bench's default, every iteration timed (perftest's way), is
# printed beside it: in a ping-pong timing every iteration shifts when the
# next operation meets the peer's poll (docs/tools/weft-bench.md,
# Statistics). weft_bench's mean is its whole loop's time / n, with no clock
# read, printed beside weft-bench's every-iteration mean. The ratio per round
# is weft-bench / weft_bench; the summary is the median over rounds. Prints
# uptime before and after. Exit status 1 if a run fails, 2 for bad arguments.
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
    for every in 16 1; do
        "$BUILD/tools/weft-run" -n 2 --timeout 120 --transport "$TRANSPORT" "$BUILD/tools/weft-bench" -t put,fadd \
            -m 8:8 -i 1000000 -x 10000 --sample-every $every --json "$out/wb$every.$r.json" >/dev/null \
            2>"$out/wb$every.$r.err" || { cat "$out/wb$every.$r.err" >&2; exit 1; }
    done
done
echo "uptime after: $(uptime)"
python3 - "$out" "$ROUNDS" "$TRANSPORT" <<'PY'
import json, statistics, sys
out, rounds, transport = sys.argv[1], int(sys.argv[2]), sys.argv[3]
pairs = {'put': 'put_pingpong', 'fadd': 'fadd_latency'}
keys = ('gb_p50', 'gb_mean', 'wb16_median', 'wb1_median', 'wb1_mean')
rows = {op: {k: [] for k in keys} for op in pairs}
for r in range(1, rounds + 1):
    gb = {b['name'].split('/')[1]: b for b in json.load(open('%s/gb.%d.json' % (out, r)))['benchmarks']}
    wb16 = {row['op']: row for row in json.load(open('%s/wb16.%d.json' % (out, r)))['rows']}
    wb1 = {row['op']: row for row in json.load(open('%s/wb1.%d.json' % (out, r)))['rows']}
    for op, name in pairs.items():
        rows[op]['gb_p50'].append(gb[name]['p50_ns'])
        rows[op]['gb_mean'].append(gb[name]['mean_ns'])
        rows[op]['wb16_median'].append(wb16[op]['median_us'] * 1000)
        rows[op]['wb1_median'].append(wb1[op]['median_us'] * 1000)
        rows[op]['wb1_mean'].append(wb1[op]['mean_us'] * 1000)
ratio = lambda v, a, b: statistics.median([x / y for x, y in zip(v[a], v[b])])
print('| %s, %d rounds | weft_bench p50 ns (1 in 16) | weft-bench median ns (1 in 16) | ratio (median of rounds) '
      '| weft-bench median ns (every) | weft_bench mean ns (loop) | weft-bench mean ns (every) | ratio |' % (transport, rounds))
print('|---|---|---|---|---|---|---|---|')
for op, v in rows.items():
    med = lambda k: statistics.median(v[k])
    print('| %s (%s) | %.1f | %.1f | %.2f | %.1f | %.1f | %.1f | %.2f |' % (
        op, 'half round trip' if op == 'put' else 'full round trip', med('gb_p50'), med('wb16_median'),
        ratio(v, 'wb16_median', 'gb_p50'), med('wb1_median'), med('gb_mean'), med('wb1_mean'),
        ratio(v, 'wb1_mean', 'gb_mean')))
print()
print('per round (weft_bench p50 / weft-bench median 1 in 16 / every, ns):')
for op, v in rows.items():
    print('  %s: %s' % (op, ', '.join('%.1f/%.1f/%.1f' % t for t in zip(v['gb_p50'], v['wb16_median'], v['wb1_median']))))
PY
