#!/usr/bin/env bash
# run_mpi_compare.sh BUILD_DIR [OUT_DIR] — weft against Debian's Open MPI and
# MPICH on this machine, in one run: 8-byte ping-pong, barrier, 8-byte
# allreduce, 1 MiB allreduce, and bcast and allgather of 8 B, 64 KiB and
# 1 MiB at 2, 4 and 8 ranks (the performance section), next to this machine's
# memory-copy bound (bench/stream_copy.c: a STREAM-like copy of 1 MiB and of
# 64 MiB, run by as many processes as the collective has ranks). Every program runs bench/coll_bench.h's code; only the library
# underneath differs (bench/coll_weft.cpp, bench/mpi/coll_mpi.c).
#
# Builds coll_mpi.c with mpicc.openmpi and mpicc.mpich into OUT_DIR, then, for
# each rank count, runs the lanes one after the other (so that a change of
# machine load hits neighbouring numbers alike):
#   weft-shm       weft-run --transport shm
#   openmpi        mpirun --mca pml ob1 --mca btl self,vader (its defaults otherwise)
#   mpich          mpiexec.mpich (hydra; Debian's build is ch4:ucx)
#   weft-ucx-shm   weft-run --transport ucx, UCX_TLS=shm            (extra row)
#   openmpi-yield  the openmpi lane plus --mca mpi_yield_when_idle 1 (extra row)
# and prints a markdown table with the ratios weft/Open MPI and weft/MPICH
# (bench/coll_report.py). A lane whose tools are missing is skipped and shows
# n/a. Every run is bounded by `timeout`.
#
# INTERLEAVE=1 runs every test on its own (--only), all lanes of a test one
# right after the other, instead of each lane's whole program in turn: this
# machine's host moves between a fast and a slow regime within seconds (the
# same 2-rank ping-pong at 170 or 400 ns, the 4-rank 1 MiB allreduce at 0.3 or
# 1.1 ms, for weft and Open MPI alike; bench/RESULTS.md, run J), and lanes a
# minute apart then compare regimes, not libraries.
#
# Environment: RANKS ("2 4 8"), ITERS (20000), WARMUP (1000), BW_ITERS (200),
# BW_WARMUP (10), BUDGET_MS (3000: per test; a lane that is slower runs fewer
# iterations and says so), ROUNDS (1: repeat everything, the table takes the
# median), RUN_TIMEOUT (180 s per run).
set -u -o pipefail

BUILD=${1:?usage: run_mpi_compare.sh BUILD_DIR [OUT_DIR]}
BUILD=$(cd "$BUILD" && pwd)
OUT=${2:-$BUILD/bench/mpi-compare-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
SRC=$(cd "$(dirname "$0")" && pwd)
RANKS=${RANKS:-"2 4 8"}
ROUNDS=${ROUNDS:-1}
RUN_TIMEOUT=${RUN_TIMEOUT:-180}
LANES=" ${LANES:-weft-shm openmpi mpich weft-ucx-shm openmpi-yield} "
want() { [[ $LANES == *" $1 "* ]]; }
ARGS=(--iters "${ITERS:-20000}" --warmup "${WARMUP:-1000}" --bw-iters "${BW_ITERS:-200}"
      --bw-warmup "${BW_WARMUP:-10}" --budget-ms "${BUDGET_MS:-3000}")
FAILED=0
: > "$OUT/commands.txt"
: > "$OUT/results.txt"

log() { printf '== %s\n' "$*" >&2; }

# run LANE RANKS ROUND CMD...: runs one lane, logs the exact command, keeps
# its RESULT lines (tagged with the round) in results.txt.
run() {
    local lane=$1 n=$2 round=$3
    shift 3
    local logf="$OUT/$lane-n$n-r$round${LOGTAG:-}.log"
    printf '%s\n' "$*" >> "$OUT/commands.txt"
    log "$lane n=$n round $round"
    if ! env "$@" > "$logf" 2>&1; then
        log "$lane n=$n FAILED (see $logf)"
        tail -5 "$logf" >&2
        FAILED=1
    fi
    grep '^RESULT ' "$logf" | sed "s/\$/ round=$round/" >> "$OUT/results.txt"
}

# The MPI programs: one source, two libraries.
declare -A MPI_BIN
for lib in openmpi mpich; do
    if command -v "mpicc.$lib" > /dev/null; then
        if "mpicc.$lib" -O2 -Wall -Wextra -I"$SRC" "$SRC/mpi/coll_mpi.c" -o "$OUT/coll_$lib" \
            > "$OUT/build-$lib.log" 2>&1; then
            MPI_BIN[$lib]="$OUT/coll_$lib"
        else
            log "mpicc.$lib failed (see $OUT/build-$lib.log)"
            FAILED=1
        fi
    else
        log "SKIP $lib: mpicc.$lib not found (apt-get install libopenmpi-dev / libmpich-dev)"
    fi
done

STREAM=""
if cc -O2 -Wall -Wextra -I"$SRC" "$SRC/stream_copy.c" -o "$OUT/stream_copy" > "$OUT/build-stream.log" 2>&1; then
    STREAM="$OUT/stream_copy"
else
    log "cc stream_copy.c failed (see $OUT/build-stream.log)"
    FAILED=1
fi

WEFT=(timeout "$RUN_TIMEOUT" "$BUILD/tools/weft-run" --timeout $((RUN_TIMEOUT - 10)))
OMPI=(OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout "$RUN_TIMEOUT" mpirun.openmpi
      --oversubscribe --mca pml ob1 --mca btl self,vader)

machine() {
    echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
    echo "host: $(hostname), nproc $(nproc), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
    echo "uptime: $(uptime)"
    echo "weft: $(git -C "$SRC" rev-parse --short HEAD 2>/dev/null) ($BUILD)"
    [ -n "${BASE_BUILD:-}" ] && echo "weft base: $BASE_BUILD"
    echo "open mpi: $(mpirun.openmpi --version 2>/dev/null | head -1)"
    echo "mpich: $(mpichversion 2>/dev/null | grep -E 'Version|Device' | tr -s ' \t' ' ' | paste -sd ',')"
    echo "packages: $(dpkg-query -W -f '${Package} ${Version}, ' libucx0 libopenmpi3 libmpich12 2>/dev/null | sed 's/, $//')"
    echo "arguments: ${ARGS[*]}"
}
machine > "$OUT/machine.txt"

# lanes N ROUND [extra arguments for every program]: each wanted lane once.
lanes() {
    local n=$1 round=$2
    shift 2
    local ARGS=("${ARGS[@]}" "$@")
    want weft-shm && run weft-shm "$n" "$round" WEFT_TIMEOUT_MS=120000 "${WEFT[@]}" --transport shm -n "$n" \
        "$BUILD/bench/coll_weft" "${ARGS[@]}" --label weft-shm
    [ -n "${BASE_BUILD:-}" ] &&
        run weft-shm-base "$n" "$round" WEFT_TIMEOUT_MS=120000 timeout "$RUN_TIMEOUT" \
            "$BASE_BUILD/tools/weft-run" --timeout $((RUN_TIMEOUT - 10)) --transport shm -n "$n" \
            "$BASE_BUILD/bench/coll_weft" "${ARGS[@]}" --label weft-shm-base
    want openmpi && [ -n "${MPI_BIN[openmpi]:-}" ] &&
        run openmpi "$n" "$round" "${OMPI[@]}" -n "$n" "${MPI_BIN[openmpi]}" "${ARGS[@]}" --label openmpi
    want mpich && [ -n "${MPI_BIN[mpich]:-}" ] &&
        run mpich "$n" "$round" timeout "$RUN_TIMEOUT" mpiexec.mpich -n "$n" "${MPI_BIN[mpich]}" \
            "${ARGS[@]}" --label mpich
    want weft-ucx-shm && run weft-ucx-shm "$n" "$round" WEFT_TIMEOUT_MS=120000 UCX_TLS=shm "${WEFT[@]}" --transport ucx \
        -n "$n" "$BUILD/bench/coll_weft" "${ARGS[@]}" --label weft-ucx-shm
    want openmpi-yield && [ -n "${MPI_BIN[openmpi]:-}" ] &&
        run openmpi-yield "$n" "$round" "${OMPI[@]}" --mca mpi_yield_when_idle 1 -n "$n" \
            "${MPI_BIN[openmpi]}" "${ARGS[@]}" --label openmpi-yield
}

TESTS="pingpong8_half barrier allreduce8_u64 allreduce8_f64 allreduce_1MiB bcast8 bcast_64KiB bcast_1MiB
       allgather8 allgather_64KiB allgather_1MiB"
for round in $(seq 1 "$ROUNDS"); do
    for n in $RANKS; do
        [ -n "$STREAM" ] && run stream "$n" "$round" timeout "$RUN_TIMEOUT" "$STREAM" --ranks "$n"
        if [ "${INTERLEAVE:-0}" = 1 ]; then
            for t in $TESTS; do LOGTAG="-$t" lanes "$n" "$round" --only "$t"; done
        else
            lanes "$n" "$round"
        fi
    done
done
echo "uptime after: $(uptime)" >> "$OUT/machine.txt"

python3 "$SRC/coll_report.py" "$OUT" | tee "$OUT/table.md"
log "results in $OUT"
exit $FAILED
