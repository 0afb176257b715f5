#!/usr/bin/env bash
# stencil_test.sh WEFT_RUN STENCIL TRANSPORT — the stencil killed twice and
# restarted twice ends with the bits of an uninterrupted run
# (checkpoint -> restart -> checkpoint -> restart):
#   1. 60 steps, no checkpoint: the reference digest;
#   2. checkpoints every 10 steps, rank 2 SIGKILLed at step 37;
#   3. restart (from step 30), rank 1 SIGKILLed 15 steps later (step 44);
#   4. restart (from step 40) to the end: the digest must be the reference.
set -uo pipefail
run=$1 bin=$2 transport=$3
n=4
ref=$(mktemp -d /tmp/weft-stencil-XXXXXX)
dir=$(mktemp -d /tmp/weft-stencil-XXXXXX)
out=$(mktemp)
trap 'rm -rf "$ref" "$dir" "$out"' EXIT
go() {  # go [weft-run options...] -- STEPS EVERY DIR
  local opts=()
  while [ "$1" != -- ]; do opts+=("$1"); shift; done
  shift
  "$run" --timeout 120 --transport "$transport" "${opts[@]}" -n $n "$bin" "$@" >"$out" 2>&1
  local rc=$?
  grep -E '^stencil|weft-run:' "$out"
  return $rc
}
fail() { echo "stencil_test: FAILED: $*"; cat "$out"; exit 1; }
digest() { sed -n 's/.*digest \([0-9a-f]*\).*/\1/p' "$out"; }

go -- 60 0 "$ref" || fail "the uninterrupted run"
want=$(digest)
[ -n "$want" ] || fail "no digest"
go --fault kill:rank=2:at=stencil.step:count=38 -- 60 10 "$dir" && fail "the first run should have been killed"
grep -q "step 30: generation 3" "$out" || fail "three checkpoints before the kill at step 37"
[ -e "$dir/gen-00000000000000000003/MANIFEST" ] || fail "generation 3 is not committed"
go --fault kill:rank=1:at=stencil.step:count=15 -- 60 10 "$dir" && fail "the second run should have been killed"
grep -q "restarted from generation 3 at step 30" "$out" || fail "the first restart did not resume at step 30"
go -- 60 10 "$dir" || fail "the last run"
grep -q "at step 40" "$out" || fail "the second restart did not resume at step 40"
got=$(digest)
[ "$got" = "$want" ] || fail "digest $got after two restarts, $want uninterrupted"
echo "stencil_test: ok: digest $got after two kills and two restarts, as uninterrupted"
