#!/usr/bin/env bash
# with-cm-device.sh CMD... — runs CMD with WEFT_VERBS_CONNECT=rdma_cm.
# rdma_cm routes by IP address and cannot use the loopback interface that
# the VM's rxe0 sits on, so inside the soft-RoCE VM (WEFT_RXE_REQUIRED=1)
# this first makes an RDMA device on an IP interface: a dummy netdev with
# 10.77.0.1 and fd00:77::1 and rxecm0 on it (rxe loops packets to its own address back
# internally), used through WEFT_VERBS_DEVICE, and removed afterwards so the
# other tests see only rxe0. On a real host CMD uses the default device,
# whose interface has an address.
set -u
made=0
if [ "${WEFT_RXE_REQUIRED:-0}" = 1 ] && [ ! -e /sys/class/infiniband/rxecm0 ]; then
  if ! { ip link add weftcm0 type dummy && ip addr add 10.77.0.1/24 dev weftcm0 &&
         ip -6 addr add fd00:77::1/64 dev weftcm0 nodad && ip link set weftcm0 up &&
         rdma link add rxecm0 type rxe netdev weftcm0; }; then
    echo "with-cm-device.sh: cannot make rxecm0 on a dummy interface" >&2
    exit 1
  fi
  made=1
fi
[ -e /sys/class/infiniband/rxecm0 ] && export WEFT_VERBS_DEVICE=rxecm0
export WEFT_VERBS_CONNECT=rdma_cm
"$@"
rc=$?
if [ $made = 1 ]; then
  rdma link delete rxecm0
  ip link delete weftcm0
fi
exit $rc
