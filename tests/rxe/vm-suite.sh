#!/usr/bin/env bash
# vm-suite.sh — what CI runs inside the soft-RoCE VM, from the build tree:
# the device as weft sees it, the verbs and UCX-over-verbs tests (ctest -L
# rxe), then (WEFT_RXE_BENCH=1) the perftest comparison. Called by
# run-in-vm.sh; the working directory is the build tree.
set -uo pipefail
export WEFT_RXE_REQUIRED=1
./tools/weft-info || exit 1
rc=0
ctest -L rxe --output-on-failure --timeout 300 || rc=1
if [ "${WEFT_RXE_BENCH:-0}" = 1 ]; then
  bash "$(dirname "$0")/bench-vs-perftest.sh" . || rc=1
fi
exit $rc
