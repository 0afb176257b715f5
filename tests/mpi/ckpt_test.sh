#!/usr/bin/env bash
# ckpt_test.sh KIND LAUNCHER PROGRAM — application-level checkpoint and
# restart through libweft-mpi and weft's ckpt (tests/mpi/ckpt_app.c, 4
# ranks, 400 steps, checkpoints at steps 100 and 250, a message in transit
# at each):
#   1. straight through, checkpointing at both: the reference checksum;
#   2. a job that stops right after its checkpoint at 100;
#   3. a restart from it (generation 1, step 100) that stops after its own
#      checkpoint at 250 (generation 2);
#   4. a restart from that one to the end: the reference checksum again.
# checkpoint -> restart -> checkpoint -> restart, with the same MPI; every
# launch bounded by timeout.
set -u
KIND=${1:?usage: ckpt_test.sh openmpi|mpich LAUNCHER PROGRAM}
LAUNCHER=${2:?} PROG=${3:?}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/launch.sh"
MPI_ENV=()
fail() {
    echo "FAIL ckpt_test ($KIND): $*"
    exit 1
}
run() { # run NAME ARGS...: the program on 4 ranks; its output stays in $tmp/NAME
    local name=$1
    shift
    mpi_launch "$KIND" "$LAUNCHER" 4 - "$tmp/$name" "$PROG" "$@"
    local rc=$?
    grep "ckpt_app:" "$tmp/$name"
    [ $rc = 0 ] || { tail -20 "$tmp/$name.err"; fail "run '$name' exited $rc (124: timed out)"; }
}
run straight "$tmp/ref" 400 100 250
want=$(grep -o 'checksum [0-9a-f]*' "$tmp/straight")
[ -n "$want" ] || fail "the straight run printed no checksum"
run stop100 "$tmp/ckpt" 400 100 250 stop=100
run restart100 "$tmp/ckpt" 400 100 250 restart stop=250
grep -q "restarted from generation 1 at step 100" "$tmp/restart100" || fail "the first restart did not resume generation 1 at step 100"
run restart250 "$tmp/ckpt" 400 100 250 restart
grep -q "restarted from generation 2 at step 250" "$tmp/restart250" || fail "the second restart did not resume generation 2 at step 250"
got=$(grep -o 'checksum [0-9a-f]*' "$tmp/restart250")
[ "$got" = "$want" ] || fail "after checkpoint, restart, checkpoint, restart: '$got'; straight through: '$want'"
echo "ok   checkpoint -> restart -> checkpoint -> restart under $KIND: $want, as straight through"
