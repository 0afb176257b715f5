#!/usr/bin/env bash
# stencil_launchers_test.sh WEFT_RUN STENCIL MPIRUN — a checkpoint written
# under one launcher restarts under another (MANA restarts under one launcher
# and fails under the next, mana #468): weft's images name no launcher.
#   1. weft-run, 60 steps, no checkpoint: the reference digest;
#   2. weft-run, checkpoints every 10 steps, rank 2 SIGKILLed at step 37;
#   3. Open MPI's mpirun (weft's PMIx bootstrap) restarts from step 30, and
#      rank 1 is SIGKILLed 15 steps later (step 44);
#   4. mpirun restarts from step 40 to the end: the reference digest;
#   5. PRRTE's prterun (the anchors', when built here) restarts the last
#      generation (step 60): nothing left to run, the same digest.
# Every job is bounded by a timeout. Under the PMIx launchers one rank is
# killed through WEFT_FAULT_POINTS, set by a wrapper for PMIX_RANK only.
set -uo pipefail
run=$1 bin=$2 mpirun=$3
n=4
prefix=${WEFT_ANCHORS_PREFIX:-$HOME/.cache/weft-anchors}
ref=$(mktemp -d /tmp/weft-stencil-XXXXXX)
dir=$(mktemp -d /tmp/weft-stencil-XXXXXX)
out=$(mktemp)
trap 'rm -rf "$ref" "$dir" "$out"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 WEFT_TRANSPORT=shm WEFT_TIMEOUT_MS=60000
fail() { echo "stencil_launchers_test: FAILED: $*"; cat "$out"; exit 1; }
digest() { sed -n 's/.*digest \([0-9a-f]*\).*/\1/p' "$out"; }
show() { grep -E '^stencil|weft-run:' "$out"; }
# pmix KILL_RANK KILL_STEP LAUNCHER... -- STENCIL ARGS: one job under a PMIx
# launcher; KILL_RANK -1 kills nobody.
pmix() {
  local kill_rank=$1 kill_step=$2
  shift 2
  local launcher=()
  while [ "$1" != -- ]; do launcher+=("$1"); shift; done
  shift
  timeout 120 "${launcher[@]}" -n $n bash -c '
    if [ "$PMIX_RANK" = "$0" ]; then export WEFT_FAULT_POINTS="kill@stencil.step#$1"; fi
    shift; exec "$@"' "$kill_rank" "$kill_step" "$bin" "$@" >"$out" 2>&1
  local rc=$?
  show
  return $rc
}

"$run" --timeout 120 -n $n "$bin" 60 0 "$ref" >"$out" 2>&1 || fail "the uninterrupted run"
want=$(digest)
[ -n "$want" ] || fail "no digest"
"$run" --timeout 120 --fault kill:rank=2:at=stencil.step:count=38 -n $n "$bin" 60 10 "$dir" >"$out" 2>&1 &&
  fail "the weft-run job should have been killed"
show
[ -e "$dir/gen-00000000000000000003/MANIFEST" ] || fail "generation 3 is not committed"
pmix 1 15 "$mpirun" --oversubscribe -- 60 10 "$dir" && fail "the first mpirun job should have been killed"
grep -q "restarted from generation 3 at step 30" "$out" || fail "mpirun did not restart weft-run's checkpoint at step 30"
pmix -1 0 "$mpirun" --oversubscribe -- 60 10 "$dir" || fail "the last mpirun job"
grep -q "at step 40" "$out" || fail "the second mpirun restart did not resume at step 40"
got=$(digest)
[ "$got" = "$want" ] || fail "digest $got after restarts under mpirun, $want uninterrupted"
if [ -x "$prefix/bin/prterun" ]; then
  LD_LIBRARY_PATH="$prefix/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
    pmix -1 0 "$prefix/bin/prterun" --allow-run-as-root --map-by :OVERSUBSCRIBE -- 60 10 "$dir" ||
    fail "the prterun job"
  grep -q "at step 60" "$out" || fail "prterun did not restart the last generation"
  [ "$(digest)" = "$want" ] || fail "digest $(digest) under prterun, $want uninterrupted"
  echo "stencil_launchers_test: prterun restarted the last generation too"
else
  echo "stencil_launchers_test: the prterun part is skipped: no prterun at $prefix/bin (the anchors are not built here)"
fi
echo "stencil_launchers_test: ok: weft-run's checkpoint restarted under mpirun twice, digest $got as uninterrupted"
