#!/usr/bin/env bash
# drain_signal_test.sh KIND LAUNCHER RING LIB RANKS STEPS — libweft-mpi drains
# a real MPI program, over and over, while it runs (issue 18):
#   1. RING (tests/mpi/ring.c) without the layer: the reference checksum;
#   2. RING with LIB preloaded; once every rank has written its pid, SIGUSR1
#      goes to one rank after another every 0.25 s until the job ends;
#   3. the layered run must exit 0, print the reference checksum, and its
#      ranks must report at least 3 drains that reached a quiescent point.
# KIND is openmpi (LAUNCHER = mpirun) or mpich (LAUNCHER = mpiexec). Every
# launch is bounded by timeout; a hang is a failure naming the step.
set -u
KIND=${1:?usage: drain_signal_test.sh openmpi|mpich LAUNCHER RING LIB RANKS STEPS}
LAUNCHER=${2:?} RING=${3:?} LIB=${4:?} RANKS=${5:?} STEPS=${6:?}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL drain_signal_test ($KIND): $*"; exit 1; }
. "$(dirname "$0")/launch.sh"
MPI_ENV=("WEFT_MPI_TEST_PIDDIR=$tmp/pids")
mkdir -p "$tmp/pids"
launch() {  # launch 0|1 OUT: the ring job, with the layer preloaded when 1
    rm -f "$tmp"/pids/*
    local lib=-
    [ "$1" = 1 ] && lib=$LIB
    mpi_launch "$KIND" "$LAUNCHER" "$RANKS" "$lib" "$2" "$RING" "$STEPS"
}

launch 0 "$tmp/ref"
rc=$?
[ $rc = 0 ] || { cat "$tmp/ref.err"; fail "the run without the layer failed (exit $rc)"; }
want=$(grep -o 'checksum [0-9a-f]*' "$tmp/ref")
[ -n "$want" ] || fail "the run without the layer printed no checksum"

launch 1 "$tmp/layered" &
job=$!
signals=0
deadline=$((SECONDS + 60))
until [ "$(ls "$tmp/pids" 2>/dev/null | wc -l)" -ge "$RANKS" ]; do
    kill -0 $job 2>/dev/null || break
    [ $SECONDS -lt $deadline ] || break
    sleep 0.05
done
r=0
while kill -0 $job 2>/dev/null; do
    pid=$(cat "$tmp/pids/pid.$r" 2>/dev/null)
    [ -n "$pid" ] && kill -USR1 "$pid" 2>/dev/null && signals=$((signals + 1))
    r=$(((r + 1) % RANKS))
    sleep 0.25
done
wait $job
rc=$?
got=$(grep -o 'checksum [0-9a-f]*' "$tmp/layered")
drains=$(grep -o 'drain [0-9]* quiescent' "$tmp/layered.err" | sort -u | wc -l)
echo "drain_signal_test ($KIND, $RANKS ranks, $STEPS steps): $signals SIGUSR1 sent, $drains drain(s) quiescent"
grep 'weft-mpi rank 0: drain' "$tmp/layered.err" | head -5
buffered=$(grep -o 'point: [0-9]* MPI message(s) in this rank' "$tmp/layered.err" | awk '{s += $2} END {print s + 0}')
echo "MPI messages in the layer's buffer at quiescent points (summed over ranks and drains): $buffered"
if [ $rc != 0 ] || [ "$got" != "$want" ] || [ "$drains" -lt 3 ]; then
    echo "--- layered run's stderr (last 40 lines):"
    tail -40 "$tmp/layered.err"
    [ $rc = 0 ] || fail "the layered run exited $rc (124: timed out)"
    [ "$got" = "$want" ] || fail "layered: '$got', without the layer: '$want'"
    fail "only $drains drain(s) reached a quiescent point ($signals signals)"
fi
echo "ok   drain_signal_test ($KIND): $want under the layer as without it, across $drains drains"
