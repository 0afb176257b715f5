#!/usr/bin/env bash
# expect_output.sh ERE COMMAND [ARGS...] — runs COMMAND, shows its output,
# and passes only if it exits 0 AND a line of its output matches ERE.
# (ctest's PASS_REGULAR_EXPRESSION alone ignores the exit status: a job
# that printed its line and then hung until `timeout` killed it passed.)
set -u
ere=${1:?usage: expect_output.sh ERE COMMAND [ARGS...]}
shift
out=$(mktemp)
trap 'rm -f "$out"' EXIT
"$@" >"$out" 2>&1
rc=$?
cat "$out"
if [ "$rc" != 0 ]; then
    echo "FAIL expect_output: '$*' exited $rc (124: its timeout ended it)"
    exit 1
fi
if ! grep -Eq "$ere" "$out"; then
    echo "FAIL expect_output: no line of '$*' matches '$ere'"
    exit 1
fi
echo "ok   expect_output: exit 0 and '$ere'"
