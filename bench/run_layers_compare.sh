#!/usr/bin/env bash
# run_layers_compare.sh BASE_BUILD NEW_BUILD [ROUNDS] — the same hot paths
# from two builds of weft (e.g. before and after a refactor), alternating
# in one run, ROUNDS times (default 3): fetch-add, put and AM over shm and
# ucx (UCX_TLS=shm), the 8-byte allreduce at 2 ranks over shm, and the
# drain (full drain and one round, 4 ranks). Prints a markdown table of the
# medians over rounds and the ratio NEW/BASE (below 1: NEW is faster), with
# `uptime` before and after. Every step is bounded by `timeout`.
set -u -o pipefail
base=$(cd "${1:?usage: run_layers_compare.sh BASE_BUILD NEW_BUILD [ROUNDS]}" && pwd)
new=$(cd "${2:?usage: run_layers_compare.sh BASE_BUILD NEW_BUILD [ROUNDS]}" && pwd)
rounds=${3:-3}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
echo "uptime before: $(uptime)"

run_one() {  # run_one LABEL BUILD ROUND
    local label=$1 b=$2 r=$3
    local filter='/(fadd_latency|put_pingpong|am_pingpong)/'
    timeout 600 "$b/tools/weft-run" --transport shm --timeout 550 -n 2 "$b/bench/weft_bench" \
        --benchmark_filter="shm$filter" --benchmark_min_time=0.3 \
        --benchmark_out="$out/$label-$r-shm.json" --benchmark_out_format=json >/dev/null 2>&1 ||
        echo "  $label round $r: weft_bench shm failed" >&2
    UCX_TLS=shm timeout 600 "$b/tools/weft-run" --transport ucx --timeout 550 -n 2 "$b/bench/weft_bench" \
        --benchmark_filter="ucx$filter" --benchmark_min_time=0.3 \
        --benchmark_out="$out/$label-$r-ucx.json" --benchmark_out_format=json >/dev/null 2>&1 ||
        echo "  $label round $r: weft_bench ucx failed" >&2
    timeout 600 "$b/tools/weft-run" --transport shm --timeout 550 -n 2 "$b/bench/comm_bench" \
        --benchmark_filter='^allreduce/8/' --benchmark_min_time=0.3 \
        --benchmark_out="$out/$label-$r-coll.json" --benchmark_out_format=json >/dev/null 2>&1 ||
        echo "  $label round $r: comm_bench failed" >&2
    timeout 600 "$b/tools/weft-run" --transport shm --timeout 550 -n 4 "$b/bench/drain_bench" --reps 15 \
        >"$out/$label-$r-drain.txt" 2>&1 || echo "  $label round $r: drain_bench failed" >&2
}

for ((r = 1; r <= rounds; r++)); do
    echo "round $r of $rounds" >&2
    run_one base "$base" "$r"
    run_one new "$new" "$r"
done
echo "uptime after: $(uptime)"

python3 - "$out" "$rounds" "$base" "$new" <<'PY'
import json, re, statistics, sys, glob, os
out, rounds, base, new = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
def gbench(label, r, lane):
    p = f"{out}/{label}-{r}-{lane}.json"
    vals = {}
    if not os.path.exists(p): return vals
    try: data = json.load(open(p))
    except Exception: return vals
    for b in data.get("benchmarks", []):
        name = b["name"].split("/real_time")[0].split("/manual_time")[0]
        unit = {"ns": 1, "us": 1e3, "ms": 1e6}.get(b.get("time_unit", "ns"), 1)
        if "p50_ns" in b: vals[name + " p50"] = b["p50_ns"]
        vals[name + (" mean" if "p50_ns" in b else "")] = b.get("mean_ns", b["real_time"] * unit)
    return vals
def drain(label, r):
    p = f"{out}/{label}-{r}-drain.txt"
    if not os.path.exists(p): return {}
    m = re.search(r"weft: full ([\d.]+) us \(([\d.]+) rounds, ([\d.]+) us/round", open(p).read())
    return {"drain full (4 ranks)": float(m.group(1)) * 1e3, "drain round (4 ranks)": float(m.group(3)) * 1e3} if m else {}
rows = {}
for label in ("base", "new"):
    for r in range(1, rounds + 1):
        vals = {}
        for lane in ("shm", "ucx", "coll"): vals.update(gbench(label, r, lane))
        vals.update(drain(label, r))
        for k, v in vals.items(): rows.setdefault(k, {}).setdefault(label, []).append(v)
print(f"\nbase: {base}\nnew:  {new}\nmedian over {rounds} rounds (ns per operation; p50 and mean where the benchmark reports both)\n")
print("| benchmark | base ns | new ns | new/base |")
print("|---|---|---|---|")
for k in sorted(rows):
    b, n = rows[k].get("base", []), rows[k].get("new", [])
    if not b or not n: print(f"| {k} | {'n/a' if not b else round(statistics.median(b))} | {'n/a' if not n else round(statistics.median(n))} | n/a |"); continue
    mb, mn = statistics.median(b), statistics.median(n)
    print(f"| {k} | {mb:.0f} | {mn:.0f} | {mn / mb:.2f} |")
PY
