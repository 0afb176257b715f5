#!/usr/bin/env bash
# fabric_check_test.sh WEFT_RUN WEFT_FABRIC_CHECK MODE [RANKS TRANSPORT] — weft-fabric-check
# (docs/tools/weft-fabric-check.md) run for real under weft-run, every run
# bounded by --timeout:
#   cli      --help, an unknown flag, bad values (exit 2, named on stderr)
#   healthy  every check passes: exit 0; the JSON is valid and agrees with
#            the summary; the heat map is an SVG with a cell per pair
#   corrupt  WEFT_FABRIC_CHECK_CORRUPT=1:2 (the test-only fault point): exit 1,
#            pair 1->2 named on stdout, stderr and in the JSON, no other pair
#   kill     rank 2 killed as it starts its pairs (weft-run --fault ...:at=
#            fabric-check.origin, --keep-survivors): exit 1, rank 2 and a
#            pair into it named, the survivors' phases still complete
#   fault    --fault-check, weft-run kills rank RANKS-1 at fabric-check.fault:
#            every survivor reports its detection; exit 0
#   perhost  --per-host on two simulated hosts (weft-run --hosts 2): pairs
#            between the hosts' first ranks only; a corrupted one is named
set -u
run=$1 tool=$2 mode=$3 ranks=${4:-4} transport=${5:-shm}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
. "$(dirname "$0")/../mp/check.sh"
out=$dir/out err=$dir/err json=$dir/report.json svg=$dir/heatmap.svg
launch() { "$run" --timeout 90 --transport "$transport" "$@" >"$out" 2>"$err"; }
show() { echo "--- stdout"; cat "$out"; echo "--- stderr"; cat "$err"; }

# json_check PYTHON-EXPRESSION: evaluated with d = the report; prints 1 when true.
json_check() {
    python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(1 if ($1) else 0)" "$json" 2>/dev/null || echo 0
}

case $mode in
cli)
    "$tool" --help >"$out" 2>"$err"
    check "--help exits 0" 0 $?
    check "--help: first line says what it is" 1 "$(head -1 "$out" | grep -c '^weft-fabric-check: ')"
    check "--help: documents --lat-tolerance" 1 "$(grep -c -- '--lat-tolerance' "$out")"
    "$tool" --no-such-flag >"$out" 2>"$err"
    check "--no-such-flag exits 2" 2 $?
    check "--no-such-flag: named on stderr" 1 "$(grep -c -- "'--no-such-flag'" "$err")"
    check "--no-such-flag: nothing on stdout" 0 "$(wc -c <"$out")"
    for bad in "--iters 0" "--iters x" "--sizes 9:3" "--sizes 8" "--sizes 8:128M" "--bw-size 4" \
               "--lat-tolerance 0.5" "--bw-tolerance nan" "--fault-victim 0 --fault-check" "--fault-victim 2" \
               "--fault-bound -1" "--iters" "--json /no/such/dir/r.json" "--heatmap /no/such/dir/h.svg"; do
        # shellcheck disable=SC2086
        "$tool" $bad >"$out" 2>"$err"
        check "$bad exits 2" 2 $?
        check "$bad: says why on stderr" 1 "$(grep -c '^weft-fabric-check: ' "$err")"
    done
    # A victim outside the job is found once the job's size is known: exit 2 too.
    launch -n 2 "$tool" --fault-check --fault-victim 5 --quiet
    check "--fault-victim 5 in a job of 2 exits 2" 2 $?
    check "--fault-victim 5: says why" 1 "$(grep -c 'victim rank 1..1' "$err")"
    ;;
healthy)
    launch -n "$ranks" "$tool" --json "$json" --heatmap "$svg"
    rc=$?
    check "healthy run on $transport, $ranks ranks, exits 0" 0 $rc
    pairs=$((ranks * (ranks - 1)))
    check "summary: verdict PASS" 1 "$(grep -c '^verdict: PASS$' "$out")"
    check "summary: every pair connected" 1 "$(grep -c "^connectivity: $pairs/$pairs pairs$" "$out")"
    check "summary: every pair intact" 1 "$(grep -c "^integrity: $pairs/$pairs pairs intact" "$out")"
    check "summary: no ticket lost or duplicated" 1 "$(grep -c ', 0 lost, 0 duplicated$' "$out")"
    check "JSON is valid (json.tool)" 0 "$(python3 -m json.tool "$json" >/dev/null 2>&1; echo $?)"
    check "JSON: verdict pass, no failures" 1 "$(json_check "d['verdict'] == 'pass' and d['failures'] == []")"
    check "JSON: $pairs pairs, all ok with latency and bandwidth" 1 \
        "$(json_check "len(d['pairs']) == $pairs and all(p['ok'] and p['latency_us'] > 0 and p['bandwidth_gbs'] > 0 for p in d['pairs'])")"
    check "JSON: transport $transport, $ranks ranks" 1 \
        "$(json_check "d['transport'] == '$transport' and d['ranks'] == $ranks")"
    check "JSON: exact fetch-add sums and full ticket sets on every rank" 1 \
        "$(json_check "len(d['atomics']) == $ranks and all(a['fetch_add_final'] == a['fetch_add_expected'] == $ranks * 100 and a['ticket_word_final'] == a['tickets_expected'] and a['tickets_lost'] == 0 == a['tickets_duplicated'] for a in d['atomics'])")"
    check "JSON: both rings, every rank, no data errors" 1 \
        "$(json_check "len(d['rings']) == 2 * $ranks and all(g['data_errors'] == 0 and g['gbs'] > 0 for g in d['rings'])")"
    # The summary's outlier count is the JSON's, and each flagged pair is listed.
    check "JSON outliers agree with the summary" 1 \
        "$(json_check "'outliers: %d' % len(d['outliers']) in open('$out').read() and all(o in open('$out').read() for o in d['outliers'])")"
    check "JSON latency median is the summary's" 1 \
        "$(json_check "'%.3f' % d['latency_median_us'] in open('$out').read()")"
    check "heat map is an SVG with a cell per pair in each matrix" $((2 * pairs)) \
        "$(python3 -c "import sys, xml.dom.minidom as m; print(sum(1 for r in m.parse(sys.argv[1]).getElementsByTagName('rect') if r.getElementsByTagName('title')))" "$svg" 2>/dev/null)"
    ;;
corrupt)
    WEFT_FABRIC_CHECK_CORRUPT=1:2 launch -n "$ranks" "$tool" --json "$json" --quiet
    check "corrupted pair: exit 1" 1 $?
    check "stdout names pair 1->2" 1 "$(grep -c '^  FAIL pair 1->2: 1 of [0-9]* transfers corrupted' "$out")"
    check "stderr names pair 1->2" 1 "$(grep -c '^weft-fabric-check: FAIL pair 1->2: ' "$err")"
    check "nothing else failed" 1 "$(grep -c '^verdict: FAIL (1)$' "$out")"
    check "JSON: pair 1->2 not ok, its integrity failure counted" 1 \
        "$(json_check "[(p['origin'], p['target']) for p in d['pairs'] if not p['ok']] == [(1, 2)] and [p for p in d['pairs'] if p['origin'] == 1 and p['target'] == 2][0]['integrity_failures'] == 1")"
    check "JSON: verdict fail, naming 1->2" 1 "$(json_check "d['verdict'] == 'fail' and 'pair 1->2' in d['failures'][0]")"
    ;;
kill)
    launch --keep-survivors --fault kill:rank=2:at=fabric-check.origin -n "$ranks" "$tool" --json "$json" --quiet
    check "rank 2 killed: exit 1" 1 $?
    check "stdout names rank 2" 1 "$(grep -c '^  FAIL rank 2 failed during the run$' "$out")"
    check "stdout names pair 3->2" 1 "$(grep -c '^  FAIL pair 3->2: ' "$out")"
    check "stderr names rank 2's pairs" 1 "$(grep -c '^weft-fabric-check: FAIL pairs 2->\*: not measured' "$err")"
    check "JSON: rank 2 lost, verdict fail" 1 "$(json_check "d['lost_ranks'] == [2] and d['verdict'] == 'fail'")"
    check "JSON: the survivors' atomics and rings completed without rank 2" 1 \
        "$(json_check "len(d['atomics']) == $ranks - 1 and all(a['fetch_add_final'] == a['fetch_add_expected'] for a in d['atomics']) and all(g['data_errors'] == 0 and g['status'] == 'success' and g['from'] != 2 for g in d['rings']) and len(d['rings']) == 2 * ($ranks - 1)")"
    ;;
fault)
    victim=$((ranks - 1))
    launch --keep-survivors --fault "kill:rank=$victim:at=fabric-check.fault" -n "$ranks" "$tool" --fault-check \
        --fault-bound 20 --json "$json" --quiet
    check "fault check: exit 0 (every survivor noticed)" 0 $?
    check "summary: rank $victim killed, detection per survivor" 1 \
        "$(grep -c "^fault check: rank $victim killed; detection (ms from the kill's agreement):\( [0-9]*:[0-9.]*\)\{$victim\} (bound 20 s)$" "$out")"
    check "JSON: every survivor reported and detected, verdict pass" 1 \
        "$(json_check "d['fault_check']['victim'] == $victim and len(d['fault_check']['survivors']) == $victim and all(s['reported'] and s['detected'] and 0 <= s['detect_ms'] for s in d['fault_check']['survivors']) and d['verdict'] == 'pass'")"
    ;;
perhost)
    # Two simulated hosts (weft-run --hosts: namespaces, root only; skipped
    # (77) where they cannot be made, as tests/mp/hosts_test.sh). Their /tmp
    # is private, so the report goes under the working directory.
    if [ "$(id -u)" != 0 ] || ! command -v ip >/dev/null || ! unshare --net --pid --mount --uts --ipc --fork true 2>/dev/null; then
        echo "fabric check perhost: skipped: simulated hosts need root, iproute2 and namespaces"
        exit 77
    fi
    json=$(mktemp -p "$PWD" fabric-check-XXXXXX.json)
    trap 'rm -rf "$dir" "$json"' EXIT
    launch --hosts 2 -n "$ranks" "$tool" --per-host --json "$json" --quiet
    check "--per-host on 2 hosts: exit 0" 0 $?
    check "summary: pairs between ranks 0 and $((ranks / 2))" 1 \
        "$(grep -c "^pairs: one rank per host, 2 hosts: ranks 0 $((ranks / 2))$" "$out")"
    check "JSON: 2 pairs between the hosts' first ranks, 2 hosts, verdict pass" 1 \
        "$(json_check "d['pair_ranks'] == [0, $((ranks / 2))] and len(d['pairs']) == 2 and len(set(d['hosts'])) == 2 and d['verdict'] == 'pass'")"
    check "JSON: every rank still in the atomics" 1 "$(json_check "len(d['atomics']) == $ranks")"
    WEFT_FABRIC_CHECK_CORRUPT=$((ranks / 2)):0 launch --hosts 2 -n "$ranks" "$tool" --per-host --json "$json" --quiet
    check "--per-host, pair $((ranks / 2))->0 corrupted: exit 1" 1 $?
    check "stderr names pair $((ranks / 2))->0" 1 "$(grep -c "^weft-fabric-check: FAIL pair $((ranks / 2))->0: " "$err")"
    ;;
*)
    echo "fabric_check_test.sh: unknown mode '$mode'" >&2
    exit 2
    ;;
esac
if [ "$fail" != 0 ]; then show; else echo "fabric check $mode: all passed"; fi
exit "$fail"
