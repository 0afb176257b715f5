#!/usr/bin/env bash
# run_pingpong_overhead.sh [BUILD_DIR] — libweft-mpi's cost on an 8-byte
# MPI_Send/MPI_Recv ping-pong (bench/mpi/sendrecv_pingpong.c) under both
# of Debian's MPIs, 2 ranks, alternating, ROUNDS rounds (default 5) of
# TRIPS round trips (default 400000):
#   single      the program at MPI_THREAD_SINGLE, no layer;
#   serialized  at MPI_THREAD_SERIALIZED, the level the layer asks for;
#   layer       at SINGLE with the layer preloaded (it asks for SERIALIZED).
# Prints each round (half a round trip, ns) and the medians' ratios
# (bench/mpi/overhead_table.py).
set -u
BUILD=${1:-build}
TRIPS=${TRIPS:-400000}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
dir=$(mktemp -d)
log=$dir/log
trap 'rm -rf "$dir"' EXIT
echo "uptime before: $(uptime)"
for kind in openmpi mpich; do
    lib=$(realpath "$BUILD/mpi/libweft-mpi-$kind.so" 2>/dev/null)
    [ -f "$lib" ] || { echo "no $BUILD/mpi/libweft-mpi-$kind.so: $kind skipped"; continue; }
    "mpicc.$kind" -O2 -o "$dir/pingpong-$kind" "$(dirname "$0")/sendrecv_pingpong.c" || exit 1
    run() { # run LEVEL [PRELOAD]: the half round trip in ns
        local level=$1 pre=${2:-}
        if [ "$kind" = openmpi ]; then
            timeout 120 mpirun.openmpi --oversubscribe -n 2 ${pre:+-x LD_PRELOAD=$pre} "$dir/pingpong-$kind" "$level" "$TRIPS"
        else
            timeout 120 mpiexec.mpich -n 2 ${pre:+-genv LD_PRELOAD $pre} "$dir/pingpong-$kind" "$level" "$TRIPS"
        fi 2>/dev/null | awk '/half round trip/ {print $4}'
    }
    for r in $(seq 1 "${ROUNDS:-5}"); do
        single=$(run single) serialized=$(run serialized) layer=$(run single "$lib")
        echo "$kind round $r single $single serialized $serialized layer $layer"
        echo "$kind $single $serialized $layer" >>"$log"
    done
done
echo "uptime after: $(uptime)"
python3 "$(dirname "$0")/overhead_table.py" "$log"
