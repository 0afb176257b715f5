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
check_rows() {
    python3 - "$@" <<'PY'
import csv, json, sys
table, js, cs, mapped = sys.argv[1], sys.argv[2], sys.argv[3], set(filter(None, sys.argv[4].split(',')))
fail = []
lines = [l.split() for l in open(table) if l.strip() and not l.startswith('#')]
head, body = lines[0], lines[1:]
if head[-2:] != ['base', 'ratio']:
    fail.append('table header %s has no base and ratio columns' % head)
rows = json.load(open(js))['rows']
csv_rows = list(csv.DictReader(open(cs)))
if not (len(rows) == len(body) == len(csv_rows) > 0):
    fail.append('%d table rows, %d JSON rows, %d CSV rows' % (len(body), len(rows), len(csv_rows)))
for t, j, c in zip(body, rows, csv_rows):
    name = '%s %s' % (j['op'], j['bytes'])
    if t[0] != j['op'] or c['op'] != j['op']:
        fail.append('%s: table, JSON and CSV rows differ' % name)
    if 'base_us' not in j or 'ratio' not in j:
        fail.append('%s: no base_us or ratio in the JSON' % name)
        continue
    if j['op'] in mapped:
        base, ratio = j['base_us'], j['ratio']
        if not (isinstance(base, float) and isinstance(ratio, float) and base > 0 and ratio > 0):
            fail.append('%s: base %s, ratio %s: not numbers' % (name, base, ratio))
            continue
        # Every number is printed to 0.001: allow for that rounding.
        mean = j['mean_us']
        rel = 0.0005 / base + 0.0005 / mean
        if abs(ratio - mean / base) > 0.0005 + 1.01 * rel * mean / base:
            fail.append('%s: ratio %s is not mean %s / base %s' % (name, ratio, mean, base))
        want = ['%.3f' % base, '%.3f' % ratio]
    else:
        if j['base_us'] is not None or j['ratio'] is not None:
            fail.append('%s: base %s, ratio %s where n/a (null) was expected' % (name, j['base_us'], j['ratio']))
        want = ['n/a', 'n/a']
    if t[-2:] != want or [c['base_us'], c['ratio']] != want:
        fail.append('%s: table %s, CSV %s, expected %s' % (name, t[-2:], [c['base_us'], c['ratio']], want))
for f in fail:
    print('FAIL', f)
print('ok   base and ratio: numbers for %s, n/a otherwise; table = JSON = CSV (%d rows)' %
      (sorted(mapped) or 'no row', len(rows)) if not fail else 'FAIL base and ratio columns')
sys.exit(1 if fail else 0)
PY
}

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
