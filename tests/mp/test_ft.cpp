// test_ft.cpp — fault tolerance (weft/ft.h): failures found and reported,
// failed sets with FAILED_NEW per thread, validate_global / agree / shrink
// uniform on every survivor even when their coordinator dies, heartbeats
// for stopped processes and fencing, revoke, bad input.
//
// Every test is its own ctest entry (tests/mp/CMakeLists.txt, GTEST_FILTER)
// with the fault it needs, injected by weft-run (--keep-survivors): SIGKILL
// at a named fault point or on a timer, SIGSTOP for a while. Victims are
// named by rank in each test. Waits are bounded; times are printed for the
// record, never asserted.
#include "group/ft.hpp"
#include "tests/mp/comm_util.hpp"
#include "tests/mp/raw_enums.h"

#include <weft/drain.h>
#include <weft/ft.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <poll.h>
#include <sys/syscall.h>
#include <thread>
#include <unistd.h>

using namespace mp;

namespace {

std::vector<uint32_t> get_failed(weft_comm_t c, weft_failed_set_t which, weft_failed_kind_t kind) {
    size_t n = 0;
    EXPECT_EQ(weft_comm_get_failed(c, which, kind, nullptr, 0, &n), WEFT_OK) << "size query";
    std::vector<uint32_t> v(n);
    EXPECT_EQ(weft_comm_get_failed(c, which, kind, v.data(), v.size(), &n), WEFT_OK);
    EXPECT_EQ(n, v.size());
    return v;
}

// Polls validate_local until |L| >= want; the num_new of the call that
// got there (or UINT32_MAX after timeout_s).
uint32_t wait_failed(weft_comm_t c, uint32_t want, double timeout_s = 30) {
    const uint64_t end = now_ns() + uint64_t(timeout_s * 1e9);
    uint32_t total = 0, fresh = 0, fresh_sum = 0;
    while (now_ns() < end) {
        EXPECT_EQ(weft_comm_validate_local(c, &total, &fresh), WEFT_OK);
        fresh_sum += fresh;
        if (total >= want) return fresh_sum;
        // Sleeps (up to 1 ms) but wakes at once when a failure is declared;
        // spinning ranks would starve the victim and the monitor thread.
        weft_wait(ctx, 1000000);
    }
    return UINT32_MAX;
}

// Progresses for `s` seconds (a bounded pause that keeps weft moving).
void progress_for(double s) {
    const uint64_t end = now_ns() + uint64_t(s * 1e9);
    while (now_ns() < end) weft_wait(ctx, 1000000);
}

[[noreturn]] void die_at(const char* point) {
    weft_fault_point(point);
    std::fprintf(stderr, "[rank %u] survived fault point %s: run under weft-run --fault kill:...:at=%s\n", rank, point,
                 point);
    std::_Exit(3);
}

// Survivors hand a vector to the lowest survivor, which compares them all.
void expect_same_everywhere(weft_comm_t w, const std::vector<uint64_t>& mine, const std::vector<uint32_t>& survivors,
                            const char* what) {
    const uint32_t root = survivors.front();
    const int32_t tag = 4242;
    if (rank != root) {
        ASSERT_EQ(weft_send(w, mine.data(), mine.size(), WEFT_UINT64, root, tag), WEFT_OK) << what;
        return;
    }
    for (uint32_t r : survivors) {
        if (r == root) continue;
        std::vector<uint64_t> theirs(mine.size() + 1, 0xdead);
        weft_msg_status_t s;
        ASSERT_EQ(weft_recv(w, theirs.data(), theirs.size(), WEFT_UINT64, int32_t(r), tag, &s), WEFT_OK) << what;
        theirs.resize(s.bytes / 8);
        EXPECT_EQ(theirs, mine) << what << ": rank " << r << " differs from rank " << root;
    }
}

std::vector<uint32_t> all_but(std::initializer_list<uint32_t> dead) {
    std::vector<uint32_t> v;
    for (uint32_t r = 0; r < size; ++r)
        if (std::find(dead.begin(), dead.end(), r) == dead.end()) v.push_back(r);
    return v;
}

std::vector<uint64_t> widen(const std::vector<uint32_t>& v) { return std::vector<uint64_t>(v.begin(), v.end()); }

class Ft : public testing::Test {
protected:
    // Survivors end together with an agreement: the launcher's barrier
    // fails once a rank died, so without this a rank could finalize and
    // exit while a peer is still inside the test's last collective (its
    // exit then reads as a failure there). An agreement is safe for that:
    // its coordinator returns only after every survivor accepted, and its
    // COMMIT is delivered before its exit is noticed.
    void TearDown() override {
        if (fenced_) return;  // the others no longer hear it
        int one = 1;
        const weft_status_t st = weft_comm_agree(w_, &one);
        EXPECT_TRUE(st == WEFT_OK || st == WEFT_ERR_PEER_FAILED) << "closing agreement: " << weft_strerror(st);
    }
    testing::ScopedTrace trace_{__FILE__, __LINE__, "rank " + std::to_string(rank) + " of " + std::to_string(size)};
    // Whether c reads as revoked here within `seconds` (progressing).
    static bool revoked_within(weft_comm_t c, double seconds) {
        int revoked = 0;
        const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
        while (!revoked && std::chrono::steady_clock::now() < until) {
            weft_comm_is_revoked(c, &revoked);
            if (!revoked) progress_for(0.001);
        }
        return revoked == 1;
    }
    // After a creation (status st, communicator d) that a member died in:
    // whether every survivor made it is agreed (the world has a dead
    // member), and where it was made but not everywhere it must be revoked.
    void expect_revoked_unless_every_survivor_made(weft_status_t st, weft_comm_t d, const char* what) {
        EXPECT_TRUE(st == WEFT_OK || st == WEFT_ERR_PEER_FAILED || st == WEFT_ERR_REVOKED) << weft_strerror(st);
        int all_made = st == WEFT_OK ? 1 : 0;
        const weft_status_t ast = weft_comm_agree(w_, &all_made);
        EXPECT_TRUE(ast == WEFT_OK || ast == WEFT_ERR_PEER_FAILED) << weft_strerror(ast);
        std::printf("[rank %u] %s %s; every survivor made it: %d\n", rank, what, weft_strerror(st), all_made);
        if (st == WEFT_OK && !all_made) {
            EXPECT_TRUE(revoked_within(d, 20)) << "a communicator some survivors do not have stayed usable here";
        }
    }
    static void free_both(weft_comm_t& parent, weft_comm_t& child) {
        if (child) {
            EXPECT_EQ(weft_comm_free(&child), WEFT_OK);
        }
        EXPECT_EQ(weft_comm_free(&parent), WEFT_OK);
    }
    weft_comm_t w_ = world();
    bool fenced_ = false;  // this rank was declared failed (stopped too long)
};

// ------------------------------------------------------------ SIGKILL
// mp.ft.kill.*: the last rank is killed at mp.ft.victim. Every survivor
// gets PEER_FAILED from a barrier, and again after a pause; L names the
// victim. Prints the time from the victim's last word to the failure
// being known here (the victim stamps our window just before it dies).
TEST_F(Ft, KilledRankFailsBarrierEverywhereAndAgainAfterAPause) {
    ASSERT_GE(size, 2u);
    const uint32_t victim = size - 1;
    void* base = nullptr;
    weft_window_t win = nullptr;
    ASSERT_EQ(weft_window_allocate(ctx, 64, &base, &win), WEFT_OK);
    // A communicator without the victim, made before it dies.
    weft_comm_t rest = nullptr;
    ASSERT_EQ(weft_comm_split(w_, rank == victim ? WEFT_UNDEFINED : 0, 0, &rest), WEFT_OK);
    ASSERT_EQ(weft_barrier(w_), WEFT_OK);
    barrier();
    if (rank == victim) {
        const uint64_t t = now_ns();
        for (uint32_t r = 0; r < size; ++r)
            if (r != rank) {
                ASSERT_EQ(weft_put(win, r, 0, &t, sizeof t), WEFT_OK);
            }
        for (uint32_t r = 0; r < size; ++r)
            if (r != rank) {
                ASSERT_EQ(weft_flush(win, r), WEFT_OK);
            }
        die_at("mp.ft.victim");
    }
    ASSERT_NE(wait_failed(w_, 1), UINT32_MAX) << "the victim was never declared failed";
    const uint64_t seen = now_ns();
    const uint64_t stamped = std::atomic_ref<uint64_t>(*static_cast<uint64_t*>(base)).load();
    if (stamped)
        std::fprintf(stderr, "[ft] rank %u of %u: SIGKILL known after %.1f us\n", rank, size,
                     double(seen - stamped) / 1e3);
    EXPECT_EQ(get_failed(w_, WEFT_FAILED_LOCAL, WEFT_FAILED_ALL), std::vector<uint32_t>{victim});
    EXPECT_EQ(weft_barrier(w_), WEFT_ERR_PEER_FAILED);
    progress_for(0.2);
    EXPECT_EQ(weft_barrier(w_), WEFT_ERR_PEER_FAILED) << "after a pause";
    int64_t one = 1, sum = 0;
    EXPECT_EQ(weft_allreduce(w_, &one, &sum, 1, WEFT_INT64, WEFT_OP_SUM), WEFT_ERR_PEER_FAILED);
    // The communicator without the victim is insulated.
    EXPECT_EQ(weft_allreduce(rest, &one, &sum, 1, WEFT_INT64, WEFT_OP_SUM), WEFT_OK);
    EXPECT_EQ(sum, int64_t(size - 1));
    EXPECT_EQ(weft_barrier(rest), WEFT_OK);
    uint32_t n = 9, nn = 9;
    EXPECT_EQ(weft_comm_validate_local(rest, &n, &nn), WEFT_OK);
    EXPECT_EQ(n, 0u) << "the victim is no member of it";
    EXPECT_EQ(weft_comm_free(&rest), WEFT_OK);
}

// mp.ft.new.*: rank size-1 dies at mp.ft.victim1; rank size-2 once every
// survivor has looked twice (it waits for their messages), at
// mp.ft.victim2. FAILED_NEW gives {r1}, {}, {r2}; two other threads each
// see r1 once; a small buffer reports the size needed; validate_global
// makes G = L.
TEST_F(Ft, FailedNewPerCallAndPerThread) {
    ASSERT_GE(size, 3u);
    const uint32_t r1 = size - 1, r2 = size - 2;
    barrier();
    if (rank == r1) die_at("mp.ft.victim1");
    if (rank == r2) {
        ASSERT_NE(wait_failed(w_, 1), UINT32_MAX);
        for (uint32_t r = 0; r < r2; ++r) {
            uint64_t x = 0;
            ASSERT_EQ(weft_recv(w_, &x, 1, WEFT_UINT64, int32_t(r), 77, nullptr), WEFT_OK);
        }
        die_at("mp.ft.victim2");
    }
    EXPECT_EQ(get_failed(w_, WEFT_FAILED_LOCAL, WEFT_FAILED_ALL), std::vector<uint32_t>{}) << "before any validate";
    ASSERT_EQ(wait_failed(w_, 1), 1u);
    EXPECT_EQ(get_failed(w_, WEFT_FAILED_LOCAL, WEFT_FAILED_NEW), std::vector<uint32_t>{r1});
    uint32_t total = 0, fresh = 0;
    ASSERT_EQ(weft_comm_validate_local(w_, &total, &fresh), WEFT_OK);
    EXPECT_EQ(total, 1u);
    EXPECT_EQ(fresh, 0u);
    EXPECT_EQ(get_failed(w_, WEFT_FAILED_LOCAL, WEFT_FAILED_NEW), std::vector<uint32_t>{}) << "second call";
    // r1 is in L but not recognised: operations naming it fail. Cleared,
    // point-to-point with it is PROC_NULL.
    {
        uint64_t x = 7;
        weft_msg_status_t s = blank_status();
        EXPECT_EQ(weft_recv(w_, &x, 1, WEFT_UINT64, int32_t(r1), 3, &s), WEFT_ERR_PEER_FAILED) << "not cleared yet";
        // Any-source: a message already here still matches; otherwise the
        // unrecognised failure is reported (PENDING), nothing is posted.
        uint64_t y = 42, z = 0;
        ASSERT_EQ(weft_send(w_, &y, 1, WEFT_UINT64, rank, 8), WEFT_OK);
        EXPECT_EQ(weft_recv(w_, &z, 1, WEFT_UINT64, WEFT_ANY_SOURCE, 8, &s), WEFT_OK) << "a queued message matches";
        EXPECT_EQ(z, 42u);
        EXPECT_EQ(weft_recv(w_, &z, 1, WEFT_UINT64, WEFT_ANY_SOURCE, 8, &s), WEFT_ERR_PEER_FAILED_PENDING);
        const uint32_t ask[2] = {r1, 0};
        weft_rank_state_t states[2] = {WEFT_RANK_OK, WEFT_RANK_CLEARED};
        EXPECT_EQ(weft_comm_rank_states(w_, ask, 2, states), WEFT_OK);
        EXPECT_EQ(states[0], WEFT_RANK_FAILED);
        EXPECT_EQ(states[1], WEFT_RANK_OK);
        EXPECT_EQ(get_failed(w_, WEFT_FAILED_UNCLEARED, WEFT_FAILED_ALL), std::vector<uint32_t>{r1});
        EXPECT_EQ(weft_comm_validate_clear(w_, ask, 2), WEFT_ERR_INVALID_ARG) << "rank 0 is not in L";
        EXPECT_EQ(get_failed(w_, WEFT_FAILED_CLEARED, WEFT_FAILED_ALL), std::vector<uint32_t>{}) << "all or nothing";
        const uint32_t bad = size;
        EXPECT_EQ(weft_comm_validate_clear(w_, &bad, 1), WEFT_ERR_INVALID_RANK);
        ASSERT_EQ(weft_comm_validate_clear(w_, &r1, 1), WEFT_OK);
        EXPECT_EQ(weft_comm_rank_states(w_, ask, 1, states), WEFT_OK);
        EXPECT_EQ(states[0], WEFT_RANK_CLEARED);
        EXPECT_EQ(get_failed(w_, WEFT_FAILED_CLEARED, WEFT_FAILED_ALL), std::vector<uint32_t>{r1});
        EXPECT_EQ(get_failed(w_, WEFT_FAILED_UNCLEARED, WEFT_FAILED_ALL), std::vector<uint32_t>{});
        weft_request_t pending = nullptr;
        EXPECT_EQ(weft_irecv(w_, &z, 1, WEFT_UINT64, WEFT_ANY_SOURCE, 8, &pending), WEFT_OK) << "r1 is recognised now";
        EXPECT_EQ(weft_request_cancel(pending), WEFT_OK);
        EXPECT_EQ(weft_request_wait(&pending, &s), WEFT_OK);
        EXPECT_EQ(s.cancelled, 1);
        size_t count = 0;
        EXPECT_EQ(weft_comm_get_failed(w_, WEFT_FAILED_CLEARED, WEFT_FAILED_NEW, nullptr, 0, &count),
                  WEFT_ERR_INVALID_ARG);
        s = blank_status();
        EXPECT_EQ(weft_recv(w_, &x, 1, WEFT_UINT64, int32_t(r1), 3, &s), WEFT_OK);
        EXPECT_EQ(s.source, WEFT_PROC_NULL);
        EXPECT_EQ(s.tag, WEFT_ANY_TAG);
        EXPECT_EQ(s.bytes, 0u);
        EXPECT_EQ(x, 7u) << "a PROC_NULL receive wrote the buffer";
        EXPECT_EQ(weft_ssend(w_, &x, 1, WEFT_UINT64, r1, 3), WEFT_OK);
        weft_request_t req = nullptr;
        ASSERT_EQ(weft_irecv(w_, &x, 1, WEFT_UINT64, int32_t(r1), 3, &req), WEFT_OK);
        int flag = 0;
        EXPECT_EQ(weft_request_test(&req, &flag, &s), WEFT_OK);
        EXPECT_EQ(flag, 1) << "a PROC_NULL receive completes at once";
        EXPECT_EQ(s.source, WEFT_PROC_NULL);
    }
    // Two more threads (one at a time: the context is SERIALIZED), each
    // with its own cursor: each sees r1 once.
    for (int t = 0; t < 2; ++t) {
        std::thread th([&] {
            uint32_t n = 0, nn = 0;
            EXPECT_EQ(weft_comm_validate_local(w_, &n, &nn), WEFT_OK);
            EXPECT_EQ(nn, 1u) << "thread " << t;
            EXPECT_EQ(get_failed(w_, WEFT_FAILED_LOCAL, WEFT_FAILED_NEW), std::vector<uint32_t>{r1}) << "thread " << t;
            EXPECT_EQ(weft_comm_validate_local(w_, &n, &nn), WEFT_OK);
            EXPECT_EQ(nn, 0u) << "thread " << t;
            EXPECT_EQ(get_failed(w_, WEFT_FAILED_LOCAL, WEFT_FAILED_NEW), std::vector<uint32_t>{}) << "thread " << t;
        });
        th.join();
    }
    uint64_t x = rank;
    ASSERT_EQ(weft_send(w_, &x, 1, WEFT_UINT64, r2, 77), WEFT_OK);
    ASSERT_EQ(wait_failed(w_, 2), 1u);
    EXPECT_EQ(get_failed(w_, WEFT_FAILED_LOCAL, WEFT_FAILED_NEW), std::vector<uint32_t>{r2});
    EXPECT_EQ(get_failed(w_, WEFT_FAILED_LOCAL, WEFT_FAILED_ALL), (std::vector<uint32_t>{r2, r1}));
    uint32_t small[1] = {12345};
    size_t count = 0;
    EXPECT_EQ(weft_comm_get_failed(w_, WEFT_FAILED_LOCAL, WEFT_FAILED_ALL, small, 1, &count), WEFT_ERR_TRUNCATE);
    EXPECT_EQ(count, 2u) << "the size needed";
    EXPECT_EQ(small[0], 12345u) << "nothing written to a buffer too small";
    EXPECT_EQ(get_failed(w_, WEFT_FAILED_GLOBAL, WEFT_FAILED_ALL), std::vector<uint32_t>{});
    ASSERT_EQ(weft_comm_validate_global(w_, &total, &fresh), WEFT_OK);
    EXPECT_EQ(total, 2u);
    EXPECT_EQ(fresh, 0u);
    EXPECT_EQ(get_failed(w_, WEFT_FAILED_GLOBAL, WEFT_FAILED_ALL), (std::vector<uint32_t>{r2, r1}));
    EXPECT_EQ(get_failed(w_, WEFT_FAILED_GLOBAL, WEFT_FAILED_NEW), (std::vector<uint32_t>{r2, r1}));
}

// mp.ft.global.*: the last rank dies at mp.ft.victim; even ranks look
// (validate_local) before validate_global, odd ranks go straight in. G is
// identical on every survivor and names the victim; L = G after.
TEST_F(Ft, ValidateGlobalGivesIdenticalG) {
    ASSERT_GE(size, 3u);
    const uint32_t victim = size - 1;
    barrier();
    if (rank == victim) die_at("mp.ft.victim");
    if (rank % 2 == 0) {
        ASSERT_NE(wait_failed(w_, 1), UINT32_MAX);
    }
    uint32_t total = 0, fresh = 0;
    ASSERT_EQ(weft_comm_validate_global(w_, &total, &fresh), WEFT_OK);
    const auto g = get_failed(w_, WEFT_FAILED_GLOBAL, WEFT_FAILED_ALL);
    EXPECT_EQ(g, std::vector<uint32_t>{victim}) << "G must name the dead rank: nobody can decide without it otherwise";
    EXPECT_EQ(get_failed(w_, WEFT_FAILED_LOCAL, WEFT_FAILED_ALL), g) << "L = G after validate_global";
    EXPECT_EQ(get_failed(w_, WEFT_FAILED_CLEARED, WEFT_FAILED_ALL), g) << "and G is recognised";
    uint64_t x = 0;
    weft_msg_status_t s;
    EXPECT_EQ(weft_recv(w_, &x, 1, WEFT_UINT64, int32_t(victim), 3, &s), WEFT_OK);
    EXPECT_EQ(s.source, WEFT_PROC_NULL);
    EXPECT_EQ(total, g.size());
    expect_same_everywhere(w_, widen(g), all_but({victim}), "G");
}

// mp.ft.survivors.*: rank 1 dies at mp.ft.victim. Collectives on the
// world fail until validate_global puts it in G; then they run over the
// survivors (docs/fault-tolerance.md), roots keep their numbers, and allgather leaves the
// dead rank's block untouched.
TEST_F(Ft, CollectivesContinueOverSurvivorsOfG) {
    ASSERT_GE(size, 3u);
    const uint32_t victim = 1;
    barrier();
    if (rank == victim) die_at("mp.ft.victim");
    ASSERT_NE(wait_failed(w_, 1), UINT32_MAX);
    EXPECT_EQ(weft_barrier(w_), WEFT_ERR_PEER_FAILED) << "not yet in G";
    ASSERT_EQ(weft_comm_validate_global(w_, nullptr, nullptr), WEFT_OK);
    EXPECT_EQ(weft_barrier(w_), WEFT_OK);
    int64_t mine = rank + 1, sum = 0, want = 0;
    for (uint32_t r = 0; r < size; ++r)
        if (r != victim) want += r + 1;
    EXPECT_EQ(weft_allreduce(w_, &mine, &sum, 1, WEFT_INT64, WEFT_OP_SUM), WEFT_OK);
    EXPECT_EQ(sum, want);
    const uint32_t last = size - 1;
    int64_t b = rank == last ? 333 : 0;
    EXPECT_EQ(weft_bcast(w_, &b, 1, WEFT_INT64, last), WEFT_OK);
    EXPECT_EQ(b, 333);
    EXPECT_EQ(weft_bcast(w_, &b, 1, WEFT_INT64, victim), WEFT_ERR_PEER_FAILED) << "a root in G";
    int64_t red = -1;
    EXPECT_EQ(weft_reduce(w_, &mine, &red, 1, WEFT_INT64, WEFT_OP_SUM, 2), WEFT_OK);
    if (rank == 2) {
        EXPECT_EQ(red, want);
    }
    std::vector<int64_t> all(size, -1);
    const int64_t tenfold = int64_t(rank) * 10;
    EXPECT_EQ(weft_allgather(w_, &tenfold, 1, WEFT_INT64, all.data()), WEFT_OK);
    for (uint32_t r = 0; r < size; ++r) EXPECT_EQ(all[r], r == victim ? -1 : int64_t(r) * 10) << "block " << r;
    weft_request_t req = nullptr;
    ASSERT_EQ(weft_ibarrier(w_, &req), WEFT_OK);
    EXPECT_EQ(weft_request_wait(&req, nullptr), WEFT_OK);
    ASSERT_EQ(weft_iallreduce(w_, &mine, &sum, 1, WEFT_INT64, WEFT_OP_SUM, &req), WEFT_OK);
    EXPECT_EQ(weft_request_wait(&req, nullptr), WEFT_OK);
    EXPECT_EQ(sum, want);
    // Non-blocking: the blocks reach their places when the request is
    // finished (here by test, polled), the failed member's stays.
    std::vector<int64_t> again(size, -7);
    const int64_t hundred = int64_t(rank) * 100;
    ASSERT_EQ(weft_iallgather(w_, &hundred, 1, WEFT_INT64, again.data(), &req), WEFT_OK);
    int flag = 0;
    const uint64_t give_up = now_ns() + 20000000000ull;  // by time: a peer may be descheduled for a while
    while (!flag && now_ns() < give_up) ASSERT_EQ(weft_request_test(&req, &flag, nullptr), WEFT_OK);
    ASSERT_EQ(flag, 1) << "iallgather over the survivors did not complete";
    for (uint32_t r = 0; r < size; ++r) EXPECT_EQ(again[r], r == victim ? -7 : int64_t(r) * 100) << "block " << r;
    // In place, waited for.
    std::vector<int64_t> inplace(size, -9);
    inplace[rank] = int64_t(rank) + 1000;
    ASSERT_EQ(weft_iallgather(w_, WEFT_IN_PLACE, 1, WEFT_INT64, inplace.data(), &req), WEFT_OK);
    ASSERT_EQ(weft_request_wait(&req, nullptr), WEFT_OK);
    for (uint32_t r = 0; r < size; ++r) EXPECT_EQ(inplace[r], r == victim ? -9 : int64_t(r) + 1000) << "block " << r;
}

// mp.ft.coord_*: rank 0 coordinates the first agreement and is killed in
// it (after one PROPOSE, or after one COMMIT). The survivors still decide
// one value — flag and status alike.
TEST_F(Ft, AgreeSurvivesCoordinatorDeath) {
    ASSERT_GE(size, 3u);
    barrier();
    int flag = int(0xff & ~(1u << rank));
    const uint64_t t0 = now_ns();
    const weft_status_t st = weft_comm_agree(w_, &flag);
    ASSERT_NE(rank, 0u) << "rank 0 should have died inside the agreement";
    ASSERT_TRUE(st == WEFT_OK || st == WEFT_ERR_PEER_FAILED) << weft_strerror(st);
    std::fprintf(stderr, "[ft] rank %u: agree with a dying coordinator: flag %#x, %s, %.2f ms\n", rank, flag,
                 weft_strerror(st), double(now_ns() - t0) / 1e6);
    // Every live rank contributed, and at most rank 0's bit may be missing.
    for (uint32_t r = 1; r < size; ++r) EXPECT_EQ(flag & (1 << r), 0) << "rank " << r << "'s zero bit was lost";
    expect_same_everywhere(w_, {uint64_t(uint32_t(flag)), uint64_t(st)}, all_but({0}), "agree outcome");
    // The next agreement runs with rank 1 coordinating.
    int again = 1;
    const weft_status_t st2 = weft_comm_agree(w_, &again);
    EXPECT_TRUE(st2 == WEFT_OK || st2 == WEFT_ERR_PEER_FAILED);
    EXPECT_EQ(again, 1);
    expect_same_everywhere(w_, {uint64_t(st2)}, all_but({0}), "second agree");
}

// mp.ft.participant.*: rank 2 dies as it enters the agreement (it never
// contributes). The survivors decide without it, uniformly: flag, and
// PEER_FAILED since it is not in G.
TEST_F(Ft, AgreeSurvivesParticipantDeath) {
    ASSERT_GE(size, 3u);
    barrier();
    int flag = int(0xff & ~(1u << rank));
    const weft_status_t st = weft_comm_agree(w_, &flag);
    ASSERT_NE(rank, 2u) << "rank 2 should have died entering the agreement";
    EXPECT_EQ(st, WEFT_ERR_PEER_FAILED) << "the agreed failed set names rank 2, which is not in G";
    for (uint32_t r = 0; r < size; ++r) {
        if (r != 2) {
            EXPECT_EQ(flag & (1 << r), 0) << "rank " << r << "'s zero bit was lost";
        }
    }
    EXPECT_NE(flag & (1 << 2), 0) << "rank 2 never contributed";
    expect_same_everywhere(w_, {uint64_t(uint32_t(flag)), uint64_t(st)}, all_but({2}), "agree outcome");
}

TEST_F(Ft, ValidateGlobalSurvivesCoordinatorDeath) {
    ASSERT_GE(size, 3u);
    barrier();
    uint32_t total = 0, fresh = 0;
    ASSERT_EQ(weft_comm_validate_global(w_, &total, &fresh), WEFT_OK);
    ASSERT_NE(rank, 0u) << "rank 0 should have died inside the agreement";
    const auto g1 = get_failed(w_, WEFT_FAILED_GLOBAL, WEFT_FAILED_ALL);
    expect_same_everywhere(w_, widen(g1), all_but({0}), "G after the first validate_global");
    ASSERT_EQ(weft_comm_validate_global(w_, &total, &fresh), WEFT_OK);
    const auto g2 = get_failed(w_, WEFT_FAILED_GLOBAL, WEFT_FAILED_ALL);
    EXPECT_EQ(g2, std::vector<uint32_t>{0}) << "the second one must know rank 0 is dead";
    expect_same_everywhere(w_, widen(g2), all_but({0}), "G after the second validate_global");
}

// ------------------------------------------------------------ heartbeats
// mp.ft.adjacent.*: 8 ranks, no pidfd monitor (WEFT_PIDFD_MONITOR=0), so
// only heartbeats can find the dead: ranks 3, 4, 5 are killed at once (on
// a timer). Rank 2 watches all three; everyone learns all three, and only
// them. Each rank stamps its liveness into rank 0's window every 10 ms, so
// rank 0 can print how long after the last stamp all three were known.
TEST_F(Ft, ThreeAdjacentKillsFoundTogether) {
    ASSERT_EQ(size, 8u);
    void* base = nullptr;
    weft_window_t win = nullptr;
    ASSERT_EQ(weft_window_allocate(ctx, 64 * 8, &base, &win), WEFT_OK);
    const bool victim = rank >= 3 && rank <= 5;
    const uint64_t end = now_ns() + 40'000'000'000ull;
    uint64_t first = 0, next_stamp = 0;
    uint32_t total = 0, fresh = 0;
    while (now_ns() < end) {
        const uint64_t now = now_ns();
        if (now >= next_stamp) {
            ASSERT_EQ(weft_put(win, 0, 8 * rank, &now, 8), WEFT_OK);
            next_stamp = now + 10'000'000;
        }
        ASSERT_EQ(weft_comm_validate_local(w_, &total, &fresh), WEFT_OK);
        if (total && !first) first = now_ns();
        if (total >= 3) break;
        weft_wait(ctx, 1000000);
    }
    ASSERT_FALSE(victim) << "the victim outlived its timer";
    ASSERT_EQ(total, 3u) << "not all three were found";
    const uint64_t all = now_ns();
    EXPECT_EQ(get_failed(w_, WEFT_FAILED_LOCAL, WEFT_FAILED_ALL), (std::vector<uint32_t>{3, 4, 5}));
    if (rank == 0) {
        uint64_t last = 0;
        for (uint32_t r = 3; r <= 5; ++r)
            last = std::max(last, std::atomic_ref<uint64_t>(static_cast<uint64_t*>(base)[r]).load());
        std::fprintf(stderr,
                     "[ft] 3 adjacent SIGKILLs (heartbeats only): all known %.0f ms after their last stamp, "
                     "%.1f ms between first and last\n",
                     double(all - last) / 1e6, double(all - first) / 1e6);
    }
}

// mp.ft.stop_short.*: rank 2 of 3 is stopped for 0.3 s (timeout 1 s): not
// declared. It tells the others when it sees its own clock jump; they keep
// watching for longer than a timeout after that.
TEST_F(Ft, ShortStopIsNotDeclared) {
    ASSERT_EQ(size, 3u);
    const uint32_t victim = 2;
    if (rank == victim) {
        uint64_t last = now_ns(), gap = 0;
        const uint64_t end = last + 30'000'000'000ull;
        while (now_ns() < end) {
            weft_wait(ctx, 1000000);
            const uint64_t now = now_ns();
            gap = std::max(gap, now - last);
            last = now;
            if (gap > 200'000'000) break;
        }
        ASSERT_GT(gap, 200'000'000u) << "never stopped: run under --fault stop:rank=2:after=SEC:for=0.3";
        std::fprintf(stderr, "[ft] rank 2 was stopped for %.0f ms\n", double(gap) / 1e6);
        for (uint32_t r = 0; r < size; ++r)
            if (r != rank) {
                ASSERT_EQ(weft_send(w_, &gap, 1, WEFT_UINT64, r, 5), WEFT_OK);
            }
    } else {
        uint64_t gap = 0;
        ASSERT_EQ(weft_recv(w_, &gap, 1, WEFT_UINT64, int32_t(victim), 5, nullptr), WEFT_OK);
    }
    progress_for(1.5);
    uint32_t total = 9, fresh = 9;
    ASSERT_EQ(weft_comm_validate_local(w_, &total, &fresh), WEFT_OK);
    EXPECT_EQ(total, 0u) << "a stop shorter than the timeout was declared a failure";
    EXPECT_EQ(weft_barrier(w_), WEFT_OK);
}

// mp.ft.stop_long.*: rank 2 of 3 is stopped for 3 s: declared, and fenced
// after it resumes — its message and active message to rank 0 are dropped,
// while rank 1's arrive. Runs with WEFT_FT_FENCE=drop, so that the victim
// lives on to try. Its one-sided put is not fenced that way on shm: it
// stamps when it stopped into rank 0's window, for the record. Over verbs
// (mp.ft.stop.verbs, in the soft-RoCE VM) and UCX over tcp it is: the
// survivors' QPs to it are in ERR, their endpoints closed, so nothing it
// sends, put or message, lands.
// The victim of a stop fault progresses until it notices a gap of 1.5 s
// (it was stopped and has resumed); returns when the gap began, 0 if none
// came within 30 s.
uint64_t progress_until_stopped() {
    uint64_t last = now_ns();
    const uint64_t end = last + 30'000'000'000ull;
    while (now_ns() < end) {
        weft_wait(ctx, 1000000);
        const uint64_t now = now_ns();
        if (now - last > 1'500'000'000ull) return last;
        last = now;
    }
    return 0;
}

std::atomic<int> am_from_victim{0};
void count_am(void*, uint32_t, const void*, size_t) { am_from_victim.fetch_add(1); }

TEST_F(Ft, LongStopIsDeclaredAndFenced) {
    ASSERT_EQ(size, 3u);
    const uint32_t victim = 2;
    weft_caps_t caps{};
    ASSERT_EQ(weft_query_caps(ctx, &caps), WEFT_OK);
    // Where one-sided operations are not CPU stores into mapped memory (a
    // NIC, or UCX's tcp emulation), the survivors' side refuses them.
    const bool transport_fenced = caps.atomics != WEFT_ATOMICS_CPU;
    void* base = nullptr;
    weft_window_t win = nullptr;
    ASSERT_EQ(weft_window_allocate(ctx, 64, &base, &win), WEFT_OK);
    ASSERT_EQ(weft_am_register(ctx, 7, count_am, nullptr), WEFT_OK);
    barrier();
    if (rank == victim) {
        const uint64_t stopped_at = progress_until_stopped();
        ASSERT_NE(stopped_at, 0u) << "never stopped: run under --fault stop:rank=2:after=SEC:for=3";
        // Over verbs and tcp these may fail here (the survivors' QPs to us
        // are in ERR, their endpoints closed); over shm they succeed here
        // and are dropped there.
        auto sent = [&](weft_status_t st) { return st == WEFT_OK || (transport_fenced && st == WEFT_ERR_PEER_FAILED); };
        weft_status_t st = weft_put(win, 0, 0, &stopped_at, 8);
        if (st == WEFT_OK) st = weft_flush(win, 0);
        EXPECT_TRUE(sent(st)) << weft_strerror(st);
        uint64_t x = 222;
        st = weft_send(w_, &x, 1, WEFT_UINT64, 0, 9);
        EXPECT_TRUE(sent(st)) << weft_strerror(st);
        st = weft_am_send(ctx, 0, 7, &x, sizeof x);
        EXPECT_TRUE(sent(st)) << weft_strerror(st);
        barrier();  // A
        barrier();  // B
        fenced_ = true;
        return;
    }
    ASSERT_NE(wait_failed(w_, 1), UINT32_MAX) << "the stopped rank was never declared";
    const uint64_t declared = now_ns();
    EXPECT_EQ(get_failed(w_, WEFT_FAILED_LOCAL, WEFT_FAILED_ALL), std::vector<uint32_t>{victim});
    uint64_t got = 0;
    weft_request_t req = nullptr;
    if (rank == 0) {
        // Unrecognised failure: an any-source receive is refused (PENDING)
        // until the failure is recognised.
        EXPECT_EQ(weft_irecv(w_, &got, 1, WEFT_UINT64, WEFT_ANY_SOURCE, 9, &req), WEFT_ERR_PEER_FAILED_PENDING);
        EXPECT_EQ(req, nullptr);
        ASSERT_EQ(weft_comm_validate_clear(w_, &victim, 1), WEFT_OK);
        ASSERT_EQ(weft_irecv(w_, &got, 1, WEFT_UINT64, WEFT_ANY_SOURCE, 9, &req), WEFT_OK);
    }
    barrier();  // A: the victim has sent
    if (rank == 0) {
        const uint64_t stopped_at = std::atomic_ref<uint64_t>(*static_cast<uint64_t*>(base)).load();
        if (transport_fenced) {
            EXPECT_EQ(stopped_at, 0u) << "the declared rank's put landed through a QP in ERR or a closed endpoint";
        } else {
            EXPECT_NE(stopped_at, 0u) << "its put, unfenced on this transport, never landed";
            std::fprintf(stderr, "[ft] SIGSTOPped rank declared %.0f ms after it stopped (timeout %s ms)\n",
                         double(declared - stopped_at) / 1e6,
                         std::getenv("WEFT_FT_TIMEOUT_MS") ? std::getenv("WEFT_FT_TIMEOUT_MS") : "1000");
        }
        progress_for(0.3);  // its message, if it got through, would match now
    }
    barrier();  // B
    if (rank == 1) {
        uint64_t x = 111;
        ASSERT_EQ(weft_send(w_, &x, 1, WEFT_UINT64, 0, 9), WEFT_OK);
    }
    if (rank == 0) {
        weft_msg_status_t s;
        ASSERT_EQ(weft_request_wait(&req, &s), WEFT_OK);
        EXPECT_EQ(s.source, 1) << "a fenced rank's message matched";
        EXPECT_EQ(got, 111u);
        progress_for(0.1);
        int flag = 1;
        EXPECT_EQ(weft_iprobe(w_, WEFT_ANY_SOURCE, 9, &flag, nullptr), WEFT_OK);
        EXPECT_EQ(flag, 0) << "a fenced rank's message was queued";
        EXPECT_EQ(am_from_victim.load(), 0) << "a fenced rank's active message ran";
    }
}

// mp.ft.stop_kill.*: the same stop under the default WEFT_FT_FENCE=kill.
// Its same-host peers SIGKILL it when they declare it, while it is still
// stopped, so the one-sided put it would make on resuming (which nothing
// could refuse on shm) never lands, and its process is gone.
TEST_F(Ft, LongStopIsDeclaredAndKilled) {
    ASSERT_EQ(size, 3u);
    const uint32_t victim = 2;
    void* base = nullptr;
    weft_window_t win = nullptr;
    ASSERT_EQ(weft_window_allocate(ctx, 64, &base, &win), WEFT_OK);
    auto* words = static_cast<uint64_t*>(base);  // [0] the victim's marker, [1] its pid
    if (rank == victim) {
        const uint64_t pid = static_cast<uint64_t>(getpid());
        for (uint32_t r = 0; r < victim; ++r) ASSERT_EQ(weft_put(win, r, 8, &pid, 8), WEFT_OK);
        for (uint32_t r = 0; r < victim; ++r) ASSERT_EQ(weft_flush(win, r), WEFT_OK);
    }
    barrier();
    if (rank == victim) {
        progress_until_stopped();
        // Reached only if nobody fenced it (or it never stopped).
        const uint64_t marker = 0xfe4ce;
        for (uint32_t r = 0; r < victim; ++r) weft_put(win, r, 0, &marker, 8);
        for (uint32_t r = 0; r < victim; ++r) weft_flush(win, r);
        std::fprintf(stderr, "[rank %u] ran on after its stop: not fenced\n", rank);
        std::_Exit(0);
    }
    ASSERT_NE(wait_failed(w_, 1), UINT32_MAX) << "the stopped rank was never declared";
    const pid_t pid = static_cast<pid_t>(std::atomic_ref<uint64_t>(words[1]).load());
    ASSERT_GT(pid, 0);
    // Its exit, however long the stop lasts (a pidfd also sees a zombie).
    const int fd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
    if (fd >= 0) {
        pollfd p{fd, POLLIN, 0};
        EXPECT_EQ(poll(&p, 1, 30000), 1) << "the declared rank (pid " << pid << ") is still alive after 30 s";
        close(fd);
    } else {
        EXPECT_EQ(errno, ESRCH) << "pidfd_open: " << std::strerror(errno);
    }
    EXPECT_EQ(std::atomic_ref<uint64_t>(words[0]).load(), 0u) << "the declared rank wrote into our window";
}

// mp.ft.reclaim.*: a communicator's failed sets and agreement instances go
// when it is released, and so do this thread's FAILED_NEW cursors for it
// (when it next needs a new one): dup, agree, validate_global, free, twenty
// times. (Internals: the Ft layer of this context, reached through the
// handle.)
TEST_F(Ft, FreedCommunicatorsLeaveNoFtState) {
    weft::group::Ft* ft = weft::group::Ft::of(*weft::group::shell_of(w_)->engine);
    ASSERT_NE(ft, nullptr);
    const size_t comms0 = ft->tracked_comms(), instances0 = ft->tracked_instances();
    for (int i = 0; i < 20; ++i) {
        weft_comm_t d = nullptr;
        ASSERT_EQ(weft_comm_dup(w_, &d), WEFT_OK);
        int flag = 1;
        ASSERT_EQ(weft_comm_agree(d, &flag), WEFT_OK);
        uint32_t failed = 0, fresh = 0;
        ASSERT_EQ(weft_comm_validate_global(d, &failed, &fresh), WEFT_OK);
        ASSERT_EQ(weft_comm_free(&d), WEFT_OK);
    }
    // The frees' barriers finish in progress.
    const uint64_t end = now_ns() + 10'000'000'000ull;
    while (ft->tracked_comms() > comms0 && now_ns() < end) weft_wait(ctx, 1000000);
    EXPECT_EQ(ft->tracked_comms(), comms0) << "failed sets of freed communicators kept";
    EXPECT_LE(ft->tracked_instances(), instances0) << "agreement instances of freed communicators kept";
    // A new cursor (a fresh dup's) drops the freed ones'.
    weft_comm_t d = nullptr;
    ASSERT_EQ(weft_comm_dup(w_, &d), WEFT_OK);
    uint32_t failed = 0, fresh = 0;
    ASSERT_EQ(weft_comm_validate_local(d, &failed, &fresh), WEFT_OK);
    EXPECT_LE(weft::group::Ft::thread_cursors(), 2u) << "FAILED_NEW cursors of freed communicators kept";
    ASSERT_EQ(weft_comm_free(&d), WEFT_OK);
    barrier();  // before anyone's closing agreement on the world makes an instance here
}

// mp.ft.oversubscribed.*: 4 ranks on this machine's 2 cores, each
// computing for 5 periods at a time without calling weft, for 3 s: the
// detector threads still beat and observers credit only their own running
// time, so nobody is suspected.
TEST_F(Ft, NoFalseSuspicionsUnderOversubscription) {
    barrier();
    const uint64_t end = now_ns() + 3'000'000'000ull;
    volatile uint64_t sink = 0;
    while (now_ns() < end) {
        const uint64_t stop = now_ns() + 500'000'000ull;  // 5 x the default period
        while (now_ns() < stop)
            for (int i = 0; i < 10000; ++i) sink = sink + uint64_t(i) * 2654435761u;
        weft_progress(ctx, nullptr);
    }
    uint32_t total = 9, fresh = 9;
    ASSERT_EQ(weft_comm_validate_local(w_, &total, &fresh), WEFT_OK);
    EXPECT_EQ(total, 0u) << "a busy rank was suspected";
    EXPECT_EQ(weft_barrier(w_), WEFT_OK);
}

// mp.ft.rma.*: the last rank dies inside an epoch. A flush naming it fails;
// a flush of all completes the live targets and reports the failure once;
// the survivors' puts to each other arrive. Then WIN_VALIDATE: the dead
// target becomes PROC_NULL for every one-sided operation.
TEST_F(Ft, RmaFlushReportsDeadTargetOnce) {
    ASSERT_GE(size, 3u);
    const uint32_t victim = size - 1;
    void* base = nullptr;
    weft_window_t win = nullptr;
    ASSERT_EQ(weft_window_allocate(ctx, 8 * size, &base, &win), WEFT_OK);
    barrier();
    if (rank == victim) die_at("mp.ft.victim");
    ASSERT_NE(wait_failed(w_, 1), UINT32_MAX);
    const uint64_t mine = 100 + rank;
    for (uint32_t r = 0; r < victim; ++r) ASSERT_EQ(weft_put(win, r, 8 * rank, &mine, 8), WEFT_OK);
    EXPECT_EQ(weft_put(win, victim, 8 * rank, &mine, 8), WEFT_ERR_PEER_FAILED);
    EXPECT_EQ(weft_flush(win, victim), WEFT_ERR_PEER_FAILED);
    EXPECT_EQ(weft_flush(win, WEFT_RANK_ALL), WEFT_ERR_PEER_FAILED) << "the failure surfaces at the next flush";
    EXPECT_EQ(weft_flush(win, WEFT_RANK_ALL), WEFT_OK) << "and only once";
    for (uint32_t r = 0; r < victim; ++r) EXPECT_EQ(weft_flush(win, r), WEFT_OK) << "live target " << r;
    // Survivors tell each other their puts are complete, then look.
    for (uint32_t r = 0; r < victim; ++r) {
        if (r != rank) {
            ASSERT_EQ(weft_send(w_, &mine, 1, WEFT_UINT64, r, 21), WEFT_OK);
        }
    }
    for (uint32_t r = 0; r < victim; ++r) {
        if (r == rank) continue;
        uint64_t x = 0;
        ASSERT_EQ(weft_recv(w_, &x, 1, WEFT_UINT64, int32_t(r), 21, nullptr), WEFT_OK);
    }
    for (uint32_t r = 0; r < victim; ++r)
        EXPECT_EQ(std::atomic_ref<uint64_t>(static_cast<uint64_t*>(base)[r]).load(), 100u + r) << "put from " << r;

    uint64_t got = 7, old = 9;
    EXPECT_EQ(weft_get(win, victim, 0, &got, 8), WEFT_ERR_PEER_FAILED) << "not PROC_NULL before the validate";
    EXPECT_EQ(weft_window_validate(nullptr, w_, nullptr), WEFT_ERR_NOT_INITIALIZED);
    uint32_t proc_null = 0;
    ASSERT_EQ(weft_window_validate(win, w_, &proc_null), WEFT_OK);
    EXPECT_EQ(proc_null, 1u);
    EXPECT_EQ(weft_put(win, victim, 0, &mine, 8), WEFT_OK) << "PROC_NULL put";
    EXPECT_EQ(weft_get(win, victim, 0, &got, 8), WEFT_OK) << "PROC_NULL get";
    EXPECT_EQ(got, 7u) << "a PROC_NULL get leaves the buffer";
    EXPECT_EQ(weft_atomic_fetch_add(win, victim, 0, 1, &old), WEFT_OK);
    EXPECT_EQ(weft_atomic_compare_swap(win, victim, 0, 0, 1, &old), WEFT_OK);
    EXPECT_EQ(weft_atomic_swap(win, victim, 0, 1, &old), WEFT_OK);
    EXPECT_EQ(old, 9u) << "a PROC_NULL atomic leaves old_value";
    EXPECT_EQ(weft_flush(win, victim), WEFT_OK);
    EXPECT_EQ(weft_flush(win, WEFT_RANK_ALL), WEFT_OK);
    // Bad input still gets its status: an offset outside the region.
    EXPECT_EQ(weft_put(win, victim, 8 * size, &mine, 8), WEFT_ERR_OUT_OF_RANGE);
    // Live targets are untouched by it.
    uint64_t one = 1;
    EXPECT_EQ(weft_atomic_fetch_add(win, 0, 8 * victim, one, &old), WEFT_OK);
    EXPECT_EQ(weft_flush(win, 0), WEFT_OK);
}

// mp.ft.anysource.*: rank 0 posted an any-source receive before the last
// rank died. Its wait and test then say PENDING and keep the request, as do
// any-source probes and a blocking any-source receive (withdrawn); once the
// failure is recognised (validate_global) the same request completes with
// a survivor's message.
TEST_F(Ft, AnySourceReceivePostedBeforeTheFailureIsPending) {
    ASSERT_GE(size, 3u);
    const uint32_t victim = size - 1;
    uint64_t got = 0;
    weft_request_t r = nullptr;
    if (rank == 0) {
        ASSERT_EQ(weft_irecv(w_, &got, 1, WEFT_UINT64, WEFT_ANY_SOURCE, 31, &r), WEFT_OK);
    }
    barrier();
    if (rank == victim) die_at("mp.ft.victim");
    ASSERT_NE(wait_failed(w_, 1), UINT32_MAX);
    if (rank == 0) {
        EXPECT_EQ(weft_request_wait(&r, nullptr), WEFT_ERR_PEER_FAILED_PENDING);
        ASSERT_NE(r, nullptr) << "a pending receive is kept";
        int flag = 1;
        EXPECT_EQ(weft_request_test(&r, &flag, nullptr), WEFT_ERR_PEER_FAILED_PENDING);
        EXPECT_EQ(flag, 0);
        // The multi-request forms say it too, name it, and keep it.
        weft_request_t set[2] = {nullptr, r};
        size_t index = 0;
        EXPECT_EQ(weft_request_waitany(2, set, &index, nullptr), WEFT_ERR_PEER_FAILED_PENDING);
        EXPECT_EQ(index, 1u);
        EXPECT_EQ(weft_request_testany(2, set, &index, &flag, nullptr), WEFT_ERR_PEER_FAILED_PENDING);
        EXPECT_EQ(index, 1u);
        EXPECT_EQ(flag, 0);
        weft_msg_status_t statuses[2]{};
        EXPECT_EQ(weft_request_waitall(2, set, statuses), WEFT_ERR_PEER_FAILED_PENDING);
        EXPECT_EQ(statuses[1].error, WEFT_ERR_PEER_FAILED_PENDING);
        EXPECT_EQ(set[1], r) << "kept";
        EXPECT_EQ(weft_iprobe(w_, WEFT_ANY_SOURCE, 31, &flag, nullptr), WEFT_ERR_PEER_FAILED_PENDING);
        EXPECT_EQ(weft_probe(w_, WEFT_ANY_SOURCE, 31, nullptr), WEFT_ERR_PEER_FAILED_PENDING);
        uint64_t other = 0;
        EXPECT_EQ(weft_recv(w_, &other, 1, WEFT_UINT64, WEFT_ANY_SOURCE, 32, nullptr), WEFT_ERR_PEER_FAILED_PENDING);
    }
    uint32_t failed = 0, added = 0;
    ASSERT_EQ(weft_comm_validate_global(w_, &failed, &added), WEFT_OK);
    EXPECT_EQ(failed, 1u);
    const uint64_t mine = 500 + rank;
    if (rank == 1) {
        ASSERT_EQ(weft_send(w_, &mine, 1, WEFT_UINT64, 0, 31), WEFT_OK);
    }
    if (rank == 0) {
        weft_msg_status_t st{};
        ASSERT_EQ(weft_request_wait(&r, &st), WEFT_OK) << "recognised: the receive goes on";
        EXPECT_EQ(r, nullptr);
        EXPECT_EQ(got, 501u);
        EXPECT_EQ(st.source, 1);
    }
}

// mp.ft.pending_progress.*: rank 0 waits on an any-source receive and a
// named one from rank 1 while rank 3's failure is known but not
// recognised. Re-waiting must progress: rank 1's messages match, the named
// receive completes through waitany and the any-source one through wait
// (PENDING is an answer for now, never a reason to stop progressing).
TEST_F(Ft, WaitsProgressWhileAnySourceIsPending) {
    ASSERT_GE(size, 3u);
    const uint32_t victim = size - 1;
    uint64_t any = 0, named = 0;
    weft_request_t ra = nullptr, rn = nullptr;
    if (rank == 0) {
        ASSERT_EQ(weft_irecv(w_, &any, 1, WEFT_UINT64, WEFT_ANY_SOURCE, 31, &ra), WEFT_OK);
        ASSERT_EQ(weft_irecv(w_, &named, 1, WEFT_UINT64, 1, 33, &rn), WEFT_OK);
    }
    barrier();
    if (rank == victim) die_at("mp.ft.victim");
    ASSERT_NE(wait_failed(w_, 1), UINT32_MAX);  // validate_local: known, not recognised
    if (rank == 1) {                            // the named message; the any-source one once rank 0 has it
        const uint64_t a = 701, b = 702;
        uint64_t go = 0;
        ASSERT_EQ(weft_send(w_, &b, 1, WEFT_UINT64, 0, 33), WEFT_OK);
        ASSERT_EQ(weft_recv(w_, &go, 1, WEFT_UINT64, 0, 34, nullptr), WEFT_OK);
        ASSERT_EQ(weft_send(w_, &a, 1, WEFT_UINT64, 0, 31), WEFT_OK);
    }
    if (rank == 0) {
        const uint64_t end = now_ns() + 10'000'000'000ull;
        weft_request_t set[2] = {ra, rn};
        size_t index = SIZE_MAX, calls = 0;
        weft_status_t st = WEFT_ERR_PEER_FAILED_PENDING;
        while (st == WEFT_ERR_PEER_FAILED_PENDING && now_ns() < end) {
            st = weft_request_waitany(2, set, &index, nullptr);
            ++calls;
        }
        ASSERT_EQ(st, WEFT_OK) << "waitany never completed the named receive (" << calls << " calls)";
        EXPECT_EQ(index, 1u);
        EXPECT_EQ(named, 702u);
        const uint64_t go = 1;
        ASSERT_EQ(weft_send(w_, &go, 1, WEFT_UINT64, 1, 34), WEFT_OK);
        weft_msg_status_t s{};
        calls = 0;
        st = WEFT_ERR_PEER_FAILED_PENDING;
        while (st == WEFT_ERR_PEER_FAILED_PENDING && now_ns() < end) {
            st = weft_request_wait(&ra, &s);
            ++calls;
        }
        ASSERT_EQ(st, WEFT_OK) << "a live sender's message never matched the any-source receive (" << calls
                               << " waits)";
        EXPECT_EQ(any, 701u);
        EXPECT_EQ(s.source, 1);
        EXPECT_EQ(ra, nullptr);
    }
}

// ------------------------------------------------------------ shrink, revoke
// mp.ft.shrink.*: ranks 2 and 5 of 8 die at mp.ft.victim; the survivors
// shrink at once: the same 6 members, in order, everywhere.
TEST_F(Ft, ShrinkAfterKillsGivesIdenticalMembership) {
    ASSERT_GE(size, 6u);
    barrier();
    if (rank == 2 || rank == 5) die_at("mp.ft.victim");
    weft_comm_t s = nullptr;
    const uint64_t t0 = now_ns();
    ASSERT_EQ(weft_comm_shrink(w_, &s), WEFT_OK);
    const double ms = double(now_ns() - t0) / 1e6;
    ASSERT_EQ(comm_size(s), size - 2);
    std::vector<uint32_t> want = all_but({2, 5}), members(size - 2);
    for (uint32_t r = 0; r < size - 2; ++r) ASSERT_EQ(weft_comm_job_rank(s, r, &members[r]), WEFT_OK);
    EXPECT_EQ(members, want);
    EXPECT_EQ(want[comm_rank(s)], rank);
    const auto all = allgather_one<uint64_t>(s, rank, WEFT_UINT64);
    EXPECT_EQ(all, widen(want));
    EXPECT_EQ(weft_barrier(s), WEFT_OK);
    if (comm_rank(s) == 0) std::fprintf(stderr, "[ft] shrink of %u ranks with 2 dead: %.2f ms\n", size, ms);
    EXPECT_EQ(weft_comm_free(&s), WEFT_OK);

    // The non-blocking form, overlapped with work on the world's survivors'
    // point-to-point: the same membership, one context ID everywhere.
    weft_comm_t is = nullptr;
    weft_request_t req = nullptr;
    ASSERT_EQ(weft_comm_ishrink(w_, &is, &req), WEFT_OK);
    int flag = 0;
    const uint64_t give_up = now_ns() + 30000000000ull;
    while (!flag && now_ns() < give_up) ASSERT_EQ(weft_request_test(&req, &flag, nullptr), WEFT_OK);
    ASSERT_EQ(flag, 1) << "ishrink did not complete";
    ASSERT_NE(is, nullptr);
    ASSERT_EQ(comm_size(is), size - 2);
    for (uint32_t r = 0; r < size - 2; ++r) ASSERT_EQ(weft_comm_job_rank(is, r, &members[r]), WEFT_OK);
    EXPECT_EQ(members, want);
    uint64_t id = 0;
    ASSERT_EQ(weft_comm_context_id(is, &id), WEFT_OK);
    const auto ids = allgather_one<uint64_t>(is, id, WEFT_UINT64);
    for (uint64_t x : ids) EXPECT_EQ(x, id) << "one context ID on every survivor";
    EXPECT_EQ(weft_comm_free(&is), WEFT_OK);
    EXPECT_EQ(weft_comm_ishrink(w_, nullptr, &req), WEFT_ERR_INVALID_ARG);
    EXPECT_EQ(weft_comm_ishrink(w_, &is, nullptr), WEFT_ERR_INVALID_ARG);
}

// mp.ft.revoke.*: no failure. Rank 0 revokes a duplicate while the others
// wait in receives on it and rank 1 has a 4 MiB send pending to rank 2.
TEST_F(Ft, RevokeFailsPendingAndLaterOperations) {
    ASSERT_GE(size, 3u);
    weft_comm_t d = nullptr;
    ASSERT_EQ(weft_comm_dup(w_, &d), WEFT_OK);
    uint64_t x = 0;
    weft_request_t rreq = nullptr, sreq = nullptr;
    std::vector<uint8_t> big(4u << 20, 0x5a);
    if (rank != 0) {
        ASSERT_EQ(weft_irecv(d, &x, 1, WEFT_UINT64, WEFT_ANY_SOURCE, 3, &rreq), WEFT_OK);
    }
    if (rank == 1) {
        ASSERT_EQ(weft_isend(d, big.data(), big.size(), WEFT_BYTE, 2, 4, &sreq), WEFT_OK);
    }
    barrier();
    if (rank == 0) {
        ASSERT_EQ(weft_comm_revoke(d), WEFT_OK);
    }
    if (rank != 0) {
        weft_msg_status_t s;
        EXPECT_EQ(weft_request_wait(&rreq, &s), WEFT_ERR_REVOKED);
    }
    if (rank == 1) {
        // Never received: it must not report success.
        EXPECT_EQ(weft_request_wait(&sreq, nullptr), WEFT_ERR_REVOKED);
    }
    int revoked = 0;
    EXPECT_EQ(weft_comm_is_revoked(d, &revoked), WEFT_OK);
    EXPECT_EQ(revoked, 1);
    EXPECT_EQ(weft_barrier(d), WEFT_ERR_REVOKED);
    EXPECT_EQ(weft_send(d, &x, 1, WEFT_UINT64, 0, 3), WEFT_ERR_REVOKED);
    int flag = 1;
    EXPECT_EQ(weft_comm_agree(d, &flag), WEFT_OK) << "agree works on a revoked communicator";
    EXPECT_EQ(flag, 1);
    weft_comm_t s = nullptr;
    ASSERT_EQ(weft_comm_shrink(d, &s), WEFT_OK);
    EXPECT_EQ(comm_size(s), size);
    EXPECT_EQ(weft_barrier(s), WEFT_OK);
    EXPECT_EQ(weft_comm_free(&s), WEFT_OK);
    EXPECT_EQ(weft_comm_free(&d), WEFT_OK);
    barrier();
}

// mp.ft.revoke.*: a rendezvous send whose announcement the receiver holds
// unreceived when the receiver itself revokes. The receiver refuses it,
// and its reply overtakes the revoke notice (rank 1 is no finger of rank
// 2 in 4 ranks: the notice reaches it through a relay), so the send must
// learn from the refusal itself that nothing was delivered.
TEST_F(Ft, RevokeRefusesRendezvousSendsWithAnError) {
    ASSERT_EQ(size, 4u) << "rank 1 must be no finger of rank 2";
    for (int round = 0; round < 3; ++round) {
        weft_comm_t d = nullptr;
        ASSERT_EQ(weft_comm_dup(w_, &d), WEFT_OK);
        std::vector<uint8_t> big(4u << 20, 0x5a);
        weft_request_t sreq = nullptr;
        if (rank == 1) {
            ASSERT_EQ(weft_isend(d, big.data(), big.size(), WEFT_BYTE, 2, 4, &sreq), WEFT_OK);
        }
        if (rank == 2) {  // the announcement is here, unreceived
            int flag = 0;
            const uint64_t end = now_ns() + 30'000'000'000ull;
            while (!flag && now_ns() < end) ASSERT_EQ(weft_iprobe(d, 1, 4, &flag, nullptr), WEFT_OK);
            ASSERT_EQ(flag, 1) << "the 4 MiB announcement never arrived";
            ASSERT_EQ(weft_comm_revoke(d), WEFT_OK);
        }
        if (rank == 1) {
            EXPECT_EQ(weft_request_wait(&sreq, nullptr), WEFT_ERR_REVOKED) << "round " << round;
        }
        int revoked = 0;
        const uint64_t end = now_ns() + 30'000'000'000ull;
        while (!revoked && now_ns() < end) {
            ASSERT_EQ(weft_comm_is_revoked(d, &revoked), WEFT_OK);
            weft_wait(ctx, 1000000);
        }
        EXPECT_EQ(revoked, 1);
        EXPECT_EQ(weft_comm_free(&d), WEFT_OK);
        barrier();
    }
}

// mp.ft.revoke.*: blocking collectives on the flag path (barrier, small
// allreduce) pending at the other members when one revokes return
// REVOKED at once, not at their deadline; ULFM's revoke-then-shrink works.
TEST_F(Ft, RevokeInterruptsBlockingFlagCollectives) {
    for (int which = 0; which < 2; ++which) {
        const char* what = which ? "allreduce" : "barrier";
        weft_comm_t d = nullptr;
        ASSERT_EQ(weft_comm_dup(w_, &d), WEFT_OK);
        barrier();
        if (rank == 0) {
            progress_for(0.3);  // the others are inside their collective
            ASSERT_EQ(weft_comm_revoke(d), WEFT_OK);
        } else {
            const uint64_t t0 = now_ns();
            uint64_t v = rank, sum = 0;
            const weft_status_t st = which ? weft_allreduce(d, &v, &sum, 1, WEFT_UINT64, WEFT_OP_SUM) : weft_barrier(d);
            EXPECT_EQ(st, WEFT_ERR_REVOKED) << what;
            std::fprintf(stderr, "[ft] rank %u: blocking %s revoked after %.1f ms\n", rank, what,
                         double(now_ns() - t0) / 1e6);
        }
        weft_comm_t s = nullptr;
        ASSERT_EQ(weft_comm_shrink(d, &s), WEFT_OK) << "shrink after revoking a " << what;
        EXPECT_EQ(comm_size(s), size);
        EXPECT_EQ(weft_barrier(s), WEFT_OK);
        EXPECT_EQ(weft_comm_free(&s), WEFT_OK);
        EXPECT_EQ(weft_comm_free(&d), WEFT_OK);
    }
}

// mp.ft.revoke.*: rank 0 revokes a duplicate as soon as its own dup
// returns, often before the others have created it: they must still see
// the revoke (kept until they create it). Their pending ibarrier returns
// REVOKED, never a match with rank 0's release barrier, and every freed
// duplicate is released (its release barrier has a tag of its own).
TEST_F(Ft, RevokeRightAfterCreationReachesEveryone) {
    const size_t comms0 = weft::group::shell_of(w_)->engine->registry().comms().size();
    for (int i = 0; i < 20; ++i) {
        const std::string what = "iteration " + std::to_string(i);
        weft_comm_t d = nullptr;
        ASSERT_EQ(weft_comm_dup(w_, &d), WEFT_OK) << what;
        if (rank == 0) {
            ASSERT_EQ(weft_comm_revoke(d), WEFT_OK);
        } else {
            weft_request_t r = nullptr;
            const weft_status_t st = weft_ibarrier(d, &r);
            if (st == WEFT_OK) {
                EXPECT_EQ(weft_request_wait(&r, nullptr), WEFT_ERR_REVOKED) << what;
            } else {
                EXPECT_EQ(st, WEFT_ERR_REVOKED) << what;
            }
        }
        int revoked = 0;
        ASSERT_EQ(weft_comm_is_revoked(d, &revoked), WEFT_OK);
        EXPECT_EQ(revoked, 1) << what;
        EXPECT_EQ(weft_comm_free(&d), WEFT_OK);
    }
    barrier();
    const uint64_t end = now_ns() + 10'000'000'000ull;
    while (weft::group::shell_of(w_)->engine->registry().comms().size() > comms0 && now_ns() < end)
        weft_wait(ctx, 1000000);
    EXPECT_EQ(weft::group::shell_of(w_)->engine->registry().comms().size(), comms0)
        << "freed revoked communicators never released";
}

// mp.ft.iagree.*: two non-blocking agreements in flight, then a blocking
// one: each gives the AND of its own flags, everywhere.
TEST_F(Ft, IagreeOverlapsAndMatchesAgree) {
    int a = rank == 1 ? 0 : 1, b = 0x3c | (rank == 0 ? 0 : 0x40);
    weft_request_t reqs[2] = {nullptr, nullptr};
    ASSERT_EQ(weft_comm_iagree(w_, &a, &reqs[0]), WEFT_OK);
    ASSERT_EQ(weft_comm_iagree(w_, &b, &reqs[1]), WEFT_OK);
    int c = 5;
    ASSERT_EQ(weft_comm_agree(w_, &c), WEFT_OK) << "a blocking agreement behind two open ones";
    weft_msg_status_t st[2];
    ASSERT_EQ(weft_request_waitall(2, reqs, st), WEFT_OK);
    EXPECT_EQ(a, size > 1 ? 0 : 1);
    EXPECT_EQ(b, size > 1 ? 0x3c : 0x7c);
    EXPECT_EQ(c, 5);
    EXPECT_EQ(weft_comm_iagree(w_, nullptr, &reqs[0]), WEFT_ERR_INVALID_ARG);
    EXPECT_EQ(weft_comm_iagree(w_, &a, nullptr), WEFT_ERR_INVALID_ARG);
    barrier();
}

// mp.ft.mismatch.*: members that call different fault-tolerant operations
// at the same point (chaos seed 1074: a member recovered with
// validate_global and shrink while the others ended their round with an
// agree first) get BAD_PARAM from each of them, at once, instead of one
// value decided for different questions (a shrink built from an agree's
// contributions) or a wait to the deadline.
TEST_F(Ft, MismatchedOperationsFailTogether) {
    weft_comm_t d = nullptr;
    ASSERT_EQ(weft_comm_dup(w_, &d), WEFT_OK);
    uint32_t nf = 0, nn = 0;
    int flag = 1;
    weft_comm_t shrunk = nullptr;
    if (rank == 0) {
        EXPECT_EQ(weft_comm_validate_global(d, &nf, &nn), WEFT_ERR_BAD_PARAM) << "validate_global against agree";
        EXPECT_EQ(weft_comm_shrink(d, &shrunk), WEFT_ERR_BAD_PARAM) << "shrink against validate_global";
        weft_request_t req = nullptr;
        ASSERT_EQ(weft_comm_ishrink(d, &shrunk, &req), WEFT_OK);
        weft_msg_status_t ms{};
        EXPECT_EQ(weft_request_wait(&req, &ms), WEFT_ERR_BAD_PARAM) << "ishrink against iagree";
        EXPECT_EQ(shrunk, nullptr);
    } else {
        EXPECT_EQ(weft_comm_agree(d, &flag), WEFT_ERR_BAD_PARAM) << "agree against validate_global";
        EXPECT_EQ(weft_comm_validate_global(d, &nf, &nn), WEFT_ERR_BAD_PARAM) << "validate_global against shrink";
        weft_request_t req = nullptr;
        ASSERT_EQ(weft_comm_iagree(d, &flag, &req), WEFT_OK);
        weft_msg_status_t ms{};
        EXPECT_EQ(weft_request_wait(&req, &ms), WEFT_ERR_BAD_PARAM) << "iagree against ishrink";
    }
    // In step again: the same operation everywhere agrees as usual.
    flag = rank == 1 ? 0 : 1;
    EXPECT_EQ(weft_comm_agree(d, &flag), WEFT_OK);
    EXPECT_EQ(flag, size > 1 ? 0 : 1);
    EXPECT_EQ(weft_comm_validate_global(d, &nf, &nn), WEFT_OK);
    ASSERT_EQ(weft_comm_free(&d), WEFT_OK);
}

// mp.ft.split_revoked.*: rank 3 is delayed inside its dup of p, after its
// first send (weft-run --fault delay:...:at=group.split.contributed),
// while rank 0, whose dup finished, revokes p: the revoke overtakes the dup
// at some members, which fail it, while others made the communicator
// (chaos seed 1075). The members that failed tell the others, who revoke
// what they made, so nothing waits for a member that does not have it:
// before, the freed communicator's release never ended at the members that
// had it, and every later drain timed out in its collective phase.
TEST_F(Ft, SplitRevokedWhileRunningLeavesNothingWaiting) {
    weft_comm_t p = nullptr, d = nullptr;
    ASSERT_EQ(weft_comm_dup(w_, &p), WEFT_OK);
    // Rank 3 starts first, so its dup's first step waits for rank 2 when
    // the delay puts it to sleep: ranks 0 and 2 then finish without it
    // (recursive doubling), rank 1 waits for its second step.
    if (rank != 3) std::this_thread::sleep_for(std::chrono::milliseconds(300));
    const weft_status_t st = weft_comm_dup(p, &d);
    EXPECT_TRUE(st == WEFT_OK || st == WEFT_ERR_REVOKED) << weft_strerror(st);
    if (rank == 0) {
        EXPECT_EQ(weft_comm_revoke(p), WEFT_OK);
    }
    uint64_t made = st == WEFT_OK ? 1 : 0, everywhere = 0;
    ASSERT_EQ(weft_allreduce(w_, &made, &everywhere, 1, WEFT_UINT64, WEFT_OP_SUM), WEFT_OK);
    std::printf("[rank %u] dup %s; %llu of %u members made it\n", rank, weft_strerror(st),
                static_cast<unsigned long long>(everywhere), size);
    if (st == WEFT_OK && everywhere < size) {
        // Made here, not everywhere: revoked by the members that failed it.
        EXPECT_TRUE(revoked_within(d, 20))
            << "a communicator made at " << everywhere << " of " << size << " members stayed usable here";
    }
    free_both(p, d);
    // Nothing waits for the members without it: a drain converges.
    barrier();
    weft_drain_result_t res{};
    if (rank == 1) {
        uint64_t n = 0;
        EXPECT_EQ(weft_drain_request(ctx, &n), WEFT_OK);
    }
    EXPECT_EQ(weft_drain_wait(ctx, 1, 60000, &res), WEFT_OK);
    EXPECT_EQ(res.status, WEFT_OK) << "the drain after the split: " << weft_strerror(res.status);
}

// mp.ft.split_death.*: the same with a death: rank 3 dies inside its dup
// of p after its first send (a delay, then SIGKILL, at
// group.split.contributed), so ranks 0 and 2 finish the dup and rank 1 fails
// it (PEER_FAILED). Rank 1's notice makes 0 and 2 revoke theirs: no
// survivor waits in it for another survivor that does not have it.
TEST_F(Ft, SplitWithAMemberDyingLeavesNothingWaiting) {
    weft_comm_t p = nullptr, d = nullptr;
    ASSERT_EQ(weft_comm_dup(w_, &p), WEFT_OK);
    if (rank != 3) std::this_thread::sleep_for(std::chrono::milliseconds(300));
    const weft_status_t st = weft_comm_dup(p, &d);  // rank 3 dies inside
    expect_revoked_unless_every_survivor_made(st, d, "dup");
    free_both(p, d);
}

// mp.ft.create_death.*: the same for weft_comm_create_from_ranks: rank 3 is
// delayed, then killed, inside the new communicator's slot exchange
// (group.create.slot_exchange). Rank 3 starts it first and rank 2 last, so
// ranks 0 and 2 finish it without rank 3's second step and rank 1 fails it;
// rank 1's revoke notice reaches 0 and 2 directly.
TEST_F(Ft, CreateWithAMemberDyingLeavesNothingWaiting) {
    weft_comm_t p = nullptr, d = nullptr;
    ASSERT_EQ(weft_comm_dup(w_, &p), WEFT_OK);
    if (rank != 3) std::this_thread::sleep_for(std::chrono::milliseconds(rank == 2 ? 500 : 300));
    const uint32_t all[4] = {0, 1, 2, 3};
    const weft_status_t st = weft_comm_create_from_ranks(p, all, 4, 77, &d);  // rank 3 dies inside
    expect_revoked_unless_every_survivor_made(st, d, "create_from_ranks");
    free_both(p, d);
}

// ------------------------------------------------------------ bad input, cost
TEST_F(Ft, BadInputGetsClearStatuses) {
    uint32_t n = 0, nn = 0;
    size_t count = 0;
    int flag = 0;
    weft_comm_t out = nullptr;
    EXPECT_EQ(weft_comm_validate_local(nullptr, &n, &nn), WEFT_ERR_NOT_INITIALIZED);
    EXPECT_EQ(weft_comm_validate_global(nullptr, &n, &nn), WEFT_ERR_NOT_INITIALIZED);
    EXPECT_EQ(weft_comm_get_failed(nullptr, WEFT_FAILED_LOCAL, WEFT_FAILED_ALL, nullptr, 0, &count),
              WEFT_ERR_NOT_INITIALIZED);
    EXPECT_EQ(weft_comm_agree(nullptr, &flag), WEFT_ERR_NOT_INITIALIZED);
    EXPECT_EQ(weft_comm_revoke(nullptr), WEFT_ERR_NOT_INITIALIZED);
    EXPECT_EQ(weft_comm_shrink(nullptr, &out), WEFT_ERR_NOT_INITIALIZED);
    weft_comm_t d = nullptr, stale = nullptr;
    ASSERT_EQ(weft_comm_dup(w_, &d), WEFT_OK);
    stale = d;
    ASSERT_EQ(weft_comm_free(&d), WEFT_OK);
    EXPECT_EQ(weft_comm_validate_local(stale, &n, &nn), WEFT_ERR_NOT_INITIALIZED) << "freed communicator";
    EXPECT_EQ(weft_comm_agree(stale, &flag), WEFT_ERR_NOT_INITIALIZED) << "freed communicator";
    EXPECT_EQ(mp_raw_get_failed(w_, 4, WEFT_FAILED_ALL, nullptr, 0, &count), WEFT_ERR_INVALID_ARG);
    EXPECT_EQ(weft_comm_validate_clear(nullptr, nullptr, 0), WEFT_ERR_NOT_INITIALIZED);
    EXPECT_EQ(weft_comm_validate_clear(w_, nullptr, 2), WEFT_ERR_INVALID_ARG);
    EXPECT_EQ(weft_comm_rank_states(w_, nullptr, 1, nullptr), WEFT_ERR_INVALID_ARG);
    EXPECT_EQ(mp_raw_get_failed(w_, -1, WEFT_FAILED_ALL, nullptr, 0, &count), WEFT_ERR_INVALID_ARG);
    EXPECT_EQ(mp_raw_get_failed(w_, WEFT_FAILED_LOCAL, 7, nullptr, 0, &count), WEFT_ERR_INVALID_ARG);
    EXPECT_EQ(weft_comm_get_failed(w_, WEFT_FAILED_LOCAL, WEFT_FAILED_ALL, nullptr, 0, nullptr), WEFT_ERR_INVALID_ARG);
    EXPECT_EQ(weft_comm_get_failed(w_, WEFT_FAILED_LOCAL, WEFT_FAILED_ALL, nullptr, 3, &count), WEFT_ERR_INVALID_ARG);
    EXPECT_EQ(weft_comm_get_failed(w_, WEFT_FAILED_GLOBAL, WEFT_FAILED_NEW, nullptr, 0, &count), WEFT_OK);
    EXPECT_EQ(count, 0u);
    EXPECT_EQ(weft_comm_agree(w_, nullptr), WEFT_ERR_INVALID_ARG);
    EXPECT_EQ(weft_comm_shrink(w_, nullptr), WEFT_ERR_INVALID_ARG);
    EXPECT_EQ(weft_comm_is_revoked(w_, nullptr), WEFT_ERR_INVALID_ARG);
    barrier();
}

// mp.ft.cost.*: failure-free validate_global and agree, for the record.
TEST_F(Ft, AgreementCostWithoutFailures) {
    const int iters = slow_fabric() ? 20 : 200;
    ASSERT_EQ(weft_barrier(w_), WEFT_OK);
    uint64_t t0 = now_ns();
    for (int i = 0; i < iters; ++i) {
        int flag = (i + int(rank)) % 7 != 0 ? 1 : 0;
        const int want = [&] {
            for (uint32_t r = 0; r < size; ++r)
                if ((i + int(r)) % 7 == 0) return 0;
            return 1;
        }();
        ASSERT_EQ(weft_comm_agree(w_, &flag), WEFT_OK);
        ASSERT_EQ(flag, want) << "iteration " << i;
    }
    const double agree_us = double(now_ns() - t0) / 1e3 / iters;
    t0 = now_ns();
    for (int i = 0; i < iters; ++i) ASSERT_EQ(weft_comm_validate_global(w_, nullptr, nullptr), WEFT_OK);
    const double validate_us = double(now_ns() - t0) / 1e3 / iters;
    if (rank == 0)
        std::fprintf(stderr, "[ft] %u ranks: agree %.1f us, validate_global %.1f us (mean of %d)\n", size, agree_us,
                     validate_us, iters);
    barrier();
}

}  // namespace

int main(int argc, char** argv) { return mp::run_all(argc, argv); }
