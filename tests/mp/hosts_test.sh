#!/usr/bin/env bash
# hosts_test.sh WEFT_RUN [weft-run options...] -n N PROG — runs a test under
# weft-run --hosts (simulated hosts: network, PID, mount, UTS and IPC
# namespaces; tools/hosts/hosts.hpp). They need root and iproute2: where
# they cannot be made, the test is skipped (77) with the reason, or fails
# under CI=true, where the lane must run.
set -uo pipefail
run=$1
shift
why=""
if [ "$(id -u)" != 0 ]; then
  why="simulated hosts need root (namespaces)"
elif ! command -v ip >/dev/null; then
  why="simulated hosts need iproute2's ip (apt-get install iproute2)"
elif ! unshare --net --pid --mount --uts --ipc --fork true 2>/dev/null; then
  why="this machine refuses new namespaces (unshare failed)"
fi
if [ -n "$why" ]; then
  if [ "${CI:-}" = true ]; then
    echo "hosts_test: FAILED: $why (CI must run the cross-host lane)"
    exit 1
  fi
  echo "hosts_test: skipped: $why"
  exit 77
fi
exec "$run" "$@"
