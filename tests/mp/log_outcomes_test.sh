#!/usr/bin/env bash
# log_outcomes_test.sh WEFT_RUN LOG_OUTCOMES LAUNCH_HELPER — what weft logs,
# as a user sees it (README "Logging"):
#   - expected outcomes (REVOKED, PEER_FAILED_PENDING polled for a second:
#     hundreds of returns) print no ERROR line at the default level, and do
#     print their lines at WEFT_LOG=debug;
#   - a rank that finalized and exited 0 before a peer's bootstrap exchange
#     is named as a departure (at debug), never as a death;
#   - after a failure, survivors that free a communicator and finalize at
#     different times print nothing (finalize completes the free first).
set -u
run=$1
prog=$2
helper=$3
err=$(mktemp)
trap 'rm -f "$err"' EXIT
. "$(dirname "$0")/check.sh"
# The lines rank 0 wrote between its markers.
between() { sed -n '/expected outcomes begin/,/expected outcomes end/p' "$err"; }

timeout 100 "$run" --timeout 90 --transport shm --keep-survivors --fault kill:rank=1:at=log_outcomes.victim \
    -n 2 "$prog" 2>"$err"
check "expected outcomes returned (default log level)" 0 $?
check "both markers on stderr" 2 "$(between | grep -c 'expected outcomes')"
check "no ERROR line for an expected outcome" 0 "$(between | grep -c ' ERROR ')"
between | grep ' ERROR ' | sort | uniq -c | sort -rn | head -5

WEFT_LOG=debug timeout 100 "$run" --timeout 90 --transport shm --keep-survivors \
    --fault kill:rank=1:at=log_outcomes.victim -n 2 "$prog" 0.05 2>"$err"
check "expected outcomes returned (WEFT_LOG=debug)" 0 $?
check "REVOKED logged at debug" 1 "$(between | grep -q ' DEBUG .*was revoked' && echo 1 || echo 0)"
check "PENDING logged at debug" 1 "$(between | grep -q ' DEBUG .*unrecognised failure' && echo 1 || echo 0)"

# Rank 0 makes one bootstrap barrier more than rank 1: its finalize barrier
# fails because rank 1 finalized and exited 0.
timeout 60 "$run" --timeout 30 -n 2 "$helper" depart 2>"$err"
check "a departure does not fail the job" 0 $?
check "a departure is not called a death" 0 "$(grep -c 'died' "$err")"
check "a departure prints no ERROR line" 0 "$(grep -c ' ERROR ' "$err")"
WEFT_LOG=debug timeout 60 "$run" --timeout 30 -n 2 "$helper" depart 2>"$err"
check "a departure is named at debug" 1 \
    "$(grep -q ' DEBUG .*job 0 rank 1 finalized and exited (status 0)' "$err" && echo 1 || echo 0)"

# After a failure: a communicator freed by every survivor, one of them late.
# The others' finalize completes the free's release barrier first, so the
# late one's barrier never fails on a rank that left (an ERROR line each).
timeout 60 "$run" --timeout 30 --transport shm --keep-survivors --fault kill:rank=3:at=launch_helper.victim \
    -n 4 "$helper" free_after_failure 2>"$err"
check "survivors free a communicator and finalize" 0 $?
check "a late free after a failure prints no ERROR or WARN line" 0 "$(grep -c ' ERROR \| WARN ' "$err")"
# The same with MULTIPLE contexts: finalize's wait for the late free steps
# out of the API lock between polls and must hand it back (it deadlocked).
timeout 60 "$run" --timeout 30 --transport shm --keep-survivors --fault kill:rank=3:at=launch_helper.victim \
    -n 4 "$helper" free_after_failure multiple 2>"$err"
check "MULTIPLE: survivors free a communicator and finalize (no deadlock)" 0 $?
check "MULTIPLE: no ERROR or WARN line" 0 "$(grep -c ' ERROR \| WARN ' "$err")"
[ $fail = 0 ] || cat "$err" | tail -20

if [ $fail = 0 ]; then echo "log outcome tests: all passed"; fi
exit $fail
