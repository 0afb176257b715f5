#!/usr/bin/env python3
"""ipo_report.py OUT_DIR TLS...: the instructions-per-operation table of
run_ipo.sh, from its callgrind profiles (main thread of each process)."""
import glob
import os
import re
import subprocess
import sys

STAR = re.compile(r"^\s*([\d,]+) \([^)]*\)\s+\*\s+(.*?)(?:\s+\[[^\]]*\])?\s*$")
EDGE = re.compile(r"^\s*([\d,]+) \([^)]*\)\s+<\s+(.*?)\s+\(([\d,]+)x\)")


def num(s):
    return int(s.replace(",", ""))


def short(name):
    """file:function(args) -> function (no namespace, no args)."""
    f = name.split(":", 1)[-1] if not name.startswith("???:") else name[4:]
    f = re.sub(r"\(anonymous namespace\)::", "", f).split("(")[0]
    return f.split("::")[-1]


def profile(path):
    """{function: [Ir of all calls to it, {caller: [calls, Ir]}]} of one
    callgrind file. The cost of a call is the caller's edge cost (everything
    executed between the call and its return): callgrind splits one function
    into pieces by the file of its inlined code, an edge never."""
    out = subprocess.run(["callgrind_annotate", "--inclusive=yes", "--tree=caller", "--threshold=100", path],
                         capture_output=True, text=True).stdout
    fns = {}
    for block in out.split("\n\n"):
        edges, star = [], None
        for line in block.split("\n"):
            m = STAR.match(line)
            if m:
                star = short(m.group(2))
                continue
            e = EDGE.match(line)
            if e:
                edges.append((short(e.group(2)), num(e.group(1)), num(e.group(3))))
        if star:
            entry = fns.setdefault(star, [0, {}])
            for caller, cost, n in edges:
                entry[0] += cost
                c = entry[1].setdefault(caller, [0, 0])
                c[0] += n
                c[1] += cost
    return fns


def main_thread(prefix):
    files = sorted(glob.glob(prefix + "-01")) or sorted(glob.glob(prefix))
    return profile(files[0]) if files else None


def calls(p, fn, only_from=None):
    if not p or fn not in p:
        return 0
    return sum(v[0] for c, v in p[fn][1].items() if only_from is None or c in only_from)


def ucx_under(p, callers):
    """Ir of every call into UCX (ucp_*, uct_*, ucs_*) made by `callers`."""
    return sum(v[1] for fn, (_, cs) in p.items() if fn.startswith(("ucp_", "uct_", "ucs_"))
               for c, v in cs.items() if c in callers)


def per_call(p, fn):
    n = calls(p, fn)
    return p[fn][0] / n if n else float("nan")


# benchmark -> (weft entry, the ucp call under it, perftest test)
OPS = [
    ("put_pingpong", "weft_put", "ucp_put_nbx", "ucp_put_lat", "put"),
    ("get_latency", "weft_get", "ucp_get_nbx", "ucp_get", "get"),
    ("fadd_latency", "weft_atomic_fetch_add", "ucp_atomic_op_nbx", "ucp_fadd", "fetch-add"),
    ("cswap_latency", "weft_atomic_compare_swap", "ucp_atomic_op_nbx", "ucp_cswap", "compare-swap"),
    ("am_pingpong", "weft_am_send", "ucp_am_send_nbx", "ucp_am_lat", "AM send"),
]
WAITERS = {"complete", "wait_long"}  # weft's waits for a request
# weft's functions that call UCX during an operation (the table entries, with
# the backend's put/get/atomic inlined, and the waits).
OP_CALLERS = {"ucx_put", "ucx_get", "ucx_fetch_add", "ucx_compare_swap", "ucx_swap", "put", "get", "atomic",
              "am_send"} | WAITERS


def fmt(x):
    return "—" if x != x else f"{x:.0f}"


def main():
    out, lanes = sys.argv[1], sys.argv[2:]
    print("| lane | op | weft Ir/op | UCX inside (call + polls) | polls inside/op | weft's own Ir/op |"
          " perftest ucp call Ir/op | perftest polls/op | weft_progress Ir/poll | ucp_worker_progress Ir/poll |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for lane in ["shm-backend"] + list(lanes):
        for bm, entry, ucp, ptest, label in OPS:
            if lane == "shm-backend":
                w = main_thread(os.path.join(out, f"cg.weft-shm-{bm}"))
                pt = None
            else:
                w = main_thread(os.path.join(out, f"cg.weft-ucx-{lane}-{bm}"))
                pt = main_thread(os.path.join(out, f"cg.perftest-{lane}-{ptest}"))
            if not w or entry not in w:
                continue
            n = calls(w, entry)
            ir = per_call(w, entry)
            inner_polls = calls(w, "ucp_worker_progress", WAITERS) / n if lane != "shm-backend" else 0.0
            ucx_in = ucx_under(w, OP_CALLERS) / n if lane != "shm-backend" else float("nan")
            own = ir - ucx_in if lane != "shm-backend" else ir
            prog = per_call(w, "weft_progress") if "weft_progress" in w else float("nan")
            p_call = per_call(pt, ucp) if pt and ucp in pt else float("nan")
            p_polls = calls(pt, "ucp_worker_progress") / calls(pt, ucp) if pt and calls(pt, ucp) else float("nan")
            p_poll = per_call(pt, "ucp_worker_progress") if pt and "ucp_worker_progress" in pt else float("nan")
            name = "weft shm backend" if lane == "shm-backend" else f"ucx UCX_TLS={lane}"
            print(f"| {name} | {label} | {fmt(ir)} | {fmt(ucx_in)} | {inner_polls:.1f} | {fmt(own)} | {fmt(p_call)} |"
                  f" {p_polls:.1f} | {fmt(prog)} | {fmt(p_poll)} |")


main()
