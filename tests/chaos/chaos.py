#!/usr/bin/env python3
"""chaos.py — weft's seeded chaos test (tests/chaos/README.md).

Runs many short jobs of chaos_rank under weft-run. Run i uses seed S+i, and
everything about it derives from that seed: the lane (shm, UCX over shm, UCX
over tcp), the number of ranks (3-8), the number of rounds, the fault
weft-run injects (kill or stop, at a fault point or a time) and, inside the
ranks, every operation. After each job it checks the invariants on the
ranks' logs:

  bounded     no job hangs past its bound (weft-run --timeout), no weft wait
              ends in WEFT_ERR_TIMEOUT, every drain ends within its bound
  delivery    a receive's data and status are what the sender sent; a
              synchronous or rendezvous send that reported success was
              received by a survivor that posted its receive
  result      collectives and agreements equal the serial reference
  agreement   survivors agree on failed sets (validate_global) and shrunk
              memberships (allgather on the new communicator, and the logs)
  counters    at each drain's quiescent point, messages sent = received over
              the job, and buffered messages add up to the job-wide figure
  finish      every rank that was not a victim finishes and finalizes

A failure prints the seed, the invariant and a one-line command to rerun
that seed alone. The last line is "N passed, N failed".
"""
import argparse
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

M64 = (1 << 64) - 1


def mix(x):
    x = (x + 0x9E3779B97F4A7C15) & M64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & M64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & M64
    return x ^ (x >> 31)


class Rng:
    """splitmix64: the same numbers on every Python (random's may change)."""

    def __init__(self, seed):
        self.s = mix(seed ^ 0xC4A05)

    def next(self):
        self.s = mix(self.s)
        return self.s

    def below(self, n):
        return self.next() % n if n else 0

    def uniform(self, lo, hi):
        return lo + (hi - lo) * (self.next() >> 11) / float(1 << 53)

    def pick(self, seq):
        return seq[self.below(len(seq))]


LANES = {
    "shm": ("shm", None),
    "ucx-shm": ("ucx", "shm"),
    "ucx-tcp": ("ucx", "tcp"),
}

# The chaos program's own points (chaos_rank.cpp): before every step, before
# each round's agreement, inside a recovery (after validate_global, before
# shrink), right after a drain request.
CHAOS_POINTS = ["chaos.step", "chaos.round_end", "chaos.recovery", "chaos.drain"]


def weft_points(source):
    """weft's own fault points, found in its sources (verbs-only ones left out)."""
    pts = set()
    if source:
        for sub in ("transport", "group", "drain", "ckpt"):
            root = os.path.join(source, sub)
            for dirpath, _, files in os.walk(root):
                if "verbs" in dirpath:
                    continue
                for f in files:
                    if f.endswith((".cpp", ".hpp", ".c", ".h")):
                        with open(os.path.join(dirpath, f), errors="replace") as fh:
                            pts.update(re.findall(r'WEFT_FAULT_POINT\("([^"]+)"\)', fh.read()))
    pts.discard("transport.verbs.connecting")
    # Points for mp tests' delays (mp.ft.split_*, mp.ft.create_death): left
    # out so that the seeds' plans stay as they were.
    pts.discard("group.split.contributed")
    pts.discard("group.create.slot_exchange")
    return sorted(pts) or ["ft.agree.enter", "ft.agree.commit", "ft.agree.propose_partial",
                           "ft.agree.commit_partial", "transport.init.done", "transport.init.exchanged"]


def plan(seed, lanes, points):
    """Everything weft-run is told for run `seed`."""
    r = Rng(seed)
    lane = r.pick(lanes)
    n = 3 + r.below(6)
    rounds = 6 + r.below(9)
    fault = None
    kind = "none"
    x = r.below(100)
    victim = r.below(n)
    if x < 15:
        pass
    elif x < 65:
        action = "kill" if r.below(100) < 60 else "stop"
        pt = r.pick(CHAOS_POINTS + CHAOS_POINTS + points)
        if pt == "chaos.step":
            count = 1 + r.below(rounds * 4)
        elif pt.startswith("ft.agree"):
            count = 1 + r.below(rounds + 2)
            if "partial" in pt or pt == "ft.agree.commit":
                # Only a coordinator reaches these: usually the lowest rank.
                victim = 0 if r.below(100) < 70 else victim
        elif pt.startswith("transport.init"):
            count = 1
        else:
            count = 1 + r.below(2)
        fault = "%s:rank=%d:at=%s:count=%d" % (action, victim, pt, count)
        kind = action
    else:
        # Jobs take 0.1-1 s when nothing hangs (start-up included).
        after = round(r.uniform(0.03, 0.6), 2)
        if r.below(100) < 50:
            fault = "kill:rank=%d:after=%s" % (victim, after)
            kind = "kill"
        else:
            # Short stops are not declared (below WEFT_FT_TIMEOUT_MS): the
            # rank comes back and the job goes on whole. Long ones are
            # declared and fenced (the survivors SIGKILL it).
            dur = round(r.uniform(0.1, 0.5) if r.below(100) < 40 else r.uniform(1.8, 4.0), 2)
            fault = "stop:rank=%d:after=%s:for=%s" % (victim, after, dur)
            kind = "stop"
    # Drain steps in 60% of the jobs: a drain that cannot end holds a job
    # to its bound and hides what the rest of its plan would find.
    drains = r.below(100) < 60
    return {"seed": seed, "lane": lane, "n": n, "rounds": rounds, "fault": fault, "kind": kind,
            "victim": victim if fault else None, "drains": drains}


LINE = re.compile(r"^(\w) (.*)$")


def parse_logs(d, n):
    logs = {}
    for rank in range(n):
        path = os.path.join(d, "rank.%d.log" % rank)
        entries = []
        if os.path.exists(path):
            with open(path, errors="replace") as fh:
                for line in fh:
                    m = LINE.match(line.rstrip("\n"))
                    if not m:
                        continue
                    kv = {}
                    for tok in m.group(2).split(" "):
                        if "=" in tok:
                            k, v = tok.split("=", 1)
                            kv[k] = v
                    entries.append((m.group(1), kv, line.rstrip("\n")))
        logs[rank] = entries
    return logs


# Liveness, not safety: a wait that ended at its deadline (a call returned
# TIMEOUT, a recovery or drain that timed out, a job held to its bound).
# With --liveness-known such a job is reported as stalled and does not fail
# the run (known open: a creation the parent's revoke interrupted exists at
# some members only, and a member left waiting in it makes the others'
# agreements time out — see the README); every safety invariant (delivery,
# result, agreement, membership, counters, a crash) still fails it.
def liveness(inv, detail):
    if inv in ("bounded", "drain-bound", "recovery"):
        return True
    return inv in ("status", "finish") and ("TIMEOUT" in detail or "exited with 124" in detail)


# Known open, outside weft: UCX 1.13 crashes (SIGSEGV in uct_rkey_release,
# from ucp_ep_rkey_unpack's error path) when a same-host peer dies while a
# window's keys are unpacked at start-up: its sysv segment is gone, shmat
# fails, and UCX frees a key it never made. weft_init would have failed
# there anyway (a member died); the crash is UCX's.
# Likewise UCX 1.13's tcp transport asserts (tcp_ep.c:478,
# UCT_TCP_EP_FLAG_CTX_TYPE_TX) when a connection to a peer killed at
# start-up is refused while it is being wired up.
def ucx_unpack_crash(inv, detail, out_text):
    crashed = inv == "finish" and any(x in detail for x in ("Segmentation fault", "Aborted", "exited with 139",
                                                            "exited with 134"))
    return crashed and (("ucp_ep_rkey_unpack" in out_text and "shmat" in out_text) or
                        ("tcp_ep.c" in out_text and "UCT_TCP_EP_FLAG_CTX_TYPE_TX" in out_text))


# A rank that hit drain-bound leaves at once (chaos_rank exits 4): its
# "did not finish" follows from the stall; so does that of a rank UCX crashed.
def after_stall(inv, detail, fails, out_text=""):
    if inv != "finish" or not ("did not finish" in detail or "exited with 4" in detail):
        return False
    return any(i == "drain-bound" or ucx_unpack_crash(i, d, out_text) for i, d in fails)


# A death during start-up fails weft_init on the other ranks (documented);
# how a survivor then leaves — returning the error, or dying in UCX 1.13's
# wire-up or cleanup paths — is reported as a known open stall, never a pass.
def startup_death(inv, detail, init_failed_ranks):
    return inv == "finish" and init_failed_ranks > 0


def check(p, rc, d, out_text, job_timeout):
    """The invariants of one job: a list of (invariant, detail)."""
    n = p["n"]
    fails = []
    logs = parse_logs(d, n)
    init_failed = [f for f in os.listdir(d) if f.startswith("init.")]
    # A stop at a start-up point with no resume: the victim stays stopped
    # for good, and before init is done nobody fences it (its peers fail
    # weft_init and exit, as documented), so weft-run waits for it until its
    # --timeout. That is the launcher's bound doing its job, not a hang, when
    # every other rank failed init.
    stuck_in_init = bool(p["fault"]) and p["fault"].startswith("stop:") and ":at=transport.init." in p["fault"] \
        and ":for=" not in p["fault"] and len(init_failed) >= n - 1
    if rc == 124 and not stuck_in_init:
        last = []
        for rank in range(n):
            if logs[rank] and logs[rank][-1][0] not in ("Z",):
                last.append("rank %d: %s" % (rank, logs[rank][-1][2][:120]))
        fails.append(("bounded", "the job hung: weft-run --timeout %ds killed it; last lines: %s"
                      % (job_timeout, " | ".join(last[:8]))))
    elif rc != 0 and not stuck_in_init:
        fails.append(("finish", "weft-run exited with %d: %s" % (
            rc, " / ".join(l for l in out_text.splitlines() if "weft-run:" in l)[:400])))
    for l in out_text.splitlines():
        m = re.match(r"weft-run: job \d+ rank (\d+) \(pid \d+\) killed by signal (\d+) \((.*)\)", l)
        if m and m.group(2) != "9":
            fails.append(("finish", "rank %s killed by signal %s (%s)" % m.groups()))
    for rank in range(n):
        for t, kv, line in logs[rank]:
            if t == "V":
                fails.append((kv.get("inv", "?"), line[2:]))
            elif t == "W" and not p["fault"]:
                fails.append(("drain", "a drain ended with %s in a job without a fault: %s" % (kv.get("ended"), line[2:])))
    # A rank that dies during start-up makes its peers fail weft_init (as
    # documented); a stop short of the failure timeout must not.
    short_stop = bool(p["fault"]) and re.search(r":for=([0-9.]+)", p["fault"]) is not None and \
        float(re.search(r":for=([0-9.]+)", p["fault"]).group(1)) < 1.0
    if init_failed and (not p["fault"] or short_stop) and rc != 124:
        fails.append(("finish", "weft_init failed on %d rank(s) %s" % (
            len(init_failed), "after a short stop of rank %d" % p["victim"] if short_stop else "with no fault")))
    victim = p["victim"]
    finished = set()
    for rank in range(n):
        if any(t == "Z" for t, _, _ in logs[rank]):
            finished.add(rank)
    if rc != 124 and not init_failed:
        for rank in range(n):
            if rank != victim and rank not in finished:
                fails.append(("finish", "rank %d (not a victim) did not finish" % rank))
    # Survivors agree on recoveries (failed set, membership) and on G.
    rec = {}
    for rank in range(n):
        for t, kv, _ in logs[rank]:
            if t == "R":
                rec.setdefault(kv["epoch"], {})[rank] = (int(kv["failed"], 16), int(kv["members"], 16))
            if t == "G" and kv.get("op") == "validate_global":
                rec.setdefault("G" + kv["e"] + "." + kv["r"], {})[rank] = (int(kv["failed"], 16), None)
    for epoch, views in sorted(rec.items()):
        if len(set(views.values())) > 1:
            fails.append(("agreement", "epoch %s: survivors' views differ: %s" % (
                epoch, ", ".join("rank %d failed=%#x members=%s" % (r, f, "%#x" % m if m is not None else "-")
                                 for r, (f, m) in sorted(views.items())))))
        for r, (f, m) in views.items():
            if f & (1 << r):
                fails.append(("agreement", "epoch %s: rank %d is in its own failed set" % (epoch, r)))
            both = {q for q in finished if f & (1 << q)}
            if both and rc != 124:
                fails.append(("agreement", "epoch %s: rank(s) %s in the failed set finished the job (not fenced)"
                              % (epoch, sorted(both))))
                break
    # A synchronous send, or a rendezvous send outside a drain's round, that
    # reported success: its receiver, if it got past that round, received it.
    # Over UCX with tcp weft has no zero-copy rendezvous (UcxBackend::expose:
    # peer error handling), so a large send goes as one UCX active message
    # into the receiver's buffer and completes once it is there, as MPI's
    # standard mode allows; a revoke then discards it at the receiver
    # (ULFM's rule). There it is checked as an eager send: not at all.
    zero_copy = p["lane"] != "ucx-tcp"
    drain_rounds = set()
    passed = {}
    recv_ok = set()
    for rank in range(n):
        for t, kv, _ in logs[rank]:
            if t == "S" and kv.get("op") == "drain":
                drain_rounds.add((kv["e"], kv["r"]))
            elif t == "T":
                passed.setdefault(rank, set()).add((kv["e"], kv["r"]))
            elif t == "P" and kv["role"] == "recv" and kv["st"] == "OK":
                recv_ok.add(kv["id"])
    # A step a rank logged after its round's T line (a dup used once the
    # round's agreement said every member ended it cleanly) is passed only
    # if a later T (or the final F) line follows it: the rank may die inside
    # it (seed 1031: killed after two of a ring's three receives).
    # A rank may also die inside a late step before it logs anything of it
    # (seed 1065: killed in a ring's blocking send after its receive had
    # pulled the message, before the S line): a step any rank logged after
    # its round's T line is late everywhere, and a rank whose last T or F
    # line is that round's T has not shown that it got past it.
    late_steps = {}
    late_anywhere = set()
    unclosed = {}
    for rank in range(n):
        ended = set()
        open_steps = []
        last_end = None
        for t, kv, _ in logs[rank]:
            if t == "T":
                ended.add((kv["e"], kv["r"]))
                open_steps = []
                last_end = (kv["e"], kv["r"])
            elif t == "F":  # the job's last agreement: past every step
                open_steps = []
                last_end = None
            elif t == "S" and (kv.get("e"), kv.get("r")) in ended:
                open_steps.append((kv["e"], kv["r"], kv["s"]))
                late_anywhere.add(open_steps[-1])
            elif t == "P" and kv.get("id", "").count(".") == 5:
                # A step's messages may come before its S line (seed 1093).
                e, r, st = kv["id"].split(".")[:3]
                if (e, r) in ended:
                    open_steps.append((e, r, st))
                    late_anywhere.add(open_steps[-1])
        late_steps[rank] = set(open_steps)
        unclosed[rank] = last_end
    for rank in range(n):
        for t, kv, _ in logs[rank]:
            if t != "P" or kv["role"] != "send" or kv["st"] != "OK":
                continue
            k = kv["kind"]
            e, r, _s, _src, dst, _seq = kv["id"].split(".")
            if k == "eager" or (k == "rndv" and ((e, r) in drain_rounds or not zero_copy)):
                continue
            dst = int(dst)
            if (e, r, _s) in late_anywhere and unclosed[dst] == (e, r):
                continue
            if (e, r) in passed.get(dst, set()) and (e, r, _s) not in late_steps[dst] and kv["id"] not in recv_ok:
                fails.append(("delivery", "%s send %s reported OK at rank %d, but rank %d, which got past that round, "
                              "never received it" % (k, kv["id"], rank, dst)))
    # Drain counters. At the quiescent point (Q, the callback: this rank's
    # state-window counters and buffer) sent = received over the job; the
    # job-wide buffered count comes with drain_wait's result (D).
    q, dres = {}, {}
    for rank in range(n):
        for t, kv, _ in logs[rank]:
            if t == "Q":
                q.setdefault(int(kv["drain"]), {})[rank] = kv
            elif t == "D" and kv.get("wait") == "OK" and kv.get("status") == "OK":
                dres.setdefault(int(kv["drain"]), {})[rank] = kv
    for drain, views in sorted(q.items()):
        if len(views) != n:
            continue  # a rank is missing (dead): its counters are unknown
        sent = sum(int(v["sent"]) for v in views.values())
        recv = sum(int(v["received"]) for v in views.values())
        if sent != recv:
            fails.append(("counters", "drain %d: %d messages sent, %d received over the job at the quiescent point"
                          % (drain, sent, recv)))
        buf = sum(int(v["buffered"]) for v in views.values())
        jb = {int(v["job_buffered"]) for v in dres.get(drain, {}).values()}
        if len(jb) > 1:
            fails.append(("counters", "drain %d: ranks got different job-wide buffered counts %s" % (drain, sorted(jb))))
        elif jb and buf != next(iter(jb)):
            fails.append(("counters", "drain %d: the ranks' buffered messages add up to %d, the drain says %d"
                          % (drain, buf, next(iter(jb)))))
    return fails, logs


def hint(fails, p, out_text=""):
    """Guesses at which issue-12 defect a failure looks like, or 'new'."""
    text = " ".join(d for _, d in fails)
    invs = {i for i, _ in fails}
    fault_hit = bool(p["fault"]) and p.get("fired", True)
    out = []
    crash = re.search(r"killed by signal (11|6|7|4) \((\w[\w ]*)\)", text)
    if crash and "ucp_get_req_handler" in out_text:
        out.append("new (#1 family): a rank crashed serving a peer's pull of a send buffer freed after its send "
                   "completed (a rendezvous withdrawn by a revoke while the pull was in flight)")
    elif crash and "refcount == 0" in out_text and "ucp_cleanup" in out_text:
        out.append("new: UCX asserts in ucp_cleanup when weft_init fails after a peer died (rkeys or "
                   "registrations still held)")
    elif crash:
        out.append("new: a rank crashed (%s)" % crash.group(2))
    if re.search(r"rndv send \S+ reported OK", text):
        out.append("issue 12 #1 (a rendezvous send refused by a revoke reports success)")
    if re.search(r"ssend(_rndv)? send \S+ reported OK", text):
        out.append("issue 12 #1-like, new: a synchronous send reported success, its receive failed")
    if "payload differs" in text:
        out.append("new (#1 family): a receive reported success with bytes the sender did not send (its "
                   "rendezvous send was completed by a revoke while this pull still read the buffer)")
    if "drain-bound" in invs:
        out.append("issue 12 #4 (a drain with a dead rank never ends)" if fault_hit else
                   "new: a drain with no dead rank (after a revoke/shrink) never ends; #4's missing bound")
    if re.search(r"(barrier|allreduce|reduce|bcast|allgather)\([^)]*\)? returned TIMEOUT|barrier returned TIMEOUT", text):
        out.append("issue 12 #2 (revoke does not interrupt blocking flag collectives)")
    if "waitany returned" in text or "stayed pending" in text:
        out.append("issue 12 #5 (waits make no progress)")
    if re.search(r"(agree|validate_global|shrink)[^;]* returned TIMEOUT", text):
        out.append("agreement/shrink timed out: follows #2/#3 (a member stuck in a collective never joins)")
    if "the job hung" in text and not out:
        out.append("issue 12 #3 (revoke notice lost) or #2/#4/#6: a wait nothing ended")
    if "BUSY" in text:
        out.append("issue 12 #7 (spurious BUSY)")
    if "weft_init failed" in text:
        out.append("new: a fault during start-up (not at an init point) fails weft_init on every rank")
    if "counters" in invs:
        out.append("new: drain counters do not balance")
    return "; ".join(out) if out else "new"


def main():
    ap = argparse.ArgumentParser(description="weft's seeded chaos test: many short jobs with random faults")
    ap.add_argument("--weft-run", required=True)
    ap.add_argument("--rank-bin", required=True)
    ap.add_argument("--source", default=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    ap.add_argument("--lanes", default="shm,ucx-shm,ucx-tcp")
    ap.add_argument("--seed", type=int, default=1000, help="first seed (run i uses seed+i)")
    ap.add_argument("--runs", type=int, default=40)
    ap.add_argument("--budget", type=float, default=200, help="seconds of wall time for all runs")
    ap.add_argument("--job-timeout", type=int, default=40, help="weft-run --timeout of each job (s)")
    ap.add_argument("--op-timeout-ms", type=int, default=8000, help="WEFT_TIMEOUT_MS of each job")
    ap.add_argument("--drain-timeout-ms", type=int, default=8000, help="WEFT_DRAIN_TIMEOUT_MS of each job")
    ap.add_argument("--drain-wait-ms", type=int, default=20000, help="the ranks' bound on weft_drain_wait")
    ap.add_argument("--parallel", type=int, default=1, help="jobs at once")
    ap.add_argument("--liveness-known", action="store_true",
                    help="report jobs whose only failures are timeouts as stalled instead of failed (CI)")
    ap.add_argument("--keep", help="keep every run's logs under this directory (failing runs' are always kept)")
    ap.add_argument("-v", "--verbose", action="store_true")
    a = ap.parse_args()
    lanes = [l for l in a.lanes.split(",") if l]
    for l in lanes:
        if l not in LANES:
            ap.error("unknown lane %s" % l)
    points = weft_points(a.source)
    weft_run, rank_bin = os.path.abspath(a.weft_run), os.path.abspath(a.rank_bin)
    keep_root = a.keep or tempfile.mkdtemp(prefix="weft-chaos-")
    os.makedirs(keep_root, exist_ok=True)
    me = os.path.abspath(__file__)
    print("chaos: seeds %d..%d, budget %.0f s, job bound %d s, lanes %s, weft fault points: %s"
          % (a.seed, a.seed + a.runs - 1, a.budget, a.job_timeout, ",".join(lanes), " ".join(points)), flush=True)
    t0 = time.monotonic()
    done = []
    failed = []
    stalled = []

    def run_one(seed):
        """One job: its plan, weft-run, the checks. Returns what report() prints."""
        p = plan(seed, lanes, points)
        d = os.path.join(keep_root, "seed-%d" % seed)
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        transport, tls = LANES[p["lane"]]
        cmd = [weft_run, "--timeout", str(a.job_timeout), "--transport", transport, "--keep-survivors"]
        if p["fault"]:
            cmd += ["--fault", p["fault"]]
        cmd += ["-n", str(p["n"]), rank_bin, "--seed", str(seed), "--out", d, "--rounds", str(p["rounds"]),
                "--drain-wait-ms", str(a.drain_wait_ms)] + ([] if p["drains"] else ["--no-drains"])
        env = dict(os.environ)
        env.update({"WEFT_TIMEOUT_MS": str(a.op_timeout_ms), "WEFT_DRAIN_TIMEOUT_MS": str(a.drain_timeout_ms)})
        env.pop("UCX_TLS", None)
        if tls:
            env["UCX_TLS"] = tls
        start = time.monotonic()
        try:
            proc = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  timeout=a.job_timeout + 60)
            rc, out_text = proc.returncode, proc.stdout.decode(errors="replace")
        except subprocess.TimeoutExpired as e:  # weft-run itself did not end
            rc, out_text = 124, (e.stdout or b"").decode(errors="replace") + "\nchaos: weft-run did not end\n"
        took = time.monotonic() - start
        with open(os.path.join(d, "output.txt"), "w") as fh:
            fh.write(" ".join(shlex.quote(c) for c in cmd) + "\n" + out_text)
        fails, logs = check(p, rc, d, out_text, a.job_timeout)
        recoveries = max([int(kv.get("recoveries", 0)) for r in logs for t, kv, _ in logs[r] if t == "F"] or [0])
        if not p["fault"]:
            fired = False
        elif ":at=" in p["fault"]:
            # A rank killed (or stopped, then fenced) at a point never finishes.
            fired = p["victim"] not in {r for r in logs if any(t == "Z" for t, _, _ in logs[r])}
        else:
            fired = any(l.startswith("weft-run: fault:") for l in out_text.splitlines())
        p["fired"] = fired
        hint_text = hint(fails, p, out_text) if fails else ""
        if not fails and not a.keep:
            shutil.rmtree(d, ignore_errors=True)
        return p, rc, took, recoveries, fails, hint_text, d, out_text

    def report(res):
        p, rc, took, recoveries, fails, hint_text, d, out_text = res
        seed = p["seed"]
        done.append(p)
        rerun = ("python3 %s --weft-run %s --rank-bin %s --lanes %s --job-timeout %d --seed %d --runs 1 "
                 "--keep /tmp/weft-chaos-%d" % (me, weft_run, rank_bin, ",".join(lanes), a.job_timeout, seed, seed))
        print("chaos: seed %d %s n=%d rounds=%d%s fault=%s%s: %s in %.1f s (rc %d, %d recoveries)"
              % (seed, p["lane"], p["n"], p["rounds"], "" if p["drains"] else " no-drains", p["fault"] or "none",
                 "" if p["fired"] or not p["fault"] else " (not reached)",
                 "FAIL" if fails else "ok", took, rc, recoveries), flush=True)
        init_failed_ranks = len([f for f in os.listdir(d) if f.startswith("init.")]) if os.path.isdir(d) else 0
        if fails and a.liveness_known and all(liveness(inv, detail) or ucx_unpack_crash(inv, detail, out_text) or
                                              after_stall(inv, detail, fails, out_text) or
                                              startup_death(inv, detail, init_failed_ranks if p["fault"] else 0)
                                              for inv, detail in fails):
            stalled.append((p, fails, rerun, hint_text))
            print("chaos:   seed %d stalled (timeouts or UCX's start-up crash only, known open: see --liveness-known): %s"
                  % (seed, "; ".join(sorted({i for i, _ in fails}))))
            print("chaos:   rerun: %s" % rerun, flush=True)
        elif fails:
            failed.append((p, fails, rerun, hint_text))
            seen = set()
            for inv, detail in fails:
                if (inv, detail[:60]) in seen:
                    continue
                seen.add((inv, detail[:60]))
                print("chaos:   seed %d invariant %s: %s" % (seed, inv, detail[:600]))
                if len(seen) >= 6:
                    break
            if len(fails) > len(seen):
                print("chaos:   ... and %d more (logs)" % (len(fails) - len(seen)))
            print("chaos:   looks like: %s" % hint_text)
            print("chaos:   logs: %s" % d)
            print("chaos:   rerun: %s" % rerun, flush=True)
        if a.verbose:
            print(out_text)

    # Jobs run --parallel at a time; one starts only if it would end within
    # the budget even if it hangs to its bound. Results print as jobs end;
    # each depends on its seed alone.
    from concurrent.futures import ThreadPoolExecutor, wait, FIRST_COMPLETED
    pending = set()
    with ThreadPoolExecutor(max_workers=a.parallel) as pool:
        i = 0
        stopped = False
        while i < a.runs or pending:
            can_start = i < a.runs and not stopped and len(pending) < a.parallel
            if can_start and (done or pending) and time.monotonic() - t0 + a.job_timeout + 5 > a.budget:
                print("chaos: budget reached: %d of %d runs started (%.0f s)" % (i, a.runs, time.monotonic() - t0),
                      flush=True)
                stopped = True
                can_start = False
            if can_start:
                pending.add(pool.submit(run_one, a.seed + i))
                i += 1
                continue
            if not pending:
                break
            finished, pending = wait(pending, return_when=FIRST_COMPLETED)
            for f in sorted(finished, key=lambda f: f.result()[0]["seed"]):
                report(f.result())
    done.sort(key=lambda p: p["seed"])
    failed.sort(key=lambda f: f[0]["seed"])
    with_faults = [p for p in done if p["fault"]]
    kills = sum(1 for p in with_faults if p["kind"] == "kill")
    stops = sum(1 for p in with_faults if p["kind"] == "stop")
    reached = sum(1 for p in with_faults if p["fired"])
    last = done[-1]["seed"] if done else a.seed - 1
    print("chaos: %d runs (%d with faults: %d kill, %d stop; %d reached), %d failures, %d stalled, seeds %d..%d, %.0f s"
          % (len(done), len(with_faults), kills, stops, reached, len(failed), len(stalled), a.seed, last,
             time.monotonic() - t0))
    for p, fails, rerun, hint_text in stalled:
        print("chaos: STALLED seed %d (%s) — rerun: %s" % (p["seed"], ", ".join(sorted({i for i, _ in fails})), rerun))
    for p, fails, rerun, hint_text in failed:
        print("chaos: FAILED seed %d (%s): %s — rerun: %s" % (
            p["seed"], ", ".join(sorted({i for i, _ in fails})), hint_text, rerun))
    if not a.keep and not failed:
        shutil.rmtree(keep_root, ignore_errors=True)
    print("%d passed, %d failed" % (len(done) - len(failed) - len(stalled), len(failed)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
