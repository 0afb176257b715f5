#!/usr/bin/env bash
# run_osu_overhead.sh [BUILD_DIR] — libweft-mpi's overhead with no drain
# pending (issue 18): OSU Micro-Benchmarks 7.4 under Debian's Open MPI,
# 2 ranks, alternating, ROUNDS rounds (default 5):
#   without     the benchmark as it is (MPI_Init: MPI_THREAD_SINGLE);
#   serialized  without the layer, its MPI_Init asking for
#               MPI_THREAD_SERIALIZED (bench/mpi/serialized_init.c), the
#               level the layer asks for: what the MPI itself costs more;
#   with        the layer preloaded.
# Prints each round and the medians' ratios (time with / time without,
# and with / serialized; for osu_bw, bandwidth the other way round). OSU is
# the one .ci/run builds beside the PMIx anchors (WEFT_OSU_DIR, default
# ~/.cache/weft-anchors/osu-openmpi); without it the script says so.
set -u
BUILD=${1:-build}
OSU=${WEFT_OSU_DIR:-$HOME/.cache/weft-anchors/osu-openmpi}/libexec/osu-micro-benchmarks/mpi
LIB=$(realpath "$BUILD/mpi/libweft-mpi-openmpi.so" 2>/dev/null)
[ -x "$OSU/pt2pt/osu_latency" ] || { echo "no OSU Micro-Benchmarks at $OSU: skipped"; exit 0; }
[ -f "$LIB" ] || { echo "no $BUILD/mpi/libweft-mpi-openmpi.so: build first"; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
value() { # the last number OSU prints (one size per run)
    timeout 120 mpirun.openmpi --oversubscribe -n 2 "$@" 2>/dev/null | awk '/^ *[0-9]/ {v=$NF} END {print v}'
}
log=$(mktemp)
shim_dir=$(mktemp -d)
trap 'rm -rf "$log" "$shim_dir"' EXIT
SHIM=$shim_dir/serialized_init.so
mpicc.openmpi -O2 -shared -fPIC -o "$SHIM" "$(dirname "$0")/serialized_init.c" || { echo "cannot build the shim"; exit 1; }
echo "uptime before: $(uptime)"
for r in $(seq 1 "${ROUNDS:-5}"); do
    for b in "pt2pt/osu_latency -m 8:8 -i 200000 -x 20000" "pt2pt/osu_bw -m 8192:8192 -i 2000 -x 200" \
        "collective/osu_allreduce -m 8:8 -i 200000 -x 20000" "collective/osu_barrier -i 200000 -x 20000"; do
        read -r -a words <<<"$b"
        prog=${words[0]}
        args=("${words[@]:1}")
        without=$(value "$OSU/$prog" "${args[@]}")
        serialized=$(value -x "LD_PRELOAD=$SHIM" "$OSU/$prog" "${args[@]}")
        with=$(value -x "LD_PRELOAD=$LIB" "$OSU/$prog" "${args[@]}")
        echo "round $r $(basename "$prog") without $without serialized $serialized with $with"
        echo "$(basename "$prog") $without $serialized $with" >>"$log"
    done
done
echo "uptime after: $(uptime)"
python3 "$(dirname "$0")/overhead_table.py" "$log"
