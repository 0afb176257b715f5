#!/usr/bin/env bash
# weft_hosts_signal_test.sh WEFT_HOSTS — weft-hosts ends what it started
# when it is told to stop (root; skipped otherwise, failed under CI=true):
#   1. COMMAND ignores SIGTERM (as prterun does when its daemons cannot
#      answer: "Abort is in progress"): `timeout 2` around weft-hosts still
#      ends within the 5 s grace plus a margin, and weft-hosts says it
#      killed COMMAND's process group;
#   2. COMMAND exits and leaves a process behind on the head: that process
#      is gone when weft-hosts returns, so nobody holds the caller's pipes.
# Before the fix, case 1 never ended (a test that piped weft-hosts' output
# waited 10 minutes for a leftover prterun).
set -u
tool=${1:?usage: weft_hosts_signal_test.sh WEFT_HOSTS}
. "$(dirname "$0")/check.sh"
if [ "$(id -u)" != 0 ]; then
  [ "${CI:-}" = true ] && { echo "FAIL: CI=true but not root"; exit 1; }
  echo "skipped: weft-hosts needs root"; exit 77
fi
mark=weft-hosts-signal-test-$$
dir=$(mktemp -d)
trap 'pkill -9 -f "$mark" 2>/dev/null; rm -rf "$dir"' EXIT

echo "== 1. COMMAND ignores SIGTERM"
start=$(date +%s)
timeout -k 30 2 "$tool" 1 bash -c "trap '' TERM; exec -a $mark sleep 600" >"$dir/out" 2>"$dir/err"
rc=$? took=$(( $(date +%s) - start ))
check "weft-hosts under timeout 2: killed by timeout's TERM path (124), not its KILL (137)" 124 $rc
check "it ended within 2 s + the 5 s grace + 3 s of margin" 1 "$([ "$took" -le 10 ] && echo 1 || echo 0)"
check "it said it killed COMMAND's group" 1 "$(grep -c 'did not end within 5 s of signal 15' "$dir/err")"
check "no process of COMMAND is left" 0 "$(pgrep -fc "$mark")"

echo "== 2. COMMAND leaves a process behind"
"$tool" 1 bash -c "(exec -a $mark sleep 600) & disown; exit 3" >"$dir/out" 2>"$dir/err" </dev/null
check "weft-hosts returns COMMAND's status" 3 $?
check "what COMMAND left on the head is gone" 0 "$(pgrep -fc "$mark")"
exit $fail
