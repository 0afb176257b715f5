#!/usr/bin/env python3
"""The chaos checker's delivery invariant on hand-written logs.

chaos.py's check() decides from the ranks' logs whether a job broke an
invariant; a checker that misjudges fails CI for nothing (seed 1065) or lets
a lost message through. These cases pin its rule for late steps (work on a
dup after the round's T line): a rank killed inside such a step before it
logged anything of it has not shown it got past the step, while a rank that
logged a later round end has.
"""
import importlib.util
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("chaos", os.path.join(HERE, "chaos.py"))
chaos = importlib.util.module_from_spec(spec)
spec.loader.exec_module(chaos)

PLAN = {"seed": 1, "lane": "ucx-shm", "n": 2, "rounds": 2, "fault": "kill:rank=1:after=0.1", "kind": "kill",
        "victim": 1, "drains": False, "fired": True}

# Rank 0 sends a rendezvous message to rank 1 in step 15 of round 0 (a ring
# on a dup, run after the round's T line); the transport reported it OK.
SENDER = """I seed=1 rank=0 size=2 transport=ucx eager=1024 rounds=2
T e=0 r=0 clean=1
A e=0 r=0 st=OK flag=1
S e=0 r=0 s=15 op=ring shift=1 m=1 kind=rndv mode=1
P role=send id=0.0.15.0.1.0 kind=rndv st=OK
"""


def delivery_failures(receiver_log):
    with tempfile.TemporaryDirectory() as d:
        with open(os.path.join(d, "rank.0.log"), "w") as fh:
            fh.write(SENDER)
        with open(os.path.join(d, "rank.1.log"), "w") as fh:
            fh.write(receiver_log)
        fails, _ = chaos.check(dict(PLAN), 0, d, "", 40)
    return [detail for inv, detail in fails if inv == "delivery"]


def main():
    bad = 0
    start = "I seed=1 rank=1 size=2 transport=ucx eager=1024 rounds=2\nT e=0 r=0 clean=1\n"
    cases = [
        # Killed in the late step before its S line (its receive had pulled
        # the message, its own blocking send had not finished): not a loss.
        ("killed inside the late step, nothing of it logged", start, 0),
        # Got past the round's end and the next one, never received it: lost.
        ("past a later round end, never received", start + "T e=0 r=1 clean=1\n", 1),
        # Received it: fine.
        ("received", start + "P role=recv id=0.0.15.0.1.0 kind=rndv any=0 st=OK\nT e=0 r=1 clean=1\n", 0),
    ]
    for name, log, want in cases:
        got = delivery_failures(log)
        ok = len(got) == want
        bad += 0 if ok else 1
        print("%s: %s (%d delivery failure(s), want %d)%s" % ("ok" if ok else "FAIL", name, len(got), want,
                                                            "" if ok else ": " + "; ".join(got)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
