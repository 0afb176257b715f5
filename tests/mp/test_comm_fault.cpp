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

#include <cstdlib>
#include <string>

using namespace mp;

namespace {

bool timed_mode() {
    const char* m = std::getenv("WEFT_TEST_FAULT_MODE");
    return m && std::string(m) == "timed";
}

// The collective loop every rank runs: allreduce and barrier on the world,
// iallreduce on a dup, in turn. Returns the first error, after `i`
// successful collectives whose results were all correct.
weft_status_t collectives_until_error(weft_comm_t w, weft_comm_t d, uint64_t& i, double timeout_s) {
    const uint64_t end = now_ns() + uint64_t(timeout_s * 1e9);
    for (i = 0; now_ns() < end; ++i) {
        const int64_t v = int64_t(rank + i);
        int64_t sum = -1;
        weft_status_t st = WEFT_OK;
        switch (i % 3) {
            case 0: st = weft_allreduce(w, &v, &sum, 1, WEFT_INT64, WEFT_OP_SUM); break;
            case 1: st = weft_barrier(w); break;
            case 2: {
                weft_request_t req = nullptr;
                st = weft_iallreduce(d, &v, &sum, 1, WEFT_INT64, WEFT_OP_SUM, &req);
                if (st == WEFT_OK) st = weft_request_wait(&req, nullptr);
                break;
            }
        }
        if (st != WEFT_OK) return st;
        if (i % 3 != 1) {
            EXPECT_EQ(sum, int64_t(size * i + size * (size - 1) / 2)) << "collective " << i << " completed wrongly";
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
    if (!timed_mode()) {
        EXPECT_EQ(done, 0u) << "a collective completed without the dead member";
    }
    std::printf("[rank %u] collective %llu failed after %.1f ms: %s\n", rank, (unsigned long long)done,
                double(now_ns() - t0) / 1e6, weft_strerror(st));
    // Later collectives on either communicator fail too, promptly.
    int64_t sum = 0;
    EXPECT_NE(weft_allreduce(w, &one, &sum, 1, WEFT_INT64, WEFT_OP_SUM), WEFT_OK) << "world after the failure";
    EXPECT_NE(weft_barrier(d), WEFT_OK) << "dup after the failure";
    // Freeing the dup does not hang either (its deferred barrier cannot complete).
    EXPECT_EQ(weft_comm_free(&d), WEFT_OK);
}

}  // namespace

int main(int argc, char** argv) { return mp::run_all(argc, argv); }
