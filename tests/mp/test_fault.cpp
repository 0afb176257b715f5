// test_fault.cpp — a peer SIGKILLed mid-run is reported to every survivor
// (failure handler, statuses of operations aimed at it), survivors keep
// working among themselves, nothing hangs, finalize returns.
//
// Run by ctest under `weft-run --keep-survivors` with the last rank as the
// victim, either at a named fault point (deterministic) or on a timer while
// every rank is busy with RMA (the victim dies at an arbitrary instruction).
#include "tests/mp/mp_main.hpp"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

using namespace mp;

namespace {

struct Failures {
    std::vector<uint32_t> peers;
    std::vector<uint64_t> when_ns;
};

// A PROC_FAILED event handler's record: peers in the order they came.
struct Events {
    std::vector<uint32_t> peers;
};
void on_event(void* arg, weft_event_t event, uint32_t peer) {
    if (event == WEFT_EVENT_PROC_FAILED) static_cast<Events*>(arg)->peers.push_back(peer);
}

void on_failure(void* arg, uint32_t peer) {
    auto* f = static_cast<Failures*>(arg);
    f->peers.push_back(peer);
    f->when_ns.push_back(now_ns());
}

bool timed_mode() {
    const char* m = std::getenv("WEFT_TEST_FAULT_MODE");
    return m && std::string(m) == "timed";
}

TEST(Fault, KilledPeerIsReportedToEverySurvivor) {
    ASSERT_GE(size, 2u);
    const uint32_t victim = size - 1;
    Failures failures;
    WEFT_OK_OR_FAIL(weft_set_peer_failure_handler(ctx, on_failure, &failures));
    // Two PROC_FAILED registrations and one taken back before the failure.
    Events first, second, withdrawn;
    uint64_t id_first = 0, id_second = 0, id_withdrawn = 0;
    WEFT_OK_OR_FAIL(weft_event_register(ctx, WEFT_EVENT_PROC_FAILED, on_event, &first, &id_first));
    WEFT_OK_OR_FAIL(weft_event_register(ctx, WEFT_EVENT_PROC_FAILED, on_event, &withdrawn, &id_withdrawn));
    WEFT_OK_OR_FAIL(weft_event_register(ctx, WEFT_EVENT_PROC_FAILED, on_event, &second, &id_second));
    WEFT_OK_OR_FAIL(weft_event_deregister(ctx, id_withdrawn));
    void* base = nullptr;
    weft_window_t w = nullptr;
    WEFT_OK_OR_FAIL(weft_window_allocate(ctx, 4096, &base, &w));
    barrier();

    if (rank == victim) {
        if (timed_mode()) {
            // Busy until weft-run's timer kills us (bounded by its --timeout).
            for (;;) {
                uint64_t old;
                for (uint32_t t = 0; t < size; ++t) weft_atomic_fetch_add(w, t, 64, 1, &old);
                weft_progress(ctx, nullptr);
            }
        }
        // Stamp the moment of death into rank 0's window, then die.
        const uint64_t t = now_ns();
        WEFT_OK_OR_FAIL(weft_put(w, 0, 0, &t, 8));
        WEFT_OK_OR_FAIL(weft_flush(w, 0));
        weft_fault_point("mp.fault.victim");
        FAIL() << "the victim survived its fault point: run under weft-run --fault kill:rank=" << victim
               << ":at=mp.fault.victim";
        std::_Exit(3);
    }

    // Survivors: keep operating on every peer until the failure is seen.
    const bool seen = progress_until(
        [&] {
            uint64_t old;
            for (uint32_t t = 0; t < size; ++t) {
                weft_status_t st = weft_atomic_fetch_add(w, t, 64, 1, &old);
                if (st != WEFT_OK && !(t == victim && st == WEFT_ERR_PEER_FAILED)) {
                    ADD_FAILURE() << "fetch-add to " << t << ": " << weft_strerror(st);
                    return true;
                }
            }
            return !failures.peers.empty();
        },
        20);
    ASSERT_TRUE(seen) << "no failure notice within 20 s";
    ASSERT_EQ(failures.peers.size(), 1u);
    EXPECT_EQ(failures.peers[0], victim);
    EXPECT_EQ(first.peers, std::vector<uint32_t>{victim}) << "PROC_FAILED event, first registration";
    EXPECT_EQ(second.peers, std::vector<uint32_t>{victim}) << "PROC_FAILED event, second registration";
    EXPECT_TRUE(withdrawn.peers.empty()) << "a deregistered handler was called";
    if (!timed_mode() && rank == 0) {
        uint64_t died = 0;
        std::memcpy(&died, base, 8);
        ASSERT_NE(died, 0u);
        std::printf("failure seen %.3f ms after the victim reached its fault point\n",
                    double(failures.when_ns[0] - died) / 1e6);
    }

    int failed = 0;
    WEFT_OK_OR_FAIL(weft_peer_failed(ctx, victim, &failed));
    EXPECT_EQ(failed, 1);
    uint64_t v = 1, old = 0;
    EXPECT_EQ(weft_atomic_fetch_add(w, victim, 0, 1, &old), WEFT_ERR_PEER_FAILED);
    EXPECT_EQ(weft_put(w, victim, 0, &v, 8), WEFT_ERR_PEER_FAILED);
    EXPECT_EQ(weft_get(w, victim, 0, &v, 8), WEFT_ERR_PEER_FAILED);
    EXPECT_EQ(weft_am_send(ctx, victim, 1, &v, 8), WEFT_ERR_PEER_FAILED);

    // Survivors still reach each other: each adds 1 to a word of every
    // survivor and waits for its own word to count them all.
    for (uint32_t t = 0; t < victim; ++t) WEFT_OK_OR_FAIL(weft_atomic_fetch_add(w, t, 128, 1, &old));
    EXPECT_TRUE(progress_until(
        [&] { return std::atomic_ref<uint64_t>(static_cast<uint64_t*>(base)[16]).load() == victim; }, 20))
        << "some survivor's fetch-add never arrived";
    // Survivors-only barrier on rank 0 (the job barrier needs the victim):
    // arrive, wait for all, then say we are leaving so rank 0 outlives the
    // last reader of its window.
    WEFT_OK_OR_FAIL(weft_atomic_fetch_add(w, 0, 192, 1, &old));
    EXPECT_TRUE(progress_until(
        [&] {
            uint64_t x = 0;
            return weft_get(w, 0, 192, &x, 8) == WEFT_OK && x == victim;
        },
        20))
        << "survivors-only barrier";
    if (rank != 0) {
        WEFT_OK_OR_FAIL(weft_atomic_fetch_add(w, 0, 256, 1, &old));
    } else {
        EXPECT_TRUE(progress_until(
            [&] { return std::atomic_ref<uint64_t>(static_cast<uint64_t*>(base)[32]).load() == victim - 1; }, 20));
    }
    // A job-wide barrier cannot complete without the victim: it must say so
    // at once rather than hang.
    EXPECT_EQ(weft_bootstrap_barrier(ctx), WEFT_ERR_PEER_FAILED);
    uint32_t none = 0;
    EXPECT_EQ(weft_progress(ctx, &none), WEFT_OK);
    EXPECT_EQ(failures.peers.size(), 1u) << "a failure must be reported once";
    EXPECT_EQ(first.peers.size(), 1u) << "an event must be raised once";
    EXPECT_EQ(second.peers.size(), 1u) << "an event must be raised once";
    EXPECT_EQ(weft_event_deregister(ctx, id_first), WEFT_OK);
    EXPECT_EQ(weft_event_deregister(ctx, id_second), WEFT_OK);
}

}  // namespace

int main(int argc, char** argv) { return mp::run_all(argc, argv); }
