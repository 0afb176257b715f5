#!/usr/bin/env bash
# run_all.sh BUILD_DIR [OUT_DIR] — every benchmark of bench/ in one run, then
# a markdown table of raw numbers and ratios.
#
# The machines are shared and noisy, so every comparison is a ratio between
# numbers taken minutes apart in this same run: the floor (floor_pingpong),
# weft over shm, ucx_perftest and weft over ucx with UCX_TLS=shm, the same
# pair with UCX_TLS=tcp, and 16 ranks on the cores there are.
#
# Every step is bounded by `timeout`; ucx_perftest uses loopback only
# (127.0.0.1). A ucx lane whose weft_init reports UNSUPPORTED prints SKIP and
# shows n/a in the table instead of failing the run.
#
# Environment: MIN_TIME (benchmark seconds per run, default 0.5),
# PERF_ITERS_SHM / PERF_ITERS_TCP (ucx_perftest -n), OVERSUB_K (fetch-adds per
# rank, default 200000).
set -u -o pipefail

BUILD=${1:?usage: run_all.sh BUILD_DIR [OUT_DIR]}
BUILD=$(cd "$BUILD" && pwd)
OUT=${2:-$BUILD/bench/results-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$OUT"
MIN_TIME=${MIN_TIME:-0.5}
PERF_ITERS_SHM=${PERF_ITERS_SHM:-200000}
PERF_ITERS_TCP=${PERF_ITERS_TCP:-20000}
OVERSUB_K=${OVERSUB_K:-200000}
RUN="$BUILD/tools/weft-run"
BENCH="$BUILD/bench/weft_bench"
# A port of our own, so that two people running this at once do not meet.
PORT=$((20000 + $$ % 20000))
FAILED=0
: > "$OUT/commands.txt"
: > "$OUT/perftest.txt"

log() { printf '== %s\n' "$*" >&2; }
# Runs one step, logging the exact command; a failed step marks the run.
step() {
    local name=$1
    shift
    printf '%s\n' "$*" >> "$OUT/commands.txt"
    log "$name: $*"
    if ! env "$@" > "$OUT/$name.log" 2>&1; then
        log "$name FAILED (see $OUT/$name.log)"
        tail -5 "$OUT/$name.log" >&2
        FAILED=1
    fi
}

# perftest TLS TEST ITERS (bench/ucx_perftest.sh): ucx_perftest's number for one test.
. "$(dirname "$0")/ucx_perftest.sh"

weft_bench() {  # weft_bench NAME TRANSPORT [UCX_TLS]
    local name=$1 transport=$2 tls=${3:-}
    local envs=(WEFT_TIMEOUT_MS=60000)
    [ -n "$tls" ] && envs+=("UCX_TLS=$tls")
    step "$name" "${envs[@]}" timeout 900 "$RUN" --transport "$transport" --timeout 850 -n 2 "$BENCH" \
        --benchmark_min_time="$MIN_TIME" --benchmark_out="$OUT/$name.json" --benchmark_out_format=json
}

{
    echo "date: $(date -Is)"
    echo "host: $(hostname)"
    echo "nproc: $(nproc)"
    echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
    echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "ucx: $(ucx_info -v 2>/dev/null | head -1)"
} > "$OUT/machine.txt"

step floor timeout 300 "$BUILD/bench/floor_pingpong" --benchmark_min_time="$MIN_TIME" \
    --benchmark_out="$OUT/floor.json" --benchmark_out_format=json
weft_bench weft-shm shm
for t in ucp_put_lat ucp_fadd ucp_cswap ucp_am_lat; do perftest shm $t "$PERF_ITERS_SHM"; done
weft_bench weft-ucx-shm ucx shm
for t in ucp_put_lat ucp_fadd ucp_cswap ucp_am_lat; do perftest tcp $t "$PERF_ITERS_TCP"; done
weft_bench weft-ucx-tcp ucx tcp
step oversub-shm timeout 90 "$RUN" --transport shm --timeout 60 -n 16 "$BUILD/bench/oversubscribed" "$OVERSUB_K"
# The ucx lanes of the same test, smaller K (tcp atomics are emulated: ~10 µs each, and
# only move while rank 0, one of 8 ranks on its core, progresses).
step oversub-ucx-shm UCX_TLS=shm timeout 90 "$RUN" --transport ucx --timeout 60 -n 16 \
    "$BUILD/bench/oversubscribed" $((OVERSUB_K / 10))
step oversub-ucx-tcp UCX_TLS=tcp timeout 90 "$RUN" --transport ucx --timeout 60 -n 16 \
    "$BUILD/bench/oversubscribed" 2000

python3 "$(dirname "$0")/report.py" "$OUT" | tee "$OUT/table.md"
log "results in $OUT"
exit $FAILED
