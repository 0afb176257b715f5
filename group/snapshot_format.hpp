// snapshot_format.hpp — the bytes of the group layer's saved state
// (snapshot.hpp): an encoder and a verifying parser, no runtime. The
// parser takes untrusted bytes (fuzz_ckpt_image feeds it): it returns a
// status, logs what is wrong, and nothing it returns points outside the
// input. The image section that holds these bytes carries their checksum
// (ckpt/format.hpp); this layer checks their meaning.
//
// Bytes (little-endian):
//   header   24 B  u32 magic, engine slot, request count, posted count,
//                  buffered count; 4 zero bytes
//   requests 80 B each (encode_snapshot spells the fields out)
//   posted   u32 each: a place in the request list, in posting order;
//                  zero-padded to a multiple of 8
//   buffered 32 B envelope each (source rank, tag, kind, source peer,
//                  length, cookie), then its payload zero-padded to 8
// Kinds are this format's own numbers, not the engine's enums.
#pragma once

#include "transport/common.hpp"

#include <weft/comm.h>

#include <cstdint>
#include <vector>

namespace weft::group {

namespace saved {
enum RequestKind : uint8_t { send = 0, recv = 1, coll = 2 };
enum MessageKind : uint32_t { eager = 0, eager_sync = 1 };
constexpr uint8_t flag_done = 1, flag_sync = 2;
constexpr uint32_t no_region = UINT32_MAX;            // a posted receive of 0 bytes
constexpr uint64_t max_requests = uint64_t(1) << 24;  // RequestPool's capacity
constexpr uint32_t max_engine_slots = 64;             // Engine::max_engines
}  // namespace saved

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
};

struct SavedMessage {
    int32_t src = 0, tag = 0;
    uint32_t kind = 0;  // saved::MessageKind
    uint32_t source_peer = 0;
    uint64_t len = 0;
    uint64_t cookie = 0;
    const uint8_t* data = nullptr;  // len bytes (parsed: inside the input)
};

struct Snapshot {
    uint32_t engine_slot = 0;
    std::vector<SavedRequest> requests;
    std::vector<uint32_t> posted;  // places in `requests`, posting order
    std::vector<SavedMessage> messages;
};

std::vector<uint8_t> encode_snapshot(const Snapshot& s);
// CORRUPT for anything malformed or impossible for a world of world_size
// ranks (a pending request of a kind that cannot be pending, two requests
// at one place, a posted receive that is not pending, a message of an
// unknown kind...), with `what` and the offset in the log line.
Status parse_snapshot(const uint8_t* data, size_t len, uint32_t world_size, const char* what, Snapshot& out);

}  // namespace weft::group
