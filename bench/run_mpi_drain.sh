#!/usr/bin/env bash
# libweft-mpi's drain of a running MPI program against the MANA-protocol
# coordinator model (bench/mana_model.hpp), at several rank counts, both MPIs:
#   - the layer: tests/mpi/ring.c under each MPI's launcher with
#     libweft-mpi preloaded, SIGUSR1 to the launcher every PERIOD s (one
#     drain per signal); rank 0 reports each drain's request -> quiescent on
#     every rank; the median and max over the run are printed;
#   - the model: bench/drain_bench at the same N under weft-run, its
#     "mana-model: full" median (a drain of an idle job, coordinator round
#     trips over TCP), and weft's own drain of that idle job beside it.
# Usage: bench/run_mpi_drain.sh [build-dir]; RANKS="4 8 16", PERIOD=0.25,
# STEPS_OPENMPI=20000, STEPS_MPICH=1000 (divided by N/4: the same work per
# rank). Prints uptime before and after; every launch is bounded.
set -uo pipefail
build=${1:-build}
ranks=${RANKS:-4 8 16} period=${PERIOD:-0.25}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
uptime
drains() { # drains KIND N: the ring under the layer, signalled through its launcher
    local kind=$1 n=$2 steps launcher env
    if [ "$kind" = openmpi ]; then
        launcher=mpirun.openmpi steps=$((${STEPS_OPENMPI:-20000} * 4 / n))
        env=(--oversubscribe -x "LD_PRELOAD=$build/mpi/libweft-mpi-openmpi.so")
    else
        launcher=mpiexec.mpich steps=$((${STEPS_MPICH:-1000} * 4 / n))
        env=(-genv LD_PRELOAD "$build/mpi/libweft-mpi-mpich.so")
    fi
    timeout 300 "$launcher" "${env[@]}" -n "$n" "$build/mpi/mpi_ring_$kind" "$steps" >"$tmp/out" 2>"$tmp/err" &
    local job=$! pid=""
    until grep -q "^ring: started" "$tmp/out" 2>/dev/null; do
        kill -0 $job 2>/dev/null || break
        sleep 0.05
    done
    pid=$(pgrep -P "$job" -x "$(basename "$launcher" | cut -c1-15)" || pgrep -n -x "$(basename "$launcher" | cut -c1-15)")
    while kill -0 $job 2>/dev/null; do
        [ -n "$pid" ] && kill -USR1 "$pid" 2>/dev/null
        sleep "$period"
    done
    wait $job
    grep -o 'rank 0: drain [0-9]* quiescent: [0-9.]* ms' "$tmp/err" | awk '{print $6}' | sort -n |
        awk -v k="$kind" -v n="$n" '{v[NR] = $1} END {
            if (NR) printf "layer %-7s %2d ranks: %3d drains, request to quiescent median %.3f ms, max %.3f ms\n", k, n, NR, v[int((NR + 1) / 2)], v[NR];
            else printf "layer %-7s %2d ranks: no drain reached a quiescent point\n", k, n }'
}
for n in $ranks; do
    for kind in openmpi mpich; do
        [ -x "$build/mpi/mpi_ring_$kind" ] && drains "$kind" "$n"
    done
    "$build/tools/weft-run" --timeout 300 -n "$n" "$build/bench/drain_bench" --reps 20 2>/dev/null |
        grep "^ranks" | sed 's/^/drain_bench (an idle job): /'
done
uptime
