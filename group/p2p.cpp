// p2p.cpp — requests, matching, and the eager / rendezvous / synchronous
// protocols with their replies and pulls.
#include "group/engine.hpp"

#include "group/schedule.hpp"

#include <weft/state_window.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace weft::group {

namespace {
constexpr uint32_t am_msg = Runtime::am_internal_first;        // header + eager payload or RTS
constexpr uint32_t am_reply = Runtime::am_internal_first + 1;  // ACK (ssend) / FIN (rendezvous)

inline bool matches(int32_t want_src, int32_t want_tag, int32_t src, int32_t tag) {
    return (want_src == WEFT_ANY_SOURCE || want_src == src) && (want_tag == WEFT_ANY_TAG || want_tag == tag);
}
}  // namespace

struct P2p::MsgHeader {
    uint64_t context;
    int32_t src;
    int32_t tag;
    uint64_t len;      // message bytes
    uint64_t cookie;   // eager_sync / rts: what the reply names
    uint64_t addr;     // rts: the exposed buffer
    uint32_t kind;     // MsgKind
    uint32_t key_len;  // rts: bytes of key following the header
};
static_assert(sizeof(P2p::MsgHeader) == 48);

P2p::P2p(Engine& eng) : eng_(eng), rt_(eng.rt()) {}

void P2p::init() {
    eager_limit_ =
        rt_.backend().am_eager_limit() > sizeof(MsgHeader) ? rt_.backend().am_eager_limit() - sizeof(MsgHeader) : 0;
    ExposedBuffer probe;
    uint8_t byte = 0;
    zero_copy_ = rt_.backend().expose(&byte, 1, probe) == WEFT_OK;
    if (zero_copy_) rt_.backend().unexpose(probe);
}

void P2p::register_handlers() {
    rt_.am_register_internal(am_msg, on_msg, this);
    rt_.am_register_internal(am_reply, on_reply, this);
}

void P2p::shutdown() {
    // The hook stays: the transport's finalize barrier progresses, and a
    // reply owed for a message arriving then must still go out.
    // Rendezvous announcements nobody here received (the application's
    // mistake, or a collective that failed here before its partner's
    // announcement came) are refused now, and those still arriving on
    // arrival: a sender waiting for our pull would otherwise wait until its
    // deadline (a failed collective keeps its rendezvous sends until the
    // partner answers: coll.cpp, Schedule::fail).
    shutting_down_ = true;
    for (auto& c : eng_.registry().comms()) {
        for (MatchQueue* q : {&c->p2p, &c->coll, &c->create}) {
            const size_t before = q->unexpected.size();
            refuse_rendezvous(*q, WEFT_ANY_TAG, WEFT_ERR_PEER_FAILED);
            if (q->unexpected.size() != before)
                WEFT_LOG(warn, "finalizing: refused %zu rendezvous message(s) on communicator %llx nobody received",
                         before - q->unexpected.size(), static_cast<unsigned long long>(c->id));
        }
    }
    flush_deferred();
    pool_.for_each([&](Request& r) {
        if (r.exposed_live) {
            rt_.backend().unexpose(r.exposed);
            r.exposed_live = false;
        }
    });
}

// ------------------------------------------------------------- requests
RequestPool::~RequestPool() {
    for (auto& c : chunks_) delete[] c.load(std::memory_order_relaxed);
}

bool RequestPool::grow() {
    const uint32_t n = created();
    if (n / chunk_size >= max_chunks) return false;
    Request* chunk = new Request[chunk_size];
    for (uint32_t i = 0; i < chunk_size; ++i) {
        chunk[i].index = n + i;
        chunk[i].handle = handle_value(engine_slot_, n + i);
    }
    chunks_[n >> chunk_bits].store(chunk, std::memory_order_relaxed);
    created_.store(n + chunk_size, std::memory_order_release);
    for (uint32_t i = chunk_size; i-- > 0;) free_.push_back(&chunk[i]);
    return true;
}

Request* RequestPool::take() {
    if (free_.empty() && !grow()) {
        // 16 Mi requests alive at once: the program never waits for them.
        WEFT_LOG(error, "more than %u requests are alive at once (never waited for or freed)", max_chunks * chunk_size);
        std::abort();
    }
    Request* r = free_.back();
    free_.pop_back();
    return r;
}

Request* RequestPool::take_at(uint32_t index) {
    while (index >= created())
        if (!grow()) return nullptr;
    Request* want = at(index);
    auto it = std::find(free_.begin(), free_.end(), want);
    if (it == free_.end()) return nullptr;
    free_.erase(it);
    return want;
}

Request* P2p::new_request(ReqKind k, Comm* c) {
    Request* r = pool_.take();
    prepare(r, k, c);
    return r;
}

Request* P2p::adopt(uint32_t index, ReqKind k, Comm* c) {
    Request* r = pool_.take_at(index);
    if (r) prepare(r, k, c);
    return r;
}

void P2p::prepare(Request* r, ReqKind k, Comm* c) {
    r->magic = Request::live_magic;
    r->kind = k;
    r->done = r->user = r->matched = r->detached = false;
    r->comm = c;
    r->queue = nullptr;
    r->buf = nullptr;
    r->cap = 0;
    r->src = r->tag = 0;
    r->dest_peer = 0;
    r->cookie = 0;
    r->exposed_live = false;
    r->sync = r->blocking = r->dummy = false;
    r->status = weft_msg_status_t{};
    r->status.source = -1;
    r->status.tag = -1;
    if (c) ++c->refs;
}

void P2p::release(Request* r) {
    WEFT_ASSERT(r->magic == Request::live_magic);  // released twice: a bug here
    Comm* c = r->comm;
    if (r->exposed_live) {
        rt_.backend().unexpose(r->exposed);
        r->exposed_live = false;
    }
    r->sched.reset();
    r->scatter.reset();
    r->magic = Request::dead_magic;
    r->comm = nullptr;
    pool_.give_back(r);
    if (c) {
        --c->refs;
        eng_.registry().maybe_release_comm(c);
    }
}

void P2p::complete(Request& r, Status st) {
    if (r.done) return;
    r.done = true;
    if (r.status.error == WEFT_OK) r.status.error = st;
    if (r.exposed_live) {
        rt_.backend().unexpose(r.exposed);
        r.exposed_live = false;
    }
}

void P2p::arm(Request& r) {
    // Generation 0 never appears, so no cookie is 0 ("no reply awaited").
    if (++r.generation == 0) r.generation = 1;
    r.cookie = uint64_t(r.generation) << 32 | r.index;
}

Request* P2p::awaiting(uint64_t cookie) {
    Request* r = pool_.at(cookie & 0xffffffffu);
    const bool waits = live(r) && r->kind == ReqKind::send && !r->done && r->cookie == cookie;
    return waits ? r : nullptr;
}

Status P2p::finish(Request& r, weft_msg_status_t* status) {
    if (__builtin_expect(r.scatter != nullptr, 0) && r.status.error == WEFT_OK) {
        const Request::BlockScatter& s = *r.scatter;
        for (size_t j = 0; j < s.place.size(); ++j)
            std::memcpy(s.out + size_t(s.place[j]) * s.bytes, s.scratch.data() + j * s.bytes, s.bytes);
    }
    if (status) *status = r.status;
    Status st = r.status.error;
    release(&r);
    return st;
}

Request* P2p::completed_request(Comm& c, ReqKind k, const weft_msg_status_t& st) {
    Request* r = new_request(k, &c);
    r->status = st;
    r->done = true;
    return r;
}

// ------------------------------------------------------------- contexts
MatchQueue* P2p::queue_for(uint64_t context) {
    auto it = contexts_.find(context);
    if (it != contexts_.end()) return it->second.queue;
    auto& q = early_[context];
    if (!q) q = std::make_unique<MatchQueue>();
    return q.get();
}

void P2p::register_queues(Comm* c) {
    const std::pair<uint64_t, MatchQueue*> ctxs[] = {
        {c->id, &c->p2p}, {c->id | coll_bit, &c->coll}, {c->id | create_bit, &c->create}};
    for (auto [id, q] : ctxs) {
        auto it = early_.find(id);
        if (it != early_.end()) {
            // Arrived before we created the communicator: keep their order.
            q->unexpected = std::move(it->second->unexpected);
            early_.erase(it);
        }
        contexts_[id] = Context{c, q};
    }
    revoked_gone_.erase(c->id);  // the context is in use again
}

void P2p::unregister_queues(Comm* c) {
    for (MatchQueue* q : {&c->p2p, &c->coll, &c->create})
        for (const auto& u : q->unexpected)
            WEFT_LOG(warn, "communicator %llx released with an unreceived %llu-byte message from rank %d tag %d",
                     static_cast<unsigned long long>(c->id), static_cast<unsigned long long>(u.len), u.src, u.tag);
    contexts_.erase(c->id);
    contexts_.erase(c->id | coll_bit);
    contexts_.erase(c->id | create_bit);
    if (c->revoked) revoked_gone_.insert(c->id);
}

bool P2p::in_drain_sums(uint32_t peer, uint64_t ctx_bits) const {
    // Collectives' own traffic is the Collective Clock's business. A message
    // to or from another job's process is in neither job's sums (a drain
    // spans one job; it refuses while a communicator across jobs lives):
    // counted at one end only, it would unbalance them for good.
    return !(ctx_bits & coll_bit) && peer < rt_.size();
}

void P2p::count_p2p(Comm& c, uint32_t peer, uint64_t ctx_bits, bool sent) {
    if (!in_drain_sums(peer, ctx_bits)) return;
    // Creation handshakes (create_bit) are not collectives: the drain must
    // see them in transit like any message, so they count per rank.
    bump(sent ? WEFT_STATE_P2P_SENT_OFF : WEFT_STATE_P2P_RECEIVED_OFF);
    if (!ctx_bits && c.slot != no_slot)
        bump(WEFT_STATE_CLOCK_OFF(c.slot, sent ? WEFT_STATE_CLOCK_SENT : WEFT_STATE_CLOCK_RECEIVED));
}

void P2p::bump(uint64_t off) {
    // Owner-store word: only this rank (under the context's lock) writes
    // it, peers only read, so a load and a release store do — no locked
    // instruction on the hot path.
    std::atomic_ref<uint64_t> w(*state_word(rt_, off));
    w.store(w.load(std::memory_order_relaxed) + 1, std::memory_order_release);
}

// ------------------------------------------------------------ sending
Status P2p::send_now(Comm& c, const void* buf, size_t bytes, uint32_t dest, int32_t tag) {
    const uint32_t peer = c.members[dest];
    if (__builtin_expect(c.revoked, 0)) return revoked_since_entry(c, "send");
    if (rt_.peer_failed(peer))
        return WEFT_FAIL(WEFT_ERR_PEER_FAILED, "send: rank %u (job rank %u) has failed", dest, peer);
    const MsgHeader h{c.id, static_cast<int32_t>(c.rank), tag, bytes, 0, 0, eager, 0};
    count_p2p(c, peer, 0, true);
    uint8_t msg[sizeof(MsgHeader) + stack_eager];
    std::memcpy(msg, &h, sizeof h);
    if (bytes) std::memcpy(msg + sizeof h, buf, bytes);
    return rt_.backend().am_send(peer, am_msg, msg, sizeof h + bytes);
}

Status P2p::isend(Comm& c, uint64_t ctx_bits, const void* buf, size_t bytes, uint32_t dest, int32_t tag, bool sync,
                  Request*& out) {
    const uint32_t peer = c.members[dest];
    Request* r = new_request(ReqKind::send, &c);
    r->dest_peer = peer;
    r->sync = sync;
    out = r;
    if (__builtin_expect(c.revoked, 0) && !(ctx_bits & create_bit)) {
        complete(*r, revoked_since_entry(c, "send"));
        return WEFT_OK;
    }
    if (rt_.peer_failed(peer)) {
        complete(*r, WEFT_FAIL(WEFT_ERR_PEER_FAILED, "send: rank %u (job rank %u) has failed", dest, peer));
        return WEFT_OK;
    }
    MsgHeader h{c.id | ctx_bits, static_cast<int32_t>(c.rank), tag, bytes, 0, 0, eager, 0};
    const bool large = bytes > eager_limit_;
    const bool rendezvous = large && zero_copy_ && rt_.backend().zero_copy_to(peer);
    // A large message without zero copy goes whole, but is confirmed by its
    // receiver as a rendezvous is (eager_sync: ACK once matched): a send
    // reports success only once the receiver took it, so a revoke or a
    // failure before that still fails it (mp.ft.revoke across hosts).
    const bool acked = sync || large;
    if (acked) {
        arm(*r);
        h.cookie = r->cookie;
    }
    count_p2p(c, peer, ctx_bits, true);
    Status st;
    if (rendezvous) {
        st = rt_.backend().expose(buf, bytes, r->exposed);
        if (st == WEFT_OK) {
            r->exposed_live = true;
            h.kind = sync ? rts_sync : rts;
            h.addr = r->exposed.addr;
            h.key_len = static_cast<uint32_t>(r->exposed.key.size());
            // The RTS is small: header and key in one eager message.
            uint8_t msg[sizeof(MsgHeader) + 512];
            if (h.key_len > 512)
                st = WEFT_FAIL(WEFT_ERR_TRANSPORT, "send: a %u-byte remote key", h.key_len);
            else {
                std::memcpy(msg, &h, sizeof h);
                if (h.key_len) std::memcpy(msg + sizeof h, r->exposed.key.data(), h.key_len);
                st = rt_.backend().am_send(peer, am_msg, msg, sizeof h + h.key_len);
            }
        }
    } else {
        h.kind = acked ? eager_sync : eager;
        // Header and payload go as one message, built on the stack up to the
        // eager limit (no shared scratch: sends nest inside sends); large
        // payloads without zero copy build one on the heap.
        uint8_t small[sizeof(MsgHeader) + stack_eager];
        std::vector<uint8_t> big;
        uint8_t* msg = small;
        if (bytes > stack_eager) {
            big.resize(sizeof h + bytes);
            msg = big.data();
        }
        std::memcpy(msg, &h, sizeof h);
        if (bytes) std::memcpy(msg + sizeof h, buf, bytes);
        st = rt_.backend().am_send(peer, am_msg, msg, sizeof h + bytes);
    }
    if (!live(r) || r->done) return WEFT_OK;  // a reply already came (handlers run inside sends)
    if (st != WEFT_OK)
        complete(*r, st);
    else if (!r->cookie)
        complete(*r, WEFT_OK);  // eager: the buffer is ours again
    return WEFT_OK;
}

void P2p::queue_reply(uint32_t peer, uint64_t cookie, ReplyKind kind, Status why) {
    replies_.push_back(Reply{peer, cookie, kind, why});
}

// ---------------------------------------------------------- receiving
Status P2p::irecv(Comm& c, uint64_t ctx_bits, void* buf, size_t cap, int32_t src, int32_t tag, Request*& out) {
    Request* r = new_request(ReqKind::recv, &c);
    r->buf = static_cast<uint8_t*>(buf);
    r->cap = cap;
    r->src = src;
    r->tag = tag;
    out = r;
    if (__builtin_expect(c.revoked, 0) && ctx_bits != create_bit) {
        // Not posted: revoke_pending has completed every receive of c, and
        // a receive posted after it would take a message its sender sent
        // before it heard of the revoke — the one an earlier receive,
        // failed by the revoke, was meant for (chaos seed 1036: TRUNCATE).
        complete(*r, revoked_since_entry(c, "receive"));
        return WEFT_OK;
    }
    MatchQueue& q = ctx_bits == coll_bit ? c.coll : ctx_bits == create_bit ? c.create : c.p2p;
    for (auto it = q.unexpected.begin(); it != q.unexpected.end(); ++it) {
        if (!matches(src, tag, it->src, it->tag)) continue;
        Unexpected u = std::move(*it);
        if (it == q.unexpected.begin())
            q.unexpected.pop_front();
        else
            q.unexpected.erase(it);
        r->matched = true;
        if (is_rts(u.kind)) {
            Status st = do_pull(*r, u);
            complete(*r, st);
        } else {
            deliver_eager(*r, u, u.data.data(), u.data.size());
        }
        return WEFT_OK;
    }
    if (src >= 0 && rt_.peer_failed(c.members[src])) {
        complete(*r, WEFT_FAIL(WEFT_ERR_PEER_FAILED, "receive: rank %d (job rank %u) has failed", src, c.members[src]));
        return WEFT_OK;
    }
    r->queue = &q;
    q.posted.push_back(r);
    return WEFT_OK;
}

bool P2p::iprobe(Comm& c, int32_t src, int32_t tag, weft_msg_status_t& st) {
    for (const auto& u : c.p2p.unexpected) {
        if (!matches(src, tag, u.src, u.tag)) continue;
        st = weft_msg_status_t{u.src, u.tag, static_cast<size_t>(u.len), WEFT_OK, 0};
        return true;
    }
    return false;
}

void P2p::abandon(Request& r, Status why) {
    if (r.done) return;
    if (r.kind == ReqKind::recv && !r.matched) {
        cancel(r);
        r.status.cancelled = 0;
        r.status.error = why;
        return;
    }
    for (auto it = pulls_.begin(); it != pulls_.end(); ++it)
        if (it->r == &r) {
            // Matched but not pulled: never write the buffer after we give
            // it back; the sender stops exposing its own and learns that
            // nothing was delivered.
            queue_refusal(it->u.source_peer, it->u.cookie, why);
            pulls_.erase(it);
            break;
        }
    complete(r, why);
}

void P2p::refuse_rendezvous(MatchQueue& q, int32_t tag, Status why) {
    for (auto it = q.unexpected.begin(); it != q.unexpected.end();) {
        if (!is_rts(it->kind) || (tag != WEFT_ANY_TAG && it->tag != tag)) {
            ++it;
            continue;
        }
        queue_refusal(it->source_peer, it->cookie, why);
        it = q.unexpected.erase(it);
    }
}

bool P2p::has_failed_member(const Comm& c) const {
    for (uint32_t m : c.members)
        if (rt_.peer_failed(m)) return true;
    return false;
}

Status P2p::cancel(Request& r) {
    if (r.kind != ReqKind::recv || r.done || r.matched) return WEFT_OK;  // nothing to cancel
    auto& posted = r.queue->posted;
    posted.erase(std::find(posted.begin(), posted.end(), &r));
    r.queue = nullptr;
    r.status.cancelled = 1;
    complete(r, WEFT_OK);
    return WEFT_OK;
}

void P2p::deliver_eager(Request& r, const Unexpected& u, const uint8_t* data, size_t len) {
    const size_t n = std::min(len, r.cap);
    if (n) std::memcpy(r.buf, data, n);
    r.status.source = u.src;
    r.status.tag = u.tag;
    r.status.bytes = n;
    if (u.kind == eager_sync) queue_reply(u.source_peer, u.cookie);
    if (len > r.cap) {
        complete(r,
                 WEFT_FAIL(WEFT_ERR_TRUNCATE, "receive: a %zu-byte message from rank %d tag %d into a %zu-byte buffer",
                           len, u.src, u.tag, r.cap));
        return;
    }
    complete(r, WEFT_OK);
}

Status P2p::do_pull(Request& r, const Unexpected& u) {
    const size_t n = std::min<size_t>(u.len, r.cap);
    r.status.source = u.src;
    r.status.tag = u.tag;
    r.status.bytes = n;
    Status st = n ? rt_.backend().pull(u.source_peer, u.addr, u.data.data(), u.data.size(), r.buf, n) : WEFT_OK;
    // A reply even after a failed pull (the sender must not wait forever),
    // but a refusal: its data did not arrive.
    if (st != WEFT_OK) {
        queue_refusal(u.source_peer, u.cookie, st);
        return st;
    }
    queue_reply(u.source_peer, u.cookie);
    if (u.len > r.cap)
        return WEFT_FAIL(WEFT_ERR_TRUNCATE, "receive: a %llu-byte message from rank %d tag %d into a %zu-byte buffer",
                         static_cast<unsigned long long>(u.len), u.src, u.tag, r.cap);
    return WEFT_OK;
}

void P2p::start_pull(Request& r, Unexpected&& u) { pulls_.push_back(PendingPull{&r, std::move(u)}); }

// Transport handler: one message (eager payload or RTS) from source_peer.
void P2p::on_msg(void* arg, uint32_t source_peer, const void* payload, size_t len) {
    auto* self = static_cast<P2p*>(arg);
    MsgHeader h;
    if (len < sizeof h) {
        WEFT_LOG(error, "dropped a %zu-byte point-to-point message from peer %u: shorter than its header", len,
                 source_peer);
        return;
    }
    std::memcpy(&h, payload, sizeof h);
    self->arrived(source_peer, h, static_cast<const uint8_t*>(payload) + sizeof h, len - sizeof h);
}

void P2p::arrived(uint32_t source_peer, const MsgHeader& h, const uint8_t* body, size_t body_len) {
    const bool ok_kind = h.kind == eager || h.kind == eager_sync || is_rts(h.kind);
    const bool ok_len = is_rts(h.kind) ? body_len == h.key_len : body_len == h.len;
    if (!ok_kind || !ok_len || h.src < 0 || source_peer >= rt_.universe_size()) {
        WEFT_LOG(error, "dropped a malformed message from peer %u (kind %u, %zu body bytes for %llu)", source_peer,
                 h.kind, body_len, static_cast<unsigned long long>(h.len));
        return;
    }
    MatchQueue* q;
    auto cit = contexts_.find(h.context);
    if (cit != contexts_.end()) {
        // Known communicator: the claimed source must be who sent it.
        Comm* c = cit->second.comm;
        if (static_cast<uint32_t>(h.src) >= c->size || c->members[h.src] != source_peer) {
            WEFT_LOG(error, "dropped a message on communicator %llx claiming rank %d from job rank %u",
                     static_cast<unsigned long long>(c->id), h.src, source_peer);
            return;
        }
        count_p2p(*c, source_peer, h.context & (coll_bit | create_bit), false);
        q = cit->second.queue;
        if (is_rts(h.kind) && (h.context & coll_bit) && has_failed_member(*c)) {
            // Its collective fails here too: never pulled, so answer now
            // and the sender stops exposing its buffer (see Schedule::fail).
            queue_refusal(source_peer, h.cookie, WEFT_ERR_PEER_FAILED);
            return;
        }
        if (is_rts(h.kind) && c->revoked && !(h.context & create_bit)) {
            // Revoked here: no receive will be posted for it (the sender
            // waits for this answer: P2p::revoke_pending).
            queue_refusal(source_peer, h.cookie, WEFT_ERR_REVOKED);
            return;
        }
    } else if (revoked_gone_.count(h.context & ~(coll_bit | create_bit))) {
        // Freed here while revoked: nobody will receive it. It has arrived
        // all the same (its sender counted it: the drain's sums must see
        // it here too), and a rendezvous sender waits for an answer
        // (P2p::revoke_pending): refuse it.
        if (in_drain_sums(source_peer, h.context)) bump(WEFT_STATE_P2P_RECEIVED_OFF);
        if (is_rts(h.kind)) queue_refusal(source_peer, h.cookie, WEFT_ERR_REVOKED);
        WEFT_LOG(debug, "dropped a message from job rank %u for communicator %llx, freed here after its revoke",
                 source_peer, static_cast<unsigned long long>(h.context));
        return;
    } else {
        q = queue_for(h.context);  // not created here yet: kept for when it is
        // It has arrived: the drain's global sums must see it now, not when
        // the communicator is created here.
        if (in_drain_sums(source_peer, h.context)) bump(WEFT_STATE_P2P_RECEIVED_OFF);
    }
    Unexpected u;
    u.src = h.src;
    u.tag = h.tag;
    u.kind = h.kind;
    u.source_peer = source_peer;
    u.len = h.len;
    u.cookie = h.cookie;
    u.addr = h.addr;
    for (auto it = q->posted.begin(); it != q->posted.end(); ++it) {
        Request* r = *it;
        if (!matches(r->src, r->tag, h.src, h.tag)) continue;
        // Usually the oldest receive matches: pop_front is a few
        // instructions where deque::erase is ~90.
        if (it == q->posted.begin())
            q->posted.pop_front();
        else
            q->posted.erase(it);
        r->queue = nullptr;
        r->matched = true;
        if (is_rts(h.kind)) {
            u.data = eng_.buffers().copy(body, body_len);
            start_pull(*r, std::move(u));  // outside this handler: a pull may wait
        } else {
            deliver_eager(*r, u, body, body_len);
        }
        return;
    }
    if (shutting_down_ && is_rts(h.kind)) {
        // Finalizing: nobody here will receive it. Refuse it so the sender
        // is not left waiting for a pull (see shutdown).
        WEFT_LOG(warn, "finalizing: refused a %llu-byte message from job rank %u (tag %d) nobody received",
                 static_cast<unsigned long long>(h.len), source_peer, h.tag);
        queue_refusal(source_peer, h.cookie, WEFT_ERR_PEER_FAILED);
        return;
    }
    u.data = eng_.buffers().copy(body, body_len);
    q->unexpected.push_back(std::move(u));
}

// ACK of a synchronous send or FIN of a rendezvous: the send is complete.
// DRAINED: a drain pulled the rendezvous payload into the receiver's
// buffer; the sender's buffer is free, and a synchronous send now waits
// for the ACK the receiver sends when the application receives it.
void P2p::on_reply(void* arg, uint32_t source_peer, const void* payload, size_t len) {
    auto* self = static_cast<P2p*>(arg);
    WireReply w;
    if (len == sizeof w) std::memcpy(&w, payload, sizeof w);
    if (len != sizeof w || w.kind > refused ||
        (w.kind == refused && (w.status <= WEFT_OK || w.status > WEFT_ERR_LAST_))) {
        WEFT_LOG(error, "dropped a malformed %zu-byte reply from peer %u", len, source_peer);
        return;
    }
    Request* r = self->awaiting(w.cookie);
    if (!r || r->dest_peer != source_peer) {
        WEFT_LOG(warn, "reply %llx from peer %u names no pending send", static_cast<unsigned long long>(w.cookie),
                 source_peer);
        return;
    }
    if (w.kind == refused) {
        // The receiver dropped it unreceived: nothing was delivered.
        WEFT_LOG(debug, "send %llx to job rank %u refused: %s", static_cast<unsigned long long>(w.cookie), source_peer,
                 weft_strerror(static_cast<Status>(w.status)));
        self->complete(*r, static_cast<Status>(w.status));
        return;
    }
    if (w.kind == drained) {
        if (r->exposed_live) {
            self->rt_.backend().unexpose(r->exposed);
            r->exposed_live = false;
        }
        if (r->sync) return;  // the ACK comes when the application receives it
    }
    self->complete(*r, WEFT_OK);
}

// ------------------------------------------------------------ progress
uint32_t P2p::flush_deferred() {
    uint32_t n = 0;
    while (!pulls_.empty()) {
        PendingPull p = std::move(pulls_.front());
        pulls_.pop_front();
        if (live(p.r) && !p.r->done) complete(*p.r, do_pull(*p.r, p.u));
        ++n;
    }
    // Swap out first: a send may run handlers that queue more replies.
    while (!replies_.empty()) {
        std::vector<Reply> now;
        now.swap(replies_);
        for (const Reply& rp : now) {
            if (rt_.peer_failed(rp.peer)) continue;
            const WireReply w{rp.cookie, rp.kind, static_cast<int32_t>(rp.why)};
            const uint32_t peer = rp.peer;
            Status st = rt_.backend().am_send(peer, am_reply, &w, sizeof w);
            if (st != WEFT_OK) WEFT_LOG(warn, "reply to peer %u not sent: %s", peer, weft_strerror(st));
            ++n;
        }
    }
    return n;
}

void P2p::peer_gone(uint32_t peer, bool departed) {
    if (departed) {
        // It finalized: it will never pull or answer what we still wait for
        // (a send it never received is the application's error; after a
        // failure elsewhere, ranks stop meeting and this happens normally).
        for_each_awaiting([&](Request& r) {
            if (r.dest_peer == peer)
                complete(r, WEFT_FAIL(WEFT_ERR_PEER_FAILED, "send: job rank %u finalized without receiving it", peer));
        });
        return;
    }
    // Receives naming it and sends waiting for its reply can never finish.
    for (auto& c : eng_.registry().comms()) {
        const int32_t cr = c->rank_of_peer(peer);
        if (cr < 0) continue;
        // Every collective on it fails, here and at its other members: no
        // rendezvous announced for one will be pulled (Schedule::fail).
        refuse_rendezvous(c->coll, WEFT_ANY_TAG, WEFT_ERR_PEER_FAILED);
        for (MatchQueue* q : {&c->p2p, &c->coll, &c->create}) {
            for (auto it = q->posted.begin(); it != q->posted.end();) {
                Request* r = *it;
                if (r->src != cr) {
                    ++it;
                    continue;
                }
                it = q->posted.erase(it);
                r->queue = nullptr;
                r->status.source = cr;
                complete(*r, WEFT_ERR_PEER_FAILED);
            }
        }
    }
    for_each_awaiting([&](Request& r) {
        if (r.dest_peer == peer) complete(r, WEFT_ERR_PEER_FAILED);
    });
}

// The API checked c before it took weft (usable_comm); another thread
// holding weft meanwhile — the drain's, whose rounds progress while the
// caller waits at the gate, or a progress thread — can have taken in the
// revoke notice since. Such an operation fails as one started after the
// revoke does.
Status P2p::revoked_since_entry(const Comm& c, const char* what) {
    return WEFT_FAIL(WEFT_ERR_REVOKED, "%s: communicator %llx was revoked", what,
                     static_cast<unsigned long long>(c.id));
}

void P2p::revoke_pending(Comm& c) {
    for (MatchQueue* q : {&c.p2p, &c.coll}) {
        refuse_rendezvous(*q, WEFT_ANY_TAG, WEFT_ERR_REVOKED);
        while (!q->posted.empty()) {
            Request* r = q->posted.front();
            q->posted.pop_front();
            r->queue = nullptr;
            complete(*r, WEFT_ERR_REVOKED);
        }
    }
    // Sends waiting for an ACK fail now. A rendezvous send whose buffer is
    // still exposed does not: its receiver may be pulling it this moment
    // (the application would free the buffer under the pull, and over UCX
    // serving a pull of freed memory crashes this process). It completes
    // with the receiver's answer: FIN if the pull delivered it, REFUSED
    // (REVOKED) if the receiver dropped it unreceived, which every member
    // does once the notice reaches it (here, in refuse_rendezvous above and
    // in arrived), or with the receiver's failure.
    for_each_awaiting([&](Request& r) {
        if (r.comm == &c && !r.exposed_live) complete(r, WEFT_ERR_REVOKED);
    });
}

}  // namespace weft::group
