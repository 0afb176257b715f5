// test_drain_fault.cpp — drains with a member that fails or stops
// (docs/drain.md, "When a member fails or stops").
//
// Each test is its own ctest entry (tests/mp/CMakeLists.txt: GTEST_FILTER
// and the fault weft-run injects). A drain must end within its bound with a
// status that says why — WEFT_ERR_PEER_FAILED naming the failed member, or
// WEFT_ERR_TIMEOUT — and the job must go on: survivors still communicate
// and a later drain ends too.
//
// A drain that hangs holds weft on its rank (the entry gate is closed) and
// finalize would wait for it, so every wait for a drain here has a bound
// well inside weft-run's --timeout; past it the rank says which drain hung
// and exits at once (a clear failure instead of weft-run's kill). Bounds
// only: no time is asserted.
#include "tests/mp/comm_util.hpp"

#include <weft/drain.h>
#include <weft/ft.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>

#include <sys/types.h>

using namespace mp;

namespace {

uint32_t env_rank(const char* name, uint32_t fallback) {
    const char* v = std::getenv(name);
    return v && *v ? static_cast<uint32_t>(std::strtoul(v, nullptr, 10)) : fallback;
}

// Far below weft-run's --timeout (tests/mp/CMakeLists.txt) and far above
// anything the drain needs to end on a failure; below WEFT_DRAIN_TIMEOUT_MS
// (60 s in these tests unless set lower), so a drain that ends within it
// ended on the failure, not on its deadline.
constexpr uint64_t wait_bound_ms = 40000;

// Waits for drain `number`; past the bound the drain hangs: say so and
// leave now (finalize would wait for the stuck drain thread).
weft_drain_result_t wait_bounded(uint64_t number, const char* what) {
    weft_drain_result_t res{};
    const weft_status_t st = weft_drain_wait(ctx, number, wait_bound_ms, &res);
    if (st == WEFT_ERR_TIMEOUT && res.drain == 0) {
        std::fprintf(stderr,
                     "[rank %u] FAILED: drain %llu (%s) did not end within %llu ms: the drain hangs "
                     "(docs/drain.md: every failure case has a bound)\n",
                     rank, static_cast<unsigned long long>(number), what,
                     static_cast<unsigned long long>(wait_bound_ms));
        std::fflush(stderr);
        std::_Exit(4);
    }
    EXPECT_EQ(res.drain, number);
    EXPECT_EQ(st, res.status) << "weft_drain_wait returns the drain's status";
    return res;
}

uint64_t request() {
    uint64_t n = 0;
    EXPECT_EQ(weft_drain_request(ctx, &n), WEFT_OK);
    return n;
}

std::vector<uint32_t> survivors_without(uint32_t victim) {
    std::vector<uint32_t> v;
    for (uint32_t r = 0; r < size; ++r)
        if (r != victim) v.push_back(r);
    return v;
}

// Point-to-point around the ring of survivors: every survivor sends to the
// next and receives from the previous. Also lines the survivors up: none
// leaves before its neighbours reached the same place.
void survivor_ring(const std::vector<uint32_t>& live, int32_t tag) {
    const auto me = std::find(live.begin(), live.end(), rank) - live.begin();
    const uint32_t next = live[(me + 1) % live.size()], prev = live[(me + live.size() - 1) % live.size()];
    uint64_t out = 1000ull * rank + uint64_t(tag), in = 0;
    weft_request_t rr = nullptr, rs = nullptr;
    ASSERT_EQ(weft_irecv(world(), &in, 1, WEFT_UINT64, int32_t(prev), tag, &rr), WEFT_OK);
    ASSERT_EQ(weft_isend(world(), &out, 1, WEFT_UINT64, next, tag, &rs), WEFT_OK);
    ASSERT_EQ(weft_request_wait(&rs, nullptr), WEFT_OK) << "send to survivor " << next;
    ASSERT_EQ(weft_request_wait(&rr, nullptr), WEFT_OK) << "receive from survivor " << prev;
    EXPECT_EQ(in, 1000ull * prev + uint64_t(tag));
}

std::atomic<int> callbacks{0};
void on_quiescent(void*, const weft_drain_result_t*) { callbacks.fetch_add(1); }

// mp.drain_fault.*: a member is SIGKILLed before the drain
// (WEFT_TEST_DRAIN_KILL=before: the test's own point mp.drain.victim) or
// inside it (=during: weft-run arms one of the drain's points,
// drain.collective.attempt, drain.p2p.phase, drain.quiescent.barrier).
// Every survivor's drain ends with PEER_FAILED naming it; survivors still
// talk; a second drain ends the same way, at once.
TEST(DrainFault, EndsNamingTheKilledMember) {
    ASSERT_GE(size, 3u);
    const uint32_t victim = env_rank("WEFT_TEST_DRAIN_VICTIM", size - 1);
    ASSERT_LT(victim, size);
    const char* when = std::getenv("WEFT_TEST_DRAIN_KILL");
    const bool before = when && std::string(when) == "before";
    const uint32_t asker = victim == 0 ? 1 : 0;
    const std::vector<uint32_t> live = survivors_without(victim);
    ASSERT_EQ(weft_drain_set_callback(ctx, on_quiescent, nullptr), WEFT_OK);
    barrier();

    if (before) {
        if (rank == victim) {
            weft_fault_point("mp.drain.victim");
            std::fprintf(
                stderr,
                "[rank %u] survived mp.drain.victim: run under weft-run --fault kill:rank=%u:at=mp.drain.victim\n",
                rank, victim);
            std::_Exit(3);
        }
        ASSERT_TRUE(progress_until(
            [&] {
                int f = 0;
                return weft_peer_failed(ctx, victim, &f) == WEFT_OK && f;
            },
            30))
            << "the victim's death was not noticed within 30 s";
    }

    if (rank == asker) {
        EXPECT_EQ(request(), 1u);
    }
    const weft_drain_result_t first = wait_bounded(1, before ? "member dead before it" : "member killed inside it");
    if (rank == victim) {
        std::fprintf(stderr,
                     "[rank %u] the victim's drain ended (%s): run under weft-run --fault kill:rank=%u:at=drain.*\n",
                     rank, weft_strerror(first.status), victim);
        std::_Exit(3);
    }
    EXPECT_EQ(first.status, WEFT_ERR_PEER_FAILED) << "drain 1 with rank " << victim << " dead";
    EXPECT_EQ(first.failed_rank, victim) << "the result names the failed member";
    std::printf("[rank %u] drain 1: %s, failed rank %u, %u attempt(s), %d callback(s)\n", rank,
                weft_strerror(first.status), first.failed_rank, first.attempts, callbacks.load());

    // The job goes on among the survivors.
    survivor_ring(live, 11);

    // A later drain on a job with a dead member ends the same way, at once.
    if (rank == asker) {
        EXPECT_EQ(request(), 2u);
    }
    const weft_drain_result_t second = wait_bounded(2, "a later drain");
    EXPECT_EQ(second.status, WEFT_ERR_PEER_FAILED) << "drain 2";
    EXPECT_EQ(second.failed_rank, victim);
    EXPECT_EQ(second.attempts, 1u) << "a drain that starts with a member known dead makes no attempt to converge";

    survivor_ring(live, 12);
    ASSERT_EQ(weft_drain_set_callback(ctx, nullptr, nullptr), WEFT_OK);
    // Survivors leave together (test_ft.cpp's reason): without this one can
    // finalize and exit while a neighbour still waits for its last message,
    // and that receive then reads the exit as a failure.
    int one = 1;
    const weft_status_t st = weft_comm_agree(world(), &one);
    EXPECT_TRUE(st == WEFT_OK || st == WEFT_ERR_PEER_FAILED) << "closing agreement: " << weft_strerror(st);
}

char proc_state(pid_t pid) {
    std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
    std::string line;
    std::getline(f, line);
    const auto close = line.rfind(')');
    return close == std::string::npos || close + 2 >= line.size() ? '?' : line[close + 2];
}

// mp.drain_fault.stopped.*: a member is SIGSTOPped (weft-run --fault
// stop:...:at=mp.drain.stop) and nothing declares it failed (heartbeats not
// observed: WEFT_FT_TIMEOUT_MS=0). The drain cannot finish: it ends at
// WEFT_DRAIN_TIMEOUT_MS (2 s here) with TIMEOUT on the others. Rank 0 then
// resumes the member (SIGCONT): its drain ends with the same status, the
// whole job runs a barrier, and the next drain succeeds on every rank.
TEST(DrainFault, EndsAtItsDeadlineWithAStoppedMember) {
    ASSERT_GE(size, 2u);
    const uint32_t victim = size - 1;
    ASSERT_EQ(weft_drain_set_callback(ctx, on_quiescent, nullptr), WEFT_OK);
    barrier();
    if (rank == victim) {
        const uint64_t pid = uint64_t(getpid());
        ASSERT_EQ(weft_send(world(), &pid, 1, WEFT_UINT64, 0, 21), WEFT_OK);
        weft_fault_point("mp.drain.stop");  // stopped here until rank 0 sends SIGCONT
    } else if (rank == 0) {
        uint64_t pid = 0;
        ASSERT_EQ(weft_recv(world(), &pid, 1, WEFT_UINT64, int32_t(victim), 21, nullptr), WEFT_OK);
        const uint64_t end = now_ns() + 20000000000ull;
        while (proc_state(pid_t(pid)) != 'T' && now_ns() < end)
            std::this_thread::sleep_for(std::chrono::milliseconds(2));
        ASSERT_EQ(proc_state(pid_t(pid)), 'T')
            << "rank " << victim << " did not stop: run under weft-run --fault stop:rank=" << victim
            << ":at=mp.drain.stop";
        EXPECT_EQ(request(), 1u);
        const weft_drain_result_t res = wait_bounded(1, "a member stopped");
        EXPECT_EQ(res.status, WEFT_ERR_TIMEOUT) << "drain 1 with rank " << victim << " stopped";
        EXPECT_EQ(res.failed_rank, UINT32_MAX);
        // Now resume it; its drain ends the same way (the decision says so).
        ASSERT_EQ(kill(pid_t(pid), SIGCONT), 0);
    }
    if (rank != 0) {
        const weft_drain_result_t res = wait_bounded(1, "a member stopped");
        EXPECT_EQ(res.status, WEFT_ERR_TIMEOUT) << "drain 1 with rank " << victim << " stopped";
    }
    EXPECT_EQ(callbacks.load(), 0) << "no quiescent point, no callback";
    // The job goes on: a barrier over everyone, then a drain that succeeds.
    ASSERT_EQ(weft_barrier(world()), WEFT_OK);
    if (rank == 0) {
        EXPECT_EQ(request(), 2u);
    }
    const weft_drain_result_t again = wait_bounded(2, "after the member resumed");
    EXPECT_EQ(again.status, WEFT_OK) << "drain 2, every member alive";
    EXPECT_EQ(callbacks.load(), 1);
    ASSERT_EQ(weft_barrier(world()), WEFT_OK);
    ASSERT_EQ(weft_drain_set_callback(ctx, nullptr, nullptr), WEFT_OK);
}

}  // namespace

int main(int argc, char** argv) { return mp::run_all(argc, argv); }
