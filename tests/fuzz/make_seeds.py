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

c = "fuzz_ckpt_image"


def request(index, gen, kind, flags, src, tag, dest, region, offset, cap, cookie, status=(0, 0, 0, 0, 0)):
    return struct.pack("<IIBBHiiIIQQQiiQiiI", index, gen, kind, flags, 0, src, tag, dest, region, offset, cap, cookie,
                       *status, 0)


def message(src, tag, kind, peer, payload, cookie=0):
    m = struct.pack("<iiIIQQ", src, tag, kind, peer, len(payload), cookie) + payload
    return m + b"\0" * (-len(m) % 8)


# A rank's runtime state (group/snapshot_format.hpp): a posted any-source
# receive, a completed receive, a synchronous send awaiting its ack, and two
# buffered messages (one synchronous).
reqs = [request(1, 0, 1, 1, 0, 0, 0, 0xFFFFFFFF, 0, 0, 0, (2, 9, 8, 0, 0)),
        request(7, 0, 1, 0, -1, 5, 0, 3, 64, 16, 0),
        request(1030, 4, 0, 2, 0, 0, 3, 0xFFFFFFFF, 0, 0, (4 << 32) | 1030)]
posted = struct.pack("<I", 1) + b"\0" * 4
msgs = message(1, 20, 0, 1, bytes(range(11))) + message(3, 21, 1, 3, b"", (9 << 32) | 2)
write(c, "snapshot", struct.pack("<IIIIII", 0x504E5357, 2, len(reqs), 1, 2, 0) + b"".join(reqs) + posted + msgs)
