// test_comm_mt.cpp — several application threads of each rank sharing the
// world communicator (and each with its own), under WEFT_THREAD_MULTIPLE
// (ctest sets MP_THREAD_MULTIPLE=1, see mp_main.cpp). Run over every lane.
#include "tests/mp/comm_util.hpp"

#include <thread>

using namespace mp;

namespace {

using Threads = CommTest;

// Each thread runs a ring on its own dup (with an allreduce now and then)
// and, with its own tag, a ring on the shared world communicator.
TEST_F(Threads, ConcurrentRingsAndAllreduces) {
    constexpr uint32_t kThreads = 4;
    const uint64_t iters = slow_fabric() ? 100 : 400;
    std::vector<weft_comm_t> cs(kThreads, nullptr);
    for (auto& c : cs) ASSERT_EQ(weft_comm_dup(w_, &c), WEFT_OK);
    auto body = [&](uint32_t t) {
        for (uint64_t i = 0; i < iters; ++i) {
            const std::string what = "thread " + std::to_string(t) + " iteration " + std::to_string(i);
            uint64_t out[2] = {rank * 1000003ull + i * 8 + t, ~(rank * 1000003ull + i * 8 + t)};
            uint64_t in[2] = {0, 0};
            weft_request_t reqs[4] = {};
            const int32_t tag = int32_t(10 + t);
            bool ok = weft_irecv(cs[t], &in[0], 1, WEFT_UINT64, int32_t(left_), tag, &reqs[0]) == WEFT_OK &&
                      weft_irecv(w_, &in[1], 1, WEFT_UINT64, int32_t(left_), tag, &reqs[1]) == WEFT_OK &&
                      weft_isend(cs[t], &out[0], 1, WEFT_UINT64, right_, tag, &reqs[2]) == WEFT_OK &&
                      weft_isend(w_, &out[1], 1, WEFT_UINT64, right_, tag, &reqs[3]) == WEFT_OK &&
                      weft_request_waitall(4, reqs, nullptr) == WEFT_OK;
            EXPECT_TRUE(ok) << what << ": a call failed";
            if (!ok) return;
            const uint64_t want = left_ * 1000003ull + i * 8 + t;
            EXPECT_EQ(in[0], want) << what << " on its dup";
            EXPECT_EQ(in[1], ~want) << what << " on the world";
            if (in[0] != want || in[1] != ~want) return;
            if (i % 10 == 0) {
                uint64_t v = t + i, sum = 0;
                EXPECT_EQ(weft_allreduce(cs[t], &v, &sum, 1, WEFT_UINT64, WEFT_OP_SUM), WEFT_OK) << what;
                EXPECT_EQ(sum, (t + i) * size) << what;
            }
        }
    };
    std::vector<std::thread> threads;
    for (uint32_t t = 0; t < kThreads; ++t) threads.emplace_back(body, t);
    for (auto& th : threads) th.join();
    for (auto& c : cs) ASSERT_EQ(weft_comm_free(&c), WEFT_OK);
}

// One thread blocks in a receive while another sends the message it waits
// for (to this very rank): blocking calls must not hold the context.
TEST_F(Threads, BlockedReceiveDoesNotBlockOtherThreads) {
    uint64_t got = 0;
    std::thread receiver([&] {
        weft_msg_status_t s = blank_status();
        EXPECT_EQ(weft_recv(w_, &got, 1, WEFT_UINT64, int32_t(rank), 77, &s), WEFT_OK) << describe(s);
    });
    // Let the receiver block first (not needed for correctness).
    const uint64_t until = now_ns() + 20000000;
    while (now_ns() < until) std::this_thread::yield();
    const uint64_t v = 0xabcdef00ull + rank;
    EXPECT_EQ(weft_send(w_, &v, 1, WEFT_UINT64, rank, 77), WEFT_OK);
    receiver.join();
    EXPECT_EQ(got, v);
}

}  // namespace

int main(int argc, char** argv) { return mp::run_all(argc, argv); }
