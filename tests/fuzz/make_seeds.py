#!/usr/bin/env python3
"""Writes seed inputs for the fuzzers (valid frames and rings) into corpus/."""
import os
import struct

here = os.path.dirname(os.path.abspath(__file__))


def frame(t, payload, seq=0):
    return struct.pack("<IHHII", 0x42544657, 1, t, len(payload), seq) + payload


def write(target, name, data):
    d = os.path.join(here, "corpus", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


w = "fuzz_bootstrap_wire"
write(w, "hello", frame(1, bytes(range(32)) + struct.pack("<III", 0, 3, 1234)))
write(w, "welcome", frame(2, b""))
write(w, "exchange", frame(3, b"\x00" + b"blob", 7))
blobs = [b"a", b"", b"ccc"]
write(w, "result", frame(4, struct.pack("<I", len(blobs)) + b"".join(struct.pack("<I", len(b)) + b for b in blobs), 7))
write(w, "error", frame(5, struct.pack("<IH", 9, 4) + b"dead"))
write(w, "peer_failed", frame(6, struct.pack("<II", 0, 2)))

r = "fuzz_am_ring"
rec = struct.pack("<IHHQ", 8, 1, 3, 42) + b"payload!"
pad = struct.pack("<IHHQ", 1024 - 16 - 16, 4, 0, 0)
write(r, "one_record", struct.pack("<QQ", len(rec), 0) + rec)
write(r, "two_records", struct.pack("<QQ", 2 * len(rec), 0) + rec + rec)
write(r, "pad", struct.pack("<QQ", 1024 + len(rec), 16) + b"\0" * 16 + pad + b"\0" * (1024 - 32 - 16) + rec)
