#!/usr/bin/env bash
# weft's drain against the MANA model (bench/mana_model.hpp) at 2, 4, 8 and
# 16 ranks, same run, then a fit of the per-round cost against log2(N) and N.
# Usage: bench/run_drain_compare.sh [build-dir] [reps]; RANKS="2 4 8 16" by default.
set -euo pipefail
build=${1:-build} reps=${2:-30}
out=$(mktemp)
for n in ${RANKS:-2 4 8 16}; do
  "$build/tools/weft-run" --timeout 300 -n "$n" "$build/bench/drain_bench" --reps "$reps" | tee -a "$out"
done
python3 - "$out" <<'PY'
import math, re, sys
rows = []
for line in open(sys.argv[1]):
    m = re.search(r"ranks (\d+).*?full ([\d.]+) us \((\d+) rounds, ([\d.]+) us/round.*?mana-model: full ([\d.]+) us \((\d+) rounds, ([\d.]+) us/round", line)
    if m:
        rows.append(tuple(float(x) for x in m.groups()))
def fit(xs, ys):  # least squares y = a + b x, and R^2
    n = len(xs); mx = sum(xs) / n; my = sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs); sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys))
    b = sxy / sxx; a = my - b * mx
    ss = sum((y - my) ** 2 for y in ys) or 1e-30
    r2 = 1 - sum((y - a - b * x) ** 2 for x, y in zip(xs, ys)) / ss
    return a, b, r2
if len(rows) >= 3:
    ns = [r[0] for r in rows]
    for name, col in (("weft us/round", 3), ("mana-model us/round", 6)):
        ys = [r[col] for r in rows]
        a, b, r2 = fit([math.log2(n) for n in ns], ys)
        a2, b2, r22 = fit(ns, ys)
        print(f"{name}: {a:.3f} + {b:.3f}*log2(N) (R^2 {r2:.3f});  {a2:.3f} + {b2:.3f}*N (R^2 {r22:.3f})")
PY
rm -f "$out"
