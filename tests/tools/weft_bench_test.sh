#!/usr/bin/env bash
# weft_bench_test.sh WEFT_RUN WEFT_BENCH TRANSPORT RANKS — weft-bench for real
# on one transport, small sizes and few iterations (each run bounded by
# weft-run --timeout):
#   - the command line: tests/mp/cli_test.sh's checks, and bad values exit 2;
#   - a run of every test writes a table, JSON (valid: python3 -m json.tool),
#     CSV and SVG whose rows are the table's rows, field for field; every
#     row expected is there, with min <= median <= max and p99 <= p99.9 <= max;
#   - --sample-every 4 times 1 latency iteration in 4 (and the bandwidth
#     rows every one): iters counts the timed ones;
#   - --rank-sweep repeats the collective rows at 2, 4, ... ranks, then N;
#   - -t fault under weft-run --fault kill: a row of the 2 survivors' notice
#     times; without the armed fault point, exit 2;
#   - --compare ucx_perftest adds base and ratio columns, filled for its rows
#     (and, with rsvg-convert on PATH, --plot FILE.png writes a PNG).
#   - --compare perftest off verbs: exit 1, the reason on stderr, every row's
#     base and ratio n/a; an unknown --compare value exits 2.
# Nothing here depends on how fast anything is.
set -u
RUN=${1:?usage: weft_bench_test.sh WEFT_RUN WEFT_BENCH TRANSPORT RANKS}
BENCH=${2:?}
TRANSPORT=${3:?}
RANKS=${4:?}
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../mp/check.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

echo "== command line"
bash "$HERE/../mp/cli_test.sh" "$BENCH" || fail=1
for bad in "-m 3:8" "-m 8:4" "-m 1:8388608" "-m 8" "-i 0" "-i x" "-x -1" "-W 0" "-t put,nosuch" "--plot x.pdf" \
           "--compare nosuch" "--sample-every 0" "--sample-every 1025" "--json" "--json /nonexistent/r.json" "--csv /nonexistent/r.csv" \
           "--plot /nonexistent/r.svg"; do
    # shellcheck disable=SC2086
    timeout 20 "$BENCH" $bad >"$tmp/out" 2>"$tmp/err"
    check "weft-bench $bad exits 2" 2 $?
    check "weft-bench $bad: says why on stderr" 1 "$(grep -c '^weft-bench: ' "$tmp/err")"
done

echo "== a run of every test on $TRANSPORT, $RANKS ranks"
timeout 60 "$RUN" --timeout 50 -n "$RANKS" --transport "$TRANSPORT" "$BENCH" -m 1:64 -i 40 -x 4 -W 8 \
    --json "$tmp/r.json" --csv "$tmp/r.csv" --plot "$tmp/r.svg" >"$tmp/table" 2>"$tmp/stderr"
rc=$?
check "weft-bench run exits 0" 0 $rc
[ $rc = 0 ] || { cat "$tmp/stderr"; cat "$tmp/table"; }
check "the JSON is valid (python3 -m json.tool)" 0 "$(python3 -m json.tool "$tmp/r.json" >/dev/null 2>&1; echo $?)"
python3 - "$tmp/table" "$tmp/r.json" "$tmp/r.csv" "$tmp/r.svg" "$RANKS" <<'PY'
import csv, json, sys, xml.etree.ElementTree as ET
table, js, cs, svg, ranks = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
fail = []
lines = [l.split() for l in open(table) if l.strip() and not l.startswith('#')]
head, body = lines[0], lines[1:]
keys = {'op': 'op', 'unit': 'unit', 'bytes': 'bytes', 'ranks': 'ranks', 'iters': 'iters', 'min': 'min_us',
        'median': 'median_us', 'mean': 'mean_us', 'p99': 'p99_us', 'p99.9': 'p999_us', 'max': 'max_us',
        'MB/s': 'mb_s', 'Mmsg/s': 'mmsg_s'}
if head != list(keys):
    fail.append('table header %s' % head)
doc = json.load(open(js))
rows = doc['rows']
def text(v):
    return v if isinstance(v, str) else ('%.3f' % v if isinstance(v, float) else str(v))
if len(rows) != len(body):
    fail.append('%d JSON rows, %d table rows' % (len(rows), len(body)))
for t, j in zip(body, rows):
    want = [text(j[keys[k]]) for k in head]
    if t != want:
        fail.append('table row %s != JSON row %s' % (t, want))
csv_rows = list(csv.DictReader(open(cs)))
if len(csv_rows) != len(body):
    fail.append('%d CSV rows, %d table rows' % (len(csv_rows), len(body)))
for t, c in zip(body, csv_rows):
    if t != [c[keys[k]] for k in head]:
        fail.append('table row %s != CSV row %s' % (t, c))
sizes = [str(1 << k) for k in range(7)]
want = set()
for op in ('put', 'get', 'am', 'send', 'put_bw', 'am_bw', 'send_bw', 'bcast', 'allgather'):
    want |= {(op, s) for s in sizes}
want |= {('allreduce', s) for s in sizes if int(s) >= 8}
want |= {(op, '8') for op in ('fadd', 'cswap', 'swap')}
want |= {(op, '0') for op in ('barrier', 'comm_dup', 'comm_free', 'group_construct', 'group_destruct', 'drain',
                             'drain_round')}
got = {(r['op'], str(r['bytes'])) for r in rows}
if got != want:
    fail.append('rows missing %s, unexpected %s' % (sorted(want - got), sorted(got - want)))
for r in rows:
    name = '%s %s' % (r['op'], r['bytes'])
    # A drain round's work excludes its waits for tree partners: a leaf's
    # round can be all wait, its work 0 at the clock's resolution (seen
    # under ASan: min 0.0 us, median 2.9). Every other row times real work.
    least = 0 if r['op'] == 'drain_round' else 1e-9
    if not (least <= r['min_us'] <= r['median_us'] <= r['max_us'] and r['p99_us'] <= r['p999_us'] <= r['max_us']
            and r['min_us'] <= r['mean_us'] <= r['max_us']):
        fail.append('%s: statistics out of order %s' % (name, r))
    if r['iters'] <= 0:
        fail.append('%s: no iterations' % name)
    if r['op'].endswith('_bw') and not (r['mb_s'] > 0 and r['mmsg_s'] > 0):
        fail.append('%s: no bandwidth' % name)
    expect_ranks = 2 if r['op'] in ('put', 'get', 'fadd', 'cswap', 'swap', 'am', 'send', 'put_bw', 'am_bw',
                                    'send_bw') else ranks
    if r['ranks'] != expect_ranks:
        fail.append('%s: ranks %s, expected %d' % (name, r['ranks'], expect_ranks))
if doc['ranks'] != ranks or len(doc['cpu_binding']) != ranks:
    fail.append('header: ranks %s, cpu_binding %s' % (doc['ranks'], doc['cpu_binding']))
root = ET.parse(svg).getroot()
lines_drawn = [e for e in root.iter() if e.tag.endswith('polyline')]
if len(lines_drawn) < 2:
    fail.append('the SVG draws %d lines' % len(lines_drawn))
for f in fail:
    print('FAIL', f)
print('ok   table, JSON and CSV rows agree (%d rows), every row expected is there, SVG parses' % len(rows)
      if not fail else 'FAIL rows')
sys.exit(1 if fail else 0)
PY
check "rows: table = JSON = CSV, complete, ordered" 0 $?

echo "== --sample-every 4: the latency rows time 1 iteration in 4"
timeout 60 "$RUN" --timeout 50 -n "$RANKS" --transport "$TRANSPORT" "$BENCH" --sample-every 4 -t put,fadd,put_bw \
    -m 8:8 -i 40 -x 4 -W 8 --json "$tmp/e.json" >"$tmp/etable" 2>"$tmp/eerr"
check "weft-bench --sample-every 4 exits 0" 0 $?
python3 - "$tmp/e.json" <<'PY'
import json, sys
got = {r['op']: r['iters'] for r in json.load(open(sys.argv[1]))['rows']}
want = {'put': 10, 'fadd': 10, 'put_bw': 40}
print('ok   iters %s' % got if got == want else 'FAIL --sample-every 4: iters %s, expected %s' % (got, want))
sys.exit(0 if got == want else 1)
PY
check "--sample-every 4: 1 timed iteration in 4 for put and fadd, every one for put_bw" 0 $?

echo "== --rank-sweep: the collective rows at 2 ranks, then at all"
timeout 60 "$RUN" --timeout 50 -n "$RANKS" --transport "$TRANSPORT" "$BENCH" --rank-sweep -t barrier,allreduce,comm \
    -m 8:8 -i 20 -x 2 --json "$tmp/s.json" >"$tmp/stable" 2>"$tmp/serr"
check "weft-bench --rank-sweep exits 0" 0 $?
python3 - "$tmp/s.json" "$RANKS" <<'PY'
import json, sys
rows, n = json.load(open(sys.argv[1]))['rows'], int(sys.argv[2])
counts = [2 ** k for k in range(1, 32) if 2 ** k < n] + [n]
got = [(r['op'], r['ranks']) for r in rows]
want = [(op, k) for k in counts for op in ('barrier', 'allreduce', 'comm_dup', 'comm_free')]
print('ok   rows at rank counts %s' % counts if got == want else 'FAIL --rank-sweep rows %s, expected %s' % (got, want))
sys.exit(0 if got == want else 1)
PY
check "--rank-sweep: every rank count, in order" 0 $?

echo "== -t fault: a rank killed for real, time to each survivor's notice"
timeout 60 "$RUN" --timeout 50 -n 3 --transport "$TRANSPORT" --keep-survivors \
    --fault kill:rank=2:at=weft-bench.victim "$BENCH" -t fault,barrier -i 20 -x 2 --json "$tmp/f.json" \
    >"$tmp/ftable" 2>"$tmp/ferr"
check "weft-bench -t fault (rank 2 killed) exits 0" 0 $?
python3 - "$tmp/f.json" <<'PY'
import json, sys
rows = {r['op']: r for r in json.load(open(sys.argv[1]))['rows']}
f = rows.get('fault_notice')
ok = f is not None and f['ranks'] == 2 and f['iters'] == 1 and f['unit'] == 'event' and 0 < f['min_us'] <= f['max_us']
ok &= 'barrier' in rows and rows['barrier']['ranks'] == 3
print('ok   fault_notice: 2 survivors, one sample each' if ok else 'FAIL fault rows: %s' % rows)
sys.exit(0 if ok else 1)
PY
check "the fault row is the survivors'" 0 $?
timeout 60 "$RUN" --timeout 50 -n 3 --transport "$TRANSPORT" "$BENCH" -t fault >"$tmp/out" 2>"$tmp/err"
check "weft-bench -t fault without an armed victim exits 2" 2 $?
check "weft-bench -t fault without an armed victim: says why" 1 "$(grep -c -m1 '^weft-bench: -t fault needs' "$tmp/err")"

echo "== --compare ucx_perftest"
if command -v ucx_perftest >/dev/null; then
    # With rsvg-convert on PATH, this run also draws a PNG.
    png=()
    command -v rsvg-convert >/dev/null && png=(--plot "$tmp/c.png")
    timeout 60 "$RUN" --timeout 50 -n 2 --transport "$TRANSPORT" "$BENCH" -t put,fadd,send_bw -m 8:16 -i 200 -x 20 \
        --compare ucx_perftest --json "$tmp/c.json" "${png[@]}" >"$tmp/ctable" 2>"$tmp/cerr"
    check "weft-bench --compare ucx_perftest exits 0" 0 $?
    if [ ${#png[@]} -gt 0 ]; then
        check "--plot FILE.png writes a PNG" 1 "$(head -c 8 "$tmp/c.png" | od -An -c | grep -c 'P   N   G')"
    fi
    check "the table has base and ratio columns" 1 "$(grep -c '^op .* base  *ratio$' "$tmp/ctable")"
    python3 - "$tmp/ctable" "$tmp/c.json" <<'PY'
import json, sys
rows = json.load(open(sys.argv[2]))['rows']
body = [l.split() for l in open(sys.argv[1]) if l.strip() and not l.startswith('#')][1:]
ok = len(rows) == 5 and len(body) == 5
for t, r in zip(body, rows):
    # ratio = weft's median (latency rows) or time per message (bandwidth
    # rows) over the baseline's, to the printed precision.
    # Every number is printed to 0.001: allow for that rounding.
    base = r.get('base_us', 0)
    bw = r['mb_s'] > 0
    mine = 1 / r['mmsg_s'] if bw else r['median_us']
    rel = 0.0005 / base + 0.0005 / (r['mmsg_s'] if bw else mine) if base > 0 and mine > 0 else 1
    ok &= base > 0 and 'ratio' in r and abs(r['ratio'] - mine / base) <= 0.0005 + 1.01 * rel * mine / base
    ok &= t[-2:] == ['%.3f' % base, '%.3f' % r.get('ratio', -1)]
print('ok   every row has a baseline and a ratio' if ok else 'FAIL ratio column: %s' % rows)
sys.exit(0 if ok else 1)
PY
    check "every compared row has base and ratio, table = JSON" 0 $?
else
    echo "ucx_perftest is not installed: --compare not checked"
fi

echo "== --compare perftest on $TRANSPORT: refused with the reason, every row n/a"
# perftest measures an RDMA device's verbs; the run itself is the rxe test
# tools.weft_bench.compare_perftest.verbs (weft_bench_perftest_test.sh).
timeout 60 "$RUN" --timeout 50 -n 2 --transport "$TRANSPORT" "$BENCH" -t put,fadd,send_bw -m 8:16 -i 20 -x 2 \
    --compare perftest --json "$tmp/p.json" --csv "$tmp/p.csv" >"$tmp/ptable" 2>"$tmp/perr"
check "weft-bench --compare perftest on $TRANSPORT exits 1" 1 $?
check "--compare perftest on $TRANSPORT: says why on stderr" 1 \
    "$(grep -c "^weft-bench: --compare perftest: weft ran on $TRANSPORT, not verbs: .*; no baseline$" "$tmp/perr")"
check "--compare perftest on $TRANSPORT: the table says it did not run" 1 \
    "$(grep -c '^# compare: perftest .*: not run, weft ran on' "$tmp/ptable")"
python3 "$HERE/check_compare_rows.py" "$tmp/ptable" "$tmp/p.json" "$tmp/p.csv" "" median
check "--compare perftest on $TRANSPORT: every row's base and ratio n/a" 0 $?

[ $fail = 0 ] && echo "weft_bench tests: all passed"
exit $fail
