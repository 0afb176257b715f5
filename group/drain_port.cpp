// drain_port.cpp — what the drain reads and does inside group: the clock
// records, the point-to-point work still in transit, weft's buffer, the
// blocking mode's receives (docs/drain.md).
#include "group/engine.hpp"

#include "group/layer.hpp"

namespace weft::group {

DrainPort::DrainPort(Engine& eng) : eng_(eng), rt_(eng.rt()) {}

DrainPort* drain_port_of(Runtime& rt) {
    Engine* e = engine_of(rt);
    return e ? &e->drain_port() : nullptr;
}

uint16_t DrainPort::slot_use(uint32_t slot) const { return eng_.registry().slot_use(slot); }

uint32_t DrainPort::comms_across_jobs() const { return eng_.registry().spanning_jobs(); }

std::vector<DrainPort::ClockRecord> DrainPort::clock_records() const {
    std::vector<ClockRecord> out;
    for (const auto& c : eng_.registry().comms()) {
        if (c->slot == no_slot || c->slots.empty() || c->revoked)
            continue;  // revoked: out of the clock (revoke_pending)
        // Only our own slot while the peers' slots are unknown (the first
        // collective of create_from_ranks).
        if (!c->slots_known)
            out.push_back(ClockRecord{c->slot, {eng_.registry().slot_use(c->slot)}, {c->members[c->rank]}, {c->slot}});
        else
            out.push_back(ClockRecord{c->slot, c->slot_uses, c->members, c->slots});
    }
    return out;
}

uint64_t DrainPort::drain_rendezvous(uint64_t& bytes) {
    P2p& p2p = eng_.p2p();
    uint64_t n = 0;
    auto drain_queue = [&](MatchQueue& q) {
        for (Unexpected& u : q.unexpected) {
            if (!P2p::is_rts(u.kind)) continue;
            BufferPool::Buffer payload = eng_.buffers().take(u.len);
            Status st =
                u.len ? rt_.backend().pull(u.source_peer, u.addr, u.data.data(), u.data.size(), payload.data(), u.len)
                      : WEFT_OK;
            if (st != WEFT_OK) {
                WEFT_LOG(warn, "drain: could not pull a %llu-byte message from peer %u: %s",
                         static_cast<unsigned long long>(u.len), u.source_peer, weft_strerror(st));
                continue;  // stays announced; pending_transfers keeps the drain going
            }
            // Now an ordinary buffered message, in its place in arrival order.
            u.kind = u.kind == P2p::rts_sync ? P2p::eager_sync : P2p::eager;
            u.data = std::move(payload);
            u.addr = 0;
            p2p.queue_reply(u.source_peer, u.cookie, P2p::drained);
            ++n;
            bytes += u.len;
        }
    };
    for (auto& [id, ctx] : p2p.contexts_) drain_queue(*ctx.queue);
    for (auto& [id, q] : p2p.early_) drain_queue(*q);
    return n;
}

uint64_t DrainPort::pending_transfers() const {
    const Transfers t = transfers();
    return t.pulls + t.replies + t.exposed + t.announced;
}

DrainPort::Transfers DrainPort::transfers() const {
    const P2p& p2p = eng_.p2p();
    Transfers t;
    t.pulls = p2p.pulls_.size();
    t.replies = p2p.replies_.size();
    p2p.for_each_awaiting([&](const Request& r) {
        t.exposed += r.exposed_live;  // its receiver has yet to pull or drain it
    });
    auto announced = [&](const MatchQueue& q) {
        for (const Unexpected& u : q.unexpected)
            if (P2p::is_rts(u.kind)) ++t.announced;
    };
    for (const auto& [id, ctx] : p2p.contexts_) announced(*ctx.queue);
    for (const auto& [id, q] : p2p.early_) announced(*q);
    return t;
}

uint64_t DrainPort::blocked_receives() const {
    uint64_t n = 0;
    for (const auto& c : eng_.registry().comms())
        for (const Request* r : c->p2p.posted) n += r->blocking;
    return n;
}

uint64_t DrainPort::release_blocked_receives() {
    uint64_t n = 0;
    for (const auto& c : eng_.registry().comms()) {
        auto& posted = c->p2p.posted;
        for (auto it = posted.begin(); it != posted.end();) {
            Request* r = *it;
            if (!r->blocking) {
                ++it;
                continue;
            }
            it = posted.erase(it);
            r->queue = nullptr;
            r->dummy = true;
            eng_.p2p().complete(*r, WEFT_OK);
            ++n;
        }
    }
    return n;
}

void DrainPort::buffered(uint64_t& messages, uint64_t& bytes) const {
    messages = bytes = 0;
    auto count = [&](const MatchQueue& q) {
        for (const Unexpected& u : q.unexpected) {
            ++messages;
            bytes += u.len;
        }
    };
    for (const auto& c : eng_.registry().comms()) count(c->p2p);
    for (const auto& [id, q] : eng_.p2p().early_)
        if (!(id & (coll_bit | create_bit))) count(*q);
}

}  // namespace weft::group
