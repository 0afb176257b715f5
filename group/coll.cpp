// coll.cpp — collectives as schedules over the collective context.
//
// Algorithms (P ranks, r = this rank):
//   barrier    dissemination: ceil(log2 P) rounds of one zero-byte exchange;
//   bcast      binomial tree from the root;
//   reduce     binomial tree to the root (children posted at once, combined
//              in a fixed order, so every run gives the same bits);
//   allreduce  recursive doubling (non-powers of two fold the extra ranks in
//              first) up to 64 KiB or when count < P; above, a ring:
//              reduce-scatter then allgather, 2(P-1) steps of 1/P each;
//   allgather  recursive doubling for powers of two, else a ring.
// Every rank reaches identical results: partners combine the same two
// values, and the ring's blocks are reduced once and then copied.
#include "group/schedule.hpp"

#include <algorithm>
#include <cstring>

namespace weft::group {

namespace {
constexpr size_t ring_allreduce_min_bytes = 64 * 1024;

inline uint32_t mod(int64_t a, uint32_t p) { return static_cast<uint32_t>(((a % p) + p) % p); }
}  // namespace

Collectives::Collectives(Engine& eng) : eng_(eng), rt_(eng.rt()) {}

// ---------------------------------------------------------- execution
Schedule::~Schedule() {
    if (scratch_) engine->coll().give_scratch(Collectives::Scratch{std::move(scratch_), scratch_size_});
}

uint8_t* Schedule::scratch(size_t n) {
    WEFT_ASSERT(!scratch_);  // one scratch per schedule, taken while building it
    Collectives::Scratch s = engine->coll().take_scratch(n);
    scratch_ = std::move(s.buf);
    scratch_size_ = s.size;
    return scratch_.get();
}

Collectives::Scratch Collectives::take_scratch(size_t n) {
    for (auto it = scratch_pool_.begin(); it != scratch_pool_.end(); ++it)
        if (it->size >= n) {
            Scratch s = std::move(*it);
            scratch_pool_.erase(it);
            return s;
        }
    const size_t size = std::max<size_t>(n, 4096);
    return Scratch{std::unique_ptr<uint8_t[]>(new uint8_t[size]), size};
}

void Collectives::give_scratch(Scratch s) {
    constexpr size_t keep = 4;
    if (scratch_pool_.size() < keep) {
        scratch_pool_.push_back(std::move(s));
        return;
    }
    // Keep the largest: replace the smallest if this one is larger.
    auto smallest = std::min_element(scratch_pool_.begin(), scratch_pool_.end(),
                                     [](const Scratch& a, const Scratch& b) { return a.size < b.size; });
    if (smallest->size < s.size) *smallest = std::move(s);
}

bool Schedule::advance() {
    while (pc < steps.size()) {
        const Step& s = steps[pc];
        switch (s.op) {
            case Step::send: {
                Request* r = nullptr;
                engine->p2p().isend(*comm, coll_bit, s.src, s.bytes, s.peer, tag, false, r);
                inflight.push_back(r);
                break;
            }
            case Step::recv: {
                Request* r = nullptr;
                engine->p2p().irecv(*comm, coll_bit, s.dst, s.bytes, static_cast<int32_t>(s.peer), tag, r);
                inflight.push_back(r);
                break;
            }
            case Step::fence: {
                for (Request* r : inflight)
                    if (!r->done) return false;
                for (Request* r : inflight) {
                    Status st = engine->p2p().finish(*r, nullptr);
                    if (st != WEFT_OK && error == WEFT_OK) error = st;
                }
                inflight.clear();
                if (error != WEFT_OK) {
                    pc = steps.size();
                    return true;
                }
                break;
            }
            case Step::reduce:
                reduce(s.dst, s.src, s.bytes / elem_size);
                break;
            case Step::copy:
                if (s.dst != s.src) std::memmove(s.dst, s.src, s.bytes);
                break;
        }
        ++pc;
    }
    return true;
}

void Schedule::fail(Status st) {
    if (error == WEFT_OK) error = st;
    // Receives are given up (a matched one is answered unpulled), and so are
    // partners' announcements for this collective still waiting here.
    // Our own rendezvous sends are NOT: a live partner may be pulling them
    // right now, and over UCX's tcp emulation a pull of memory we gave back
    // would crash this process. They finish with the partner's FIN — it
    // pulls, or refuses because its collective failed too — or with its
    // failure; advance_schedules waits for that before completing.
    for (Request* r : inflight)
        if (engine->p2p().live(r) && !r->done && r->kind == ReqKind::recv) engine->p2p().abandon(*r, st);
    engine->p2p().refuse_rendezvous(comm->coll, tag, error);
    pc = steps.size();
}

uint32_t Collectives::advance_schedules() {
    P2p& p2p = eng_.p2p();
    uint32_t n = 0;
    for (size_t i = 0; i < active_colls_.size();) {
        Request* r = active_colls_[i];
        Schedule& s = *r->sched;
        bool finished = s.advance();
        if (finished) {
            bool sends_pending = false;
            for (Request* q : s.inflight) sends_pending |= p2p.live(q) && !q->done;
            if (sends_pending) {  // a failed schedule's rendezvous sends: see Schedule::fail
                if (!s.reported_wait) {
                    s.reported_wait = true;
                    for (Request* q : s.inflight)
                        if (p2p.live(q) && !q->done)
                            WEFT_LOG(warn, "failed collective on %llx waits for job rank %u to answer its rendezvous",
                                     static_cast<unsigned long long>(r->comm->id), q->dest_peer);
                }
                ++i;
                continue;
            }
            for (Request* q : s.inflight)
                if (p2p.live(q)) p2p.finish(*q, nullptr);
            s.inflight.clear();
            active_colls_[i] = active_colls_.back();
            active_colls_.pop_back();
            eng_.drain_port().commit_finish(*r->comm);
            p2p.complete(*r, s.error);
            if (r->detached) p2p.finish(*r, nullptr);
            ++n;
            continue;
        }
        ++i;
    }
    return n;
}

void Collectives::fail_on(const Comm& c, Status st) {
    for (Request* r : active_colls_)
        if (!r->done && r->comm == &c) r->sched->fail(st);
}

void Collectives::fail_with_member(uint32_t peer, Status st) {
    for (Request* r : active_colls_)
        if (!r->done && r->comm->rank_of_peer(peer) >= 0) r->sched->fail(st);
}

// ---------------------------------------------------------- building
namespace {

// Starts a schedule: it owns its request; the first advance runs now.
Status start(Engine& e, Comm& c, std::unique_ptr<Schedule> s, Request* r, std::vector<Request*>& active) {
    // Revoked (weft_comm_free's release barrier may start on a revoked
    // communicator): members that never made it, or failed it, will never
    // join, and revoke_pending ran before this schedule existed.
    if (c.revoked) {
        WEFT_LOG(debug, "collective on communicator %llx: revoked", static_cast<unsigned long long>(c.id));
        s->fail(WEFT_ERR_REVOKED);
    } else
        // A member already known failed: fail now instead of waiting on it.
        for (uint32_t m : c.members)
            if (e.rt().peer_failed(m)) {
                WEFT_LOG(info, "collective on communicator %llx: job rank %u has failed",
                         static_cast<unsigned long long>(c.id), m);
                s->fail(WEFT_ERR_PEER_FAILED);
                break;
            }
    r->sched = std::move(s);
    active.push_back(r);
    e.poll();  // advances it (and everything else)
    return WEFT_OK;
}

}  // namespace

Status Collectives::barrier_start(Comm& c, Request*& out, bool release) {
    Request* r = eng_.p2p().new_request(ReqKind::coll, &c);
    auto s = std::make_unique<Schedule>();
    s->engine = &eng_, s->comm = &c, s->owner = r,
    s->tag = release ? coll_tag(c, CollKind::release) : coll_tag(c, CollKind::barrier);
    eng_.drain_port().commit_begin(c);
    const uint32_t p = c.size, me = c.rank;
    for (uint32_t k = 1; k < p; k <<= 1) {
        s->add_send(mod(int64_t(me) + k, p), nullptr, 0);
        s->add_recv(mod(int64_t(me) - k, p), nullptr, 0);
        s->add_fence();
    }
    out = r;
    return start(eng_, c, std::move(s), r, active_colls_);
}

Status Collectives::bcast_start(Comm& c, void* buf, size_t bytes, uint32_t root, Request*& out) {
    Request* r = eng_.p2p().new_request(ReqKind::coll, &c);
    auto s = std::make_unique<Schedule>();
    s->engine = &eng_, s->comm = &c, s->owner = r, s->tag = coll_tag(c, CollKind::bcast);
    eng_.drain_port().commit_begin(c);
    const uint32_t p = c.size, v = mod(int64_t(c.rank) - root, p);
    uint32_t mask = 1;
    while (mask < p) {
        if (v & mask) {
            s->add_recv(mod(int64_t(v) - mask + root, p), buf, bytes);
            s->add_fence();
            break;
        }
        mask <<= 1;
    }
    for (mask >>= 1; mask > 0; mask >>= 1)
        if (v + mask < p) s->add_send(mod(int64_t(v) + mask + root, p), buf, bytes);
    s->add_fence();
    out = r;
    return start(eng_, c, std::move(s), r, active_colls_);
}

Status Collectives::reduce_start(Comm& c, const void* sendbuf, void* recvbuf, size_t count, weft_datatype_t type,
                                 weft_op_t op, uint32_t root, bool all, Request*& out) {
    Request* r = eng_.p2p().new_request(ReqKind::coll, &c);
    auto s = std::make_unique<Schedule>();
    s->engine = &eng_, s->comm = &c, s->owner = r, s->tag = coll_tag(c, all ? CollKind::allreduce : CollKind::reduce);
    s->reduce = reduce_fn(type, op);
    s->elem_size = datatype_size(type);
    eng_.drain_port().commit_begin(c);
    const uint32_t p = c.size, me = c.rank;
    const size_t bytes = count * s->elem_size;
    const bool in_place = sendbuf == WEFT_IN_PLACE;
    out = r;

    if (!all) {
        // Binomial tree to the root; the root accumulates in recvbuf, the
        // others in scratch.
        const uint32_t v = mod(int64_t(me) - root, p);
        uint32_t children = 0;
        for (uint32_t mask = 1; mask < p && !(v & mask); mask <<= 1)
            if ((v | mask) < p) ++children;
        uint8_t* tmp = s->scratch(bytes * (children + (me == root ? 0 : 1)));
        uint8_t* acc = me == root ? static_cast<uint8_t*>(recvbuf) : tmp + bytes * children;
        if (!(in_place && me == root)) s->add_copy(acc, sendbuf, bytes);
        uint32_t child = 0, mask = 1;
        for (; mask < p && !(v & mask); mask <<= 1)
            if ((v | mask) < p) s->add_recv(mod(int64_t(v | mask) + root, p), tmp + bytes * child++, bytes);
        s->add_fence();
        for (uint32_t i = 0; i < children; ++i) s->add_reduce(acc, tmp + bytes * i, bytes);
        if (me != root) {
            s->add_send(mod(int64_t(v & ~mask) + root, p), acc, bytes);
            s->add_fence();
        }
        return start(eng_, c, std::move(s), r, active_colls_);
    }

    uint8_t* acc = static_cast<uint8_t*>(recvbuf);
    if (p > 1 && bytes >= ring_allreduce_min_bytes && count >= p) {
        // Ring: block b holds elements [b*q + min(b, rem) ...) of count.
        // The send buffer is read in place: a block enters recvbuf only when
        // it is combined (reduce-scatter) or arrives reduced (allgather), so
        // nothing is copied twice.
        const size_t q = count / p, rem = count % p, es = s->elem_size;
        auto block_off = [&](uint32_t b) { return (b * q + std::min<size_t>(b, rem)) * es; };
        auto block_len = [&](uint32_t b) { return (q + (b < rem ? 1 : 0)) * es; };
        const auto* in = in_place ? acc : static_cast<const uint8_t*>(sendbuf);
        uint8_t* tmp = s->scratch(block_len(0));
        const uint32_t right = mod(int64_t(me) + 1, p), left = mod(int64_t(me) - 1, p);
        for (uint32_t i = 0; i + 1 < p; ++i) {  // reduce-scatter
            const uint32_t sb = mod(int64_t(me) - i, p), rb = mod(int64_t(me) - i - 1, p);
            s->add_send(right, (i == 0 ? in : acc) + block_off(sb), block_len(sb));
            s->add_recv(left, tmp, block_len(rb));
            s->add_fence();
            s->add_copy(acc + block_off(rb), in + block_off(rb), block_len(rb));
            s->add_reduce(acc + block_off(rb), tmp, block_len(rb));
        }
        for (uint32_t i = 0; i + 1 < p; ++i) {  // allgather of the reduced blocks
            const uint32_t sb = mod(int64_t(me) + 1 - i, p), rb = mod(int64_t(me) - i, p);
            s->add_send(right, acc + block_off(sb), block_len(sb));
            s->add_recv(left, acc + block_off(rb), block_len(rb));
            s->add_fence();
        }
        return start(eng_, c, std::move(s), r, active_colls_);
    }

    if (!in_place) s->add_copy(acc, sendbuf, bytes);
    // Recursive doubling over the largest power of two p2 <= p; the first
    // 2*(p-p2) ranks pair up first (odd ones hand their data to the even).
    uint32_t p2 = 1;
    while (p2 * 2 <= p) p2 *= 2;
    const uint32_t extra = p - p2;
    uint8_t* tmp = s->scratch(bytes);
    int64_t vrank;
    if (me < 2 * extra) {
        if (me % 2) {
            s->add_send(me - 1, acc, bytes);
            s->add_fence();
            vrank = -1;
        } else {
            s->add_recv(me + 1, tmp, bytes);
            s->add_fence();
            s->add_reduce(acc, tmp, bytes);
            vrank = me / 2;
        }
    } else {
        vrank = me - extra;
    }
    if (vrank >= 0) {
        for (uint32_t mask = 1; mask < p2; mask <<= 1) {
            const uint32_t vp = static_cast<uint32_t>(vrank) ^ mask;
            const uint32_t partner = vp < extra ? vp * 2 : vp + extra;
            s->add_send(partner, acc, bytes);
            s->add_recv(partner, tmp, bytes);
            s->add_fence();
            s->add_reduce(acc, tmp, bytes);
        }
    }
    if (me < 2 * extra) {
        if (me % 2)
            s->add_recv(me - 1, acc, bytes);
        else
            s->add_send(me + 1, acc, bytes);
        s->add_fence();
    }
    return start(eng_, c, std::move(s), r, active_colls_);
}

Status Collectives::allgather_start(Comm& c, const void* sendbuf, size_t bytes, void* recvbuf, Request*& out) {
    Request* r = eng_.p2p().new_request(ReqKind::coll, &c);
    auto s = std::make_unique<Schedule>();
    s->engine = &eng_, s->comm = &c, s->owner = r, s->tag = coll_tag(c, CollKind::allgather);
    eng_.drain_port().commit_begin(c);
    const uint32_t p = c.size, me = c.rank;
    auto* out_buf = static_cast<uint8_t*>(recvbuf);
    if (sendbuf != WEFT_IN_PLACE) s->add_copy(out_buf + me * bytes, sendbuf, bytes);
    if ((p & (p - 1)) == 0) {
        // Recursive doubling: at step mask each rank holds the blocks of its
        // aligned group of `mask` ranks and swaps them with its partner's.
        for (uint32_t mask = 1; mask < p; mask <<= 1) {
            const uint32_t partner = me ^ mask;
            const uint32_t mine = me & ~(mask - 1), theirs = partner & ~(mask - 1);
            s->add_send(partner, out_buf + mine * bytes, mask * bytes);
            s->add_recv(partner, out_buf + theirs * bytes, mask * bytes);
            s->add_fence();
        }
    } else {
        const uint32_t right = mod(int64_t(me) + 1, p), left = mod(int64_t(me) - 1, p);
        for (uint32_t i = 0; i + 1 < p; ++i) {
            const uint32_t sb = mod(int64_t(me) - i, p), rb = mod(int64_t(me) - i - 1, p);
            s->add_send(right, out_buf + sb * bytes, bytes);
            s->add_recv(left, out_buf + rb * bytes, bytes);
            s->add_fence();
        }
    }
    out = r;
    return start(eng_, c, std::move(s), r, active_colls_);
}

}  // namespace weft::group
