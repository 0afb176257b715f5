#!/usr/bin/env bash
# weft_bench_perftest_test.sh WEFT_RUN WEFT_BENCH — weft-bench --compare
# perftest for real, where there is an RDMA device (run through
# tests/rxe/needs-device.sh: in the soft-RoCE VM, or on a cluster node):
# 2 ranks on verbs, rows put, get, fadd, swap, send and put_bw at 8-64 B,
# few iterations (bounded by weft-run --timeout, each perftest server and
# client by WEFT_PERFTEST_TIMEOUT_S):
#   - exit 0; the table's '# compare:' line names the device and GID weft
#     used (weft-info's choice);
#   - the rows perftest has a program for (put, get, fadd, send, put_bw)
#     have a base and a ratio, ratio = weft's median (put_bw: us per
#     message) over base; swap (no perftest program) is n/a;
#   - table = JSON = CSV.
# Nothing here depends on how fast anything is (under qemu TCG, nothing is).
set -u
RUN=${1:?usage: weft_bench_perftest_test.sh WEFT_RUN WEFT_BENCH}
BENCH=${2:?}
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../mp/check.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
info=$(dirname "$BENCH")/weft-info

echo "== weft-bench --compare perftest on verbs"
timeout 280 "$RUN" --timeout 270 -n 2 --transport verbs "$BENCH" -t put,get,fadd,swap,send,put_bw -m 8:64 \
    -i 50 -x 5 -W 8 --compare perftest --json "$tmp/c.json" --csv "$tmp/c.csv" >"$tmp/ctable" 2>"$tmp/cerr"
rc=$?
check "weft-bench --compare perftest exits 0" 0 $rc
cat "$tmp/ctable"
[ $rc = 0 ] || cat "$tmp/cerr"
# The device and GID weft-info says weft uses (tests/rxe/bench-vs-perftest.sh
# reads them the same way).
"$info" >"$tmp/info"
dev=${WEFT_VERBS_DEVICE:-$(sed -n 's/^  \([^ :]*\): [0-9]* port(s),.*/\1/p' "$tmp/info" | head -n1)}
dev=${dev%%:*}
gid=$(awk -v d="$dev:" '$1 == d {on = 1; next} /^  [^ ]/ {on = 0}
    on && match($0, /weft uses gid\[[0-9]+\]/) {print substr($0, RSTART + 14, RLENGTH - 15); exit}' "$tmp/info")
gid=${WEFT_VERBS_GID_INDEX:-$gid}
where="gid\[$gid\]"
[ -n "$gid" ] || where="no GID (InfiniBand)"
check "the compare line names weft's device $dev and ${where//\\/}" 1 \
    "$(grep -c "^# compare: perftest .*, device $dev port [0-9]*,* $where as weft's" "$tmp/ctable")"
python3 "$HERE/check_compare_rows.py" "$tmp/ctable" "$tmp/c.json" "$tmp/c.csv" put,get,fadd,send,put_bw median
check "base and ratio for put, get, fadd, send, put_bw; swap n/a; table = JSON = CSV" 0 $?

[ "$fail" = 0 ] && echo "weft_bench --compare perftest tests: all passed"
exit "$fail"
