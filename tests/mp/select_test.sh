#!/usr/bin/env bash
# select_test.sh WEFT-RUN LAUNCH-HELPER WEFT-INFO — backend selection as
# docs/transports.md states it: weft-info lists every backend of the
# registry (built, viable or not and why) and auto's choice; a job on one
# host binds shm under auto, with or without an RDMA device; without a
# device an explicit verbs job fails at init with the probe's reason; with
# one (the soft-RoCE VM) weft-info says verbs is viable and that auto takes
# it on several hosts.
set -u
run=$1 helper=$2 info=$3
out=$(mktemp)
trap 'rm -f "$out"' EXIT
. "$(dirname "$0")/check.sh"
has() { grep -c -- "$1" "$out"; }
device=0
compgen -G "/sys/class/infiniband/*" >/dev/null && device=1

timeout 60 "$info" >"$out" 2>&1
check "weft-info exits 0" 0 $?
cat "$out"
check "weft-info: shm built and viable" 1 "$(has '^  shm    built, viable (')"
check "weft-info: a ucx line" 1 "$(has '^  ucx    \(built\|not built\)')"
check "weft-info: a verbs line" 1 "$(has '^  verbs  \(built\|not built\)')"
check "weft-info: auto picks shm on one host" 1 "$(has '^  auto   shm on one host; ')"
if [ $device = 1 ]; then
    check "weft-info: verbs viable (a device)" 1 "$(has '^  verbs  built, viable (')"
    check "weft-info: auto picks verbs on several hosts" 1 "$(has '; verbs on several hosts')"
elif grep -q '^  verbs  built' "$out"; then
    check "weft-info: verbs not viable (no device)" 1 "$(has '^  verbs  built, not viable: ')"
fi

echo "--- auto, 2 ranks on this host"
WEFT_LOG=debug timeout 120 "$run" --timeout 100 -n 2 "$helper" sleep 0 >"$out" 2>&1
check "auto job exits 0" 0 $?
check "auto binds shm on every rank" 2 "$(has 'transport shm bound (WEFT_TRANSPORT=auto)')"

if [ $device = 0 ] && grep -q '^  verbs  built' <("$info" 2>/dev/null); then
    echo "--- --transport verbs without an RDMA device"
    # --keep-survivors: the first rank to fail must not get the other killed
    # before it has said why.
    timeout 120 "$run" --timeout 100 --keep-survivors -n 2 --transport verbs "$helper" sleep 0 >"$out" 2>&1
    rc=$?
    check "explicit verbs job fails" 1 "$([ $rc != 0 ] && echo 1 || echo 0)"
    check "each rank says why" 2 "$(has 'WEFT_TRANSPORT=verbs cannot run on this host: ')"
    [ $fail = 0 ] || cat "$out"
fi
if [ $fail = 0 ]; then echo "select tests: all passed"; fi
exit $fail
