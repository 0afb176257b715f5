#!/usr/bin/env bash
# ssend_test.sh KIND LAUNCHER PROGRAM LIB — synchronous mode across a drain
# (tests/mpi/ssend.c, 3 ranks, under libweft-mpi): the drain must take the
# four messages (two synchronous, one of them persistent) into rank 1's
# buffer, and rank 0's synchronous sends must complete only after rank 1's
# program received them ("ok").
# Bounded by timeout.
set -u
KIND=${1:?usage: ssend_test.sh openmpi|mpich LAUNCHER PROGRAM LIB}
LAUNCHER=${2:?} PROG=${3:?} LIB=${4:?}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/launch.sh"
MPI_ENV=()
mpi_launch "$KIND" "$LAUNCHER" 3 "$LIB" "$tmp/run" "$PROG"
rc=$?
grep "ssend:" "$tmp/run"
failed=0
[ $rc = 0 ] || { echo "FAIL ssend_test ($KIND): the job exited $rc (124: timed out)"; failed=1; }
grep -q "synchronous sends across a drain: ok" "$tmp/run" || { echo "FAIL ssend_test ($KIND): the program's checks failed"; failed=1; }
grep -q "rank 1: at drain 1's quiescent point: 4 MPI message(s)" "$tmp/run.err" ||
    { echo "FAIL ssend_test ($KIND): the drain did not take the 4 messages into rank 1's buffer"; failed=1; }
[ $failed = 0 ] && echo "ok   an MPI_Issend and a persistent synchronous send drained into their receiver's buffer completed only after the program received them"
[ $failed = 0 ] || cat "$tmp/run.err"
exit $failed
