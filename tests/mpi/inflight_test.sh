#!/usr/bin/env bash
# inflight_test.sh KIND LAUNCHER INFLIGHT LIB — messages in transit at a
# drain (tests/mpi/inflight.c, 3 ranks, under libweft-mpi):
#   1. rank 1 must report its 17 messages (16 on a sub-communicator, one
#      to itself on MPI_COMM_SELF) in the layer's buffer at the
#      drain's quiescent point, and receive them after it in order (the
#      program checks payloads, tags, sources, counts; exit 0, "ok");
#   2. with "ialltoall", MPI_Ialltoall (refused by a wrapper generated from
#      the MPI's header) fails at call time: the job fails and stderr names
#      the call and the reason.
set -u
KIND=${1:?usage: inflight_test.sh openmpi|mpich LAUNCHER INFLIGHT LIB}
LAUNCHER=${2:?} PROG=${3:?} LIB=${4:?}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/launch.sh"
MPI_ENV=()
failed=0
fail() { echo "FAIL inflight_test ($KIND): $*"; failed=1; }

mpi_launch "$KIND" "$LAUNCHER" 3 "$LIB" "$tmp/run" "$PROG"
rc=$?
[ $rc = 0 ] || fail "the job exited $rc (124: timed out)"
grep -q "16 messages across a drain: ok" "$tmp/run" || fail "the program's checks failed"
grep -q "rank 1: at drain 1's quiescent point: 17 MPI message(s)" "$tmp/run.err" ||
    fail "rank 1 did not hold the 17 messages at the quiescent point (the drain did not take them out of MPI)"
[ $failed = 0 ] && echo "ok   16 messages buffered by the drain on a sub-communicator, received after it in order"
[ $failed = 0 ] || { cat "$tmp/run" "$tmp/run.err"; }

for call in Ialltoall; do
    mode=$(echo "$call" | tr 'A-Z' 'a-z')
    mpi_launch "$KIND" "$LAUNCHER" 3 "$LIB" "$tmp/$mode" "$PROG" "$mode"
    rc=$?
    if [ $rc = 0 ] || [ $rc = 124 ]; then
        fail "a program calling MPI_$call exited $rc under the layer (refused calls must fail at once)"
    elif ! grep -q "MPI_$call is not supported by weft-mpi yet (.*)" "$tmp/$mode.err"; then
        fail "the refusal does not name MPI_$call and why"
        cat "$tmp/$mode.err"
    else
        echo "ok   MPI_$call refused at call time (exit $rc), the call and the reason named:"
        grep -m1 "MPI_$call is not supported" "$tmp/$mode.err"
    fi
done
exit $failed
