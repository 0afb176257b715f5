#!/usr/bin/env bash
# prrte_hosts_test.sh WEFT_HOSTS HOSTS PER_HOST [options] PROG [ARGS...] — a
# weft job launched by PRRTE's prterun (the anchors' OpenPMIx + PRRTE
# master) across simulated hosts: weft-hosts makes HOSTS hosts and a head
# on their network, prterun runs on the head and starts its daemons inside
# the hosts through weft-hosts' launch agent (plm_ssh_agent, in place of
# ssh), PER_HOST ranks per host in blocks; weft bootstraps through PMIx.
# Options:
#   --victim R:POINT     rank R SIGKILLs itself at weft fault point POINT
#                        (WEFT_FAULT_POINTS, set for that rank only)
#   --kill-host H:SEC    SIGKILL host H's PID 1 SEC seconds after the start
#                        (a node loss: its ranks and PRRTE's daemon there)
# A rank's or a host's death does not end the job: prterun runs with
# --runtime-options recoverable, and the survivors finish. Skips (77) with
# the reason where the anchors are not built or namespaces cannot be made
# (hosts_test.sh), and fails then under CI=true only for the namespaces.
set -uo pipefail
weft_hosts=$1 hosts=$2 per_host=$3
shift 3
victim="" kill_host=""
while [ $# -gt 0 ]; do
  case $1 in
    --victim) victim=$2; shift 2 ;;
    --kill-host) kill_host=$2; shift 2 ;;
    *) break ;;
  esac
done
prefix=${WEFT_ANCHORS_PREFIX:-$HOME/.cache/weft-anchors}
if [ ! -x "$prefix/bin/prterun" ]; then
  echo "SKIP: no prterun at $prefix/bin (the anchors are not built here: .ci/run builds them where ../shared/anchors exists)"
  exit 77
fi
case $(cd "$prefix" && pwd -P)/ in
  /tmp/*)
    # The simulated hosts have a /tmp of their own: prterun's daemons would
    # not be found there (exit 127), and prterun waits 100 s before saying so.
    echo "SKIP: the anchors' prefix $prefix is under /tmp, which the simulated hosts do not share (build them elsewhere: WEFT_ANCHORS_PREFIX)"
    exit 77
    ;;
esac
here=$(cd "$(dirname "$0")" && pwd)
n=$((hosts * per_host))
host_list=""
for ((h = 0; h < hosts; h++)); do host_list+="${host_list:+,}weft-host-$h:$per_host"; done
# The rank's program: the victim arms its fault point (PRRTE sets PMIX_RANK).
rank_cmd=("$@")
if [ -n "$victim" ]; then
  rank_cmd=(sh -c "if [ \"\$PMIX_RANK\" = ${victim%%:*} ]; then export WEFT_FAULT_POINTS='kill@${victim#*:}#1'; fi; exec \"\$@\"" rank "$@")
fi
export PRRTE_TEST_PREFIX=$prefix PRRTE_TEST_N=$n PRRTE_TEST_HOSTS=$host_list PRRTE_TEST_PER_HOST=$per_host
export PRRTE_TEST_KILL_HOST=$kill_host
# On the head: the node loss (if asked), then prterun. weft loads the
# anchors' libpmix, the one prterun speaks (docs/testing.md).
head_script='
if [ -n "$PRRTE_TEST_KILL_HOST" ]; then
  h=${PRRTE_TEST_KILL_HOST%%:*} after=${PRRTE_TEST_KILL_HOST#*:}
  pid=$(printf "%s\n" $WEFT_HOSTS_MAP | sed -n "s/^weft-host-$h=//p")
  ( sleep "$after"; echo "prrte_hosts_test: node loss: SIGKILL to weft-host-$h (PID 1 is $pid)" >&2; kill -9 "$pid" ) &
fi
LD_LIBRARY_PATH="$PRRTE_TEST_PREFIX/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
exec "$PRRTE_TEST_PREFIX/bin/prterun" --allow-run-as-root \
  --prtemca plm_ssh_agent "$WEFT_HOSTS_AGENT" --prtemca plm_ssh_no_tree_spawn 1 \
  --runtime-options recoverable --host "$PRRTE_TEST_HOSTS" --map-by "ppr:$PRRTE_TEST_PER_HOST:node" \
  -n "$PRRTE_TEST_N" "$@"'
exec bash "$here/hosts_test.sh" timeout 100 "$weft_hosts" "$hosts" sh -c "$head_script" head "${rank_cmd[@]}"
