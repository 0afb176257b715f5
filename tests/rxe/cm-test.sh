#!/usr/bin/env bash
# cm-test.sh WEFT_RUN LAUNCH_HELPER — rdma_cm connection set-up beyond the
# suites (run through with-cm-device.sh, inside the soft-RoCE VM):
#   1. two jobs of one launch connect through rdma_cm (universe indices
#      differ from ranks: the lower universe index is the active side),
#      and every process says it did;
#   2. a device on the loopback interface (rxe0) is refused at init with a
#      reason, not left to hang in address resolution;
#   3. processes that disagree on WEFT_VERBS_CONNECT fail at init, saying so;
#   4. in the VM, the same over IPv6 (WEFT_VERBS_CM_ADDR);
#   5. a process that dies before connecting makes its peers fail init
#      (refused, or at the deadline), naming it — never hang.
set -u
run=$1 helper=$2
fail() { echo "cm-test: FAILED: $*" >&2; exit 1; }
out=$(mktemp)
trap 'rm -f "$out"' EXIT

echo "--- two jobs over rdma_cm on ${WEFT_VERBS_DEVICE:-the default device}"
WEFT_LOG=debug "$run" --timeout 120 --transport verbs -n 2 "$helper" jobs : -n 2 "$helper" jobs >"$out" 2>&1 ||
  { cat "$out"; fail "two jobs over rdma_cm"; }
grep "job .* ok" "$out"
# Each process connected its 3 peers' application and detector QPs (6)
# through rdma_cm, not by exchanged QP numbers.
n=$(grep -c "verbs rdma_cm: 6 QPs connected" "$out")
[ "$n" = 4 ] || { cat "$out"; fail "$n of 4 processes say they connected 6 QPs through rdma_cm"; }

if [ "${WEFT_RXE_REQUIRED:-0}" = 1 ]; then
  echo "--- over IPv6 (WEFT_VERBS_CM_ADDR=fd00:77::1)"
  WEFT_VERBS_CM_ADDR=fd00:77::1 WEFT_LOG=debug "$run" --timeout 120 --transport verbs -n 3 "$helper" sleep 0 \
    >"$out" 2>&1 && ok=1 || ok=0
  n=$(grep -c "verbs rdma_cm: listening on \[fd00:77::1\]:" "$out")
  m=$(grep -c "verbs rdma_cm: 4 QPs connected" "$out")
  [ $ok = 1 ] && [ "$n" = 3 ] && [ "$m" = 3 ] || { cat "$out"; fail "IPv6: status ok=$ok, $n listening, $m connected"; }
fi

if [ -e /sys/class/infiniband/rxe0 ] && [ "${WEFT_RXE_REQUIRED:-0}" = 1 ]; then
  echo "--- rdma_cm on rxe0 (lo) is refused"
  if WEFT_VERBS_DEVICE=rxe0 "$run" --timeout 60 --transport verbs -n 2 "$helper" exit 0 >"$out" 2>&1; then
    cat "$out"; fail "rdma_cm on the loopback interface succeeded"
  fi
  grep -q "loopback address, which rdma_cm cannot route" "$out" || { cat "$out"; fail "no reason given for rxe0"; }
fi

echo "--- mixed WEFT_VERBS_CONNECT"
if "$run" --timeout 60 --transport verbs -n 1 env WEFT_VERBS_CONNECT=exchange "$helper" jobs : -n 1 "$helper" jobs \
    >"$out" 2>&1; then
  cat "$out"; fail "mixed connection modes succeeded"
fi
grep -q "set WEFT_VERBS_CONNECT alike everywhere" "$out" || { cat "$out"; fail "no reason given for mixed modes"; }
echo "--- a process dies before connecting"
# Rank 1 dies at the point where it would connect. Rank 0 connects to it
# and is refused at once (its listener is gone); rank 2 then fails too: its
# connection from rank 0 is rejected when rank 0 exits, or its wait for
# rank 1's requests ends at the init deadline, or its half-made connection
# to rank 0 breaks (rdma_init_qp_attr fails). Both survivors fail init with
# an rdma_cm error naming the link (role, peer and address; one names peer
# 1), well within weft-run's limit.
if WEFT_TIMEOUT_MS=15000 "$run" --timeout 90 --transport verbs --keep-survivors \
    --fault kill:rank=1:at=transport.verbs.connecting -n 3 "$helper" exit 0 >"$out" 2>&1; then
  cat "$out"; fail "the survivors of a death during rdma_cm connection set-up succeeded"
fi
grep -q "weft-run: timeout after" "$out" && { cat "$out"; fail "weft-run had to stop the job"; }
n=$(grep -cE "ERROR .*verbs rdma_cm: .* peer [0-9]+ at" "$out")
[ "$n" = 2 ] || { cat "$out"; fail "$n of 2 survivors report an rdma_cm failure naming a peer"; }
grep -qE "verbs rdma_cm: .* QP to peer 1 at" "$out" || { cat "$out"; fail "nobody names the dead peer 1"; }
grep -E "rdma_cm" "$out" | head -4
echo "cm-test: ok"
