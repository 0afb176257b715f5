// test_verbs.cpp — what only the verbs backend has: NIC atomics through the
// loopback QP, memory registration of bad ranges, more operations in flight
// than the send queue holds, and a QP to a dead peer reported as a failure.
//
// Run under `weft-run --transport verbs --keep-survivors --fault
// kill:rank=LAST:at=mp.verbs.victim` with WEFT_PIDFD_MONITOR=0, so that the
// QP's retry-exceeded error is the only way survivors can learn of the
// death (as for a peer on another host). Needs an RDMA device: ctest runs it
// inside tests/rxe/run-in-vm.sh.
#include "tests/mp/mp_main.hpp"

#include <weft/state_window.h>

#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

using namespace mp;

namespace {

TEST(Verbs, ReportsNicAtomics) {
    weft_caps_t caps;
    WEFT_OK_OR_FAIL(weft_query_caps(ctx, &caps));
    ASSERT_STREQ(caps.transport, "verbs");
    EXPECT_EQ(caps.atomics, WEFT_ATOMICS_HARDWARE);
    EXPECT_EQ(caps.atomics_registered, WEFT_ATOMICS_HARDWARE);
    // rxe reports ATOMIC_HCA: NIC atomics are not coherent with the CPU's.
    if (const char* want = std::getenv("WEFT_TEST_EXPECT_SCOPE")) {
        EXPECT_EQ(caps.atomic_scope,
                  std::string(want) == "device" ? WEFT_ATOMIC_SCOPE_DEVICE : WEFT_ATOMIC_SCOPE_GLOBAL);
    }
    if (rank == 0)
        std::printf("atomic scope %s\n", caps.atomic_scope == WEFT_ATOMIC_SCOPE_DEVICE ? "device" : "global");
}

// The owner updates a remote-atomic word of its own state window through
// the transport (the loopback QP), mixing with peers' NIC atomics: the sum
// is exact.
TEST(Verbs, OwnerUsesLoopbackAtomicsOnItsStateWindow) {
    weft_window_t sw = nullptr;
    WEFT_OK_OR_FAIL(weft_state_window(ctx, &sw));
    const uint64_t iters = 200;
    uint64_t old = 0;
    for (uint64_t i = 0; i < iters; ++i)
        for (uint32_t t = 0; t < size; ++t)  // t == rank: loopback
            WEFT_OK_OR_FAIL(weft_atomic_fetch_add(sw, t, WEFT_STATE_FAILURE_NOTICES_OFF, 1, &old));
    barrier();
    uint64_t v = 0;
    WEFT_OK_OR_FAIL(weft_atomic_fetch_add(sw, rank, WEFT_STATE_FAILURE_NOTICES_OFF, 0, &v));
    EXPECT_EQ(v, iters * size);
    barrier();
    // Put it back for whoever reads it later, through the NIC as well.
    WEFT_OK_OR_FAIL(weft_atomic_compare_swap(sw, rank, WEFT_STATE_FAILURE_NOTICES_OFF, v, 0, &old));
    EXPECT_EQ(old, v);
    barrier();
}

// Registration of memory that is not (all) there fails on the registering
// rank with INVALID_ARG and on every rank of the collective, with a log line;
// afterwards registration still works.
TEST(Verbs, BadRegistrationRangesFailEverywhere) {
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    std::vector<uint8_t> good(4096);
    // 1: an unmapped range; 2: a range running off the end of a mapping;
    // 3: a PROT_NONE page.
    for (int kind = 1; kind <= 3; ++kind) {
        void* bad = mmap(nullptr, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        ASSERT_NE(bad, MAP_FAILED);
        void* base = good.data();
        size_t len = good.size();
        if (rank == 0) {
            if (kind == 1) munmap(bad, 2 * page);
            if (kind == 2) munmap(static_cast<uint8_t*>(bad) + page, page);
            if (kind == 3) mprotect(bad, 2 * page, PROT_NONE);
            base = bad;
            len = 2 * page;
        }
        weft_window_t w = nullptr;
        const weft_status_t st = weft_window_register(ctx, base, len, &w);
        if (rank == 0)
            EXPECT_EQ(st, WEFT_ERR_INVALID_ARG) << "kind " << kind;
        else
            EXPECT_NE(st, WEFT_OK) << "kind " << kind << ": rank 0's failure must fail the collective";
        EXPECT_EQ(w, nullptr);
        if (st == WEFT_OK) weft_window_free(w);
        if (rank != 0 || kind != 1) munmap(bad, kind == 2 && rank == 0 ? page : 2 * page);
    }
    weft_window_t w = nullptr;
    WEFT_OK_OR_FAIL(weft_window_register(ctx, good.data(), good.size(), &w));
    const uint64_t v = 0x1234500 + rank;
    WEFT_OK_OR_FAIL(weft_put(w, (rank + 1) % size, 8 * rank, &v, 8));
    WEFT_OK_OR_FAIL(weft_flush(w, WEFT_RANK_ALL));
    barrier();
    uint64_t got = 0;
    const uint32_t from = (rank + size - 1) % size;
    std::memcpy(&got, good.data() + 8 * from, 8);
    EXPECT_EQ(got, 0x1234500u + from);
    barrier();
    WEFT_OK_OR_FAIL(weft_window_free(w));
}

// Far more puts than the send queue (256 WRs) and the staging ring (256 KiB)
// hold, without a flush in between: back-pressure, nothing lost.
TEST(Verbs, ManyOutstandingPutsPastSendQueueDepth) {
    const size_t small = 8 * 2048;         // 2048 inline 8-byte puts per target
    const size_t big_n = 400, big = 1000;  // 400 KB of staged puts per target
    const size_t slot = small + big_n * big;
    void* base = nullptr;
    weft_window_t w = nullptr;
    WEFT_OK_OR_FAIL(weft_window_allocate(ctx, slot * size, &base, &w));
    std::vector<uint8_t> buf(big);
    for (uint32_t t = 0; t < size; ++t) {
        for (uint64_t i = 0; i < small / 8; ++i) {
            const uint64_t v = (uint64_t(rank) << 48) | (uint64_t(t) << 32) | i;
            WEFT_OK_OR_FAIL(weft_put(w, t, rank * slot + 8 * i, &v, 8));
        }
        for (size_t i = 0; i < big_n; ++i) {
            for (size_t b = 0; b < big; ++b) buf[b] = static_cast<uint8_t>(rank * 7 + t * 13 + i * 3 + b);
            WEFT_OK_OR_FAIL(weft_put(w, t, rank * slot + small + i * big, buf.data(), big));
        }
    }
    WEFT_OK_OR_FAIL(weft_flush(w, WEFT_RANK_ALL));
    barrier();
    const uint8_t* mem = static_cast<const uint8_t*>(base);
    for (uint32_t o = 0; o < size; ++o) {
        for (uint64_t i = 0; i < small / 8; ++i) {
            uint64_t v = 0;
            std::memcpy(&v, mem + o * slot + 8 * i, 8);
            ASSERT_EQ(v, (uint64_t(o) << 48) | (uint64_t(rank) << 32) | i) << "from " << o << " word " << i;
        }
        for (size_t i = 0; i < big_n; ++i)
            for (size_t b = 0; b < big; ++b)
                ASSERT_EQ(mem[o * slot + small + i * big + b], static_cast<uint8_t>(o * 7 + rank * 13 + i * 3 + b))
                    << "from " << o << " put " << i << " byte " << b;
    }
    barrier();
    WEFT_OK_OR_FAIL(weft_window_free(w));
}

struct Burst {
    std::vector<uint64_t> next;
    uint64_t received = 0;
    bool bad = false;
};

void on_burst(void* arg, uint32_t src, const void* payload, size_t len) {
    auto* b = static_cast<Burst*>(arg);
    uint64_t seq = 0;
    std::memcpy(&seq, payload, 8);
    if (len < 8 || src >= b->next.size() || seq != b->next[src])
        b->bad = true;
    else
        ++b->next[src];
    ++b->received;
}

// Ten times more messages per peer than it has receive slots (credits),
// sent without progressing between sends, everybody to everybody at once:
// the senders' credit waits must keep the receivers' slots flowing.
TEST(Verbs, ActiveMessageBurstPastCredits) {
    Burst b;
    b.next.assign(size, 0);
    WEFT_OK_OR_FAIL(weft_am_register(ctx, 9, on_burst, &b));
    barrier();
    const uint64_t per_peer = 320;
    std::vector<uint8_t> msg(200);
    for (uint64_t s = 0; s < per_peer; ++s)
        for (uint32_t t = 0; t < size; ++t) {
            std::memcpy(msg.data(), &s, 8);
            WEFT_OK_OR_FAIL(weft_am_send(ctx, t, 9, msg.data(), (s % 2) ? msg.size() : 8));
        }
    ASSERT_TRUE(progress_until([&] { return b.received == per_peer * size || b.bad; }))
        << "received " << b.received << " of " << per_peer * size;
    EXPECT_FALSE(b.bad) << "out of order";
    barrier();
    WEFT_OK_OR_FAIL(weft_am_register(ctx, 9, nullptr, nullptr));
}

struct Failures {
    std::vector<uint32_t> peers;
};
void on_failure(void* arg, uint32_t peer) { static_cast<Failures*>(arg)->peers.push_back(peer); }

// The last rank dies. Nothing but the QP can tell the survivors (no pidfd
// monitor): an operation to the dead peer runs into the retry limit, its
// work completion errors, the peer is declared failed.
TEST(Verbs, QpToDeadPeerIsReportedAsFailure) {
    ASSERT_GE(size, 3u) << "needs two survivors";
    const char* mon = std::getenv("WEFT_PIDFD_MONITOR");
    ASSERT_TRUE(mon && std::string(mon) == "0") << "run with WEFT_PIDFD_MONITOR=0";
    const uint32_t victim = size - 1;
    Failures f;
    WEFT_OK_OR_FAIL(weft_set_peer_failure_handler(ctx, on_failure, &f));
    void* base = nullptr;
    weft_window_t w = nullptr;
    WEFT_OK_OR_FAIL(weft_window_allocate(ctx, 4096, &base, &w));
    barrier();
    if (rank == victim) {
        weft_fault_point("mp.verbs.victim");
        FAIL() << "the victim survived: run under weft-run --fault kill:rank=" << victim << ":at=mp.verbs.victim";
        std::_Exit(3);
    }
    // Give the victim time to be gone, then talk to it.
    usleep(200000);
    const uint64_t t0 = now_ns();
    weft_status_t st = WEFT_OK;
    uint64_t old = 0;
    while (st == WEFT_OK && now_ns() - t0 < 30000000000ull) {
        st = weft_atomic_fetch_add(w, victim, 0, 1, &old);
        weft_progress(ctx, nullptr);
    }
    EXPECT_EQ(st, WEFT_ERR_PEER_FAILED) << weft_strerror(st);
    ASSERT_TRUE(progress_until([&] { return !f.peers.empty(); }, 10)) << "no failure notice";
    std::printf("[rank %u] dead peer reported %.0f ms after the first operation\n", rank, double(now_ns() - t0) / 1e6);
    EXPECT_EQ(f.peers.size(), 1u);
    EXPECT_EQ(f.peers[0], victim);
    int failed = 0;
    WEFT_OK_OR_FAIL(weft_peer_failed(ctx, victim, &failed));
    EXPECT_EQ(failed, 1);
    uint64_t v = 1;
    EXPECT_EQ(weft_put(w, victim, 0, &v, 8), WEFT_ERR_PEER_FAILED);
    EXPECT_EQ(weft_am_send(ctx, victim, 1, &v, 8), WEFT_ERR_PEER_FAILED);
    // Survivors still reach each other; a survivors-only barrier on rank 0.
    for (uint32_t t = 0; t < victim; ++t) WEFT_OK_OR_FAIL(weft_atomic_fetch_add(w, t, 64, 1, &old));
    EXPECT_TRUE(progress_until(
        [&] {
            uint64_t x = 0;
            return weft_atomic_fetch_add(w, rank, 64, 0, &x) == WEFT_OK && x == victim;
        },
        20))
        << "some survivor's fetch-add never arrived";
    WEFT_OK_OR_FAIL(weft_atomic_fetch_add(w, 0, 128, 1, &old));
    EXPECT_TRUE(progress_until(
        [&] {
            uint64_t x = 0;
            return weft_get(w, 0, 128, &x, 8) == WEFT_OK && x == victim;
        },
        20))
        << "survivors-only barrier";
    if (rank != 0) {
        WEFT_OK_OR_FAIL(weft_atomic_fetch_add(w, 0, 192, 1, &old));
    } else {
        EXPECT_TRUE(progress_until(
            [&] {
                uint64_t x = 0;
                return weft_atomic_fetch_add(w, 0, 192, 0, &x) == WEFT_OK && x == victim - 1;
            },
            20));
    }
    EXPECT_EQ(weft_bootstrap_barrier(ctx), WEFT_ERR_PEER_FAILED);
    EXPECT_EQ(f.peers.size(), 1u) << "a failure must be reported once";
}

}  // namespace

int main(int argc, char** argv) { return mp::run_all(argc, argv); }
