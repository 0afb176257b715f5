// snapshot.hpp — what a checkpoint saves of the group layer, and how a
// restart puts it back (weft/ckpt.h, docs/checkpoint.md "Runtime state").
//
// At the drain's quiescent point nothing is in transit: every message is
// either matched or in weft's buffer, every rendezvous was pulled into it,
// and no reply is owed that has not been sent. What is left on the world
// communicator is
//   - the requests the program holds: completed ones it has not waited for
//     (their statuses), receives still posted (their envelopes, and their
//     buffers as a protected region's ID and offset), synchronous sends
//     whose receiver buffered the message and owes the acknowledgment
//     (their cookies);
//   - the posted receives in posting order;
//   - the buffered messages in arrival order, envelopes and bytes (a
//     synchronous one keeps its sender's cookie: the receive that matches
//     it after the restart sends the acknowledgment the sender waits for).
// A restart re-creates each request at its place in the pool, so the
// handles the program saved in its regions name them again (p2p.hpp,
// handle_of), and puts both queues back in order: matching then goes on
// as it would have without the checkpoint.
//
// The same for every communicator besides the world, which is saved with
// its context ID, members, every member's clock slot and its C handle's
// place (comm_handle.hpp); a restart makes it again under all four. Its
// clock and collective counters start again from zero on every member, as
// the world's do: nothing of a collective is in flight at the quiescent
// point, and every member restarts.
//
// Process groups whose members are all of this job are saved too (name,
// members, infos, context ID, flags), and the counter of the context IDs
// this rank assigns; restart gives them back to weft_group_* under their
// names (a group's communicator is one of the communicators above).
//
// Not saved yet (the checkpoint is refused with UNSUPPORTED, agreed by
// every rank): a group with members of another job, a group operation in
// progress, failed processes (the failed-process sets),
// revoked communicators, requests weft holds for itself (a collective in
// progress, a receive blocked on another thread), traffic for a context
// not created yet.
//
// The bytes and their verifying parser: snapshot_format.hpp.
#pragma once

#include "group/snapshot_format.hpp"
#include "transport/runtime.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace weft::group {

// Where the program's memory is, in terms a restarted program can resolve:
// the checkpoint layer's protected regions.
struct RegionMap {
    void* arg = nullptr;
    // The region holding [addr, addr + bytes), as its ID and offset.
    bool (*locate)(void* arg, const void* addr, size_t bytes, uint32_t& id, uint64_t& offset) = nullptr;
    // The address of [offset, offset + bytes) of region `id`, or null.
    void* (*resolve)(void* arg, uint32_t id, uint64_t offset, size_t bytes) = nullptr;
};

struct SnapshotCounts {
    uint32_t requests = 0;  // held by the program
    uint32_t posted = 0;    // receives still posted
    uint32_t buffered = 0;  // messages in weft's buffer
    uint32_t comms = 0;     // communicators besides the world
    uint32_t groups = 0;    // process groups
    uint64_t buffered_bytes = 0;
};

// At the quiescent point: this rank's saved state. UNSUPPORTED (logged,
// with what) for state weft cannot save yet; INVALID_ARG for a posted
// receive whose buffer is in no protected region.
Status save_snapshot(Runtime& rt, const RegionMap& regions, std::vector<uint8_t>& out, SnapshotCounts& counts);
// Restart's verify step: CORRUPT for malformed bytes (what: the file, for
// the log), INVALID_ARG for a posted receive whose region is not
// registered here or is too small, BUSY when this rank already holds
// state (a restart puts the saved state into a fresh runtime only). On
// success `parsed` holds the decoded state, for restore_snapshot: its
// messages point into `data`, which must stay mapped until then.
Status check_snapshot(Runtime& rt, const uint8_t* data, size_t len, const RegionMap& regions, const char* what,
                      Snapshot& parsed, SnapshotCounts& counts);
// After check_snapshot passed on every rank: re-creates the requests and
// the queues from what it parsed (consumed).
Status restore_snapshot(Runtime& rt, Snapshot& parsed, const RegionMap& regions);

}  // namespace weft::group
