#!/usr/bin/env bash
# run_ucx_paired.sh BUILD_DIR [ROUNDS] [OUT_DIR] — weft's UCX lanes against
# ucx_perftest one operation at a time (issue 14 item 3). For every round,
# UCX_TLS (shm, tcp) and operation (put, fetch-add, compare-swap, active
# message), ucx_perftest's run and weft_bench's run of that operation follow
# each other within seconds, so that both meet the same host regime: this
# VM's host moves between a fast and a slow one faster than run_all.sh's
# lanes, a minute apart, can follow (bench/RESULTS.md, run J and "UCX lanes
# ... six times"). Each pair gives one ratio weft / ucx_perftest, by mean and
# by p50; the table takes the median over rounds. Loopback only; every run
# is bounded by `timeout`. uptime is printed before and after.
#
# Environment: PERF_ITERS_SHM (200000), PERF_ITERS_TCP (20000): ucx_perftest
# -n; MIN_TIME (0.5): weft_bench --benchmark_min_time.
set -u -o pipefail
BUILD=${1:?usage: run_ucx_paired.sh BUILD_DIR [ROUNDS] [OUT_DIR]}
BUILD=$(cd "$BUILD" && pwd)
ROUNDS=${2:-5}
TOP=${3:-/tmp/ucx-paired-$(date +%Y%m%d-%H%M%S)}
HERE=$(cd "$(dirname "$0")" && pwd)
MIN_TIME=${MIN_TIME:-0.5}
PORT=$((20000 + $$ % 20000))
FAILED=0
log() { printf '== %s\n' "$*" >&2; }
. "$HERE/ucx_perftest.sh"

# weft_bench's benchmark and ucx_perftest's test of each operation.
OPS="put_pingpong:ucp_put_lat fadd_latency:ucp_fadd cswap_latency:ucp_cswap am_pingpong:ucp_am_lat"

mkdir -p "$TOP"
echo "uptime before: $(uptime)" | tee "$TOP/uptime.txt"
for r in $(seq 1 "$ROUNDS"); do
    OUT=$TOP/r$r
    mkdir -p "$OUT"
    : > "$OUT/perftest.txt"
    for tls in shm tcp; do
        iters=${PERF_ITERS_SHM:-200000}
        [ "$tls" = tcp ] && iters=${PERF_ITERS_TCP:-20000}
        for op in $OPS; do
            bm=${op%%:*} test=${op##*:}
            perftest "$tls" "$test" "$iters"
            cmd=(env WEFT_TIMEOUT_MS=60000 UCX_TLS="$tls" timeout 300 "$BUILD/tools/weft-run" --transport ucx
                 --timeout 280 -n 2 "$BUILD/bench/weft_bench" --benchmark_filter="/$bm/"
                 --benchmark_min_time="$MIN_TIME" --benchmark_out="$OUT/weft-$tls-$bm.json"
                 --benchmark_out_format=json)
            printf '%s\n' "${cmd[*]}" >> "$OUT/commands.txt"
            log "round $r weft $tls $bm"
            if ! "${cmd[@]}" > "$OUT/weft-$tls-$bm.log" 2>&1; then
                log "weft $tls $bm FAILED (see $OUT/weft-$tls-$bm.log)"
                FAILED=1
            fi
        done
    done
done
echo "uptime after: $(uptime)" | tee -a "$TOP/uptime.txt"

python3 - "$TOP" "$ROUNDS" "$OPS" <<'PY' | tee "$TOP/table.md"
import json, os, statistics, sys
top, rounds, ops = sys.argv[1], int(sys.argv[2]), [o.split(":") for o in sys.argv[3].split()]
labels = {"put_pingpong": "put (half RTT)", "fadd_latency": "fetch-add", "cswap_latency": "compare-swap",
          "am_pingpong": "AM (half RTT)"}
print("| UCX_TLS | op | mean ratio: median (rounds) | p50 ratio: median | weft / perftest mean ns per round |")
print("|---|---|---|---|---|")
for tls in ("shm", "tcp"):
    for bm, test in ops:
        means, p50s, raw = [], [], []
        for r in range(1, rounds + 1):
            run = os.path.join(top, f"r{r}")
            try:
                with open(os.path.join(run, f"weft-{tls}-{bm}.json")) as f:
                    w = next(b for b in json.load(f)["benchmarks"] if f"/{bm}/" in b["name"])
                p = next(l.split() for l in open(os.path.join(run, "perftest.txt")) if l.split()[:2] == [tls, test])
                p50, avg = float(p[2]) * 1e3, float(p[3]) * 1e3
            except (OSError, ValueError, StopIteration, KeyError):
                continue
            means.append(w["mean_ns"] / avg)
            p50s.append(w["p50_ns"] / p50)
            raw.append(f"{w['mean_ns']:.0f}/{avg:.0f}")
        med = lambda v: f"{statistics.median(v):.2f}" if v else "n/a"
        print(f"| {tls} | {labels[bm]} | **{med(means)}** ({', '.join(f'{x:.2f}' for x in means)}) |"
              f" {med(p50s)} | {'; '.join(raw)} |")
PY
log "results in $TOP"
exit $FAILED
