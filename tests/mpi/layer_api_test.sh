#!/usr/bin/env bash
# layer_api_test.sh KIND LAUNCHER PROGRAM — a program that links libweft-mpi
# and uses weft/mpi_layer.h (tests/mpi/layer_api.c), 4 ranks:
#   1. a collective weft_mpi_drain and a lone weft_mpi_drain_request, with
#      a quiescent-point callback: "drain by API: ok"; then the seed's
#      example: rank 0 in its 5th MPI_Bcast, the others at 4 when a drain
#      is asked for: every rank has done 5 at the quiescent point; and a
#      drain while rank 0 waits in MPI_Recv with a finished MPI_Ibarrier it
#      has not tested (the waiting thread settles it for the drain);
#   2. openmpi only: failure notices beside MPI. The last rank kills itself
#      (SIGKILL); the survivors must each get weft's failure event for it
#      and see it in weft's failed set, then agree through weft (shrink,
#      allreduce). mpirun is told not to end the job at the first death
#      (orte_enable_recovery). Not under MPICH 4.0's hydra: there mpiexec
#      killed every rank's process group after the death even with
#      -disable-auto-cleanup (docs/mpi-layer.md).
# Every launch is bounded by timeout.
set -u
KIND=${1:?usage: layer_api_test.sh openmpi|mpich LAUNCHER PROGRAM}
LAUNCHER=${2:?} PROG=${3:?}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/launch.sh"
MPI_ENV=()
failed=0
fail() { echo "FAIL layer_api_test ($KIND): $*"; failed=1; }

mpi_launch "$KIND" "$LAUNCHER" 4 - "$tmp/api" "$PROG"
rc=$?
[ $rc = 0 ] || fail "the job exited $rc (124: timed out)"
grep -q "drain by API: ok" "$tmp/api" || fail "the program's checks of weft_mpi_drain and its callback failed"
if [ $failed = 0 ]; then
    echo "ok   weft_mpi_drain (collective) and weft_mpi_drain_request, the quiescent callback once per drain per rank"
else
    cat "$tmp/api" "$tmp/api.err"
fi

# case NAME EXPECT SAYS ARGS...: the program with ARGS, 4 ranks; it must
# exit 0 and print EXPECT; SAYS is what passed.
case_of() {
    local name=$1 expect=$2 says=$3
    shift 3
    mpi_launch "$KIND" "$LAUNCHER" 4 - "$tmp/$name" "$PROG" "$@"
    local rc=$?
    if [ $rc = 0 ] && grep -q "$expect" "$tmp/$name"; then
        echo "ok   $says"
    else
        fail "$name (exit $rc; 124: timed out)"
        cat "$tmp/$name" "$tmp/$name.err"
    fi
}
case_of bcast5 "a drain asked for inside the 5th bcast: ok" \
    "the seed's example: a drain asked for with rank 0 in its 5th MPI_Bcast and the others at 4 ends with all at 5" \
    bcast5 "$tmp/in-fifth"
case_of waiting "a drain while a rank waits with an untested collective: ok" \
    "a drain while rank 0 waits in MPI_Recv holding the layer's lock, its MPI_Ibarrier finished but untested" \
    waiting

if [ "$KIND" = openmpi ]; then
    # Open MPI 4.1's mpirun, in recovery mode, after ranks leave without
    # MPI_Finalize, at times hangs or crashes in its own teardown
    # (PMIx_server_finalize): it is ended once the survivors have reported.
    timeout 60 "$LAUNCHER" --oversubscribe --mca orte_enable_recovery 1 -n 4 "$PROG" fail >"$tmp/fail" 2>"$tmp/fail.err" &
    job=$!
    until grep -q "survivors agree through weft" "$tmp/fail" 2>/dev/null; do
        kill -0 $job 2>/dev/null || break
        sleep 0.1
    done
    sleep 0.5
    kill -TERM $job 2>/dev/null
    wait $job
    grep -q "survivors agree through weft" "$tmp/fail" || fail "the failure-notice job ended or timed out (60 s) before the survivors reported"
    notices=$(grep -c "failure notice for rank 3 .*: ok$" "$tmp/fail")
    [ "$notices" = 3 ] || fail "$notices of 3 survivors got weft's notice of rank 3's death and saw it in the failed set"
    grep -q "3 survivors agree through weft: ok" "$tmp/fail" || fail "the survivors did not agree through weft"
    cat "$tmp/fail"
    [ $failed = 0 ] && echo "ok   failure notices beside Open MPI: every survivor got weft's event and failed set"
    [ $failed = 0 ] || cat "$tmp/fail.err"
fi
exit $failed
