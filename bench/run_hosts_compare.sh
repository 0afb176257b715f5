#!/usr/bin/env bash
# run_hosts_compare.sh [BUILD_DIR] [ROUNDS] — weft against PMIx+PRRTE across
# simulated hosts, both launched by PRRTE's prterun on the same hosts
# (tests/mp/prrte_hosts_test.sh's setup: the anchors, weft-hosts, root):
#   1. a node loss: when weft's survivors know every rank of the lost host
#      failed, against when PRRTE reports the lost daemon, both measured
#      from the same SIGKILL of the host's PID 1 in the same run, on the
#      wall clock every process of the machine shares (PRRTE runs with
#      --runtime-options recoverable,notifyerrors: it reports, the job goes on);
#   2. process groups: construct and destruct (median of REPS), weft's
#      bench/group_bench against PMIx's (bench/pmix/pmix_group.c), rounds
#      interleaved, at 2 hosts x 2 ranks and 4 hosts x 1; a launch that
#      does not finish in LIMIT seconds (default 60) is reported as hung.
# Prints one line per round and the medians; load before and after.
# WITH_GROUPS=0 runs the node loss only.
set -uo pipefail
build=$(cd "${1:-build}" && pwd)
rounds=${2:-5}
prefix=${WEFT_ANCHORS_PREFIX:-$HOME/.cache/weft-anchors}
[ -x "$prefix/bin/prterun" ] || { echo "SKIP: no prterun at $prefix/bin (build the anchors: .ci/run)"; exit 77; }
[ "$(id -u)" = 0 ] || { echo "SKIP: simulated hosts need root"; exit 77; }
hosts=${HOSTS:-2} per_host=${PER_HOST:-2} after=${KILL_AFTER:-2}
last=$((hosts - 1))
host_list=""
for ((h = 0; h < hosts; h++)); do host_list+="${host_list:+,}weft-host-$h:$per_host"; done
work=$(mktemp -d)
# The PMIx probe has to be where the hosts see it: each has a private /tmp
# (a binary under it fails to launch on the host, which the RESULT grep
# below turned into "hung"); /var/tmp is the machine's.
bin_dir=$(mktemp -d /var/tmp/run_hosts_compare.XXXXXX)
trap 'rm -rf "$work" "$bin_dir"' EXIT
echo "uptime before: $(uptime)"
echo "node loss of weft-host-$last, $hosts hosts x $per_host ranks, SIGKILL to its PID 1 ${after} s after launch"
printf '%-6s %22s %22s\n' round "weft: all known (ms)" "PRRTE: lost daemon (ms)"
weft_all=() prrte_all=()
for ((r = 1; r <= rounds; r++)); do
  rm -f "$work"/*
  # On the head: the kill (its wall-clock time first), then prterun with
  # each stderr line stamped as it arrives.
  WORK=$work PREFIX=$prefix HOSTLIST=$host_list PER_HOST=$per_host N=$((hosts * per_host)) LAST=$last AFTER=$after \
  MP_HOSTS=$hosts MP_VICTIM_HOST=$last WEFT_TIMEOUT_MS=60000 GTEST_FILTER=Hosts.NodeLossFound \
  timeout 120 "$build/tools/weft-hosts" "$hosts" bash -c '
    pid=$(printf "%s\n" $WEFT_HOSTS_MAP | sed -n "s/^weft-host-$LAST=//p")
    ( sleep "$AFTER"; echo "$EPOCHREALTIME" > "$WORK/killed"; kill -9 "$pid" ) &
    LD_LIBRARY_PATH="$PREFIX/lib" "$PREFIX/bin/prterun" --allow-run-as-root \
      --prtemca plm_ssh_agent "$WEFT_HOSTS_AGENT" --prtemca plm_ssh_no_tree_spawn 1 \
      --runtime-options recoverable,notifyerrors --host "$HOSTLIST" --map-by "ppr:$PER_HOST:node" -n "$N" \
      "$0" 2> >(while IFS= read -r line; do echo "$EPOCHREALTIME $line"; done > "$WORK/stderr") > "$WORK/stdout"
    wait' "$build/tests/mp/mp_hosts"
  killed=$(cat "$work/killed" 2>/dev/null)
  weft_at=$(sed -n 's/.*all known .* at wall clock \([0-9.]*\).*/\1/p' "$work/stderr" | head -1)
  prrte_at=$(grep -m1 'lost communication with a remote daemon' "$work/stderr" | cut -d' ' -f1)
  if [ -z "$killed" ] || [ -z "$weft_at" ] || [ -z "$prrte_at" ]; then
    echo "round $r: incomplete (killed='$killed' weft='$weft_at' prrte='$prrte_at'); stderr:"; tail -5 "$work/stderr"
    continue
  fi
  w=$(echo "($weft_at - $killed) * 1000" | bc -l) p=$(echo "($prrte_at - $killed) * 1000" | bc -l)
  weft_all+=("$w") prrte_all+=("$p")
  printf '%-6s %22.1f %22.1f\n' "$r" "$w" "$p"
done
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {if (NR) print (NR % 2 ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2)}'; }
[ ${#weft_all[@]} -gt 0 ] && printf '%-6s %22.1f %22.1f\n' median "$(median "${weft_all[@]}")" "$(median "${prrte_all[@]}")"

# 2. Process groups across the hosts, both sides under the same prterun
# (WITH_GROUPS=0 skips them).
if [ "${WITH_GROUPS:-1}" = 0 ]; then
  echo "uptime after: $(uptime)"
  exit 0
fi
reps=${REPS:-200}
pmix_bin=$bin_dir/pmix_group
cc -O2 -o "$pmix_bin" "$(dirname "$0")/pmix/pmix_group.c" -I"$prefix/include" -L"$prefix/lib" \
  -Wl,-rpath,"$prefix/lib" -lpmix
# across HOSTS PER_HOST PROGRAM ARGS...: one prterun across the hosts.
across() {
  local h=$1 p=$2 list=""
  shift 2
  for ((i = 0; i < h; i++)); do list+="${list:+,}weft-host-$i:$p"; done
  PREFIX=$prefix HOSTLIST=$list PER_HOST=$p N=$((h * p)) timeout "${LIMIT:-60}" "$build/tools/weft-hosts" "$h" bash -c '
    LD_LIBRARY_PATH="$PREFIX/lib" exec "$PREFIX/bin/prterun" --allow-run-as-root \
      --prtemca plm_ssh_agent "$WEFT_HOSTS_AGENT" --prtemca plm_ssh_no_tree_spawn 1 \
      --host "$HOSTLIST" --map-by "ppr:$PER_HOST:node" -n "$N" "$@"' head "$@" 2>&1
}
echo
echo "process groups, median of $reps construct/destruct (context ID, 64-byte info), microseconds"
printf '%-10s %-6s %14s %14s %14s %14s %9s\n' layout round "weft constr." "PMIx constr." "weft destr." "PMIx destr." "c+d ratio"
for layout in "2 2" "4 1"; do
  set -- $layout
  for ((r = 1; r <= rounds; r++)); do
    w=$(across "$1" "$2" "$build/bench/group_bench" --reps "$reps" | grep 'RESULT group\.')
    x=$(across "$1" "$2" "$pmix_bin" "$reps" | grep 'RESULT pmix\.group')
    wc_=$(sed -n 's/.*group.construct ranks=.* median_us=\([0-9.]*\).*/\1/p' <<<"$w")
    wd=$(sed -n 's/.*group.destruct ranks=.* median_us=\([0-9.]*\).*/\1/p' <<<"$w")
    wcd=$(sed -n 's/.*group.construct_destruct ranks=.* median_us=\([0-9.]*\).*/\1/p' <<<"$w")
    pc=$(sed -n 's/.* construct_us=\([0-9.]*\).*/\1/p' <<<"$x")
    pd=$(sed -n 's/.* destruct_us=\([0-9.]*\).*/\1/p' <<<"$x")
    pcd=$(sed -n 's/.* construct_destruct_us=\([0-9.]*\).*/\1/p' <<<"$x")
    # PMIx's construct across PRRTE's daemons never returned while the probe
    # reused one group ID (PRRTE 52d5e4b drops it at the HNP, which relays
    # without a member; bench/pmix/pmix_group.c); should a launch still not
    # finish in LIMIT, say so, and go on.
    if [ -z "$pc" ]; then
      printf '%-10s %-6s %14s %14s %14s %14s %9s\n' "${1}x$2" "$r" "${wc_:-?}" "hung" "${wd:-?}" "hung" "-"
      continue
    fi
    if [ -z "$wc_" ]; then
      echo "${1}x$2 round $r: weft incomplete:"; echo "$w"; continue
    fi
    printf '%-10s %-6s %14s %14s %14s %14s %8.1fx\n' "${1}x$2" "$r" "$wc_" "$pc" "$wd" "$pd" "$(echo "$pcd / $wcd" | bc -l)"
  done
done
echo "uptime after: $(uptime)"
