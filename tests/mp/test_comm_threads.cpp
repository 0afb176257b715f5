// test_comm_threads.cpp — communicators under WEFT_THREAD_MULTIPLE and with
// the progress thread (the lanes set MP_THREAD_MULTIPLE=1 or
// WEFT_PROGRESS_THREAD=1).
#include "tests/mp/mp_main.hpp"

#include <weft/comm.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <thread>
#include <vector>

namespace {

weft_comm_t world() {
    weft_comm_t w = nullptr;
    EXPECT_EQ(weft_comm_world(mp::ctx, &w), WEFT_OK);
    return w;
}

// Several threads per rank, each on its own duplicate of the world, run a
// ring exchange and allreduces at the same time.
TEST(CommThreads, ConcurrentRingsOnDuplicates) {
    constexpr int threads = 3, iterations = 1500;
    std::vector<weft_comm_t> comms(threads);
    for (auto& c : comms) ASSERT_EQ(weft_comm_dup(world(), &c), WEFT_OK);
    std::atomic<int> failures{0};
    auto body = [&](int t) {
        weft_comm_t c = comms[t];
        const uint32_t right = (mp::rank + 1) % mp::size, left = (mp::rank + mp::size - 1) % mp::size;
        for (int i = 0; i < iterations; ++i) {
            uint64_t out[4] = {mp::rank, uint64_t(t), uint64_t(i), 0xfeed}, in[4] = {};
            weft_request_t reqs[2];
            if (weft_irecv(c, in, 4, WEFT_UINT64, int32_t(left), i % 7, &reqs[0]) != WEFT_OK ||
                weft_isend(c, out, 4, WEFT_UINT64, right, i % 7, &reqs[1]) != WEFT_OK ||
                weft_request_waitall(2, reqs, nullptr) != WEFT_OK) {
                ++failures;
                return;
            }
            if (in[0] != left || in[1] != uint64_t(t) || in[2] != uint64_t(i) || in[3] != 0xfeed) ++failures;
            if (i % 100 == 0) {
                uint64_t one = 1, sum = 0;
                if (weft_allreduce(c, &one, &sum, 1, WEFT_UINT64, WEFT_OP_SUM) != WEFT_OK || sum != mp::size)
                    ++failures;
            }
        }
    };
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) pool.emplace_back(body, t);
    for (auto& th : pool) th.join();
    EXPECT_EQ(failures.load(), 0) << "rank " << mp::rank;
    for (auto& c : comms) ASSERT_EQ(weft_comm_free(&c), WEFT_OK);
}

// With a progress thread, a rank that makes no weft call still serves a
// peer's rendezvous. Rank 1 posts a receive and then only watches a word of
// its own window; rank 0's send can complete only once rank 1 has pulled
// the data, and rank 0 then writes that word with a put (which, over tcp,
// also needs rank 1 to progress).
TEST(CommThreads, ProgressThreadServesRendezvousWithoutCalls) {
    // The lanes without a progress thread filter this test out (GTEST_FILTER).
    const char* thread = std::getenv("WEFT_PROGRESS_THREAD");
    ASSERT_TRUE(thread && *thread == '1') << "run with WEFT_PROGRESS_THREAD=1";
    ASSERT_GE(mp::size, 2u) << "needs 2 ranks";
    void* base = nullptr;
    weft_window_t win = nullptr;
    ASSERT_EQ(weft_window_allocate(mp::ctx, 64, &base, &win), WEFT_OK);
    constexpr size_t n = 1 << 20;
    constexpr uint64_t sent = 0x5e17;
    std::vector<uint8_t> buf(n, 0);
    if (mp::rank == 0) {
        for (size_t i = 0; i < n; ++i) buf[i] = uint8_t(i * 13 + 1);
        ASSERT_EQ(weft_send(world(), buf.data(), n, WEFT_BYTE, 1, 3), WEFT_OK);
        ASSERT_EQ(weft_put(win, 1, 0, &sent, sizeof sent), WEFT_OK);
        ASSERT_EQ(weft_flush(win, 1), WEFT_OK);
    } else if (mp::rank == 1) {
        weft_request_t r;
        ASSERT_EQ(weft_irecv(world(), buf.data(), n, WEFT_BYTE, 0, 3, &r), WEFT_OK);
        std::atomic_ref<uint64_t> word(*static_cast<uint64_t*>(base));
        const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(20);
        while (word.load(std::memory_order_acquire) != sent && std::chrono::steady_clock::now() < end)
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
        EXPECT_EQ(word.load(), sent) << "rank 0's send did not complete while this rank made no call";
        ASSERT_EQ(weft_request_wait(&r, nullptr), WEFT_OK);
        for (size_t i = 0; i < n; ++i) ASSERT_EQ(buf[i], uint8_t(i * 13 + 1)) << i;
    }
    ASSERT_EQ(weft_barrier(world()), WEFT_OK);
    ASSERT_EQ(weft_window_free(win), WEFT_OK);
}

}  // namespace

int main(int argc, char** argv) { return mp::run_all(argc, argv); }
