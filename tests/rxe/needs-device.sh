#!/usr/bin/env bash
# needs-device.sh CMD... — runs CMD if this host has an RDMA device, else
# exits 77, which ctest reports as "skipped" (SKIP_RETURN_CODE). The verbs
# tests are registered in every build but can only run where there is a
# verbs device: on a cluster, or in the soft-RoCE VM of tests/rxe/run-in-vm.sh,
# which sets WEFT_RXE_REQUIRED=1 so that a missing device fails instead.
if compgen -G "/sys/class/infiniband/*" >/dev/null; then exec "$@"; fi
if [ "${WEFT_RXE_REQUIRED:-0}" = 1 ]; then
  echo "no RDMA device in /sys/class/infiniband, but WEFT_RXE_REQUIRED=1" >&2
  exit 1
fi
echo "skipped: no RDMA device on this host (tests/rxe/run-in-vm.sh runs this test on soft-RoCE)"
exit 77
