#!/usr/bin/env python3
"""coll_report.py OUT_DIR — the tables run_mpi_compare.sh prints.

Reads OUT_DIR/results.txt (coll_bench.h's RESULT lines, each tagged with
round=N) and OUT_DIR/machine.txt. With several rounds every number is the
median over the rounds. Ratios are weft's time over the other library's time
(for the 1 MiB allreduce, its GB/s over weft's: the same thing), so <= 1 means
weft is at or below the other on that row.
"""
import collections
import math
import os
import statistics
import sys

out = sys.argv[1]
nan = float("nan")
WEFT = "weft-shm"
PEERS = ["openmpi", "mpich"]
EXTRA = ["weft-ucx-shm", "openmpi-yield"]
BASE = "weft-shm-base"  # run_mpi_compare.sh BASE_BUILD: the same program on another weft build
TESTS = [("pingpong8_half", "8-B ping-pong, half round trip"), ("barrier", "barrier"),
         ("allreduce8_u64", "8-B allreduce, uint64 sum"), ("allreduce8_f64", "8-B allreduce, double sum"),
         ("allreduce_1MiB", "1 MiB allreduce (double sum)"), ("bcast8", "8-B bcast"),
         ("bcast_64KiB", "64 KiB bcast"), ("bcast_1MiB", "1 MiB bcast"), ("allgather8", "allgather, 8 B per rank"),
         ("allgather_64KiB", "64 KiB allgather (in all)"), ("allgather_1MiB", "1 MiB allgather (in all)")]
BW = {"allreduce_1MiB", "bcast_1MiB", "allgather_1MiB"}

# (impl, test, ranks, stat) -> [value per round]; (impl, test, ranks) -> [iters]
values = collections.defaultdict(list)
iters = collections.defaultdict(list)
try:
    with open(os.path.join(out, "results.txt")) as f:
        for line in f:
            kv = dict(p.split("=", 1) for p in line.split()[1:] if "=" in p)
            key = (kv["impl"], kv["test"], int(kv["ranks"]))
            values[key + (kv["stat"],)].append(float(kv["value"]))
            if kv["stat"] == "mean":
                iters[key].append(int(kv["iters"]))
except OSError:
    pass

impls = [WEFT] + PEERS + EXTRA
ranks = sorted({k[2] for k in values})


def get(impl, test, n, stat):
    v = values.get((impl, test, n, stat))
    return statistics.median(v) if v else nan


def time_of(impl, test, n):
    """The row's number: mean ns for latency rows, GB/s for the bandwidth row."""
    return get(impl, test, n, "bw" if test in BW else "mean")


def fmt(x, test=None):
    if math.isnan(x):
        return "n/a"
    if test in BW:
        return f"{x:.2f} GB/s"
    if x >= 1e6:
        return f"{x / 1e6:.2f} ms"
    if x >= 1e4:
        return f"{x / 1e3:.1f} µs"
    return f"{x:.0f} ns"


def ratio(test, w, o):
    if math.isnan(w) or math.isnan(o) or not w or not o:
        return nan
    return o / w if test in BW else w / o


def fmt_ratio(r):
    return "n/a" if math.isnan(r) else f"{r:.2f}"


def capped(impl, test, n):
    """' (k it.)' when the time budget cut the iteration count."""
    got = iters.get((impl, test, n))
    if not got:
        return ""
    most = max(v for (i, t, m), vs in iters.items() if t == test for v in vs)
    return f" ({min(got)} it.)" if min(got) < most else ""


try:
    with open(os.path.join(out, "machine.txt")) as f:
        print("```\n" + f.read().strip() + "\n```\n")
except OSError:
    pass

print("Latency rows: mean per operation (clock read around the whole loop / iterations), averaged over the")
print("ranks; the ping-pong row is rank 0's half round trip. Bandwidth row: 2^20 bytes / mean time.")
print("Ratio = weft-shm's time / the other's time: <= 1 means weft is at or below it. `(k it.)`: the")
print("per-test time budget cut the iterations to k.\n")
print("| test | ranks | weft-shm | Open MPI | MPICH | weft/OMPI | weft/MPICH | weft ucx+shm | OMPI yield |")
print("|---|---|---|---|---|---|---|---|---|")
slower = []
for test, label in TESTS:
    for n in ranks:
        w = time_of(WEFT, test, n)
        cells = [fmt(time_of(i, test, n), test) + capped(i, test, n) for i in impls]
        rs = [ratio(test, w, time_of(p, test, n)) for p in PEERS]
        for p, r in zip(PEERS, rs):
            if not math.isnan(r) and r > 1:
                slower.append(f"{label}, {n} ranks: weft {r:.2f}x {p}")
        print(f"| {label} | {n} | {cells[0]} | {cells[1]} | {cells[2]} | {fmt_ratio(rs[0])} | "
              f"{fmt_ratio(rs[1])} | {cells[3]} | {cells[4]} |")

print("\nMedian and tail (ns; 1 iteration in 16 timed on its own, every one for 1 MiB; the largest over the")
print("ranks; each sample carries one clock read): p50 / p99\n")
print("| test | ranks | " + " | ".join(impls) + " | p50 weft/OMPI | p50 weft/MPICH |")
print("|---|---|" + "---|" * (len(impls) + 2))
for test, label in TESTS:
    for n in ranks:
        cells = []
        for i in impls:
            p50, p99 = get(i, test, n, "p50"), get(i, test, n, "p99")
            cells.append("n/a" if math.isnan(p50) else f"{fmt(p50)} / {fmt(p99)}")
        w = get(WEFT, test, n, "p50")
        cells += [fmt_ratio(ratio("", w, get(p, test, n, "p50"))) for p in PEERS]
        print(f"| {label} | {n} | " + " | ".join(cells) + " |")

print("\nRows where weft-shm is slower than a peer (by mean):" + ("" if slower else " none"))
for s in slower:
    print(f"- {s}")

# The memory-copy bound (stream_copy.c, as many copying processes as ranks):
# an allreduce of 1 MiB reads its input and writes its output at least once,
# so one 1 MiB copy is a lower bound on its time.
if any(k[0] == "stream" for k in values):
    print("\nMemory-copy bound (bench/stream_copy.c, one copy per rank at once, median pass) against the 1 MiB")
    print("rows: time / the copy's time (the goal for allreduce: within 1.5x of the bound)\n")
    print("| ranks | copy 1 MiB (cached) | copy 64 MiB (DRAM) | test | weft-shm | x cached | x DRAM | Open MPI | x cached |"
          " x DRAM |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for n in ranks:
        c1, c64 = get("stream", "copy_1MiB", n, "bw"), get("stream", "copy_64MiB", n, "bw")
        for test in sorted(BW):
            cells = []
            for impl in (WEFT, "openmpi"):
                b = time_of(impl, test, n)
                cells += [fmt(b, test), fmt_ratio(c1 / b if b == b and b else nan),
                          fmt_ratio(c64 / b if b == b and b else nan)]
            print(f"| {n} | {c1:.2f} GB/s | {c64:.2f} GB/s | {test} | " + " | ".join(cells) + " |")

# Old against new (BASE_BUILD): the same program on two weft builds, run one
# right after the other for every rank count.
if any(k[0] == BASE for k in values):
    print("\nweft-shm against weft-shm-base (BASE_BUILD), mean and p50: new / old (<= 1: the change is faster)\n")
    print("| test | ranks | old mean | new mean | new/old | old p50 | new p50 | new/old p50 |")
    print("|---|---|---|---|---|---|---|---|")
    for test, label in TESTS:
        for n in ranks:
            o, w = get(BASE, test, n, "mean"), get(WEFT, test, n, "mean")
            op50, wp50 = get(BASE, test, n, "p50"), get(WEFT, test, n, "p50")
            if math.isnan(o) and math.isnan(w):
                continue
            print(f"| {label} | {n} | {fmt(o)} | {fmt(w)} | {fmt_ratio(ratio('', w, o))} | {fmt(op50)} | "
                  f"{fmt(wp50)} | {fmt_ratio(ratio('', wp50, op50))} |")
