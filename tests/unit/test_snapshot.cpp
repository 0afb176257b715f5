// test_snapshot.cpp — the group layer's saved state on its own
// (group/snapshot_format): a round trip, and every malformed or impossible
// state refused with CORRUPT; request handles that name no request refused
// without being dereferenced. The save and the replay across ranks and
// across jobs run in tests/mp/test_ckpt.cpp.
#include "group/engine.hpp"
#include "group/snapshot_format.hpp"

#include <weft/comm.h>
#include <weft/weft.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <functional>

using namespace weft;
using namespace weft::group;

namespace {

constexpr uint32_t world_size = 4;

// A state as a checkpoint of one rank saves it: a posted receive, a
// completed receive, a synchronous send awaiting its acknowledgment, and
// two buffered messages on the world; a communicator of two (job ranks 3
// and 0, this rank its second) with a posted receive and a buffered
// message.
Snapshot sample(std::vector<uint8_t>& payload) {
    payload = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
    Snapshot s;
    s.engine_slot = 2;
    s.world_handle = uint64_t(0x7fffffff) << 32 | 1;
    s.next_context = 4;
    s.slot_uses[0] = 1;
    s.slot_uses[5] = 2;
    SavedComm pair;
    pair.handle = uint64_t(3) << 32 | 2;
    pair.id = uint64_t(1) << 32 | 1;
    pair.rank = 1;
    pair.slot = 5;
    pair.flags = saved::comm_slots_known;
    pair.members = {3, 0};
    pair.slots = {7, 5};
    pair.slot_uses = {1, 2};
    s.comms = {pair};
    SavedGroup group;
    group.name = "g";
    group.members = {2, 0, 3};
    group.infos = {{1, 2, 3}, {}, {9}};
    group.context_id = uint64_t(1) << 61 | 7;
    group.flags = 1;
    s.groups = {group};
    s.next_group_context = 8;
    SavedRequest posted;
    posted.index = 7;
    posted.kind = saved::recv;
    posted.src = WEFT_ANY_SOURCE;
    posted.tag = 5;
    posted.region = 3;
    posted.offset = 64;
    posted.cap = 16;
    SavedRequest done;
    done.index = 1;
    done.kind = saved::recv;
    done.flags = saved::flag_done;
    done.status = weft_msg_status_t{2, 9, 8, WEFT_OK, 0};
    SavedRequest ssend;
    ssend.index = 1030;
    ssend.generation = 4;
    ssend.kind = saved::send;
    ssend.flags = saved::flag_sync;
    ssend.dest_peer = 3;
    ssend.cookie = uint64_t(4) << 32 | 1030;
    SavedRequest on_pair;
    on_pair.index = 9;
    on_pair.kind = saved::recv;
    on_pair.src = 0;
    on_pair.tag = 6;
    on_pair.region = 3;
    on_pair.cap = 8;
    on_pair.comm = 1;
    s.requests = {done, posted, ssend, on_pair};
    s.posted = {1, 3};
    s.messages = {SavedMessage{1, 20, saved::eager, 1, payload.size(), 0, payload.data()},
                  SavedMessage{3, 21, saved::eager_sync, 3, 0, uint64_t(9) << 32 | 2, nullptr},
                  SavedMessage{0, 22, saved::eager, 3, 0, 0, nullptr, 1}};
    return s;
}

// Where the requests start in sample()'s bytes: after the header, the
// slot uses and the communicators.
size_t requests_at() {
    std::vector<uint8_t> payload;
    Snapshot s = sample(payload);
    s.requests.clear();
    s.posted.clear();
    s.messages.clear();
    return encode_snapshot(s).size();
}

// Where the groups start: after the header, the slot uses and the
// communicators.
size_t groups_at() {
    std::vector<uint8_t> payload;
    Snapshot s = sample(payload);
    s.groups.clear();
    return requests_at() - (encode_snapshot(sample(payload)).size() - encode_snapshot(s).size());
}

Status parse(const std::vector<uint8_t>& b) {
    Snapshot s;
    return parse_snapshot(b.data(), b.size(), world_size, "test", s);
}

// Encodes sample() after `change`: the parser must refuse it.
Status parse_changed(const std::function<void(Snapshot&)>& change) {
    std::vector<uint8_t> payload;
    Snapshot s = sample(payload);
    change(s);
    return parse(encode_snapshot(s));
}

// A job of one, whatever launched the test binary.
void job_of_one() {
    for (const char* v : {"WEFT_BOOTSTRAP", "WEFT_SECRET", "WEFT_JOB_SIZES", "WEFT_JOB", "WEFT_RANK", "PMIX_RANK",
                          "PMIX_NAMESPACE", "WEFT_TRANSPORT", "WEFT_FAULT_POINTS"})
        unsetenv(v);
}

}  // namespace

TEST(Snapshot, RoundTrip) {
    std::vector<uint8_t> payload;
    const Snapshot s = sample(payload);
    const std::vector<uint8_t> bytes = encode_snapshot(s);
    EXPECT_EQ(bytes.size() % 8, 0u);
    Snapshot p;
    ASSERT_EQ(parse_snapshot(bytes.data(), bytes.size(), world_size, "test", p), WEFT_OK);
    EXPECT_EQ(p.engine_slot, 2u);
    EXPECT_EQ(p.world_handle, s.world_handle);
    EXPECT_EQ(p.next_context, 4u);
    EXPECT_EQ(p.slot_uses[5], 2u);
    ASSERT_EQ(p.comms.size(), 1u);
    EXPECT_EQ(p.comms[0].handle, s.comms[0].handle);
    EXPECT_EQ(p.comms[0].id, s.comms[0].id);
    EXPECT_EQ(p.comms[0].members, s.comms[0].members);
    EXPECT_EQ(p.comms[0].slots, s.comms[0].slots);
    EXPECT_EQ(p.comms[0].slot_uses, s.comms[0].slot_uses);
    EXPECT_EQ(p.comms[0].flags, saved::comm_slots_known);
    ASSERT_EQ(p.groups.size(), 1u);
    EXPECT_EQ(p.groups[0].name, "g");
    EXPECT_EQ(p.groups[0].members, s.groups[0].members);
    EXPECT_EQ(p.groups[0].infos, s.groups[0].infos);
    EXPECT_EQ(p.groups[0].context_id, s.groups[0].context_id);
    EXPECT_EQ(p.groups[0].flags, 1u);
    EXPECT_EQ(p.next_group_context, 8u);
    ASSERT_EQ(p.requests.size(), 4u);
    EXPECT_EQ(p.requests[3].comm, 1u);
    EXPECT_EQ(p.requests[1].index, 7u);
    EXPECT_EQ(p.requests[1].region, 3u);
    EXPECT_EQ(p.requests[1].offset, 64u);
    EXPECT_EQ(p.requests[1].src, WEFT_ANY_SOURCE);
    EXPECT_EQ(p.requests[0].status.source, 2);
    EXPECT_EQ(p.requests[0].status.bytes, 8u);
    EXPECT_EQ(p.requests[2].cookie, s.requests[2].cookie);
    EXPECT_EQ(p.posted, (std::vector<uint32_t>{1, 3}));
    ASSERT_EQ(p.messages.size(), 3u);
    EXPECT_EQ(p.messages[2].comm, 1u);
    EXPECT_EQ(p.messages[0].len, payload.size());
    EXPECT_EQ(std::memcmp(p.messages[0].data, payload.data(), payload.size()), 0);
    EXPECT_GE(p.messages[0].data, bytes.data());
    EXPECT_EQ(p.messages[1].kind, uint32_t(saved::eager_sync));
    EXPECT_EQ(p.messages[1].len, 0u);
    // An empty state (the world alone, nothing held) is valid too.
    Snapshot empty;
    empty.world_handle = s.world_handle;
    EXPECT_EQ(parse(encode_snapshot(empty)), WEFT_OK);
}

TEST(Snapshot, EveryTruncationAndTrailingByteIsRefused) {
    std::vector<uint8_t> payload;
    const std::vector<uint8_t> bytes = encode_snapshot(sample(payload));
    for (size_t n = 0; n < bytes.size(); ++n) {
        const std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + n);
        EXPECT_EQ(parse(cut), WEFT_ERR_CORRUPT) << "cut to " << n << " bytes";
    }
    std::vector<uint8_t> longer = bytes;
    longer.push_back(0);
    EXPECT_EQ(parse(longer), WEFT_ERR_CORRUPT);
    std::vector<uint8_t> bad_magic = bytes;
    bad_magic[0] ^= 1;
    EXPECT_EQ(parse(bad_magic), WEFT_ERR_CORRUPT);
    std::vector<uint8_t> padding = bytes;
    padding[groups_at() - 1] = 1;  // the communicator's padding
    EXPECT_EQ(parse(padding), WEFT_ERR_CORRUPT);
    // Format 2's runtime state (the world alone) is refused as such.
    std::vector<uint8_t> old = bytes;
    const uint32_t old_magic = 0x504e5357;
    std::memcpy(old.data(), &old_magic, 4);
    EXPECT_EQ(parse(old), WEFT_ERR_UNSUPPORTED);
}

TEST(Snapshot, ImpossibleStatesAreRefused) {
    EXPECT_EQ(parse_changed([](Snapshot& s) { s.engine_slot = saved::max_engine_slots; }), WEFT_ERR_CORRUPT);
    EXPECT_EQ(parse_changed([](Snapshot& s) { s.requests[0].index = 7; }), WEFT_ERR_CORRUPT) << "two at one place";
    EXPECT_EQ(parse_changed([](Snapshot& s) { s.requests[0].index = uint32_t(saved::max_requests); }),
              WEFT_ERR_CORRUPT);
    EXPECT_EQ(parse_changed([](Snapshot& s) { s.requests[0].kind = 3; }), WEFT_ERR_CORRUPT);
    EXPECT_EQ(parse_changed([](Snapshot& s) { s.requests[0].flags = 4; }), WEFT_ERR_CORRUPT);
    {
        // An error number past the last status (patched into the bytes: no
        // weft_status_t holds it).
        std::vector<uint8_t> payload;
        std::vector<uint8_t> bytes = encode_snapshot(sample(payload));
        const int32_t past = WEFT_ERR_LAST_ + 1;
        std::memcpy(&bytes[requests_at() + 68], &past, 4);  // the first request's status.error
        EXPECT_EQ(parse(bytes), WEFT_ERR_CORRUPT);
    }
    // Pending: a receive with a rank outside the world, a send that is not
    // a synchronous one awaiting its acknowledgment, a collective.
    EXPECT_EQ(parse_changed([](Snapshot& s) { s.requests[1].src = int32_t(world_size); }), WEFT_ERR_CORRUPT);
    EXPECT_EQ(parse_changed([](Snapshot& s) { s.requests[1].tag = -2; }), WEFT_ERR_CORRUPT);
    EXPECT_EQ(parse_changed([](Snapshot& s) { s.requests[2].flags = 0; }), WEFT_ERR_CORRUPT);
    EXPECT_EQ(parse_changed([](Snapshot& s) { s.requests[2].cookie ^= uint64_t(1) << 32; }), WEFT_ERR_CORRUPT);
    EXPECT_EQ(parse_changed([](Snapshot& s) { s.requests[2].dest_peer = world_size; }), WEFT_ERR_CORRUPT);
    EXPECT_EQ(parse_changed([](Snapshot& s) { s.requests[2].kind = saved::coll; }), WEFT_ERR_CORRUPT);
    // Posting order: a place out of range, twice, a completed receive, a
    // pending receive left out.
    EXPECT_EQ(parse_changed([](Snapshot& s) { s.posted = {3}; }), WEFT_ERR_CORRUPT);
    EXPECT_EQ(parse_changed([](Snapshot& s) { s.posted = {1, 1}; }), WEFT_ERR_CORRUPT);
    EXPECT_EQ(parse_changed([](Snapshot& s) { s.posted = {1, 0}; }), WEFT_ERR_CORRUPT);
    EXPECT_EQ(parse_changed([](Snapshot& s) { s.posted.clear(); }), WEFT_ERR_CORRUPT);
    // Buffered messages: an unknown kind, a synchronous one without its
    // cookie, a source outside the world, a wildcard tag.
    EXPECT_EQ(parse_changed([](Snapshot& s) { s.messages[0].kind = 2; }), WEFT_ERR_CORRUPT);
    EXPECT_EQ(parse_changed([](Snapshot& s) { s.messages[1].cookie = 0; }), WEFT_ERR_CORRUPT);
    EXPECT_EQ(parse_changed([](Snapshot& s) { s.messages[0].source_peer = world_size; }), WEFT_ERR_CORRUPT);
    EXPECT_EQ(parse_changed([](Snapshot& s) { s.messages[0].src = -1; }), WEFT_ERR_CORRUPT);
    EXPECT_EQ(parse_changed([](Snapshot& s) { s.messages[0].tag = WEFT_ANY_TAG; }), WEFT_ERR_CORRUPT);
    EXPECT_EQ(parse_changed([](Snapshot& s) { s.messages[0].source_peer = 2; }), WEFT_ERR_CORRUPT) << "not its sender";
}

TEST(Snapshot, ImpossibleCommunicatorsAreRefused) {
    // The header: no world handle, a context counter that names nothing, a
    // slot used more often than its use field counts.
    EXPECT_EQ(parse_changed([](Snapshot& s) { s.world_handle = uint64_t(5) << 32; }), WEFT_ERR_CORRUPT);
    EXPECT_EQ(parse_changed([](Snapshot& s) { s.next_context = 0; }), WEFT_ERR_CORRUPT);
    EXPECT_EQ(parse_changed([](Snapshot& s) { s.slot_uses[9] = saved::max_slot_use + 1; }), WEFT_ERR_CORRUPT);
    // A communicator: bigger than the world, a member outside it or twice,
    // its slot not its rank's or out of range, the world's slot, a NULL
    // handle or the world's place, no context ID.
    EXPECT_EQ(parse_changed([](Snapshot& s) {
                  SavedComm& c = s.comms[0];
                  c.members = {3, 0, 1, 2, 3};
                  c.slots.resize(5, 1);
                  c.slot_uses.resize(5, 1);
              }),
              WEFT_ERR_CORRUPT);
    EXPECT_EQ(parse_changed([](Snapshot& s) { s.comms[0].members[0] = world_size; }), WEFT_ERR_CORRUPT);
    EXPECT_EQ(parse_changed([](Snapshot& s) { s.comms[0].members[0] = 0; }), WEFT_ERR_CORRUPT);
    EXPECT_EQ(parse_changed([](Snapshot& s) { s.comms[0].slots[1] = 6; }), WEFT_ERR_CORRUPT);
    EXPECT_EQ(parse_changed([](Snapshot& s) { s.comms[0].slot = s.comms[0].slots[1] = saved::clock_slots; }),
              WEFT_ERR_CORRUPT);
    EXPECT_EQ(parse_changed([](Snapshot& s) { s.comms[0].slot = s.comms[0].slots[1] = 0; }), WEFT_ERR_CORRUPT);
    EXPECT_EQ(parse_changed([](Snapshot& s) { s.comms[0].handle = uint64_t(3) << 32; }), WEFT_ERR_CORRUPT);
    EXPECT_EQ(parse_changed([](Snapshot& s) { s.comms[0].handle = uint64_t(3) << 32 | 1; }), WEFT_ERR_CORRUPT);
    EXPECT_EQ(parse_changed([](Snapshot& s) { s.comms[0].id = 0; }), WEFT_ERR_CORRUPT);
    EXPECT_EQ(parse_changed([](Snapshot& s) { s.comms[0].rank = 2; }), WEFT_ERR_CORRUPT);
    // Two communicators with one ID, or in one slot.
    EXPECT_EQ(parse_changed([](Snapshot& s) {
                  SavedComm twin = s.comms[0];
                  twin.handle = uint64_t(1) << 32 | 3;
                  twin.slot = twin.slots[1] = 6;
                  s.comms.push_back(twin);
              }),
              WEFT_ERR_CORRUPT);
    EXPECT_EQ(parse_changed([](Snapshot& s) {
                  SavedComm twin = s.comms[0];
                  twin.handle = uint64_t(1) << 32 | 3;
                  twin.id += 1;
                  s.comms.push_back(twin);
              }),
              WEFT_ERR_CORRUPT);
    // Requests and messages that name no communicator, or a rank outside
    // theirs.
    EXPECT_EQ(parse_changed([](Snapshot& s) { s.requests[3].comm = 2; }), WEFT_ERR_CORRUPT);
    EXPECT_EQ(parse_changed([](Snapshot& s) { s.requests[3].src = 2; }), WEFT_ERR_CORRUPT);
    EXPECT_EQ(parse_changed([](Snapshot& s) { s.messages[2].comm = 2; }), WEFT_ERR_CORRUPT);
    EXPECT_EQ(parse_changed([](Snapshot& s) { s.messages[2].src = 2; }), WEFT_ERR_CORRUPT);
    EXPECT_EQ(parse_changed([](Snapshot& s) { s.messages[2].source_peer = 0; }), WEFT_ERR_CORRUPT);
    // Process groups: no name, a name too long or with a NUL, no members,
    // more than the job, a member outside it or twice, two with one name.
    EXPECT_EQ(parse_changed([](Snapshot& s) { s.groups[0].name.clear(); }), WEFT_ERR_CORRUPT);
    EXPECT_EQ(parse_changed([](Snapshot& s) { s.groups[0].name.assign(64, 'x'); }), WEFT_ERR_CORRUPT);
    EXPECT_EQ(parse_changed([](Snapshot& s) { s.groups[0].name = std::string("a\0b", 3); }), WEFT_ERR_CORRUPT);
    EXPECT_EQ(parse_changed([](Snapshot& s) {
                  s.groups[0].members.clear();
                  s.groups[0].infos.clear();
              }),
              WEFT_ERR_CORRUPT);
    EXPECT_EQ(parse_changed([](Snapshot& s) {
                  s.groups[0].members = {0, 1, 2, 3, 0};
                  s.groups[0].infos.resize(5);
              }),
              WEFT_ERR_CORRUPT);
    EXPECT_EQ(parse_changed([](Snapshot& s) { s.groups[0].members[1] = world_size; }), WEFT_ERR_CORRUPT);
    EXPECT_EQ(parse_changed([](Snapshot& s) { s.groups[0].members[1] = 2; }), WEFT_ERR_CORRUPT);
    EXPECT_EQ(parse_changed([](Snapshot& s) { s.groups.push_back(s.groups[0]); }), WEFT_ERR_CORRUPT);
    EXPECT_EQ(parse_changed([](Snapshot& s) { s.next_group_context = 0; }), WEFT_ERR_CORRUPT);
    // Both communicators valid: accepted.
    EXPECT_EQ(parse_changed([](Snapshot& s) {
                  SavedComm other = s.comms[0];
                  other.handle = uint64_t(1) << 32 | 3;
                  other.id += 1;
                  other.slot = other.slots[1] = 6;
                  s.comms.push_back(other);
              }),
              WEFT_OK);
}

// A request handle is an engine's slot and a place in its pool: one that
// names no engine, or no place, is refused (INVALID_ARG), never read.
TEST(RequestHandles, HandlesThatNameNothingAreRefused) {
    job_of_one();
    weft_context_t ctx = nullptr;
    ASSERT_EQ(weft_init(&ctx), WEFT_OK);
    weft_comm_t world = nullptr;
    ASSERT_EQ(weft_comm_world(ctx, &world), WEFT_OK);
    uint64_t x = 0;
    weft_request_t r = nullptr;
    ASSERT_EQ(weft_irecv(world, &x, 1, WEFT_UINT64, 0, 1, &r), WEFT_OK);
    const auto value = reinterpret_cast<uintptr_t>(r);
    EXPECT_EQ(Engine::request_of(r)->magic, Request::live_magic);
    const uint32_t slot = uint32_t(value >> 32) - 1;
    int flag = 0;
    for (uint64_t bad : {uint64_t(0x1234), handle_value(Engine::max_engines, 0), handle_value(slot + 1, 0),
                         handle_value(slot, RequestPool::max_chunks * RequestPool::chunk_size - 1),
                         uint64_t(slot + 1) << 32, ~uint64_t(0)}) {
        weft_request_t h = reinterpret_cast<weft_request_t>(static_cast<uintptr_t>(bad));
        EXPECT_EQ(weft_request_test(&h, &flag, nullptr), WEFT_ERR_INVALID_ARG) << std::hex << bad;
        EXPECT_EQ(weft_request_cancel(h), WEFT_ERR_INVALID_ARG) << std::hex << bad;
    }
    // A freed request's handle is stale: refused too.
    ASSERT_EQ(weft_request_cancel(r), WEFT_OK);
    weft_request_t kept = r;
    ASSERT_EQ(weft_request_wait(&r, nullptr), WEFT_OK);
    EXPECT_EQ(r, nullptr);
    EXPECT_EQ(weft_request_wait(&kept, nullptr), WEFT_ERR_INVALID_ARG);
    ASSERT_EQ(weft_finalize(ctx), WEFT_OK);
}

// A communicator handle is a place and a generation (group/comm_handle.hpp):
// a freed one, or one made up, is refused (NOT_INITIALIZED), never read;
// the place is reused under a new generation, so the stale handle does not
// name the new communicator; the world's handle stays the same across
// contexts made one after the other.
TEST(CommHandles, StaleAndMadeUpHandlesAreRefused) {
    job_of_one();
    weft_context_t ctx = nullptr;
    ASSERT_EQ(weft_init(&ctx), WEFT_OK);
    weft_comm_t world = nullptr, dup = nullptr, again = nullptr;
    ASSERT_EQ(weft_comm_world(ctx, &world), WEFT_OK);
    ASSERT_EQ(weft_comm_dup(world, &dup), WEFT_OK);
    const weft_comm_t stale = dup;
    ASSERT_EQ(weft_comm_free(&dup), WEFT_OK);
    uint32_t rank = 0;
    EXPECT_EQ(weft_comm_rank(stale, &rank), WEFT_ERR_NOT_INITIALIZED);
    // Its release barrier (a job of one) is done by the next call's progress.
    for (int i = 0; i < 100 && comm_place_free(comm_handle_value(stale)) == false; ++i) weft_wait(ctx, 1000000);
    ASSERT_EQ(weft_comm_dup(world, &again), WEFT_OK);
    EXPECT_EQ(uint32_t(comm_handle_value(again)), uint32_t(comm_handle_value(stale))) << "the place is reused";
    EXPECT_NE(again, stale) << "under a new generation";
    EXPECT_EQ(weft_comm_rank(stale, &rank), WEFT_ERR_NOT_INITIALIZED);
    EXPECT_EQ(weft_comm_rank(again, &rank), WEFT_OK);
    for (uint64_t bad : {uint64_t(0x1234), uint64_t(1) << 32, comm_handle_value(again) + 1,
                         comm_handle_value(again) ^ (uint64_t(1) << 40), ~uint64_t(0)}) {
        weft_comm_t h = reinterpret_cast<weft_comm_t>(static_cast<uintptr_t>(bad));
        EXPECT_EQ(weft_comm_rank(h, &rank), WEFT_ERR_NOT_INITIALIZED) << std::hex << bad;
    }
    ASSERT_EQ(weft_comm_free(&again), WEFT_OK);
    ASSERT_EQ(weft_finalize(ctx), WEFT_OK);
    EXPECT_EQ(weft_comm_rank(world, &rank), WEFT_ERR_NOT_INITIALIZED) << "a finalized context's world";
    ASSERT_EQ(weft_init(&ctx), WEFT_OK);
    weft_comm_t world2 = nullptr;
    ASSERT_EQ(weft_comm_world(ctx, &world2), WEFT_OK);
    EXPECT_EQ(world2, world) << "the world's handle is the same in the next context";
    ASSERT_EQ(weft_finalize(ctx), WEFT_OK);
}
