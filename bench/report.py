#!/usr/bin/env python3
"""report.py OUT_DIR — the markdown table run_all.sh prints.

Reads the Google Benchmark JSON files, perftest.txt and the oversubscribed
logs that run_all.sh left in OUT_DIR. Every number is in nanoseconds. Both
the median (p50) and the mean are shown: on a shared machine the mean carries
the scheduler's 4 ms hiccups, the median mostly does not.
"""
import json
import math
import os
import re
import sys

out = sys.argv[1]
nan = float("nan")


def load(name):
    path = os.path.join(out, name + ".json")
    try:
        with open(path) as f:
            data = json.load(f)
    except (OSError, ValueError):
        return None
    res = {}
    for b in data.get("benchmarks", []):
        key = b["name"].replace("/manual_time", "").replace("/real_time", "")
        scale = {"ns": 1, "us": 1e3, "ms": 1e6, "s": 1e9}[b.get("time_unit", "ns")]
        # mean_ns is in the benchmark's reported unit (half round trips for
        # the perftest-style ones); real_time is always per iteration.
        res[key] = {"mean": b.get("mean_ns", b["real_time"] * scale), "p50": b.get("p50_ns", nan),
                    "p99": b.get("p99_ns", nan), "label": b.get("label", "")}
    return res


def skipped(name):
    try:
        with open(os.path.join(out, name + ".log")) as f:
            return "SKIP:" in f.read()
    except OSError:
        return False


floor = load("floor") or {}
shm = load("weft-shm") or {}
ucx = {"shm": load("weft-ucx-shm") or {}, "tcp": load("weft-ucx-tcp") or {}}
perf = {}
try:
    with open(os.path.join(out, "perftest.txt")) as f:
        for line in f:
            tls, test, p50, avg = line.split()
            perf[(tls, test)] = {"p50": float(p50) * 1e3, "mean": float(avg) * 1e3}
except OSError:
    pass


def get(d, key, stat):
    return d.get(key, {}).get(stat, nan)


def fmt(x):
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.0f}"


def ratio(a, b):
    if any(isinstance(v, float) and math.isnan(v) for v in (a, b)) or not b:
        return "n/a"
    return f"{a / b:.2f}"


def verdict(r, goal):
    try:
        return "meets" if float(r) <= goal else "**misses**"
    except ValueError:
        return "n/a"


clock = get(floor, "BM_clock_overhead", "p50")
print("## Raw numbers (ns; p50 / mean / p99)\n")
print("| what | p50 | mean | p99 | round trip |")
print("|---|---|---|---|---|")
rows = [
    ("empty timed iteration (clock cost inside every p50/p99 sample)", floor, "BM_clock_overhead", "—"),
    ("floor: fetch-add ping-pong, one cache line", floor, "BM_floor/fadd_one_line", "full"),
    ("floor: fetch-add ping-pong, two lines (weft's pattern)", floor, "BM_floor/fadd_two_lines", "full"),
    ("floor: store ping-pong, one line", floor, "BM_floor/store_one_line", "full"),
]
for src, d in (("shm", shm), ("ucx UCX_TLS=shm", ucx["shm"]), ("ucx UCX_TLS=tcp", ucx["tcp"])):
    p = "shm" if src == "shm" else "ucx"
    rows += [
        (f"weft {src}: fetch-add ping-pong", d, f"{p}/fadd_pingpong", "full"),
        (f"weft {src}: fetch-add ping-pong, one word", d, f"{p}/fadd_pingpong_one_line", "full"),
        (f"weft {src}: one blocking fetch-add", d, f"{p}/fadd_latency", "full (op latency)"),
        (f"weft {src}: one blocking compare-swap", d, f"{p}/cswap_latency", "full (op latency)"),
        (f"weft {src}: put ping-pong", d, f"{p}/put_pingpong", "half"),
        (f"weft {src}: AM ping-pong", d, f"{p}/am_pingpong", "half"),
    ]
for label, d, key, rt in rows:
    if key not in d:
        print(f"| {label} | n/a | n/a | n/a | {rt} |")
        continue
    print(f"| {label} | {fmt(get(d, key, 'p50'))} | {fmt(get(d, key, 'mean'))} | {fmt(get(d, key, 'p99'))} | {rt} |")
for tls in ("shm", "tcp"):
    for test, rt in (("ucp_put_lat", "half"), ("ucp_fadd", "full (op latency)"),
                     ("ucp_cswap", "full (op latency)"), ("ucp_am_lat", "half")):
        v = perf.get((tls, test), {})
        print(f"| ucx_perftest UCX_TLS={tls} {test} | {fmt(v.get('p50', nan))} | {fmt(v.get('mean', nan))} | — | {rt} |")

print("\n## Ratios\n")
print("Means come from two clock reads around each whole loop. p50/p99 come from 1 iteration in 16"
      f" timed alone, which adds the cost of the clock reads (an empty timed iteration: p50 {fmt(clock)} ns"
      " here) to every sample; ucx_perftest times with the TSC directly and pays less. The `-clock` column"
      " subtracts that cost from the weft side (from both sides for weft/floor) for p50 rows only. In a"
      " sub-microsecond ping-pong a timed iteration costs more than that (the ordered TSC read delays the"
      " next handshake: ~+100 ns on the floor's p50 vs its mean), so for those rows the **mean** is the"
      " number to trust.\n")
print("| ratio | stat | raw | -clock | goal | verdict |")
print("|---|---|---|---|---|---|")


def line(name, a, b, goal, stat, sub_both):
    raw = ratio(a, b)
    if stat == "mean":
        adj = raw  # means carry no per-sample clock cost
    else:
        adj = ratio(a - clock, (b - clock) if sub_both else b)
    print(f"| {name} | {stat} | {raw} | {adj} | ≤ {goal} | {verdict(raw, goal)} (raw), {verdict(adj, goal)} (-clock) |")


for stat in ("p50", "mean"):
    line("weft shm fetch-add round trip / floor (one line)", get(shm, "shm/fadd_pingpong", stat),
         get(floor, "BM_floor/fadd_one_line", stat), 1.5, stat, True)
    line("weft shm fetch-add round trip on one word / floor (one line, same pattern)",
         get(shm, "shm/fadd_pingpong_one_line", stat), get(floor, "BM_floor/fadd_one_line", stat), 1.5, stat, True)
    line("weft shm fetch-add round trip / floor (two lines, same pattern)", get(shm, "shm/fadd_pingpong", stat),
         get(floor, "BM_floor/fadd_two_lines", stat), 1.5, stat, True)
for tls in ("shm", "tcp"):
    d = ucx[tls]
    if not d:
        why = "skipped: ucx unsupported" if skipped(f"weft-ucx-{tls}") else "no data"
        print(f"| weft ucx UCX_TLS={tls} vs ucx_perftest | — | n/a | n/a | ≤ 1.2 | {why} |")
        continue
    for stat in ("p50", "mean"):
        line(f"UCX_TLS={tls}: weft put half-RTT / perftest ucp_put_lat (half)", get(d, "ucx/put_pingpong", stat),
             perf.get((tls, "ucp_put_lat"), {}).get(stat, nan), 1.2, stat, False)
        line(f"UCX_TLS={tls}: weft blocking fetch-add / perftest ucp_fadd (both one op, full)",
             get(d, "ucx/fadd_latency", stat), perf.get((tls, "ucp_fadd"), {}).get(stat, nan), 1.2, stat, False)
        line(f"UCX_TLS={tls}: weft compare-swap / perftest ucp_cswap (full)", get(d, "ucx/cswap_latency", stat),
             perf.get((tls, "ucp_cswap"), {}).get(stat, nan), 1.2, stat, False)
        line(f"UCX_TLS={tls}: weft AM half-RTT / perftest ucp_am_lat (half)", get(d, "ucx/am_pingpong", stat),
             perf.get((tls, "ucp_am_lat"), {}).get(stat, nan), 1.2, stat, False)

print("\n## 16 ranks, one word of rank 0 (oversubscribed)\n")
print("| lane | result |")
print("|---|---|")
for lane in ("oversub-shm", "oversub-ucx-shm", "oversub-ucx-tcp"):
    try:
        with open(os.path.join(out, lane + ".log")) as f:
            text = f.read()
    except OSError:
        text = ""
    m = re.search(r"^OVERSUB .*$", text, re.M)
    if m:
        print(f"| {lane} | `{m.group(0)[8:]}` |")
    elif "SKIP:" in text:
        print(f"| {lane} | skipped: transport unsupported |")
    else:
        print(f"| {lane} | **FAILED** (see {lane}.log) |")

print("\n## Commands\n\n```")
with open(os.path.join(out, "commands.txt")) as f:
    print(f.read().rstrip())
print("```")
