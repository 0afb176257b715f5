// registry.cpp — creating and freeing communicators.
//
// Context IDs are unique in the launch without any shared counter: an ID
// is (universe index of the new communicator's leader) << 32 | a number
// that leader reserved for this creation. Every creation reserves a number
// on every participant, so two creations never share one even when threads
// of one rank create communicators concurrently. The world is 0 in every
// job (a message on it from another job's process is refused: P2p::arrived
// checks the sender against the members).
//
// Clock slots are chosen locally (the lowest free slot of the pinned state
// window) and exchanged while the communicator is built, so a drain knows
// where each member keeps this communicator's clock.
#include "group/engine.hpp"

#include <weft/state_window.h>

#include <algorithm>
#include <atomic>

namespace weft::group {

int32_t Comm::rank_of_peer(uint32_t peer) const {
    for (uint32_t i = 0; i < size; ++i)
        if (members[i] == peer) return static_cast<int32_t>(i);
    return -1;
}

Registry::Registry(Engine& eng) : eng_(eng), rt_(eng.rt()) {}

Registry::~Registry() {
    for (auto& c : comms_)
        if (c->handle) release_comm_shell(*c->handle);
}

void Registry::init() {
    slot_used_.assign(WEFT_STATE_COMM_SLOTS, 0);
    slot_uses_.assign(WEFT_STATE_COMM_SLOTS, 0);
}

void Registry::restore_counters(uint64_t next_context, const std::vector<uint16_t>& uses) {
    next_ctx_counter_ = std::max(next_ctx_counter_, next_context);
    for (uint32_t s = 0; s < slot_uses_.size() && s < uses.size(); ++s)
        if (!slot_used_[s]) slot_uses_[s] = uses[s];
}

Status Registry::restore(uint64_t id, std::vector<uint32_t> members, std::vector<uint32_t> slots,
                         std::vector<uint16_t> uses, uint32_t slot, bool slots_known, Comm*& out) {
    if (slot != no_slot) {
        const auto me = std::find(members.begin(), members.end(), rt_.rank());
        if (slot >= slot_used_.size() || slot_used_[slot] || me == members.end())
            return WEFT_FAIL(WEFT_ERR_BUSY, "restart: communicator %llx: clock slot %u is taken here",
                             static_cast<unsigned long long>(id), slot);
        occupy_slot(slot, uses[me - members.begin()]);
    }
    if (Status st = make_comm(id, std::move(members), std::move(slots), std::move(uses), slot, out)) return st;
    out->slots_known = slots_known;
    return WEFT_OK;
}

Status Registry::make_world() {
    std::vector<uint32_t> members(rt_.size());
    for (uint32_t i = 0; i < rt_.size(); ++i) members[i] = i;
    uint32_t slot = 0;
    take_slot(slot);  // slot 0, its first use, on every rank
    std::vector<uint32_t> slots(rt_.size(), 0);
    std::vector<uint16_t> uses(rt_.size(), slot_use(0));
    Status st = make_comm(0, std::move(members), std::move(slots), std::move(uses), slot, world_);
    if (st != WEFT_OK) return st;
    world_->world = true;
    return WEFT_OK;
}

bool Registry::take_slot(uint32_t& slot) {
    for (uint32_t s = 0; s < slot_used_.size(); ++s)
        if (!slot_used_[s]) {
            occupy_slot(s, static_cast<uint16_t>(slot_uses_[s] % ((1u << clock_use_bits) - 1) + 1));
            slot = s;
            return true;
        }
    return false;
}

void Registry::occupy_slot(uint32_t slot, uint16_t use) {
    slot_used_[slot] = 1;
    slot_uses_[slot] = use;
    // Before anyone learns the slot: flags left by the communicator that
    // had it would satisfy the new one's first waits.
    eng_.coll().clear_flags(slot);
    reset_clock(slot);
}

// A new communicator's clock starts at zero on every member: seq and
// finished are ours to store; the target is a remote-atomic word, so it is
// swapped through the transport (loopback on a NIC whose atomics are not
// coherent with ours). It holds the slot's new use from before any member
// learns the slot: a raise or target meant for the slot's previous
// communicator that still comes is refused (clock_use_bits).
void Registry::reset_clock(uint32_t slot) {
    for (uint64_t f : {uint64_t(WEFT_STATE_CLOCK_SEQ), uint64_t(WEFT_STATE_CLOCK_FINISHED)})
        std::atomic_ref<uint64_t>(*state_word(rt_, WEFT_STATE_CLOCK_OFF(slot, f))).store(0, std::memory_order_release);
    weft_window* w = rt_.state_window();
    uint64_t old = 0;
    Status st = w->ops->swap(w, rt_.rank(), WEFT_STATE_CLOCK_OFF(slot, WEFT_STATE_CLOCK_TARGET),
                             uint64_t(slot_uses_[slot]) << clock_value_bits, &old);
    if (st != WEFT_OK) WEFT_LOG(warn, "clock slot %u: target not reset: %s", slot, weft_strerror(st));
    uint32_t hi = 0;
    for (uint32_t s = 0; s < slot_used_.size(); ++s)
        if (slot_used_[s]) hi = s + 1;
    std::atomic_ref<uint64_t>(*state_word(rt_, WEFT_STATE_DRAIN_STATUS_OFF + WEFT_STATE_DRAIN_SLOTS_HI))
        .store(hi, std::memory_order_release);
}

void Registry::give_back_slot(uint32_t slot) {
    if (slot < slot_used_.size()) slot_used_[slot] = 0;
}

// A communicator this rank freed still holds its slot until its release
// barrier finishes; that barrier needs only its other members to free it
// too, which an MPI program that frees and then creates has done.
bool Registry::slot_coming() const {
    for (const auto& c : comms_)
        if (c->freeing && c->slot != no_slot) return true;
    return false;
}

// Takes a free slot, progressing (the release barriers) while one is
// coming back, until the deadline.
bool Registry::wait_for_slot(uint32_t& slot, Deadline d) {
    slot = no_slot;
    eng_.progress_until([&] { return take_slot(slot) || !slot_coming(); }, d);
    return slot != no_slot;
}

// Our slot for c: its clock record, and the context word that tells the
// drain the record is live (make_comm, or later when it was coming back).
void Registry::assign_slot(Comm& c, uint32_t slot) {
    c.slot = slot;
    c.clock = state_word(rt_, WEFT_STATE_CLOCK_OFF(slot, WEFT_STATE_CLOCK_SEQ));
    c.slots[c.rank] = slot;
    c.slot_uses[c.rank] = slot_use(slot);
    std::atomic_ref<uint64_t>(*state_word(rt_, WEFT_STATE_CLOCK_OFF(slot, WEFT_STATE_CLOCK_CONTEXT)))
        .store(c.id + 1, std::memory_order_release);
}

// Every member's slot word (UINT64_MAX: it has none) into c; BUSY if one has
// none, the same answer on every member.
Status Registry::apply_slot_words(Comm& c, const std::vector<uint64_t>& words) {
    if (c.spans_jobs) {  // no slots across jobs: nothing to learn
        c.slots_known = true;
        return WEFT_OK;
    }
    bool full = false;
    for (uint32_t i = 0; i < c.size; ++i) {
        if (words[i] == UINT64_MAX)
            full = true;
        else {
            c.slots[i] = static_cast<uint32_t>(words[i]);
            c.slot_uses[i] = static_cast<uint16_t>(words[i] >> 32);
        }
    }
    if (full)
        return WEFT_FAIL(WEFT_ERR_BUSY,
                         "communicator creation: a member has no free clock slot (%u communicators live)",
                         WEFT_STATE_COMM_SLOTS);
    c.slots_known = true;
    eng_.drain_port().slots_learned(c);
    return WEFT_OK;
}

// A communicator whose creation failed after it was made goes as a freed
// one does (its requests still out release it when they finish).
void Registry::discard_comm(Comm& c) {
    if (creation_failed_hook_) creation_failed_hook_(creation_failed_hook_arg_, c);
    c.freeing = true;
    maybe_release_comm(&c);
}

Status Registry::make_comm(uint64_t id, std::vector<uint32_t> members, std::vector<uint32_t> slots,
                           std::vector<uint16_t> slot_uses, uint32_t my_slot, Comm*& out) {
    auto c = std::make_unique<Comm>();
    c->engine = &eng_;
    c->id = id;
    c->size = static_cast<uint32_t>(members.size());
    c->members = std::move(members);
    c->slots = std::move(slots);
    c->slot_uses = std::move(slot_uses);
    c->slot = no_slot;
    c->rank = static_cast<uint32_t>(c->rank_of_peer(rt_.rank()));
    c->spans_jobs = std::any_of(c->members.begin(), c->members.end(), [&](uint32_t p) { return p >= rt_.size(); });
    if (c->spans_jobs) {
        // No clock slot across jobs (Comm::spans_jobs): the one a creation
        // took for it goes back, and no member's is known.
        spanning_jobs_.fetch_add(1, std::memory_order_acq_rel);
        if (my_slot != no_slot) give_back_slot(my_slot);
        my_slot = no_slot;
        std::fill(c->slots.begin(), c->slots.end(), no_slot);
    }
    if (my_slot != no_slot) assign_slot(*c, my_slot);
    eng_.p2p().register_queues(c.get());
    out = c.get();
    comms_.push_back(std::move(c));
    WEFT_LOG(debug, "communicator %llx: %u ranks, I am %u, clock slot %u", static_cast<unsigned long long>(id),
             out->size, out->rank, my_slot);
    if (create_hook_) create_hook_(create_hook_arg_, *out);
    return WEFT_OK;
}

Status Registry::run_blocking(Request* r) {
    Status st = eng_.wait(*r, rt_.op_deadline());
    if (st != WEFT_OK) {
        // Leave it running; it is released when it finishes.
        r->detached = true;
        return WEFT_FAIL(st, "communicator creation: a collective step did not finish in time");
    }
    return eng_.p2p().finish(*r, nullptr);
}

Status Registry::split(Comm& parent, int32_t color, int32_t key, Comm*& out) {
    out = nullptr;
    const bool joining = color != WEFT_UNDEFINED;
    // Our slot, as the members exchange it: a slot word, none, or later (a
    // communicator we freed gives one back when its release finishes).
    constexpr int64_t no_slot_word = -1, slot_later = -2;
    uint32_t slot = no_slot;
    int64_t word = no_slot_word;
    if (joining) {
        if (take_slot(slot))
            word = static_cast<int64_t>(slot_word(slot, slot_use(slot)));
        else if (slot_coming())
            word = slot_later;
    }
    const int64_t mine[4] = {color, key, static_cast<int64_t>(next_context_counter()), word};
    std::vector<int64_t> all(4 * size_t(parent.size));
    const uint64_t seq = parent.splits++;
    Request* r = nullptr;
    Status st = eng_.coll().allgather_start(parent, mine, sizeof mine, all.data(), r);
    // Tests delay a member here so that a revoke overtakes its split.
    WEFT_FAULT_POINT("group.split.contributed");
    if (st == WEFT_OK) st = run_blocking(r);
    if (st == WEFT_OK && std::find(aborted_.begin(), aborted_.end(), SplitKey{parent.id, seq}) != aborted_.end())
        st = WEFT_FAIL(WEFT_ERR_REVOKED, "split: it failed at another member (its parent was revoked there)");
    else if (st != WEFT_OK && split_failed_hook_)
        // The allgather may have finished elsewhere (a revoke overtook it
        // here only): the members that made the communicator revoke it.
        split_failed_hook_(split_failed_hook_arg_, parent, seq);
    if (st != WEFT_OK || !joining) {
        if (slot != no_slot) give_back_slot(slot);
        return st;
    }
    std::vector<uint32_t> order;  // parent ranks of my colour, by (key, rank)
    for (uint32_t i = 0; i < parent.size; ++i)
        if (all[4 * i] == color) order.push_back(i);
    std::stable_sort(order.begin(), order.end(),
                     [&](uint32_t a, uint32_t b) { return all[4 * a + 1] < all[4 * b + 1]; });
    std::vector<uint32_t> members, slots;
    std::vector<uint16_t> uses;
    bool later = false;
    for (uint32_t i : order) {
        const int64_t w = all[4 * i + 3];
        if (w == no_slot_word) {
            if (slot != no_slot) give_back_slot(slot);
            return WEFT_FAIL(WEFT_ERR_BUSY, "split: rank %u has no free clock slot (%u communicators live)", i,
                             WEFT_STATE_COMM_SLOTS);
        }
        later |= w == slot_later;
        members.push_back(parent.members[i]);
        slots.push_back(w == slot_later ? 0 : static_cast<uint32_t>(w));
        uses.push_back(w == slot_later ? 0 : static_cast<uint16_t>(uint64_t(w) >> 32));
    }
    const uint32_t leader = order.front();
    const uint64_t id = context_id(rt_.peer(parent.members[leader]).universe_index, uint64_t(all[4 * leader + 2]));
    if (made_.size() == kept_splits) made_.pop_front();
    made_.push_back({SplitKey{parent.id, seq}, id});
    if (!later) return make_comm(id, std::move(members), std::move(slots), std::move(uses), slot, out);

    // A member's slot is still coming back. Every member saw that in the
    // same allgather, so all of them make the communicator now and
    // exchange slots on it once each has one (as create_from_ranks does):
    // the release barriers that free those slots need the other members to
    // have left this call, or at least to progress in it.
    return make_exchanging_slots(id, std::move(members), std::move(slots), std::move(uses), slot, out);
}

Comm* Registry::split_aborted(uint64_t parent_id, uint64_t seq) {
    const SplitKey key{parent_id, seq};
    for (const auto& [k, child] : made_) {
        if (!(k == key)) continue;
        for (const auto& c : comms_)
            if (c->id == child) return c.get();
        return nullptr;  // made and released already
    }
    if (std::find(aborted_.begin(), aborted_.end(), key) == aborted_.end()) {
        if (aborted_.size() == kept_splits) aborted_.pop_front();
        aborted_.push_back(key);
    }
    return nullptr;
}

Status Registry::make_exchanging_slots(uint64_t id, std::vector<uint32_t> members, std::vector<uint32_t> slots,
                                       std::vector<uint16_t> uses, uint32_t slot, Comm*& out) {
    Comm* c = nullptr;
    Status st = make_comm(id, std::move(members), std::move(slots), std::move(uses), slot, c);
    if (st != WEFT_OK) return st;
    if (c->spans_jobs) {
        // Across jobs there are no slots to exchange; the members still meet
        // in a barrier, so that the call stays collective (it returns once
        // every member made it, or fails on a dead one).
        Request* r = nullptr;
        st = eng_.coll().barrier_start(*c, r);
        if (st == WEFT_OK) st = run_blocking(r);
        if (st != WEFT_OK) {
            discard_comm(*c);
            return st;
        }
        out = c;
        return WEFT_OK;
    }
    c->slots_known = false;  // nobody can raise its target before this exchange
    if (slot == no_slot && wait_for_slot(slot, rt_.op_deadline())) assign_slot(*c, slot);
    const uint64_t my_word = slot == no_slot ? UINT64_MAX : slot_word(slot, slot_use(slot));
    std::vector<uint64_t> words(c->size, 0);
    Request* r = nullptr;
    st = eng_.coll().allgather_start(*c, &my_word, sizeof my_word, words.data(), r);
    if (st == WEFT_OK) st = run_blocking(r);
    if (st == WEFT_OK) st = apply_slot_words(*c, words);
    if (st != WEFT_OK) {
        discard_comm(*c);
        return st;
    }
    out = c;
    return WEFT_OK;
}

Status Registry::from_members(uint64_t id, std::vector<uint32_t> members, Comm*& out) {
    out = nullptr;
    for (const auto& c : comms_)
        if (c->id == id)
            return WEFT_FAIL(WEFT_ERR_BUSY, "communicator %llx exists here already (or is still being released)",
                             static_cast<unsigned long long>(id));
    uint32_t slot = no_slot;
    if (!take_slot(slot)) slot = no_slot;  // one coming back is waited for on the new communicator
    const size_t n = members.size();
    return make_exchanging_slots(id, std::move(members), std::vector<uint32_t>(n, 0), std::vector<uint16_t>(n, 0), slot,
                                 out);
}

Status Registry::dup(Comm& parent, Comm*& out) { return split(parent, 0, static_cast<int32_t>(parent.rank), out); }

Status Registry::create_from_ranks(Comm& parent, const uint32_t* ranks, uint32_t n, int32_t tag, Comm*& out) {
    out = nullptr;
    Creation k;
    Status st = creation_start(parent, ranks, n, tag, k);
    if (st != WEFT_OK) return st;
    if (!eng_.progress_until([&] { return creation_advance(k); }, rt_.op_deadline())) {
        creation_abandon(k);
        return WEFT_FAIL(WEFT_ERR_TIMEOUT, "communicator creation: a step did not finish in time");
    }
    out = k.comm;
    return k.status;
}

Status Registry::creation_start(Comm& parent, const uint32_t* ranks, uint32_t n, int32_t tag, Creation& k) {
    k.parent = &parent;
    k.ranks.assign(ranks, ranks + n);
    k.tag = tag;
    // The leader names the ID; the others learn it on the parent's
    // creation context, under the caller's tag.
    if (ranks[0] == parent.rank) {
        k.id = context_id(rt_.self_universe(), next_context_counter());
        for (uint32_t i = 1; i < n; ++i) {
            Request* s = nullptr;
            Status st = eng_.p2p().isend(parent, create_bit, &k.id, sizeof k.id, ranks[i], tag, false, s);
            if (st != WEFT_OK) {
                creation_abandon(k);
                return st;
            }
            k.id_sends.push_back(s);
        }
        return WEFT_OK;
    }
    return eng_.p2p().irecv(parent, create_bit, &k.id, sizeof k.id, static_cast<int32_t>(ranks[0]), tag, k.id_recv);
}

bool Registry::creation_advance(Creation& k) {
    if (k.done) return true;
    auto fail = [&](Status st) {
        creation_abandon(k);
        k.status = st;
        k.done = true;
        return true;
    };
    if (!k.comm) {
        // The context ID.
        for (Request*& s : k.id_sends) {
            if (!s->done) return false;
        }
        if (k.id_recv && !k.id_recv->done) return false;
        Status first = WEFT_OK;
        for (Request*& s : k.id_sends) {
            const Status st = eng_.p2p().finish(*s, nullptr);
            s = nullptr;
            if (st != WEFT_OK && first == WEFT_OK) first = st;
        }
        k.id_sends.clear();
        if (k.id_recv) {
            first = eng_.p2p().finish(*k.id_recv, nullptr);
            k.id_recv = nullptr;
            if (first != WEFT_OK)
                return fail(WEFT_FAIL(first, "create_from_ranks: no context ID from the leader (rank %u)", k.ranks[0]));
        }
        if (first != WEFT_OK) return fail(first);
        // Our clock slot; every member learns every member's (a collective
        // on the new communicator: its first, on every member).
        const uint32_t n = static_cast<uint32_t>(k.ranks.size());
        // A slot that a communicator we freed is giving back is waited for
        // (advanced again from progress), up to the operation deadline.
        uint32_t slot = no_slot;
        if (!take_slot(slot)) {
            slot = no_slot;
            if (slot_coming()) {
                if (!k.slot_wait.at_ns) k.slot_wait = rt_.op_deadline();
                if (!k.slot_wait.passed()) return false;
            }
        }
        std::vector<uint32_t> members(n), slots(n, 0);
        std::vector<uint16_t> uses(n, 0);
        for (uint32_t i = 0; i < n; ++i) members[i] = k.parent->members[k.ranks[i]];
        make_comm(k.id, std::move(members), std::move(slots), std::move(uses), slot, k.comm);
        k.comm->slots_known = false;  // nobody can raise its target before this exchange
        k.my_word = slot == no_slot ? UINT64_MAX : slot_word(slot, slot_use(slot));
        k.words.assign(n, 0);
        const Status st =
            eng_.coll().allgather_start(*k.comm, &k.my_word, sizeof k.my_word, k.words.data(), k.slot_exchange);
        if (st != WEFT_OK) return fail(st);
        // Tests delay, then kill, a member here: others finish the exchange.
        WEFT_FAULT_POINT("group.create.slot_exchange");
    }
    if (!k.slot_exchange->done) return false;
    Status st = eng_.p2p().finish(*k.slot_exchange, nullptr);
    k.slot_exchange = nullptr;
    if (st == WEFT_OK) st = apply_slot_words(*k.comm, k.words);
    if (st != WEFT_OK) return fail(st);
    k.done = true;
    return true;
}

void Registry::creation_abandon(Creation& k) {
    // Requests still out are released when they finish; a communicator
    // made already goes as a failed creation does.
    auto let_go = [&](Request* r) {
        if (!r) return;
        if (r->done)
            eng_.p2p().finish(*r, nullptr);
        else
            r->detached = true;
    };
    for (Request* s : k.id_sends) let_go(s);
    k.id_sends.clear();
    if (k.id_recv) {
        eng_.p2p().abandon(*k.id_recv, WEFT_ERR_TIMEOUT);
        eng_.p2p().finish(*k.id_recv, nullptr);
        k.id_recv = nullptr;
    }
    let_go(k.slot_exchange);
    k.slot_exchange = nullptr;
    if (k.comm) {
        discard_comm(*k.comm);
        k.comm = nullptr;
    }
}

Status Registry::free_comm(Comm& c) {
    // MANA's rule: the real free waits for a barrier on the communicator,
    // so no peer can still be sending on it. The caller's handle is dead
    // now; the communicator goes when the barrier (and every request on
    // it) has finished.
    c.freeing = true;
    Request* r = nullptr;
    Status st = eng_.coll().barrier_start(c, r, /*release=*/true);
    if (st != WEFT_OK) return st;
    r->detached = true;
    if (r->done) eng_.p2p().finish(*r, nullptr);
    return WEFT_OK;
}

void Registry::maybe_release_comm(Comm* c) {
    if (!c->freeing || c->refs != 0 || c->world) return;
    eng_.p2p().unregister_queues(c);
    if (c->slot != no_slot) {
        std::atomic_ref<uint64_t>(*state_word(rt_, WEFT_STATE_CLOCK_OFF(c->slot, WEFT_STATE_CLOCK_CONTEXT)))
            .store(0, std::memory_order_release);
        give_back_slot(c->slot);
    }
    if (c->handle) release_comm_shell(*c->handle);
    if (c->spans_jobs) spanning_jobs_.fetch_sub(1, std::memory_order_acq_rel);
    WEFT_LOG(debug, "communicator %llx released", static_cast<unsigned long long>(c->id));
    if (release_hook_) release_hook_(release_hook_arg_, c->id);
    auto it = std::find_if(comms_.begin(), comms_.end(), [&](const auto& p) { return p.get() == c; });
    if (it != comms_.end()) comms_.erase(it);
}

}  // namespace weft::group
