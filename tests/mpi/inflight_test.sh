#!/usr/bin/env bash
# inflight_test.sh KIND LAUNCHER INFLIGHT LIB — messages in transit at a
# drain (tests/mpi/inflight.c, 3 ranks, under libweft-mpi):
#   1. rank 1 must report its 17 messages (16 on a sub-communicator, one
#      to itself on MPI_COMM_SELF) in the layer's buffer at the
#      drain's quiescent point, and receive them after it in order (the
#      program checks payloads, tags, sources, counts; exit 0, "ok");
#      at a second drain it must hold 7 buffered and 1 matched by its
#      MPI_Mprobe, received after it by matched probes and persistent
#      receives;
#      at a third, non-blocking collectives rank 0 has not tested must be
#      completed by the drain itself: rank 0's quiescent line comes before
#      its line "back from computing";
#   2. with "intercomm", MPI_Intercomm_create (refused by a wrapper generated from
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
grep -q "matched probes and persistent requests across a drain: ok" "$tmp/run" ||
    fail "the program's checks of matched probes and persistent requests failed"
grep -q "rank 1: at drain 2's quiescent point: 7 MPI message(s) in this rank's buffer, 1 matched by a probe" \
    "$tmp/run.err" ||
    fail "rank 1 did not hold 7 buffered messages and the one its MPI_Mprobe matched at the second drain"
grep -q "non-blocking collectives across a drain: ok" "$tmp/run" ||
    fail "the program's checks of non-blocking collectives failed"
order=$(grep -E "rank 0: at drain 3's quiescent point|rank 0 back from computing" "$tmp/run.err" | head -1)
case $order in
*"quiescent point"*) ;;
*) fail "rank 0 was back from computing before drain 3 was quiescent: its open non-blocking collectives were not completed by the drain ($order)" ;;
esac
[ $failed = 0 ] && echo "ok   16 messages buffered by the drain on a sub-communicator, received after it in order"
[ $failed = 0 ] && echo "ok   a message matched by MPI_Mprobe before a drain and 7 buffered by it, received after it in order by matched and persistent receives"
[ $failed = 0 ] && echo "ok   non-blocking collectives left untested through a drain completed by it, with the right results"
[ $failed = 0 ] || { cat "$tmp/run" "$tmp/run.err"; }

for call in Intercomm_create; do
    mode=intercomm
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
