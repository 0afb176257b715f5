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
// two buffered messages.
Snapshot sample(std::vector<uint8_t>& payload) {
    payload = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
    Snapshot s;
    s.engine_slot = 2;
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
    s.requests = {done, posted, ssend};
    s.posted = {1};
    s.messages = {SavedMessage{1, 20, saved::eager, 1, payload.size(), 0, payload.data()},
                  SavedMessage{3, 21, saved::eager_sync, 3, 0, uint64_t(9) << 32 | 2, nullptr}};
    return s;
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

}  // namespace

TEST(Snapshot, RoundTrip) {
    std::vector<uint8_t> payload;
    const Snapshot s = sample(payload);
    const std::vector<uint8_t> bytes = encode_snapshot(s);
    EXPECT_EQ(bytes.size() % 8, 0u);
    Snapshot p;
    ASSERT_EQ(parse_snapshot(bytes.data(), bytes.size(), world_size, "test", p), WEFT_OK);
    EXPECT_EQ(p.engine_slot, 2u);
    ASSERT_EQ(p.requests.size(), 3u);
    EXPECT_EQ(p.requests[1].index, 7u);
    EXPECT_EQ(p.requests[1].region, 3u);
    EXPECT_EQ(p.requests[1].offset, 64u);
    EXPECT_EQ(p.requests[1].src, WEFT_ANY_SOURCE);
    EXPECT_EQ(p.requests[0].status.source, 2);
    EXPECT_EQ(p.requests[0].status.bytes, 8u);
    EXPECT_EQ(p.requests[2].cookie, s.requests[2].cookie);
    EXPECT_EQ(p.posted, std::vector<uint32_t>{1});
    ASSERT_EQ(p.messages.size(), 2u);
    EXPECT_EQ(p.messages[0].len, payload.size());
    EXPECT_EQ(std::memcmp(p.messages[0].data, payload.data(), payload.size()), 0);
    EXPECT_GE(p.messages[0].data, bytes.data());
    EXPECT_EQ(p.messages[1].kind, uint32_t(saved::eager_sync));
    EXPECT_EQ(p.messages[1].len, 0u);
    // An empty state (no requests, nothing buffered) is valid too.
    EXPECT_EQ(parse(encode_snapshot(Snapshot{})), WEFT_OK);
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
    padding[20] = 1;  // the header's zero bytes
    EXPECT_EQ(parse(padding), WEFT_ERR_CORRUPT);
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
        std::memcpy(&bytes[24 + 68], &past, 4);  // the first request's status.error
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
}

// A request handle is an engine's slot and a place in its pool: one that
// names no engine, or no place, is refused (INVALID_ARG), never read.
TEST(RequestHandles, HandlesThatNameNothingAreRefused) {
    // A job of one, whatever launched the test binary.
    for (const char* v : {"WEFT_BOOTSTRAP", "WEFT_SECRET", "WEFT_JOB_SIZES", "WEFT_JOB", "WEFT_RANK", "PMIX_RANK",
                          "PMIX_NAMESPACE", "WEFT_TRANSPORT", "WEFT_FAULT_POINTS"})
        unsetenv(v);
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
