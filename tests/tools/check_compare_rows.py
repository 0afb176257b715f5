#!/usr/bin/env python3
"""check_compare_rows.py TABLE JSON CSV MAPPED STAT — weft-bench --compare's
base and ratio columns, as the table, the JSON and the CSV show them.

Rows whose op is in MAPPED (comma-separated; "" for none) must have numbers,
ratio = weft's STAT (median or mean; bandwidth rows: us per message,
1 / Mmsg/s) over base to the printed precision; every other row n/a (JSON
null). The three must agree row for row. Exit 0 if all holds, else 1 with
what differed."""
import csv
import json
import sys

table, js, cs, mapped, stat = sys.argv[1], sys.argv[2], sys.argv[3], set(filter(None, sys.argv[4].split(','))), \
    sys.argv[5]
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
    if t[0] != j['op'] or c['op'] != j['op'] or t[2] != str(j['bytes']) or c['bytes'] != str(j['bytes']):
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
        bandwidth = j['mb_s'] > 0
        mine = 1 / j['mmsg_s'] if bandwidth else j[stat + '_us']
        rel = 0.0005 / base + 0.0005 / (j['mmsg_s'] if bandwidth else mine)
        if abs(ratio - mine / base) > 0.0005 + 1.01 * rel * mine / base:
            fail.append('%s: ratio %s is not %s %s / base %s' % (name, ratio, stat, mine, base))
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
