// test_comm_engine.cpp — what the communicator layer promises the layers
// above it: Collective-Clock and point-to-point counters in the pinned state
// window, clock slots reused without stale state, deferred free.
#include "tests/mp/mp_main.hpp"

#include <weft/comm.h>
#include <weft/state_window.h>

#include <chrono>
#include <thread>
#include <vector>

namespace {

weft_comm_t world() {
    weft_comm_t w = nullptr;
    EXPECT_EQ(weft_comm_world(mp::ctx, &w), WEFT_OK);
    return w;
}

uint64_t local_state_word(uint64_t off) {
    weft_window_t sw;
    void* base;
    size_t size;
    EXPECT_EQ(weft_state_window(mp::ctx, &sw), WEFT_OK);
    EXPECT_EQ(weft_window_local(sw, &base, &size), WEFT_OK);
    return std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(static_cast<uint8_t*>(base) + off))
        .load(std::memory_order_acquire);
}

// Every collective is one commit_begin and one commit_finish on its
// communicator's record; every user message one sent / one received.
TEST(CommEngine, ClockAndCountersInTheStateWindow) {
    weft_comm_t c;
    ASSERT_EQ(weft_comm_dup(world(), &c), WEFT_OK);
    uint32_t slot;
    ASSERT_EQ(weft_comm_clock_slot(c, &slot), WEFT_OK);
    uint64_t id;
    ASSERT_EQ(weft_comm_context_id(c, &id), WEFT_OK);
    EXPECT_EQ(local_state_word(WEFT_STATE_CLOCK_OFF(slot, WEFT_STATE_CLOCK_CONTEXT)), id + 1);
    const uint64_t seq0 = local_state_word(WEFT_STATE_CLOCK_OFF(slot, WEFT_STATE_CLOCK_SEQ));
    const uint64_t sent0 = local_state_word(WEFT_STATE_CLOCK_OFF(slot, WEFT_STATE_CLOCK_SENT));
    const uint64_t rank_sent0 = local_state_word(WEFT_STATE_P2P_SENT_OFF);

    uint64_t x = 1, y = 0;
    for (int i = 0; i < 5; ++i) ASSERT_EQ(weft_barrier(c), WEFT_OK);
    for (int i = 0; i < 3; ++i) ASSERT_EQ(weft_allreduce(c, &x, &y, 1, WEFT_UINT64, WEFT_OP_SUM), WEFT_OK);
    std::vector<uint64_t> big(10000, 1), bigsum(10000);
    ASSERT_EQ(weft_allreduce(c, big.data(), bigsum.data(), big.size(), WEFT_UINT64, WEFT_OP_SUM), WEFT_OK);
    weft_request_t r;
    ASSERT_EQ(weft_ibarrier(c, &r), WEFT_OK);
    ASSERT_EQ(weft_request_wait(&r, nullptr), WEFT_OK);
    EXPECT_EQ(local_state_word(WEFT_STATE_CLOCK_OFF(slot, WEFT_STATE_CLOCK_SEQ)) - seq0, 10u);
    EXPECT_EQ(local_state_word(WEFT_STATE_CLOCK_OFF(slot, WEFT_STATE_CLOCK_FINISHED)) - seq0, 10u)
        << "finished must catch up with seq once no collective is in progress";

    // Ring of 3 messages each; collectives above sent none of theirs here.
    const uint32_t right = (mp::rank + 1) % mp::size, left = (mp::rank + mp::size - 1) % mp::size;
    for (int i = 0; i < 3; ++i) {
        uint64_t in;
        weft_request_t rr;
        ASSERT_EQ(weft_irecv(c, &in, 1, WEFT_UINT64, int32_t(left), i, &rr), WEFT_OK);
        ASSERT_EQ(weft_send(c, &x, 1, WEFT_UINT64, right, i), WEFT_OK);
        ASSERT_EQ(weft_request_wait(&rr, nullptr), WEFT_OK);
    }
    EXPECT_EQ(local_state_word(WEFT_STATE_CLOCK_OFF(slot, WEFT_STATE_CLOCK_SENT)) - sent0, 3u);
    EXPECT_EQ(local_state_word(WEFT_STATE_P2P_SENT_OFF) - rank_sent0, 3u);

    // A peer reads our received count one-sidedly, at our slot (slots are
    // per rank, so everyone gathers them).
    std::vector<uint64_t> slots(mp::size);
    uint64_t my_slot = slot;
    ASSERT_EQ(weft_allgather(c, &my_slot, 1, WEFT_UINT64, slots.data()), WEFT_OK);
    weft_window_t sw;
    ASSERT_EQ(weft_state_window(mp::ctx, &sw), WEFT_OK);
    uint64_t received_there = 0;
    ASSERT_EQ(weft_get(sw, right, WEFT_STATE_CLOCK_OFF(slots[right], WEFT_STATE_CLOCK_RECEIVED), &received_there, 8),
              WEFT_OK);
    EXPECT_GE(received_there, 3u);
    ASSERT_EQ(weft_barrier(c), WEFT_OK);  // nobody frees (and reuses the slot) while others read
    ASSERT_EQ(weft_comm_free(&c), WEFT_OK);
}

// A clock slot freed by one communicator and taken by the next must not
// carry the old one's flags: the new barrier still waits for everyone.
TEST(CommEngine, ReusedSlotStartsClean) {
    void* base = nullptr;
    weft_window_t win = nullptr;
    ASSERT_EQ(weft_window_allocate(mp::ctx, 64, &base, &win), WEFT_OK);
    for (int round = 0; round < 3; ++round) {
        weft_comm_t c;
        ASSERT_EQ(weft_comm_dup(world(), &c), WEFT_OK);
        for (int i = 0; i < 20; ++i) ASSERT_EQ(weft_barrier(c), WEFT_OK);
        ASSERT_EQ(weft_comm_free(&c), WEFT_OK);
        ASSERT_EQ(weft_barrier(world()), WEFT_OK);  // the free's own barrier has run everywhere

        weft_comm_t fresh;
        ASSERT_EQ(weft_comm_dup(world(), &fresh), WEFT_OK);
        const uint64_t mark = 100 + round;
        if (mp::rank == mp::size - 1) {
            // Late on purpose: a barrier that passes on stale flags lets
            // rank 0 through before this put.
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
            ASSERT_EQ(weft_put(win, 0, 0, &mark, 8), WEFT_OK);
            ASSERT_EQ(weft_flush(win, 0), WEFT_OK);
        }
        ASSERT_EQ(weft_barrier(fresh), WEFT_OK);
        if (mp::rank == 0) {
            EXPECT_EQ(std::atomic_ref<uint64_t>(*static_cast<uint64_t*>(base)).load(), mark)
                << "the barrier on a reused slot did not wait for the last rank";
        }
        ASSERT_EQ(weft_barrier(fresh), WEFT_OK);
        ASSERT_EQ(weft_comm_free(&fresh), WEFT_OK);
    }
    ASSERT_EQ(weft_barrier(world()), WEFT_OK);
    ASSERT_EQ(weft_window_free(win), WEFT_OK);
}

// Context IDs are unique across every communicator of the job, also
// between disjoint communicators of one split.
TEST(CommEngine, ContextIdsUniqueInTheJob) {
    std::vector<weft_comm_t> comms;
    weft_comm_t c;
    for (int i = 0; i < 4; ++i) {
        ASSERT_EQ(weft_comm_dup(world(), &c), WEFT_OK);
        comms.push_back(c);
        ASSERT_EQ(weft_comm_split(world(), int32_t(mp::rank % 3), 0, &c), WEFT_OK);
        comms.push_back(c);
    }
    std::vector<uint64_t> mine;
    for (auto h : comms) {
        uint64_t id;
        ASSERT_EQ(weft_comm_context_id(h, &id), WEFT_OK);
        mine.push_back(id);
    }
    std::vector<uint64_t> all(mine.size() * mp::size);
    ASSERT_EQ(weft_allgather(world(), mine.data(), mine.size(), WEFT_UINT64, all.data()), WEFT_OK);
    // Same ID on two ranks only for the same communicator: dups are shared
    // by all, splits by ranks of one colour.
    for (size_t i = 0; i < all.size(); ++i)
        for (size_t j = i + 1; j < all.size(); ++j) {
            if (all[i] != all[j]) continue;
            const size_t ri = i / mine.size(), rj = j / mine.size(), ki = i % mine.size(), kj = j % mine.size();
            EXPECT_EQ(ki, kj) << "one ID for two different communicators";
            if (ki % 2 == 1) {
                EXPECT_EQ(ri % 3, rj % 3) << "one ID for two colours of a split";
            }
        }
    for (auto& h : comms) ASSERT_EQ(weft_comm_free(&h), WEFT_OK);
}

}  // namespace

int main(int argc, char** argv) { return mp::run_all(argc, argv); }
