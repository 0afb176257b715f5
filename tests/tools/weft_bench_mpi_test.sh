#!/usr/bin/env bash
# weft_bench_mpi_test.sh WEFT_RUN WEFT_BENCH — weft-bench --compare mpi for
# real, 2 ranks on shm, a few rows at 3 sizes, few iterations (every run
# bounded by weft-run --timeout, each mpirun by WEFT_OSU_TIMEOUT_S):
#   - without OSU (WEFT_OSU_DIR pointing nowhere): exit 1, the reason on
#     stderr, every row's base and ratio n/a (JSON: null);
#   - with OSU (WEFT_OSU_DIR, else ~/.cache/weft-anchors/osu-openmpi, as
#     weft-bench looks) and mpirun.openmpi: exit 0; the rows OSU has a
#     program for (send, put, barrier, allreduce) have a base and a ratio,
#     the ratio weft's mean over the base; swap (no OSU program) is n/a;
#     table = JSON = CSV. Without them: skipped (77) with the reason.
# Nothing here depends on how fast anything is.
set -u
RUN=${1:?usage: weft_bench_mpi_test.sh WEFT_RUN WEFT_BENCH}
BENCH=${2:?}
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../mp/check.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
tests=send,put,swap,barrier,allreduce
ROWS=(-t "$tests" -m 8:32 -i 50 -x 5)

# check_rows TABLE JSON CSV MAPPED: the base and ratio columns of the table,
# the JSON and the CSV agree; rows whose op is in MAPPED (comma-separated)
# have numbers, ratio = mean / base to the printed precision; others n/a.
check_rows() { python3 "$HERE/check_compare_rows.py" "$@" mean; }

echo "== --compare mpi without OSU"
WEFT_OSU_DIR=$tmp/no-osu timeout 60 "$RUN" --timeout 50 -n 2 --transport shm "$BENCH" "${ROWS[@]}" --compare mpi \
    --json "$tmp/n.json" --csv "$tmp/n.csv" >"$tmp/ntable" 2>"$tmp/nerr"
check "weft-bench --compare mpi without OSU exits 1" 1 $?
check "without OSU: says why on stderr" 1 "$(grep -c "^weft-bench: --compare mpi: no OSU Micro-Benchmarks at $tmp/no-osu" "$tmp/nerr")"
check_rows "$tmp/ntable" "$tmp/n.json" "$tmp/n.csv" ""
check "without OSU: every row's base and ratio n/a" 0 $?

osu=${WEFT_OSU_DIR:-$HOME/.cache/weft-anchors/osu-openmpi}
[ -d "$osu/libexec/osu-micro-benchmarks/mpi" ] && osu=$osu/libexec/osu-micro-benchmarks/mpi
skip=""
command -v mpirun.openmpi >/dev/null || skip="mpirun.openmpi is not on PATH (Debian: openmpi-bin)"
[ -x "$osu/pt2pt/osu_latency" ] ||
    skip="no OSU Micro-Benchmarks at $osu (bash ../shared/anchors/build-osu.sh ~/.cache/weft-anchors/osu-openmpi openmpi, or WEFT_OSU_DIR)"
if [ -n "$skip" ]; then
    [ "$fail" = 0 ] || exit 1
    echo "SKIP --compare mpi with OSU: $skip"
    exit 77
fi

echo "== --compare mpi with OSU at $osu"
timeout 120 "$RUN" --timeout 100 -n 2 --transport shm "$BENCH" "${ROWS[@]}" --compare mpi \
    --json "$tmp/c.json" --csv "$tmp/c.csv" >"$tmp/ctable" 2>"$tmp/cerr"
rc=$?
check "weft-bench --compare mpi exits 0" 0 $rc
[ $rc = 0 ] || { cat "$tmp/cerr"; cat "$tmp/ctable"; }
check "the table says what the baseline is" 1 "$(grep -c '^# compare: OSU Micro-Benchmarks .* base = OSU' "$tmp/ctable")"
check_rows "$tmp/ctable" "$tmp/c.json" "$tmp/c.csv" send,put,barrier,allreduce
check "with OSU: base and ratio for send, put, barrier, allreduce; swap n/a" 0 $?

[ "$fail" = 0 ] && echo "weft_bench --compare mpi tests: all passed"
exit "$fail"
