// drain_port.hpp — everything drain/ uses of group, and nothing else
// (docs/drain.md): the Collective Clock (its writer side, commit_begin and
// commit_finish, and where every member keeps each record), the
// point-to-point work the drain must see finish (pending transfers,
// rendezvous pulled into weft's buffer, buffered counts), the blocking
// mode's receives, an external stack's counts, and progress.
//
// Thread affinity: drain_active() is the one word the drain thread writes
// without holding weft (an atomic that commit_begin reads); every other
// method runs where the Engine's do — under the API lock when MULTIPLE,
// which the drain thread holds with the gate closed (WeftHold,
// transport/runtime.hpp) — except commit_begin/commit_finish, which run on
// the application's thread inside its entry.
#pragma once

#include "group/comm.hpp"

#include <atomic>
#include <vector>

namespace weft::group {

class DrainPort {
public:
    explicit DrainPort(Engine& eng);
    DrainPort(const DrainPort&) = delete;
    DrainPort& operator=(const DrainPort&) = delete;

    // ------------------------------------------------- the Collective Clock
    // Collective Clock of c in the pinned state window (drain/ reads it).
    // Inline: every collective pays them (bench/clock_bench.cpp).
    void commit_begin(Comm& c) {
        if (!c.clock) return;
        if (__builtin_expect(drain_active_.load(std::memory_order_relaxed) != 0, 0))
            return hooks_.commit(hooks_.arg, c);
        // Optimistic: count it, then look again. The drain sets
        // drain_active and then forces a fence on every thread
        // (membarrier) before it reads our seq, so either it sees this
        // increment or we see its flag below — then we take the increment
        // back and let the drain decide. Its reads of seq may glimpse the
        // transient value: that only looks like "inside a collective",
        // which never ends a drain.
        std::atomic_ref<uint64_t> seq(c.clock[0]);
        const uint64_t s = seq.load(std::memory_order_relaxed);
        seq.store(s + 1, std::memory_order_release);
        gate::fence_after_entry();
        if (__builtin_expect(drain_active_.load(std::memory_order_relaxed) != 0, 0)) {
            seq.store(s, std::memory_order_release);
            hooks_.commit(hooks_.arg, c);
        }
    }
    void commit_finish(Comm& c) {
        if (!c.clock) return;
        std::atomic_ref<uint64_t> finished(c.clock[2]);
        finished.store(finished.load(std::memory_order_relaxed) + 1, std::memory_order_release);
    }
    // While `active` is nonzero, commit_begin calls `commit` instead of
    // counting by itself: the drain decides whether this collective may
    // start (and raises targets); `commit` increments seq before returning.
    // `slots_learned` runs, while `active` is nonzero, when a new
    // communicator has just learned its members' clock slots (its first
    // collective, create_from_ranks): its clock passed the targets an
    // attempt may already have pushed, so the drain raises them.
    struct Hooks {
        void* arg = nullptr;
        void (*commit)(void* arg, Comm& c) = nullptr;
        void (*slots_learned)(void* arg, Comm& c) = nullptr;
    };
    void slots_learned(Comm& c) {
        if (c.clock && drain_active_.load(std::memory_order_acquire) != 0 && hooks_.slots_learned)
            hooks_.slots_learned(hooks_.arg, c);
    }
    void set_hooks(Hooks h) { hooks_ = h; }
    std::atomic<uint64_t>& drain_active() { return drain_active_; }
    // The clock records of every live communicator with a slot: where each
    // member keeps it.
    struct ClockRecord {
        uint32_t slot;
        std::vector<uint16_t> uses;     // their slots' uses
        std::vector<uint32_t> members;  // job ranks
        std::vector<uint32_t> slots;    // their slots
    };
    std::vector<ClockRecord> clock_records() const;
    // Live communicators with a member of another job (any thread): they
    // have no clock and their traffic is in no sum, so a drain refuses.
    uint32_t comms_across_jobs() const;
    // How often this rank took the slot (its target's use field).
    uint16_t slot_use(uint32_t slot) const;

    // ------------------------------------------------- point-to-point
    // Pulls every unmatched rendezvous message into weft's buffer (its
    // unexpected entry becomes an eager one) and answers DRAINED. Returns
    // how many it pulled; `bytes` adds their size.
    uint64_t drain_rendezvous(uint64_t& bytes);
    // Work that must finish before no message is in transit: pulls and
    // replies not yet done, rendezvous sends still exposed.
    uint64_t pending_transfers() const;
    // The same, by kind (a checkpoint names what it found).
    struct Transfers {
        uint64_t pulls = 0, replies = 0, exposed = 0, announced = 0;
    };
    Transfers transfers() const;
    // Messages and bytes in weft's buffer (unexpected queues).
    void buffered(uint64_t& messages, uint64_t& bytes) const;
    // An external stack's point-to-point messages (drain.h's hooks): they
    // join this rank's counters, which the drain sums.
    void count_external(uint64_t sent, uint64_t arrived) {
        for (auto [off, n] : {std::pair{uint64_t(WEFT_STATE_P2P_SENT_OFF), sent},
                              std::pair{uint64_t(WEFT_STATE_P2P_RECEIVED_OFF), arrived}}) {
            std::atomic_ref<uint64_t> w(*state_word(rt_, off));
            w.store(w.load(std::memory_order_relaxed) + n, std::memory_order_release);
        }
    }

    // ------------------------------------------------- blocking mode
    // The drain's blocking mode: blocking receives wait inside weft and a
    // drain releases them with a dummy completion once nothing is in
    // transit (they receive again after the drain).
    bool blocking() const { return blocking_; }
    void set_blocking(bool on) { blocking_ = on; }
    uint64_t blocked_receives() const;
    uint64_t release_blocked_receives();

    // One step of progress (transport, replies, pulls, schedules).
    uint32_t poll() { return rt_.progress(); }

private:
    Engine& eng_;
    Runtime& rt_;
    std::atomic<uint64_t> drain_active_{0};
    Hooks hooks_;
    bool blocking_ = false;
};

// The port of a context's group layer, or null (the layer is not up).
DrainPort* drain_port_of(Runtime& rt);

}  // namespace weft::group
