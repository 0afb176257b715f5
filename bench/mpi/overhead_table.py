"""overhead_table.py LOG — the table of bench/mpi/run_*_overhead.sh: LOG
holds one line per round, "NAME WITHOUT SERIALIZED WITH" (times, or
bandwidths where NAME ends in _bw); prints each NAME's medians and the
ratios with / without and with / serialized (for a bandwidth, the other
way round: a ratio above 1 is always the layer's cost)."""
import collections
import statistics
import sys

runs = collections.defaultdict(lambda: ([], [], []))
for line in open(sys.argv[1]):
    name, *values = line.split()
    for column, v in zip(runs[name], values):
        column.append(float(v))
print("| benchmark | without the layer (median) | serialized, no layer | with the layer | with / without | with / serialized |")
print("|---|---|---|---|---|---|")
for name, columns in runs.items():
    a, s, w = (statistics.median(c) for c in columns)
    bandwidth = name.endswith("_bw")
    r1, r2 = (a / w, s / w) if bandwidth else (w / a, w / s)
    print(f"| {name} | {a:g} | {s:g} | {w:g} | {r1:.2f} | {r2:.2f} |")
