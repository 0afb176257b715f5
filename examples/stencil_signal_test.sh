#!/usr/bin/env bash
# stencil_signal_test.sh WEFT_RUN STENCIL TRANSPORT — a checkpoint asked for
# from outside the job, and a restart asked for by the launcher:
#   1. the stencil runs under weft-run --checkpoint-on SIGUSR2
#      --checkpoint-dir DIR; SIGUSR2 to weft-run makes the ranks' next
#      weft_ckpt_need say so, and they checkpoint at some step S; the job is
#      then ended (SIGTERM to weft-run, forwarded to the ranks);
#   2. weft-run --restart DIR runs it to step S+20, resuming at S;
#   3. an uninterrupted run of S+20 steps ends with the same digest;
#   4. weft-run --restart of an empty directory: the ranks' weft_restart
#      fails and says so (the stencil then starts from scratch).
set -uo pipefail
run=$1 bin=$2 transport=$3
n=4
dir=$(mktemp -d /tmp/weft-stencil-sig-XXXXXX)
ref=$(mktemp -d /tmp/weft-stencil-sig-XXXXXX)
empty=$(mktemp -d /tmp/weft-stencil-sig-XXXXXX)
out=$(mktemp)
trap 'rm -rf "$dir" "$ref" "$empty" "$out"' EXIT
fail() { echo "stencil_signal_test: FAILED: $*"; cat "$out"; exit 1; }
digest() { sed -n 's/.*digest \([0-9a-f]*\).*/\1/p' "$out"; }

"$run" --timeout 120 --transport "$transport" --checkpoint-on SIGUSR2 --checkpoint-dir "$dir" -n $n "$bin" 100000000 0 - \
  >"$out" 2>&1 &
launcher=$!
for _ in $(seq 600); do grep -q "stencil: running" "$out" && break; sleep 0.1; done
grep -q "stencil: running" "$out" || fail "the stencil did not start"
kill -USR2 "$launcher"
for _ in $(seq 600); do grep -q "generation 1" "$out" && break; sleep 0.1; done
kill -TERM "$launcher"
wait "$launcher"
grep -q "asking the job for a checkpoint" "$out" || fail "weft-run did not pass the signal on"
s=$(sed -n 's/^stencil: step \([0-9]*\): generation 1,.*/\1/p' "$out")
[ -n "$s" ] || fail "no checkpoint after the signal"
[ -e "$dir/gen-00000000000000000001/MANIFEST" ] || fail "generation 1 is not committed"
echo "stencil_signal_test: checkpointed at step $s on SIGUSR2"

"$run" --timeout 120 --transport "$transport" --restart "$dir" -n $n "$bin" $((s + 20)) 0 - >"$out" 2>&1 ||
  fail "the restarted run"
grep -q "restarted from generation 1 at step $s " "$out" || fail "weft-run --restart did not resume at step $s"
got=$(digest)
"$run" --timeout 120 --transport "$transport" -n $n "$bin" $((s + 20)) 0 "$ref" >"$out" 2>&1 || fail "the reference run"
want=$(digest)
[ -n "$got" ] && [ "$got" = "$want" ] || fail "digest $got after the restart, $want uninterrupted"

"$run" --timeout 120 --transport "$transport" --restart "$empty" -n $n "$bin" 5 0 - >"$out" 2>&1
grep -q "weft-run --restart $empty: no valid generation there" "$out" || fail "a restart from nothing was not reported"
echo "stencil_signal_test: ok: digest $got, as uninterrupted"
