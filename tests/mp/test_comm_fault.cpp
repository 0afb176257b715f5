// test_comm_fault.cpp — a member SIGKILLed mid-collective makes the
// collective return an error on every survivor, never hang; survivors then
// finalize cleanly (mp_main).
//
// Run by ctest under `weft-run --keep-survivors` with the last rank as the
// victim, either at the named fault point "mp.comm.victim" (deterministic:
// it dies just before the loop, so no collective of the loop can complete)
// or on a timer while every rank loops (it dies at an arbitrary instruction,
// most likely inside a collective).
#include "tests/mp/comm_util.hpp"

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

using namespace mp;

namespace {

bool timed_mode() {
    const char* m = std::getenv("WEFT_TEST_FAULT_MODE");
    return m && std::string(m) == "timed";
}

// The collective loop every rank runs, in turn: a large allreduce on the
// world (on shm the bulk path, else a message schedule), a small allreduce
// and a barrier on the world (pinned flags), a small iallreduce on a dup
// (schedule), a large bcast from rank 0 and a large allgather on the world
// (bulk on shm). Returns the first
// error, after `i` successful collectives whose results were all correct.
weft_status_t collectives_until_error(weft_comm_t w, weft_comm_t d, uint64_t& i, double timeout_s) {
    const size_t large = 100000;
    std::vector<int64_t> in(large), out(large);
    const uint64_t end = now_ns() + uint64_t(timeout_s * 1e9);
    for (i = 0; now_ns() < end; ++i) {
        const int64_t v = int64_t(rank + i);
        std::fill(in.begin(), in.end(), v);
        std::fill(out.begin(), out.end(), -1);
        weft_status_t st = WEFT_OK;
        switch (i % 6) {
            case 0:
                st = weft_allreduce(w, in.data(), out.data(), large, WEFT_INT64, WEFT_OP_SUM);
                break;
            case 1:
                st = weft_barrier(w);
                break;
            case 2: {
                weft_request_t req = nullptr;
                st = weft_iallreduce(d, &v, out.data(), 1, WEFT_INT64, WEFT_OP_SUM, &req);
                if (st == WEFT_OK) st = weft_request_wait(&req, nullptr);
                break;
            }
            case 3:
                st = weft_allreduce(w, &v, out.data(), 1, WEFT_INT64, WEFT_OP_SUM);
                break;
            case 4:
                if (rank == 0) out = in;
                st = weft_bcast(w, out.data(), large, WEFT_INT64, 0);
                break;
            case 5:
                st = weft_allgather(w, in.data(), large / size, WEFT_INT64, out.data());
                break;
        }
        if (st != WEFT_OK) return st;
        const int64_t sum = int64_t(size * i + size * (size - 1) / 2);
        const size_t block = large / size;
        const uint64_t kind = i % 6;
        const size_t n = kind == 0 || kind == 4 ? large : kind == 5 ? block * size : kind == 1 ? 0 : 1;
        for (size_t k = 0; k < n; ++k) {
            const int64_t want = kind == 4 ? int64_t(i) : kind == 5 ? int64_t(k / block + i) : sum;
            if (out[k] != want) {
                ADD_FAILURE() << "collective " << i << " completed wrongly: element " << k << " is " << out[k]
                              << ", want " << want;
                break;
            }
        }
    }
    return WEFT_OK;
}

TEST(CommFault, KilledMemberFailsTheCollectiveOnEverySurvivor) {
    SCOPED_TRACE("rank " + std::to_string(rank) + " of " + std::to_string(size));
    ASSERT_GE(size, 2u);
    const uint32_t victim = size - 1;
    weft_comm_t w = world(), d = nullptr;
    ASSERT_EQ(weft_comm_dup(w, &d), WEFT_OK);
    int64_t one = 1, n = 0;
    ASSERT_EQ(weft_allreduce(d, &one, &n, 1, WEFT_INT64, WEFT_OP_SUM), WEFT_OK);
    ASSERT_EQ(n, int64_t(size));
    ASSERT_EQ(weft_barrier(w), WEFT_OK);
    // Every rank has left that barrier before the victim may die: a death
    // right after it may fail a barrier peers were still finishing.
    barrier();

    if (rank == victim && !timed_mode()) {
        weft_fault_point("mp.comm.victim");
        FAIL() << "the victim survived its fault point: run under weft-run --fault kill:rank=" << victim
               << ":at=mp.comm.victim";
        std::_Exit(3);
    }
    uint64_t done = 0;
    const uint64_t t0 = now_ns();
    // The victim (timed mode) loops until weft-run kills it.
    const weft_status_t st = collectives_until_error(w, d, done, rank == victim ? 1e9 : 120);
    ASSERT_NE(rank, victim) << "the victim outlived its collectives: " << weft_strerror(st);
    ASSERT_NE(st, WEFT_OK) << "no collective failed within 120 s (" << done << " completed)";
    // docs/communicators.md: every survivor learns of the failure itself and
    // fails its pending collectives; waiting out the deadline is not that.
    EXPECT_EQ(st, WEFT_ERR_PEER_FAILED) << "collective " << done << " (kind " << done % 6 << ")";
    if (!timed_mode()) {
        EXPECT_EQ(done, 0u) << "a collective completed without the dead member";
    }
    std::printf("[rank %u] collective %llu failed after %.1f ms: %s\n", rank, (unsigned long long)done,
                double(now_ns() - t0) / 1e6, weft_strerror(st));
    // Later collectives on either communicator fail too, promptly.
    int64_t sum = 0;
    EXPECT_NE(weft_allreduce(w, &one, &sum, 1, WEFT_INT64, WEFT_OP_SUM), WEFT_OK) << "world after the failure";
    EXPECT_NE(weft_barrier(d), WEFT_OK) << "dup after the failure";
    // Point-to-point with the dead rank fails rather than waits
    // (docs/communicators.md: receives naming it, sends awaiting its reply).
    uint64_t x = 0;
    weft_msg_status_t ms;
    EXPECT_EQ(weft_recv(w, &x, 1, WEFT_UINT64, int32_t(victim), 5, &ms), WEFT_ERR_PEER_FAILED)
        << "recv from the victim";
    EXPECT_EQ(weft_ssend(w, &x, 1, WEFT_UINT64, victim, 5), WEFT_ERR_PEER_FAILED) << "ssend to the victim";
    // Freeing the dup does not hang either (its deferred barrier cannot complete).
    EXPECT_EQ(weft_comm_free(&d), WEFT_OK);
}

}  // namespace

int main(int argc, char** argv) { return mp::run_all(argc, argv); }
