#!/usr/bin/env bash
# am_hold_test.sh WEFT_RUN LAUNCH_HELPER — the hold for active messages that
# arrive before their handler (weft_am_register) is bounded: with
# WEFT_AM_HOLD_BYTES far below what two jobs send each other early, a strict
# prefix of the messages is delivered, in order, and the receiver logs an
# error naming the bound. The job itself must still end cleanly.
set -uo pipefail
run=$1 helper=$2
out=$(mktemp)
trap 'rm -f "$out"' EXIT
WEFT_AM_HOLD_BYTES=4096 MP_EARLY_EXPECT_DROPS=1 \
  "$run" --timeout 120 -n 1 "$helper" early : -n 1 "$helper" early >"$out" 2>&1
rc=$?
cat "$out"
if [ $rc -ne 0 ]; then
  echo "am_hold_test: the job failed (exit $rc)" >&2
  exit 1
fi
if ! grep -q "hold for early messages is full.*WEFT_AM_HOLD_BYTES" "$out"; then
  echo "am_hold_test: no error line saying the hold overflowed (WEFT_AM_HOLD_BYTES)" >&2
  exit 1
fi
echo "am_hold_test: ok"
