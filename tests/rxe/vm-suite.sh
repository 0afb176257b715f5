#!/usr/bin/env bash
# vm-suite.sh — what CI runs inside the soft-RoCE VM, from the build tree:
# the device as weft sees it, the verbs and UCX-over-verbs tests (ctest -L
# rxe); with WEFT_RXE_ASAN_DIR, the verbs tests again from that
# AddressSanitizer+UBSan build tree; with WEFT_RXE_BENCH=1, the perftest
# comparison. Called by run-in-vm.sh; the working directory is the build tree.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
export WEFT_RXE_REQUIRED=1
./tools/weft-info || exit 1
rc=0
ctest -L rxe --output-on-failure --timeout 300 || rc=1
if [ -n "${WEFT_RXE_ASAN_DIR:-}" ]; then
  echo "=== verbs tests under ASan + UBSan ($WEFT_RXE_ASAN_DIR)"
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 LSAN_OPTIONS=suppressions=$here/../lsan.supp \
    UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --test-dir "$WEFT_RXE_ASAN_DIR" -L rxe -R '^mp\.(verbs\.n3|transport\.verbs\.n2|fault\.point\.verbs\.n3|ft\.stop\.verbs\.n3|jobs\.verbs|cm\.verbs|release\.verbs\.n3)$' \
      --output-on-failure --timeout 300 || rc=1
fi
if [ "${WEFT_RXE_BENCH:-0}" = 1 ]; then
  bash "$here/bench-vs-perftest.sh" . || rc=1
fi
exit $rc
