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


def request(index, gen, kind, flags, src, tag, dest, region, offset, cap, cookie, status=(0, 0, 0, 0, 0), comm=0):
    return struct.pack("<IIBBHiiIIQQQiiQiiI", index, gen, kind, flags, 0, src, tag, dest, region, offset, cap, cookie,
                       *status, comm)


def message(src, tag, kind, peer, payload, cookie=0, comm=0):
    m = struct.pack("<iiIIQQII", src, tag, kind, peer, len(payload), cookie, comm, 0) + payload
    return m + b"\0" * (-len(m) % 8)


def communicator(handle, cid, rank, slot, members, slots, uses):
    c = struct.pack("<QQIIII", handle, cid, len(members), rank, slot, 1)
    c += struct.pack("<%dI" % len(members), *members) + struct.pack("<%dI" % len(slots), *slots)
    c += struct.pack("<%dH" % len(uses), *uses)
    return c + b"\0" * (-len(c) % 8)


def group(name, members, infos, cid, flags):
    g = struct.pack("<IIQII", len(name), len(members), cid, flags, 0) + name
    g += b"\0" * (-len(g) % 8)
    m = struct.pack("<%dI" % len(members), *members) + struct.pack("<%dI" % len(infos), *[len(i) for i in infos])
    m += b"\0" * (-len(m) % 8)
    i = b"".join(infos)
    return g + m + i + b"\0" * (-len(i) % 8)


# A rank's runtime state (group/snapshot_format.hpp): on the world a posted
# any-source receive, a completed receive, a synchronous send awaiting its
# ack, and two buffered messages (one synchronous); a communicator of two
# (job ranks 3 and 0) with a posted receive and a buffered message; a
# process group of three.
slot_uses = [0] * 256
slot_uses[0], slot_uses[5] = 1, 2
comms = communicator((3 << 32) | 2, (1 << 32) | 1, 1, 5, [3, 0], [7, 5], [1, 2])
reqs = [request(1, 0, 1, 1, 0, 0, 0, 0xFFFFFFFF, 0, 0, 0, (2, 9, 8, 0, 0)),
        request(7, 0, 1, 0, -1, 5, 0, 3, 64, 16, 0),
        request(1030, 4, 0, 2, 0, 0, 3, 0xFFFFFFFF, 0, 0, (4 << 32) | 1030),
        request(9, 0, 1, 0, 0, 6, 0, 3, 0, 8, 0, comm=1)]
posted = struct.pack("<II", 1, 3)
msgs = message(1, 20, 0, 1, bytes(range(11))) + message(3, 21, 1, 3, b"", (9 << 32) | 2) + message(0, 22, 0, 3, b"", comm=1)
groups = group(b"g", [2, 0, 3], [bytes([1, 2, 3]), b"", bytes([9])], (1 << 61) | 7, 1)
header = struct.pack("<IIIIIIQQII", 0x334E5357, 2, len(reqs), 2, 3, 1, (0x7FFFFFFF << 32) | 1, 4, 1, 8)
write(c, "snapshot", header + struct.pack("<256H", *slot_uses) + comms + groups + b"".join(reqs) + posted + msgs)
