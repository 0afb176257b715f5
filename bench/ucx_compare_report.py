#!/usr/bin/env python3
"""ucx_compare_report.py OUT_DIR ROUNDS: the table of run_ucx_compare.sh —
weft/ucx_perftest ratios (mean and p50) per UCX row, before and after, each
round's ratio from one run_all.sh run, and their median over rounds."""
import json
import os
import statistics
import sys

out, rounds = sys.argv[1], int(sys.argv[2])
nan = float("nan")
ROWS = [("put_pingpong", "ucp_put_lat", "put (half RTT)"), ("fadd_latency", "ucp_fadd", "fetch-add"),
        ("cswap_latency", "ucp_cswap", "compare-swap"), ("am_pingpong", "ucp_am_lat", "AM (half RTT)")]


def weft(run, tls):
    try:
        with open(os.path.join(run, f"weft-ucx-{tls}.json")) as f:
            data = json.load(f)
    except (OSError, ValueError):
        return {}
    return {b["name"].split("/")[1]: b for b in data.get("benchmarks", [])}


def perftest(run):
    res = {}
    try:
        with open(os.path.join(run, "perftest.txt")) as f:
            for line in f:
                tls, test, p50, avg = line.split()
                res[(tls, test)] = (float(p50) * 1e3, float(avg) * 1e3)
    except OSError:
        pass
    return res


def ratios(side, tls, bm, test):
    means, p50s, raw = [], [], []
    for r in range(1, rounds + 1):
        run = os.path.join(out, f"{side}-{r}")
        w, p = weft(run, tls).get(bm), perftest(run).get((tls, test))
        if not w or not p:
            continue
        means.append(w["mean_ns"] / p[1])
        p50s.append(w["p50_ns"] / p[0])
        raw.append(f"{w['mean_ns']:.0f}/{p[1]:.0f}")
    med = lambda v: statistics.median(v) if v else nan
    return med(means), med(p50s), means, raw


print("| UCX_TLS | op | before mean ratio (median; rounds) | after mean ratio (median; rounds) |"
      " before p50 ratio | after p50 ratio | after weft/perftest mean ns per round |")
print("|---|---|---|---|---|---|---|")
for tls in ("shm", "tcp"):
    for bm, test, label in ROWS:
        bm_, bp, bms, _ = ratios("before", tls, bm, test)
        am, ap, ams, raw = ratios("after", tls, bm, test)
        f = lambda v: ", ".join(f"{x:.2f}" for x in v)
        print(f"| {tls} | {label} | **{bm_:.2f}** ({f(bms)}) | **{am:.2f}** ({f(ams)}) | {bp:.2f} | {ap:.2f} |"
              f" {'; '.join(raw)} |")
