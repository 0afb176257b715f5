// snapshot_format.hpp — the bytes of the group layer's saved state
// (snapshot.hpp): an encoder and a verifying parser, no runtime. The
// parser takes untrusted bytes (fuzz_ckpt_image feeds it): it returns a
// status, logs what is wrong, and nothing it returns points outside the
// input. The image section that holds these bytes carries their checksum
// (ckpt/format.hpp); this layer checks their meaning.
//
// Bytes (little-endian):
//   header   48 B  u32 magic, engine slot, request count, posted count,
//                  buffered count, communicator count; u64 the world's
//                  handle, the next context counter; u32 process group
//                  count, the groups' next context counter
//   slot uses 512 B: u16 per clock slot, how often this rank took it
//   comms    32 B each (handle, ID, size, rank, slot, flags), then its
//                  members (u32), their slots (u32) and the slots' uses
//                  (u16), zero-padded to 8
//   groups   24 B each (name length, member count, context ID, flags),
//                  the name, then the members (u32 job ranks) and their
//                  info lengths (u32), zero-padded to 8, then the infos,
//                  zero-padded to 8
//   requests 80 B each (encode_snapshot spells the fields out)
//   posted   u32 each: a place in the request list, in posting order
//                  (per communicator); zero-padded to a multiple of 8
//   buffered 40 B envelope each (source rank, tag, kind, source peer,
//                  length, cookie, communicator), then its payload
//                  zero-padded to 8
// A request's or message's communicator is 0 for the world, i + 1 for
// the i-th saved one.
// Kinds are this format's own numbers, not the engine's enums.
#pragma once

#include "transport/common.hpp"

#include <weft/comm.h>

#include <cstdint>
#include <string>
#include <vector>

namespace weft::group {

namespace saved {
enum RequestKind : uint8_t { send = 0, recv = 1, coll = 2 };
enum MessageKind : uint32_t { eager = 0, eager_sync = 1 };
constexpr uint8_t flag_done = 1, flag_sync = 2;
constexpr uint32_t no_region = UINT32_MAX;            // a posted receive of 0 bytes
constexpr uint64_t max_requests = uint64_t(1) << 24;  // RequestPool's capacity
constexpr uint32_t max_engine_slots = 64;             // Engine::max_engines
constexpr uint32_t clock_slots = 256;                 // WEFT_STATE_COMM_SLOTS
constexpr uint32_t no_slot = UINT32_MAX;              // a communicator without a clock slot
constexpr uint32_t max_slot_use = 4095;               // clock_use_bits
constexpr uint8_t comm_slots_known = 1;
constexpr uint32_t world = 0;  // a request's or message's communicator
}  // namespace saved

// A communicator besides the world, as registry.hpp makes it.
struct SavedComm {
    uint64_t handle = 0;  // its C handle's value (comm_handle.hpp)
    uint64_t id = 0;      // its context ID
    uint32_t rank = 0;
    uint32_t slot = saved::no_slot;  // ours
    uint8_t flags = 0;               // saved::comm_slots_known
    std::vector<uint32_t> members;   // job ranks, in its rank order
    std::vector<uint32_t> slots;     // each member's clock slot
    std::vector<uint16_t> slot_uses;
};

// A constructed process group (pgroup.hpp) whose members are all of this
// job.
struct SavedGroup {
    std::string name;
    std::vector<uint32_t> members;  // job ranks, in the group's order
    std::vector<std::vector<uint8_t>> infos;
    uint64_t context_id = 0;
    uint32_t flags = 0;
};

struct SavedRequest {
    uint32_t index = 0;  // its place in the pool: its handle
    uint32_t generation = 0;
    uint8_t kind = 0;  // saved::RequestKind
    uint8_t flags = 0;
    int32_t src = 0, tag = 0;            // a receive's envelope
    uint32_t dest_peer = 0;              // a send's destination (job rank)
    uint32_t region = saved::no_region;  // a posted receive's buffer: region and offset
    uint64_t offset = 0;
    uint64_t cap = 0;
    uint64_t cookie = 0;  // a synchronous send's: what the acknowledgment names
    weft_msg_status_t status{};
    uint32_t comm = saved::world;
};

struct SavedMessage {
    int32_t src = 0, tag = 0;
    uint32_t kind = 0;  // saved::MessageKind
    uint32_t source_peer = 0;
    uint64_t len = 0;
    uint64_t cookie = 0;
    const uint8_t* data = nullptr;  // len bytes (parsed: inside the input)
    uint32_t comm = saved::world;
};

struct Snapshot {
    uint32_t engine_slot = 0;
    uint64_t world_handle = 0;
    uint64_t next_context = 1;  // the registry's counter for IDs this rank names
    std::vector<uint16_t> slot_uses = std::vector<uint16_t>(saved::clock_slots, 0);
    std::vector<SavedComm> comms;
    std::vector<SavedGroup> groups;
    uint32_t next_group_context = 1;
    std::vector<SavedRequest> requests;
    std::vector<uint32_t> posted;  // places in `requests`, posting order
    std::vector<SavedMessage> messages;
};

std::vector<uint8_t> encode_snapshot(const Snapshot& s);
// CORRUPT for anything malformed or impossible for a world of world_size
// ranks (a pending request of a kind that cannot be pending, two requests
// at one place, a posted receive that is not pending, a message of an
// unknown kind, a communicator whose members or slots cannot be, two
// communicators with one handle, ID or slot, a group without members or
// with an impossible name...), with `what` and the
// offset in the log line.
Status parse_snapshot(const uint8_t* data, size_t len, uint32_t world_size, const char* what, Snapshot& out);

}  // namespace weft::group
