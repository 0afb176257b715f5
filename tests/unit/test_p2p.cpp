// test_p2p.cpp — point-to-point's medium path (group/p2p.hpp): unexpected
// messages held in the Engine's buffer pool (group/buffer_pool.hpp) and
// replies that find their send by the cookie's index and generation, where
// a stale or forged reply finds nothing.
//
// The engine tests run a singleton job and send to themselves: a message
// sent before its receive is posted is unexpected, and a reply is injected
// as the transport delivers it (an active message on the reply handler).
#include "group/buffer_pool.hpp"
#include "group/engine.hpp"
#include "group/layer.hpp"
#include "transport/runtime.hpp"

#include <weft/comm.h>
#include <weft/weft.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <set>
#include <vector>

namespace {

using weft::group::BufferPool;

TEST(BufferPool, ReusesABlockOfTheSameClass) {
    BufferPool pool;
    uint8_t* first;
    {
        BufferPool::Buffer b = pool.take(100);  // class 128 B
        ASSERT_NE(b.data(), nullptr);
        EXPECT_EQ(b.size(), 100u);
        std::memset(b.data(), 0xab, 128);  // the whole block is ours (ASan checks)
        first = b.data();
    }
    EXPECT_EQ(pool.free_blocks(), 1u);
    BufferPool::Buffer again = pool.take(65);  // same class
    EXPECT_EQ(again.data(), first);
    EXPECT_EQ(pool.allocations(), 1u);
    BufferPool::Buffer other = pool.take(64);  // class 64 B: a new block
    EXPECT_NE(other.data(), first);
    EXPECT_EQ(pool.allocations(), 2u);
}

TEST(BufferPool, EmptyAndOversizedBuffers) {
    BufferPool pool;
    BufferPool::Buffer none = pool.take(0);
    EXPECT_EQ(none.data(), nullptr);
    EXPECT_EQ(none.size(), 0u);
    {
        BufferPool::Buffer big = pool.take(BufferPool::max_pooled + 1);
        ASSERT_NE(big.data(), nullptr);
        std::memset(big.data(), 1, big.size());
    }
    EXPECT_EQ(pool.free_blocks(), 0u);  // freed, not kept
    EXPECT_EQ(pool.allocations(), 0u);
    BufferPool::Buffer top = pool.take(BufferPool::max_pooled);
    EXPECT_EQ(pool.allocations(), 1u);
}

TEST(BufferPool, MoveTransfersOwnership) {
    BufferPool pool;
    const uint8_t bytes[5] = {1, 2, 3, 4, 5};
    BufferPool::Buffer a = pool.copy(bytes, sizeof bytes);
    uint8_t* block = a.data();
    BufferPool::Buffer b = std::move(a);
    EXPECT_EQ(a.data(), nullptr);
    EXPECT_EQ(b.data(), block);
    EXPECT_EQ(std::memcmp(b.data(), bytes, sizeof bytes), 0);
    BufferPool::Buffer c = pool.take(10);
    c = std::move(b);  // c's own block goes back
    EXPECT_EQ(pool.free_blocks(), 1u);
    EXPECT_EQ(c.data(), block);
    c.reset();
    EXPECT_EQ(pool.free_blocks(), 2u);
}

TEST(BufferPool, FreeListsAreBounded) {
    BufferPool pool;
    std::vector<BufferPool::Buffer> burst;
    for (int i = 0; i < 64; ++i) burst.push_back(pool.take(BufferPool::max_pooled));
    burst.clear();
    EXPECT_EQ(pool.free_blocks(), BufferPool::free_bytes_per_class / BufferPool::max_pooled);
}

// ---------------------------------------------------------------- engine
void clear_launcher_env() {
    for (const char* v :
         {"WEFT_BOOTSTRAP", "WEFT_SECRET", "WEFT_JOB_SIZES", "WEFT_JOB", "WEFT_RANK", "PMIX_RANK", "PMIX_NAMESPACE",
          "PMIX_SERVER_URI2", "PMIX_SERVER_URI3", "PMIX_SERVER_URI4", "WEFT_TRANSPORT", "WEFT_FAULT_POINTS"})
        unsetenv(v);
}

class P2pSelf : public ::testing::Test {
protected:
    void SetUp() override {
        clear_launcher_env();
        ASSERT_EQ(weft_init(&ctx), WEFT_OK);
        ASSERT_EQ(weft_comm_world(ctx, &world), WEFT_OK);
        eng = weft::group::engine_of(*weft::runtime_of(ctx));
        ASSERT_NE(eng, nullptr);
    }
    void TearDown() override {
        if (ctx) {
            EXPECT_EQ(weft_finalize(ctx), WEFT_OK);
        }
    }
    // A reply as the transport hands it to point-to-point (p2p.cpp: the
    // handler after the message handler).
    void inject_reply(uint64_t cookie) {
        const weft::group::P2p::WireReply w{cookie, weft::group::P2p::done_reply, 0};
        ASSERT_EQ(weft::runtime_of(ctx)->backend().am_send(0, weft::Runtime::am_internal_first + 1, &w, sizeof w),
                  WEFT_OK);
        for (int i = 0; i < 100; ++i) weft_progress(ctx, nullptr);
    }
    static uint64_t cookie_of(weft_request_t r) { return weft::group::Engine::request_of(r)->cookie; }
    static bool done(weft_request_t r) { return weft::group::Engine::request_of(r)->done; }

    weft_context_t ctx = nullptr;
    weft_comm_t world = nullptr;
    weft::group::Engine* eng = nullptr;
};

TEST_F(P2pSelf, UnexpectedMessagesReuseThePoolsBlocks) {
    constexpr int n = 32;
    std::vector<uint64_t> out(64), in(64);
    auto round = [&] {
        for (int i = 0; i < n; ++i) {
            out.assign(64, uint64_t(i));
            ASSERT_EQ(weft_send(world, out.data(), out.size(), WEFT_UINT64, 0, i), WEFT_OK);
        }
        // Delivered in order: once the last is here, every one waits unexpected.
        ASSERT_EQ(weft_probe(world, 0, n - 1, nullptr), WEFT_OK);
        for (int i = n - 1; i >= 0; --i) {  // taken out of order
            weft_msg_status_t st;
            ASSERT_EQ(weft_recv(world, in.data(), in.size(), WEFT_UINT64, 0, i, &st), WEFT_OK);
            EXPECT_EQ(st.bytes, 512u);
            EXPECT_EQ(in[0], uint64_t(i));
            EXPECT_EQ(in[63], uint64_t(i));
        }
    };
    round();
    const uint64_t after_first = eng->buffers().allocations();
    EXPECT_GE(after_first, uint64_t(n));  // each held its own block
    EXPECT_GE(eng->buffers().free_blocks(), size_t(n));
    for (int k = 0; k < 5; ++k) round();
    EXPECT_EQ(eng->buffers().allocations(), after_first) << "steady state allocates no new blocks";
}

TEST_F(P2pSelf, AReplyFindsItsSendByCookie) {
    uint64_t word = 7, got = 0;
    weft_request_t s, r;
    ASSERT_EQ(weft_issend(world, &word, 1, WEFT_UINT64, 0, 3, &s), WEFT_OK);
    const uint64_t cookie = cookie_of(s);
    ASSERT_NE(cookie, 0u);
    // A reply naming another generation of the same request, or another
    // request, completes nothing.
    inject_reply(cookie + (uint64_t(1) << 32));
    inject_reply(cookie ^ 1);
    EXPECT_FALSE(done(s));
    ASSERT_EQ(weft_irecv(world, &got, 1, WEFT_UINT64, 0, 3, &r), WEFT_OK);
    ASSERT_EQ(weft_request_wait(&r, nullptr), WEFT_OK);
    ASSERT_EQ(weft_request_wait(&s, nullptr), WEFT_OK);  // the receiver's ACK
    EXPECT_EQ(got, 7u);

    // The same pool slot serves the next send under a new generation: the
    // old ACK arriving late must not complete it.
    ASSERT_EQ(weft_issend(world, &word, 1, WEFT_UINT64, 0, 4, &s), WEFT_OK);
    const uint64_t next = cookie_of(s);
    EXPECT_NE(next, cookie);
    EXPECT_EQ(next & 0xffffffffu, cookie & 0xffffffffu) << "the freed request was reused";
    inject_reply(cookie);
    EXPECT_FALSE(done(s)) << "a stale reply completed a send whose receive was never posted";
    ASSERT_EQ(weft_irecv(world, &got, 1, WEFT_UINT64, 0, 4, &r), WEFT_OK);
    ASSERT_EQ(weft_request_wait(&r, nullptr), WEFT_OK);
    ASSERT_EQ(weft_request_wait(&s, nullptr), WEFT_OK);
}

TEST_F(P2pSelf, CookiesOfLiveSendsAreDistinct) {
    constexpr int n = 16;
    uint64_t words[n] = {};
    weft_request_t s[n];
    std::set<uint64_t> cookies;
    for (int i = 0; i < n; ++i) {
        ASSERT_EQ(weft_issend(world, &words[i], 1, WEFT_UINT64, 0, 9, &s[i]), WEFT_OK);
        cookies.insert(cookie_of(s[i]));
    }
    EXPECT_EQ(cookies.size(), size_t(n));
    for (int i = 0; i < n; ++i) {
        uint64_t got;
        ASSERT_EQ(weft_recv(world, &got, 1, WEFT_UINT64, 0, 9, nullptr), WEFT_OK);
    }
    for (int i = 0; i < n; ++i) EXPECT_EQ(weft_request_wait(&s[i], nullptr), WEFT_OK);
}

}  // namespace
