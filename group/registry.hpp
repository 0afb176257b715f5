// registry.hpp — the communicators of one context: their context IDs and
// clock slots, their creation (dup, split, create_from_ranks and its
// non-blocking state machine) and their deferred free
// (docs/communicators.md, "Communicators").
//
// Context IDs are unique in the launch without any shared counter: an ID
// is (universe index of the new communicator's leader) << 32 | a number
// that leader reserved for this creation (the universe index, not the job
// rank: a communicator across jobs has members of several jobs, and every
// member must compute the same ID). Clock slots are chosen locally (the lowest
// free slot of the pinned state window) and exchanged while the
// communicator is built, so a drain knows where each member keeps this
// communicator's clock.
//
// PMIx-style process groups (group/pgroup.hpp) keep their own state; a
// group with a context ID becomes a communicator here (from_members),
// under the group's ID (bit 61 set: never one of these).
//
// Thread affinity: the Engine's (the API lock when MULTIPLE).
#pragma once

#include "group/comm.hpp"

#include <atomic>
#include <deque>
#include <memory>
#include <vector>

namespace weft::group {

class Registry {
public:
    explicit Registry(Engine& eng);
    ~Registry();
    Registry(const Registry&) = delete;
    Registry& operator=(const Registry&) = delete;
    // Engine::init: the slot table, then (after the handlers exist) the
    // world, slot 0 on every rank.
    void init();
    Status make_world();

    Comm& world() { return *world_; }
    const std::vector<std::unique_ptr<Comm>>& comms() const { return comms_; }

    Status dup(Comm& parent, Comm*& out);
    Status split(Comm& parent, int32_t color, int32_t key, Comm*& out);
    Status create_from_ranks(Comm& parent, const uint32_t* ranks, uint32_t n, int32_t tag, Comm*& out);
    // A communicator over members (peer indices, in its rank order) under a
    // context ID they all already agree on (a process group's): collective
    // over the members, who exchange clock slots on it — or, across jobs,
    // take none and only meet in a barrier (Comm::spans_jobs).
    Status from_members(uint64_t id, std::vector<uint32_t> members, Comm*& out);
    // Live communicators with a member of another job (any thread: the
    // drain refuses while there is one).
    uint32_t spanning_jobs() const { return spanning_jobs_.load(std::memory_order_acquire); }
    // create_from_ranks in steps that never block (weft_comm_ishrink): start
    // it, then advance it from progress until it says it is done (`status`,
    // and `comm` on success); abandon it at a deadline. It must not move
    // once started (requests write into it).
    struct Creation {
        Comm* parent = nullptr;
        std::vector<uint32_t> ranks;  // of the parent; the first names the ID
        int32_t tag = 0;
        uint64_t id = 0;
        std::vector<Request*> id_sends;
        Request* id_recv = nullptr;
        Comm* comm = nullptr;
        uint64_t my_word = 0;
        std::vector<uint64_t> words;  // every member's slot_word
        Request* slot_exchange = nullptr;
        Deadline slot_wait{0};  // set when our slot is still coming back (a freed communicator's)
        bool done = false;
        Status status = WEFT_OK;
    };
    Status creation_start(Comm& parent, const uint32_t* ranks, uint32_t n, int32_t tag, Creation& k);
    bool creation_advance(Creation& k);
    void creation_abandon(Creation& k);
    Status free_comm(Comm& c);
    // A request on c was released (P2p): c goes if it is freed and that was
    // its last request.
    void maybe_release_comm(Comm* c);

    // How often this rank took the slot (its target's use field).
    uint16_t slot_use(uint32_t slot) const { return slot < slot_uses_.size() ? slot_uses_[slot] : 0; }
    bool slot_taken(uint32_t slot) const { return slot < slot_used_.size() && slot_used_[slot]; }

    // Checkpoint and restart (group/snapshot.cpp). What a checkpoint saves
    // besides the communicators: the counter of the context IDs this rank
    // names, and how often it took each slot.
    uint64_t next_context() const { return next_ctx_counter_; }
    const std::vector<uint16_t>& slot_use_table() const { return slot_uses_; }
    // Restart, before restore(): both as saved (a slot taken here keeps
    // its use: the world's).
    void restore_counters(uint64_t next_context, const std::vector<uint16_t>& uses);
    // Restart: a saved communicator, under its context ID, with every
    // member's clock slot and this rank's slot taken again at its saved
    // use (BUSY if that slot is taken here).
    Status restore(uint64_t id, std::vector<uint32_t> members, std::vector<uint32_t> slots, std::vector<uint16_t> uses,
                   uint32_t slot, bool slots_known, Comm*& out);

    // Called with a communicator's context ID when it is released (its
    // free's barrier and every request on it done): layers drop their
    // per-communicator state (group/ft).
    void set_release_hook(void (*fn)(void* arg, uint64_t comm_id), void* arg) {
        release_hook_ = fn;
        release_hook_arg_ = arg;
    }
    // Called when a split (or dup) of `parent`, its split number `seq`,
    // failed here: its allgather may have finished at other members, who
    // made the communicator (creation is not uniform by itself). group/ft
    // tells the parent's members, who revoke what they made of it
    // (split_aborted), so nothing waits for this member in it.
    void set_split_failed_hook(void (*fn)(void* arg, const Comm& parent, uint64_t seq), void* arg) {
        split_failed_hook_ = fn;
        split_failed_hook_arg_ = arg;
    }
    // Called with a communicator made here whose creation then failed here
    // (its slot exchange: a member died, a deadline passed) just before it
    // is discarded: other members may have finished it. group/ft sends its
    // members a revoke notice, so none waits in it for this member.
    void set_creation_failed_hook(void (*fn)(void* arg, const Comm& c), void* arg) {
        creation_failed_hook_ = fn;
        creation_failed_hook_arg_ = arg;
    }
    // A member's split `seq` of communicator `parent_id` failed: the
    // communicator this rank made of it (nullptr if none: then a split
    // that finishes here later fails too).
    Comm* split_aborted(uint64_t parent_id, uint64_t seq);
    // Called with a communicator as soon as it exists here (before its
    // creation returns to anyone): layers apply what they learned of it
    // before it existed (group/ft: a revoke notice that came early).
    void set_create_hook(void (*fn)(void* arg, Comm& c), void* arg) {
        create_hook_ = fn;
        create_hook_arg_ = arg;
    }

private:
    Status make_comm(uint64_t id, std::vector<uint32_t> members, std::vector<uint32_t> slots,
                     std::vector<uint16_t> slot_uses, uint32_t my_slot, Comm*& out);
    // make_comm, then every member learns every member's clock slot (a
    // collective on the new communicator, its first).
    Status make_exchanging_slots(uint64_t id, std::vector<uint32_t> members, std::vector<uint32_t> slots,
                                 std::vector<uint16_t> uses, uint32_t slot, Comm*& out);
    bool take_slot(uint32_t& slot);
    // Takes `slot` (free) at `use`: take_slot's and restore's common part.
    void occupy_slot(uint32_t slot, uint16_t use);
    void give_back_slot(uint32_t slot);
    bool slot_coming() const;
    bool wait_for_slot(uint32_t& slot, Deadline d);
    void assign_slot(Comm& c, uint32_t slot);
    Status apply_slot_words(Comm& c, const std::vector<uint64_t>& words);
    void discard_comm(Comm& c);
    void reset_clock(uint32_t slot);
    // A slot and its use in one word, as the members exchange them.
    static uint64_t slot_word(uint32_t slot, uint16_t use) { return slot | (uint64_t(use) << 32); }
    uint64_t next_context_counter() { return next_ctx_counter_++; }
    // The ID a leader names with a number it reserved (the file's header).
    static uint64_t context_id(uint32_t leader_universe, uint64_t number) {
        return (uint64_t(leader_universe) << 32) | (number & 0xffffffffull);
    }
    Status run_blocking(Request* r);

    Engine& eng_;
    Runtime& rt_;
    Comm* world_ = nullptr;
    std::vector<std::unique_ptr<Comm>> comms_;
    uint64_t next_ctx_counter_ = 1;  // 0 is the world's
    std::atomic<uint32_t> spanning_jobs_{0};
    std::vector<uint8_t> slot_used_;
    std::vector<uint16_t> slot_uses_;  // how often each slot was taken (mod 4095, never 0)
    void (*release_hook_)(void* arg, uint64_t comm_id) = nullptr;
    void* release_hook_arg_ = nullptr;
    void (*create_hook_)(void* arg, Comm& c) = nullptr;
    void* create_hook_arg_ = nullptr;
    void (*split_failed_hook_)(void* arg, const Comm& parent, uint64_t seq) = nullptr;
    void (*creation_failed_hook_)(void* arg, const Comm& c) = nullptr;
    void* creation_failed_hook_arg_ = nullptr;
    void* split_failed_hook_arg_ = nullptr;
    // The last splits made here and the failures members told of, by
    // (parent's context ID, split number): a failure names no more than
    // that, and the two can come in either order.
    struct SplitKey {
        uint64_t parent, seq;
        bool operator==(const SplitKey&) const = default;
    };
    static constexpr size_t kept_splits = 64;
    std::deque<std::pair<SplitKey, uint64_t>> made_;  // -> the child's context ID
    std::deque<SplitKey> aborted_;
};

}  // namespace weft::group
