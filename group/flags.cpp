// flags.cpp — blocking barrier and small allreduce over one-sided writes
// into pinned flags.
//
// A job-wide window (allocated at init) gives every clock slot an area on
// every rank: barrier flags, one per dissemination round, and for
// allreduce two parities of {flag, 256-byte inbox} per recursive-doubling
// round. A round is: put the data into the partner's inbox, put the
// collective's epoch into the partner's flag (puts from one origin land in
// order, or a flush separates them), then wait until our own flag reaches
// the epoch. No message, no matching, no handler: on shm each round is one
// cache-line transfer each way.
//
// Why the inboxes cannot be overwritten before they are read: flags only
// grow (epochs are the communicator's collective count); a barrier flag is
// read as "at least this epoch"; an allreduce inbox of parity p is written
// again only two allreduces later, and the writer cannot finish the next
// allreduce without our data from it — which we send only after reading
// this one.
//
// Used by the blocking forms when the payload fits (non-blocking forms and
// larger payloads run as schedules, coll.cpp). Every member takes the same
// decision: it depends only on the size and the communicator.
#include "group/engine.hpp"
#include "group/reduce.hpp"

#include <weft/state_window.h>

#include <atomic>
#include <cstring>

namespace weft::group {

namespace {
constexpr size_t line = 64;
constexpr uint32_t max_rounds = 12;              // 4096 ranks
constexpr uint32_t pre_round = max_rounds;       // fold of the extra ranks
constexpr uint32_t post_round = max_rounds + 1;  // their result
constexpr uint32_t cells = max_rounds + 2;
constexpr size_t cell_size = line + flag_max_bytes;  // flag line + inbox
constexpr size_t barrier_area = max_rounds * line;
constexpr size_t slot_area = barrier_area + 2 * cells * cell_size;
static_assert(slot_area % line == 0);

inline uint64_t barrier_flag_off(uint32_t slot, uint32_t round) { return slot * slot_area + round * line; }
inline uint64_t cell_off(uint32_t slot, uint32_t parity, uint32_t round) {
    return slot * slot_area + barrier_area + (parity * cells + round) * cell_size;
}
}  // namespace

Status Collectives::init() {
    const size_t bytes = slot_area * WEFT_STATE_COMM_SLOTS;
    Status st = rt_.window_create(true, nullptr, bytes, flag_win_);
    if (st != WEFT_OK) return WEFT_FAIL(st, "cannot create the %zu-byte collective flag window", bytes);
    weft_caps_t caps{};
    rt_.backend().query_caps(caps);
    ordered_puts_ = caps.ordered_puts != 0;
    return init_bulk();
}

// No peer writes here any more: every write into a slot's area is one its
// owner awaited before the collective completed, and the communicator that
// had the slot was released only after its last collective.
void Collectives::clear_flags(uint32_t slot) {
    if (flag_win_) std::memset(flag_win_->local_base + slot * slot_area, 0, slot_area);
    clear_bulk_flags(slot);
}

bool Collectives::flags_usable(const Comm& c, size_t bytes) const {
    if (!flag_win_ || bytes > flag_max_bytes || c.size > (1u << max_rounds) || c.slot == no_slot) return false;
    for (uint32_t s : c.slots)
        if (s == no_slot) return false;
    return true;
}

// Writes data (if any) and then the epoch into rank `to`'s area.
Status Collectives::signal(const Comm& c, uint32_t to, uint64_t flag_off, const void* data, size_t bytes,
                           uint64_t epoch) {
    const uint32_t peer = c.members[to];
    const RmaOps& ops = *flag_win_->ops;
    Status st = WEFT_OK;
    if (bytes) {
        st = ops.put(flag_win_, peer, flag_off + line, data, bytes);
        if (st == WEFT_OK && !ordered_puts_) st = rt_.backend().flush(*flag_win_, peer);
    }
    if (st == WEFT_OK) st = ops.put(flag_win_, peer, flag_off, &epoch, sizeof epoch);
    return st;
}

// Waiting for a partner inside a collective (Backoff::collective_partner).
// The partner is in the same collective, so its write comes within a few of
// its scheduling turns: spin a little, then yield — which hands a shared
// core straight to it when ranks outnumber cores — for up to 200 us, and
// only then sleep (20 us growing to 1 ms: a rank that waits that long waits
// for one that computes). Flags ring no doorbell, so never the futex sleep
// of Engine::pause.
void Collectives::rest(Backoff& b) {
    // Let other threads in while we wait (MULTIPLE), and a drain past us.
    StepOut out(rt_, StepOut::let_drain_pass);
    b.pause();  // past the deadline it returns at once: await() looks at it
}

// Waits until our flag at flag_off reaches epoch; fails when a member
// fails, when the communicator is revoked (the notice arrives through the
// poll: a partner that revoked instead of joining will never write the
// flag), or at the deadline.
Status Collectives::await(const Comm& c, uint64_t flag_off, uint64_t epoch) {
    return await_word(c, reinterpret_cast<uint64_t*>(flag_win_->local_base + flag_off), epoch);
}

// The word may be ours or, on shm, a peer's mapped here (coll_shm.cpp).
Status Collectives::await_word(const Comm& c, uint64_t* word, uint64_t epoch) {
    std::atomic_ref<uint64_t> flag(*word);
    if (flag.load(std::memory_order_acquire) >= epoch) return WEFT_OK;
    const Deadline d = rt_.op_deadline();
    Backoff backoff(Backoff::collective_partner, d);
    for (uint32_t spins = 0;; ++spins) {  // ends: the flag, a failure, a revoke or the deadline
        // The transport may need us to progress for a peer's put to land
        // (UCX over tcp); on shm this is one load.
        eng_.poll();
        if (flag.load(std::memory_order_acquire) >= epoch) return WEFT_OK;
        if (__builtin_expect(c.revoked, 0))
            return WEFT_FAIL(WEFT_ERR_REVOKED, "collective on communicator %llx: revoked by a member",
                             static_cast<unsigned long long>(c.id));
        if ((spins & 15) != 15) {  // failures and the clock now and then: each costs more than a poll
            rest(backoff);
            continue;
        }
        for (uint32_t m : c.members)
            if (rt_.peer_failed(m)) return WEFT_FAIL(WEFT_ERR_PEER_FAILED, "collective: job rank %u has failed", m);
        if (rt_.released())
            return WEFT_FAIL(WEFT_ERR_TRANSPORT, "collective on communicator %llx: the transport was abandoned",
                             static_cast<unsigned long long>(c.id));
        if (d.passed())
            return WEFT_FAIL(WEFT_ERR_TIMEOUT, "collective on communicator %llx: a peer did not arrive in time",
                             static_cast<unsigned long long>(c.id));
        rest(backoff);
    }
}

Status Collectives::barrier_flags(Comm& c) {
    eng_.drain_port().commit_begin(c);
    const uint64_t epoch = ++c.flag_epoch;
    const uint32_t p = c.size, me = c.rank;
    Status st = WEFT_OK;
    for (uint32_t k = 0, dist = 1; dist < p && st == WEFT_OK; ++k, dist <<= 1) {
        st = signal(c, (me + dist) % p, barrier_flag_off(c.slots[(me + dist) % p], k), nullptr, 0, epoch);
        if (st == WEFT_OK) st = await(c, barrier_flag_off(c.slot, k), epoch);
    }
    eng_.drain_port().commit_finish(c);
    return st;
}

Status Collectives::allreduce_flags(Comm& c, const void* sendbuf, void* recvbuf, size_t count, weft_datatype_t type,
                                    weft_op_t op) {
    eng_.drain_port().commit_begin(c);
    const uint64_t epoch = ++c.flag_epoch;
    const uint32_t parity = ++c.flag_allreduces & 1, p = c.size, me = c.rank;
    const size_t bytes = count * datatype_size(type);
    const ReduceFn reduce = reduce_fn(type, op);
    auto* acc = static_cast<uint8_t*>(recvbuf);
    if (sendbuf != WEFT_IN_PLACE && bytes) std::memmove(acc, sendbuf, bytes);
    auto inbox = [&](uint32_t round) { return flag_win_->local_base + cell_off(c.slot, parity, round) + line; };
    auto exchange_out = [&](uint32_t to, uint32_t round) {
        return signal(c, to, cell_off(c.slots[to], parity, round), acc, bytes, epoch);
    };
    auto receive = [&](uint32_t round, bool combine) {
        Status s = await(c, cell_off(c.slot, parity, round), epoch);
        if (s == WEFT_OK && bytes) {
            if (combine)
                reduce(acc, inbox(round), count);
            else
                std::memcpy(acc, inbox(round), bytes);
        }
        return s;
    };

    uint32_t p2 = 1;
    while (p2 * 2 <= p) p2 *= 2;
    const uint32_t extra = p - p2;
    Status st = WEFT_OK;
    // Extra ranks (odd, below 2*extra) sit the doubling out.
    const int64_t vrank = me >= 2 * extra ? int64_t(me) - extra : (me % 2 ? int64_t(-1) : int64_t(me / 2));
    if (me < 2 * extra) st = me % 2 ? exchange_out(me - 1, pre_round) : receive(pre_round, true);
    for (uint32_t k = 0, mask = 1; vrank >= 0 && mask < p2 && st == WEFT_OK; ++k, mask <<= 1) {
        const uint32_t vp = static_cast<uint32_t>(vrank) ^ mask;
        const uint32_t partner = vp < extra ? vp * 2 : vp + extra;
        st = exchange_out(partner, k);
        if (st == WEFT_OK) st = receive(k, true);
    }
    if (st == WEFT_OK && me < 2 * extra) st = me % 2 ? receive(post_round, false) : exchange_out(me + 1, post_round);
    eng_.drain_port().commit_finish(c);
    return st;
}

}  // namespace weft::group
