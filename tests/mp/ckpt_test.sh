#!/usr/bin/env bash
# ckpt_test.sh WEFT_RUN MP_CKPT TRANSPORT — checkpoints written by one job
# and restarted by the next (weft/ckpt.h, docs/checkpoint.md):
#   1. a 3-rank job writes generation 1 (step 11), another job restarts it;
#   2. a job writes generation 2 (step 12) while rank 1 is SIGKILLed inside
#      its write: the survivors fail, no manifest is written, and the next
#      job restarts generation 1 (skipping 2);
#   3. a job writes generation 3 (step 13), which prunes the uncommitted 2,
#      and the next job restarts it;
#   4. a 2-rank job is refused the 3-rank checkpoint (BAD_PARAM);
#   5. weft_ckpt_need after WEFT_CKPT_INTERVAL_S, and weft-run's
#      --checkpoint-dir as the directory of NULL;
#   6. on a 2 MiB tmpfs a checkpoint of 1 MiB per rank fails cleanly on
#      every rank (IO), leaves no generation, and the job goes on;
#   7. a job checkpoints with posted receives, buffered messages and
#      synchronous sends awaiting their acknowledgments on every rank, and
#      the next job restarts them at their saved handles and finishes the
#      same; that job checkpoints again, and the next restarts it, eight
#      times (the first drain of a restarted job, right after its replay,
#      once ended before a DRAINED reply reached its sender);
#   9. a checkpoint whose drain is slowed down on two ranks (delay faults);
#   8. a soak: a checkpoint every 2 s with messages in flight for
#      WEFT_CKPT_SOAK_S seconds (default 20; bench/RESULTS.md has a 5-minute
#      run), bounded by weft-run's timeout.
# Every job is bounded by weft-run's --timeout.
set -uo pipefail
run=$1 bin=$2 transport=$3
dir=$(mktemp -d /tmp/weft-ckpt-job-XXXXXX)
out=$(mktemp)
trap 'rm -rf "$dir" "$out"' EXIT
export WEFT_TEST_CKPT_DIR=$dir
job() {  # job STEP FILTER RANKS [weft-run options...]
  local step=$1 filter=$2 n=$3
  shift 3
  WEFT_TEST_STEP=$step GTEST_FILTER="CkptJob.$filter" "$run" --timeout 120 --transport "$transport" "$@" -n "$n" "$bin" \
    >"$out" 2>&1
  local rc=$?
  grep -E '^CKPT|FAILED|Failure|weft-run:' "$out" | head -20
  return $rc
}
fail() { echo "ckpt_test: FAILED: $*"; cat "$out"; exit 1; }

job 11 Write 3 || fail "writing generation 1"
job 11 Restart 3 || fail "restarting generation 1 in a new job"
# weft-run counts the injected kill as expected: it passes when the survivors do.
job 12 WriteWhileARankDies 3 --keep-survivors --fault kill:rank=1:at=ckpt.image.written ||
  fail "the survivors' checkpoint did not fail as it should"
[ "$(grep -c "the checkpoint failed with peer process failed" "$out")" = 2 ] ||
  fail "both survivors should see rank 1's death (PEER_FAILED)"
[ ! -e "$dir/gen-00000000000000000002/MANIFEST" ] || fail "a generation that lost a rank was committed"
job 11 Restart 3 || fail "restarting generation 1 after the failed checkpoint"
job 13 Write 3 || fail "writing the next generation"
grep -q "CKPT generation 3" "$out" || fail "the next generation is not 3"
[ ! -e "$dir/gen-00000000000000000002" ] || fail "the uncommitted generation 2 was not pruned by the next commit"
job 13 Restart 3 || fail "restarting generation 3"
job 13 RestartIntoAnotherSizeIsRefused 2 || fail "a 2-rank job restarting a 3-rank checkpoint"
# 5. weft_ckpt_need after WEFT_CKPT_INTERVAL_S, and NULL for weft-run's
#    --checkpoint-dir (into a directory of its own).
mkdir "$dir/launcher"
WEFT_CKPT_INTERVAL_S=1 job 1 NeedAfterTheIntervalAndTheLaunchersDirectory 3 --checkpoint-dir "$dir/launcher" ||
  fail "weft_ckpt_need and the launcher's directory"
# 7. The runtime's point-to-point state, replayed by a new job, twice:
#    checkpoint -> restart -> checkpoint -> restart.
mkdir "$dir/inflight"
WEFT_TEST_CKPT_DIR=$dir/inflight job 1 WriteInFlight 3 || fail "a checkpoint with messages in flight"
WEFT_TEST_CKPT_DIR=$dir/inflight job 1 RestartInFlight 3 || fail "a restart replaying messages in flight"
grep -q "CKPT in flight: restarted generation 1, 9 requests and 7 messages on 2 communicators" "$out" || fail "the replay counts"
for step in 2 3 4 5 6 7 8; do
  WEFT_TEST_CKPT_DIR=$dir/inflight job $step RestartInFlight 3 || fail "restart number $step"
  grep -q "CKPT in flight: restarted generation $step, 9 requests and 7 messages on 2 communicators" "$out" || fail "replay number $step"
done
# 6. A full disk: a 2 MiB tmpfs (root only: CI is).
full=$(mktemp -d /tmp/weft-ckpt-full-XXXXXX)
if [ "$(id -u)" = 0 ] && mount -t tmpfs -o size=2m weft-ckpt-full "$full" 2>/dev/null; then
  trap 'umount "$full"; rm -rf "$dir" "$out" "$full"' EXIT
  WEFT_TEST_CKPT_DIR=$full job 1 DiskFull 3 || fail "a checkpoint on a full disk"
  grep -q "No space left on device" "$out" || fail "no rank said the disk was full"
else
  echo "ckpt_test: the full-disk part is skipped: cannot mount a tmpfs (not root?)"
fi
# 9. Two drain threads slowed down (delay fault points): rank 0 right after
#    it announces the point-to-point phase, rank 2 after its first round's
#    pulls and answers, before it publishes its count. Rank 1 then reads
#    both in the phase; before the fix it read the pending counts a previous
#    drain left (zero), ended the drain, and rank 2's save found its
#    rendezvous send still waiting for rank 0's answer (5 of 5 runs).
mkdir "$dir/delay"
WEFT_TEST_CKPT_DIR=$dir/delay job 1 WriteInFlight 3 --fault delay:rank=0:at=drain.p2p.phase:for=0.5 \
  --fault delay:rank=2:at=drain.p2p.round:for=0.5 || fail "a checkpoint with two drain threads slowed down"
# 8. The soak.
soak=${WEFT_CKPT_SOAK_S:-20}
mkdir "$dir/soak"
WEFT_TEST_CKPT_DIR=$dir/soak WEFT_TEST_SOAK_S=$soak WEFT_CKPT_INTERVAL_S=2 GTEST_FILTER=CkptJob.Soak \
  "$run" --timeout $((soak + 120)) --transport "$transport" -n 3 "$bin" >"$out" 2>&1 || fail "the soak"
grep -E '^CKPT' "$out"
echo "ckpt_test: ok"
