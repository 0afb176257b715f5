#!/usr/bin/env bash
# run_ipo.sh BUILD_DIR [OUT_DIR] — instructions per operation, counted by
# callgrind (issue 14): weft's entry points and the UCX calls under them,
# against ucx_perftest's own loop with the same UCX_TLS and the same op.
#
# Hardware counters are not available in this VM (perf stat: <not
# supported>), and timings on two shared cores are noisy; an instruction
# count per call is not. Only the measuring side runs under callgrind: weft's
# rank 0 (rank 1 native, through a wrapper that weft-run starts for both)
# and ucx_perftest's client (its server native). Each process is one
# callgrind profile per thread (--separate-threads=yes); the tables read the
# main thread's (the drain and detector threads' progress calls would
# otherwise count as the application's).
#
# Per call means: a function's inclusive instructions / its calls, both from
# `callgrind_annotate --inclusive=yes --tree=caller`. A put, get, fetch-add or
# AM send is one call of weft's entry (weft_put, ...) or of the ucp_*_nbx
# function perftest calls; a poll is one weft_progress or ucp_worker_progress.
# Waiting loops spin a number of times that depends on timing; per-call counts
# of the calls inside them do not.
#
# Environment: IPO_MIN_TIME (weft_bench --benchmark_min_time under callgrind,
# default 0.2), IPO_ITERS (ucx_perftest -n, default 20000), IPO_LANES
# (default "shm tcp": the UCX_TLS values; weft's own shm backend always runs),
# IPO_PERFTEST_FROM (a previous OUT_DIR whose ucx_perftest profiles to reuse:
# they do not depend on weft's build).
set -u -o pipefail

BUILD=${1:?usage: run_ipo.sh BUILD_DIR [OUT_DIR]}
BUILD=$(cd "$BUILD" && pwd)
OUT=${2:-$BUILD/bench/ipo-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
MIN_TIME=${IPO_MIN_TIME:-0.2}
ITERS=${IPO_ITERS:-20000}
LANES=${IPO_LANES:-shm tcp}
HERE=$(cd "$(dirname "$0")" && pwd)
PORT=$((20000 + $$ % 20000))
FAILED=0
: > "$OUT/commands.txt"
command -v valgrind > /dev/null || { echo "SKIP: valgrind not installed"; exit 0; }

# Rank 0 under callgrind, every other rank native. LD_BIND_NOW: no lazy
# symbol binding in the first call of each function (thousands of
# instructions), so that a run of few iterations (a loaded machine) still
# counts what a call costs.
cat > "$OUT/rank0.sh" << 'EOF'
#!/bin/sh
if [ "$WEFT_RANK" = 0 ]; then
    LD_BIND_NOW=1 exec valgrind --tool=callgrind --separate-threads=yes --callgrind-out-file="$IPO_OUT" "$@"
fi
exec "$@"
EOF
chmod +x "$OUT/rank0.sh"

# One process per operation, so that each profile holds one kind of op.
OPS="put_pingpong get_latency fadd_latency cswap_latency am_pingpong"

weft() {  # weft NAME TRANSPORT BENCHMARK [UCX_TLS]
    local name=$1 transport=$2 bm=$3 tls=${4:-}
    local envs=(WEFT_TIMEOUT_MS=120000 "IPO_OUT=$OUT/cg.$name")
    [ -n "$tls" ] && envs+=("UCX_TLS=$tls")
    local cmd=(env "${envs[@]}" timeout 600 "$BUILD/tools/weft-run" --transport "$transport" --timeout 580 -n 2
        "$OUT/rank0.sh" "$BUILD/bench/weft_bench" "--benchmark_filter=^$transport/$bm/"
        "--benchmark_min_time=$MIN_TIME")
    printf '%s\n' "${cmd[*]}" >> "$OUT/commands.txt"
    echo "== $name" >&2
    if ! "${cmd[@]}" > "$OUT/$name.log" 2>&1; then
        echo "$name FAILED (see $OUT/$name.log)" >&2
        FAILED=1
    fi
}

perftest() {  # perftest TLS TEST
    local tls=$1 test=$2 i ok=0
    PORT=$((PORT + 1))
    local name="perftest-$tls-$test"
    local cli=(env LD_BIND_NOW=1 valgrind --tool=callgrind --separate-threads=yes "--callgrind-out-file=$OUT/cg.$name"
        ucx_perftest 127.0.0.1 -p "$PORT" -t "$test" -n "$ITERS" -s 8 -f)
    printf 'UCX_TLS=%s timeout 300 ucx_perftest -p %s &\nUCX_TLS=%s timeout 300 %s\n' "$tls" "$PORT" "$tls" \
        "${cli[*]}" >> "$OUT/commands.txt"
    echo "== $name" >&2
    UCX_TLS=$tls timeout 300 ucx_perftest -p "$PORT" > "$OUT/$name.server.log" 2>&1 &
    local srv=$!
    for i in $(seq 1 20); do
        sleep 0.5
        if UCX_TLS=$tls timeout 300 "${cli[@]}" > "$OUT/$name.log" 2>&1; then
            ok=1
            break
        fi
        kill -0 "$srv" 2> /dev/null || break
    done
    if kill -0 "$srv" 2> /dev/null; then kill "$srv" 2> /dev/null; fi
    wait "$srv" 2> /dev/null
    [ $ok = 1 ] || {
        echo "$name FAILED" >&2
        FAILED=1
    }
}

for bm in $OPS; do weft "weft-shm-$bm" shm "$bm"; done
for tls in $LANES; do
    for bm in $OPS; do weft "weft-ucx-$tls-$bm" ucx "$bm" "$tls"; done
    for t in ucp_put_lat ucp_get ucp_fadd ucp_cswap ucp_am_lat; do
        if [ -n "${IPO_PERFTEST_FROM:-}" ]; then
            cp "$IPO_PERFTEST_FROM"/cg.perftest-"$tls-$t"* "$OUT"/
        else
            perftest "$tls" "$t"
        fi
    done
done

python3 "$HERE/ipo_report.py" "$OUT" $LANES | tee "$OUT/table.md"
echo "results in $OUT" >&2
exit $FAILED
