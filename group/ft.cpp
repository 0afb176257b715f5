// ft.cpp — failed sets, the fault-tolerant agreement, revoke (ft.hpp).
#include "group/ft.hpp"

#include "group/schedule.hpp"

#include <atomic>
#include <cstdio>
#include <cstring>
#include <mutex>

namespace weft::group {

namespace {

// Weft-internal active message: after the engine's two (engine.cpp).
constexpr uint32_t am_ft = Runtime::am_internal_first + 2;

struct WireHdr {
    uint32_t type;
    uint32_t ballot;  // propose/ack: the coordinator's communicator rank
    uint64_t comm_id;
    uint64_t seq;
    uint32_t from_rank;  // sender's rank in the communicator
    uint32_t flags;      // bit 0: committed (contrib); bit 1: has an accepted value;
                         // bits 8-15: what the sender's instance is for (AgreeFor)
    uint32_t nvalue;     // words of value following
    uint32_t nacc;       // words of accepted value following those
};
static_assert(sizeof(WireHdr) == 40);

// Decided instances kept per communicator to answer late messages. A
// member can be at most one instance behind any other live member (an
// instance needs every live member's contribution), so a few suffice.
constexpr uint64_t keep_decided = 8;

std::mutex& registry_mutex() {
    static std::mutex m;
    return m;
}
std::unordered_map<Engine*, Ft*>& registry() {
    static auto* m = new std::unordered_map<Engine*, Ft*>;
    return *m;
}
std::atomic<uint64_t> next_serial{1};

}  // namespace

Ft::Ft(Engine& e, Detector& d) : eng_(e), rt_(e.rt()), det_(d) {}

Ft::~Ft() {
    rt_.remove_layer(ft_layer);
    eng_.registry().set_release_hook(nullptr, nullptr);
    eng_.registry().set_create_hook(nullptr, nullptr);
    eng_.registry().set_split_failed_hook(nullptr, nullptr);
    eng_.registry().set_creation_failed_hook(nullptr, nullptr);
    std::lock_guard<std::mutex> g(registry_mutex());
    registry().erase(&eng_);
}

Status Ft::init() {
    Status st = rt_.am_register_internal(am_ft, on_msg, this);
    if (st != WEFT_OK) return st;
    st = rt_.add_layer(ft_layer, this, {.on_progress = on_progress});
    if (st != WEFT_OK) return st;
    eng_.registry().set_release_hook(on_release, this);
    eng_.registry().set_create_hook(on_create, this);
    eng_.registry().set_split_failed_hook(on_split_failed, this);
    eng_.registry().set_creation_failed_hook(on_creation_failed, this);
    std::lock_guard<std::mutex> g(registry_mutex());
    registry()[&eng_] = this;
    return WEFT_OK;
}

Ft* Ft::of(Engine& e) {
    std::lock_guard<std::mutex> g(registry_mutex());
    auto it = registry().find(&e);
    return it == registry().end() ? nullptr : it->second;
}

void Ft::on_release(void* arg, uint64_t id) {
    // Every member passed the free's barrier, so every survivor has
    // decided every agreement on it: nobody will ask for those decisions,
    // and a message for it still in flight is a late duplicate.
    auto* self = static_cast<Ft*>(arg);
    self->comms_.erase(id);
    self->released_[self->released_next_++ % self->released_.size()] = id;
    auto& ins = self->instances_;
    for (auto it = ins.lower_bound({id, 0}); it != ins.end() && it->first.first == id;)
        it = it->second.entered && !it->second.decided ? std::next(it) : ins.erase(it);
}

void Ft::on_split_failed(void* arg, const Comm& parent, uint64_t seq) {
    auto* self = static_cast<Ft*>(arg);
    WEFT_LOG(debug, "split %llu of communicator %llx failed here: its members revoke what they made of it",
             static_cast<unsigned long long>(seq), static_cast<unsigned long long>(parent.id));
    for (uint32_t r = 0; r < parent.size; ++r)
        if (r != parent.rank)
            self->send(parent.members[r], split_abort, parent.id, seq, AgreeFor::unknown, 0, parent.rank, false,
                       nullptr, nullptr);
}

void Ft::on_creation_failed(void* arg, const Comm& c) {
    // Straight to every member, not over the revoke's fingers: members
    // without the communicator do not relay.
    auto* self = static_cast<Ft*>(arg);
    WEFT_LOG(debug, "communicator %llx: its creation failed here; its members revoke it",
             static_cast<unsigned long long>(c.id));
    for (uint32_t r = 0; r < c.size; ++r)
        if (r != c.rank)
            self->send(c.members[r], revoke_notice, c.id, 0, AgreeFor::unknown, 0, c.rank, false, nullptr, nullptr);
}

void Ft::on_create(void* arg, Comm& c) {
    auto* self = static_cast<Ft*>(arg);
    auto& early = self->early_revokes_;
    if (early.empty()) return;  // the usual case: one branch per creation
    auto it = std::find(early.begin(), early.end(), c.id);
    if (it == early.end()) return;
    early.erase(it);
    WEFT_LOG(debug, "communicator %llx: revoked by a member before it was created here",
             static_cast<unsigned long long>(c.id));
    self->revoke(c);
}

FtComm& Ft::state(Comm& c) {
    auto& p = comms_[c.id];
    if (!p) p = std::make_shared<FtComm>();
    if (p->size != c.size) {
        p->serial = next_serial.fetch_add(1, std::memory_order_relaxed);
        p->size = c.size;
        p->in_l.assign(c.size, 0);
        p->in_g.assign(c.size, 0);
        p->cleared.assign(c.size, 0);
    }
    return *p;
}

void Ft::clear(Comm& c, FtComm& f, uint32_t r) {
    f.cleared[r] = 1;
    // `cleared` never moves (sized once per communicator): the engine's
    // entry points read it without a lookup.
    c.recognised = f.cleared.data();
}

bool Ft::member_failed(const Comm& c, uint32_t r) const { return rt_.peer_failed(c.members[r]); }

int32_t Ft::coordinator(const Comm& c) const {
    for (uint32_t r = 0; r < c.size; ++r)
        if (r == c.rank || !member_failed(c, r)) return static_cast<int32_t>(r);
    return static_cast<int32_t>(c.rank);
}

void Ft::update_local(Comm& c, uint32_t& num_failed, uint32_t& num_new) {
    rt_.progress();  // dispatch pending declarations (fencing: failed, not departed)
    FtComm& f = state(c);
    const size_t before = f.l_order.size();
    for (uint32_t r = 0; r < c.size; ++r)
        if (!f.in_l[r] && r != c.rank && rt_.peer_fenced(c.members[r])) {
            f.in_l[r] = 1;
            f.l_order.push_back(r);
        }
    num_failed = static_cast<uint32_t>(f.l_order.size());
    num_new = static_cast<uint32_t>(f.l_order.size() - before);
}

// ------------------------------------------------------------ messages
const char* agree_for_name(AgreeFor k) {
    switch (k) {
        case AgreeFor::agree:
            return "agree";
        case AgreeFor::validate:
            return "validate_global";
        case AgreeFor::shrink:
            return "shrink";
        case AgreeFor::built:
            return "the agreement on a built communicator (shrink, validate_global)";
        case AgreeFor::unknown:
            break;
    }
    return "unknown";
}

void Ft::send(uint32_t peer, Type t, const Instance& in, uint32_t ballot, uint32_t from_rank, bool committed,
              const std::vector<uint64_t>* value, const std::vector<uint64_t>* acc) {
    send(peer, t, in.comm_id, in.seq, in.kind, ballot, from_rank, committed, value, acc);
}

void Ft::send(uint32_t peer, Type t, uint64_t comm_id, uint64_t seq, AgreeFor kind, uint32_t ballot, uint32_t from_rank,
              bool committed, const std::vector<uint64_t>* value, const std::vector<uint64_t>* acc) {
    if (rt_.peer_failed(peer)) return;
    WireHdr h{};
    h.type = t;
    h.ballot = ballot;
    h.comm_id = comm_id;
    h.seq = seq;
    h.from_rank = from_rank;
    h.flags = (committed ? 1u : 0u) | (acc ? 2u : 0u) | uint32_t(kind) << 8;
    h.nvalue = value ? static_cast<uint32_t>(value->size()) : 0;
    h.nacc = acc ? static_cast<uint32_t>(acc->size()) : 0;
    std::vector<uint8_t> buf(sizeof h + 8ull * (h.nvalue + h.nacc));
    std::memcpy(buf.data(), &h, sizeof h);
    if (h.nvalue) std::memcpy(buf.data() + sizeof h, value->data(), 8ull * h.nvalue);
    if (h.nacc) std::memcpy(buf.data() + sizeof h + 8ull * h.nvalue, acc->data(), 8ull * h.nacc);
    Status st = rt_.backend().am_send(peer, am_ft, buf.data(), buf.size());
    // A failed send means the peer is failing: the detector declares it.
    if (st != WEFT_OK) WEFT_LOG(debug, "ft message %u to peer %u not sent: %s", t, peer, weft_strerror(st));
}

void Ft::on_msg(void* arg, uint32_t source_peer, const void* payload, size_t len) {
    // Handlers only queue (a handler can run inside a send); pump() acts.
    auto* self = static_cast<Ft*>(arg);
    const auto* p = static_cast<const uint8_t*>(payload);
    self->inbox_.push_back(Msg{source_peer, std::vector<uint8_t>(p, p + len)});
}

uint32_t Ft::on_progress(void* arg) {
    auto* self = static_cast<Ft*>(arg);
    // Most polls have no progress-mode detector, message or agreement: one
    // inline check (Ft::pump's conditions) instead of two calls.
    if (self->det_.mode() != Detector::Mode::progress && self->inbox_.empty() && !self->open_ &&
        self->iagrees_.empty() && self->ishrinks_.empty())
        return 0;
    uint32_t n = self->det_.on_progress();
    return n + self->pump();
}

Ft::Instance& Ft::instance(uint64_t comm_id, uint64_t seq) {
    Instance& in = instances_[{comm_id, seq}];
    in.comm_id = comm_id;
    in.seq = seq;
    return in;
}

uint32_t Ft::pump() {
    uint32_t n = 0;
    if (!inbox_.empty()) {
        std::vector<Msg> msgs;
        msgs.swap(inbox_);
        for (const Msg& m : msgs) handle(m);
        n += static_cast<uint32_t>(msgs.size());
    }
    // Most progress calls have no agreement open: one branch.
    if (open_)
        for (auto& [key, in] : instances_)
            if (in.entered && !in.decided) step(in);
    if (!iagrees_.empty()) n += finish_iagrees();
    if (!ishrinks_.empty()) n += advance_ishrinks();
    return n;
}

void Ft::handle(const Msg& m) {
    WireHdr h;
    if (m.bytes.size() < sizeof h) {
        WEFT_LOG(error, "ft message of %zu bytes from peer %u: truncated", m.bytes.size(), m.from_peer);
        return;
    }
    std::memcpy(&h, m.bytes.data(), sizeof h);
    if (m.bytes.size() != sizeof h + 8ull * (uint64_t(h.nvalue) + h.nacc)) {
        WEFT_LOG(error, "ft message from peer %u: length %zu does not match its header", m.from_peer, m.bytes.size());
        return;
    }
    // Belt and braces on top of the transport's fencing (which starts only
    // once the failure is dispatched): a declared process has no say.
    if (rt_.peer_failed(m.from_peer)) return;
    const uint32_t most = rt_.universe_size();  // a communicator across jobs has up to every process
    if (h.from_rank >= most || h.nvalue > 1 + most / 64 + 1 || h.nacc > 1 + most / 64 + 1) {
        WEFT_LOG(error, "ft message from peer %u names rank %u with %u+%u words: corrupted", m.from_peer, h.from_rank,
                 h.nvalue, h.nacc);
        return;
    }
    std::vector<uint64_t> value(h.nvalue), acc(h.nacc);
    if (h.nvalue) std::memcpy(value.data(), m.bytes.data() + sizeof h, 8ull * h.nvalue);
    if (h.nacc) std::memcpy(acc.data(), m.bytes.data() + sizeof h + 8ull * h.nvalue, 8ull * h.nacc);

    if (h.type == revoke_notice) {
        WEFT_LOG(debug, "revoke notice for communicator %llx from peer %u", static_cast<unsigned long long>(h.comm_id),
                 m.from_peer);
        for (auto& c : eng_.registry().comms())
            if (c->id == h.comm_id) {
                if (!c->revoked) revoke(*c);
                return;
            }
        // Not created here yet (or released already: a late relay).
        if (recently_released(h.comm_id) ||
            std::find(early_revokes_.begin(), early_revokes_.end(), h.comm_id) != early_revokes_.end())
            return;
        if (early_revokes_.size() == max_early_revokes) {
            WEFT_LOG(warn,
                     "revoke notice for communicator %llx forgotten: %zu notices for communicators not created here",
                     static_cast<unsigned long long>(early_revokes_.front()), max_early_revokes);
            early_revokes_.pop_front();
        }
        early_revokes_.push_back(h.comm_id);
        return;
    }
    if (h.type == split_abort) {
        // The sender's split of communicator comm_id failed: what we made
        // of it is revoked, so no member waits for the sender in it.
        if (Comm* child = eng_.registry().split_aborted(h.comm_id, h.seq)) {
            WEFT_LOG(debug, "communicator %llx (split %llu of %llx) failed at job rank %u: revoked",
                     static_cast<unsigned long long>(child->id), static_cast<unsigned long long>(h.seq),
                     static_cast<unsigned long long>(h.comm_id), m.from_peer);
            if (!child->revoked) revoke(*child);
        }
        return;
    }
    if (recently_released(h.comm_id)) return;  // late: everyone decided before its free
    Instance& in = instance(h.comm_id, h.seq);
    const uint32_t me = in.me;
    const auto theirs = static_cast<AgreeFor>((h.flags >> 8) & 0xff);
    // The sender is at another operation than ours here (ft.hpp).
    const bool other = in.entered && theirs != AgreeFor::unknown && theirs != in.kind;
    switch (h.type) {
        case contrib: {
            if (in.decided) {
                // It moved to us after we decided: the decision is final.
                if (in.entered) send(m.from_peer, commit, in, me, me, true, &in.decision, nullptr);
                return;
            }
            if (in.contribs.size() <= h.from_rank) in.contribs.resize(h.from_rank + 1);
            Contrib& c = in.contribs[h.from_rank];
            c.present = true;
            c.kind = theirs;
            c.committed = h.flags & 1;
            c.has_acc = h.flags & 2;
            c.acc_ballot = h.ballot;
            c.value = std::move(value);
            c.acc = std::move(acc);
            if (c.committed) c.acc = c.value;
            return;
        }
        case query:
            if (in.decided) {
                if (in.entered) send(m.from_peer, contrib, in, 0, me, true, &in.decision, nullptr);
            } else if (in.entered) {
                send(m.from_peer, contrib, in, in.acc_ballot, me, false, &in.mine, in.has_acc ? &in.acc : nullptr);
            }
            return;
        case propose:
            if (!in.entered) return;  // impossible: a proposal needs our contribution
            // Never another operation's value: the coordinator finds the
            // mismatch in our contribution and decides it for everyone.
            if (other) {
                report_mismatch(in, m.from_peer, theirs);
                return;
            }
            // ACK only what we accepted: a proposal of a lower ballot than
            // one we hold must not count towards its commit.
            if (in.decided || (in.has_acc && h.ballot < in.acc_ballot)) return;
            in.has_acc = true;
            in.acc_ballot = h.ballot;
            in.acc = value;
            send(m.from_peer, ack, in, h.ballot, me, false, nullptr, nullptr);
            return;
        case ack:
            if (in.entered && in.proposed && h.ballot == me && h.from_rank < in.acked.size()) in.acked[h.from_rank] = 1;
            return;
        case commit:
            if (in.decided) return;
            if (other && !value.empty()) {
                // Decided without us (we came late) for another operation.
                report_mismatch(in, m.from_peer, theirs);
                decide(in, {});
                return;
            }
            if (!in.entered) in.kind = theirs;  // enter() compares it with ours
            decide(in, value);
            return;
        default:
            WEFT_LOG(error, "ft message type %u from peer %u: unknown", h.type, m.from_peer);
    }
}

void Ft::report_mismatch(Instance& in, uint32_t peer, AgreeFor theirs) {
    if (in.mismatch_reported) return;
    in.mismatch_reported = true;
    char who[48];
    if (peer == UINT32_MAX)
        std::snprintf(who, sizeof who, "the members that decided it");
    else
        std::snprintf(who, sizeof who, "job rank %u", peer);
    WEFT_LOG(error,
             "agreement %llu on communicator %llx: this rank called %s, %s called %s: the members called "
             "fault-tolerant operations in different orders (every call in this agreement fails with BAD_PARAM)",
             static_cast<unsigned long long>(in.seq), static_cast<unsigned long long>(in.comm_id),
             agree_for_name(in.kind), who, agree_for_name(theirs));
}

void Ft::decide(Instance& in, const std::vector<uint64_t>& v) {
    if (in.entered) --open_;
    in.decided = true;
    in.decision = v;
    const uint64_t id = in.comm_id, seq = in.seq;
    if (seq >= keep_decided)
        for (auto it = instances_.lower_bound({id, 0});
             it != instances_.end() && it->first.first == id && it->first.second < seq - keep_decided;) {
            // An open one stays (another thread of ours may still wait in it).
            if (it->second.decided)
                it = instances_.erase(it);
            else
                ++it;
        }
}

void Ft::step(Instance& in) {
    Comm& c = *in.comm;
    const uint32_t me = c.rank;
    const int32_t co = coordinator(c);
    if (co != static_cast<int32_t>(me)) {
        if (in.coord != co) {
            in.coord = co;
            send(c.members[co], contrib, in, in.acc_ballot, me, false, &in.mine, in.has_acc ? &in.acc : nullptr);
        }
        return;
    }
    if (in.coord != co) {
        // We coordinate now: ask whoever has not contributed (a member that
        // already decided answers with the decision).
        in.coord = co;
        for (uint32_t r = 0; r < c.size; ++r)
            if (r != me && !member_failed(c, r) && !in.contribs[r].present)
                send(c.members[r], query, in, me, me, false, nullptr, nullptr);
    }
    for (uint32_t r = 0; r < c.size; ++r) {
        const Contrib& x = in.contribs[r];
        if (r == me || !x.present || x.kind == AgreeFor::unknown || x.kind == in.kind) continue;
        // Members at different operations: decide the mismatch (an empty
        // value), through the same COMMIT every member acts on.
        report_mismatch(in, c.members[r], x.kind);
        const std::vector<uint64_t> none;
        for (uint32_t q = 0; q < c.size; ++q)
            if (q != me && !member_failed(c, q)) send(c.members[q], commit, in, me, me, true, &none, nullptr);
        decide(in, none);
        return;
    }
    Contrib& own = in.contribs[me];
    own.present = true;
    own.kind = in.kind;
    own.value = in.mine;
    own.has_acc = in.has_acc;
    own.acc_ballot = in.acc_ballot;
    own.acc = in.acc;
    for (uint32_t r = 0; r < c.size; ++r)
        if (in.contribs[r].present && in.contribs[r].committed) {
            const std::vector<uint64_t> v = in.contribs[r].value;
            for (uint32_t q = 0; q < c.size; ++q)
                if (q != me) send(c.members[q], commit, in, me, me, true, &v, nullptr);
            decide(in, v);
            return;
        }
    if (!in.proposed) {
        for (uint32_t r = 0; r < c.size; ++r)
            if (!in.contribs[r].present && !member_failed(c, r)) return;  // still waiting
        // Paxos' rule: a value some member accepted may have been committed
        // somewhere; the highest ballot's is the only one that can be.
        const Contrib* best = nullptr;
        for (const Contrib& x : in.contribs)
            if (x.present && x.has_acc && (!best || x.acc_ballot > best->acc_ballot)) best = &x;
        std::vector<uint64_t> v;
        if (best) {
            v = best->acc;
        } else {
            v = in.mine;
            for (const Contrib& x : in.contribs) {
                if (!x.present || x.value.size() != v.size()) continue;
                v[0] &= x.value[0];
                for (size_t w = 1; w < v.size(); ++w) v[w] |= x.value[w];
            }
            for (uint32_t r = 0; r < c.size; ++r)
                if (r != me && member_failed(c, r) && 1 + r / 64 < v.size()) v[1 + r / 64] |= 1ull << (r % 64);
        }
        in.proposed = true;
        in.proposal = v;
        in.acked.assign(c.size, 0);
        in.acked[me] = 1;
        in.has_acc = true;
        in.acc_ballot = me;
        in.acc = v;
        uint32_t sent = 0;
        for (uint32_t r = 0; r < c.size; ++r) {
            if (r == me || member_failed(c, r)) continue;
            send(c.members[r], propose, in, me, me, false, &v, nullptr);
            // Tests kill the coordinator here: one member accepted.
            if (++sent == 1) WEFT_FAULT_POINT("ft.agree.propose_partial");
        }
    }
    for (uint32_t r = 0; r < c.size; ++r)
        if (!in.acked[r] && !member_failed(c, r)) return;
    WEFT_FAULT_POINT("ft.agree.commit");
    const std::vector<uint64_t> v = in.proposal;
    // Half of the COMMITs, then a fault point: tests kill the coordinator
    // here to check that a partial broadcast cannot split the outcome.
    uint32_t sent = 0;
    for (uint32_t r = 0; r < c.size; ++r) {
        if (r == me || member_failed(c, r)) continue;
        send(c.members[r], commit, in, me, me, true, &v, nullptr);
        if (++sent == 1) WEFT_FAULT_POINT("ft.agree.commit_partial");
    }
    decide(in, v);
}

uint64_t Ft::enter(Comm& c, const std::vector<uint64_t>& value, AgreeFor what) {
    FtComm& f = state(c);
    const uint64_t seq = f.next_seq++;
    Instance& in = instance(c.id, seq);
    in.comm = &c;
    in.me = c.rank;
    if (in.decided && !in.decision.empty() && in.kind != AgreeFor::unknown && in.kind != what) {
        // Decided before we came, for another operation.
        const AgreeFor theirs = in.kind;
        in.kind = what;
        report_mismatch(in, UINT32_MAX, theirs);
        in.decision.clear();
    }
    in.kind = what;
    in.entered = true;
    if (!in.decided) ++open_;
    in.mine = value;
    if (in.contribs.size() < c.size) in.contribs.resize(c.size);
    WEFT_FAULT_POINT("ft.agree.enter");
    return seq;
}

std::vector<uint32_t> survivors_of(const Comm& c, const std::vector<uint64_t>& v) {
    std::vector<uint32_t> out;
    for (uint32_t r = 0; r < c.size; ++r)
        if (r == c.rank || !failed_in(v, r)) out.push_back(r);
    return out;
}

std::vector<uint64_t> agree_value(const FtComm& f, uint32_t size, uint64_t flag) {
    std::vector<uint64_t> v(1 + (size + 63) / 64, 0);
    v[0] = flag;
    for (uint32_t r : f.l_order) v[1 + r / 64] |= 1ull << (r % 64);
    return v;
}

Status agree_outcome(const FtComm& f, const Comm& c, const std::vector<uint64_t>& v, int* flag) {
    if (v.empty()) return WEFT_FAIL(WEFT_ERR_BAD_PARAM, "agree: the members called different operations here");
    *flag = static_cast<int>(static_cast<uint32_t>(v[0]));
    for (uint32_t r = 0; r < c.size; ++r)
        if (r != c.rank && failed_in(v, r) && !f.in_g[r]) return WEFT_ERR_PEER_FAILED;
    return WEFT_OK;
}

Status Ft::iagree(Comm& c, int* flag, Request*& out) {
    uint32_t total = 0, added = 0;
    update_local(c, total, added);
    const uint64_t seq = enter(c, agree_value(state(c), c.size, static_cast<uint32_t>(*flag)), AgreeFor::agree);
    // A send-kind request without a cookie: nothing in the engine touches
    // it; we complete it when the instance decides.
    out = eng_.p2p().completed_request(c, ReqKind::send, weft_msg_status_t{-1, -1, 0, WEFT_OK, 0});
    out->done = false;
    iagrees_.push_back(PendingAgree{c.id, seq, &c, out, flag});
    return WEFT_OK;
}

Status Ft::ishrink(Comm& c, weft_comm_t* out, Request*& req) {
    auto s = std::make_unique<PendingShrink>();
    s->comm = &c;
    s->comm_id = c.id;
    s->out = out;
    s->deadline = rt_.op_deadline();
    uint32_t total = 0, added = 0;
    update_local(c, total, added);
    s->seq = enter(c, agree_value(state(c), c.size, 1), AgreeFor::shrink);
    // Completed by us, like iagree's.
    req = eng_.p2p().completed_request(c, ReqKind::send, weft_msg_status_t{-1, -1, 0, WEFT_OK, 0});
    req->done = false;
    s->req = req;
    ishrinks_.push_back(std::move(s));
    return WEFT_OK;
}

uint32_t Ft::advance_ishrinks() {
    uint32_t n = 0;
    for (size_t i = 0; i < ishrinks_.size();) {
        if (advance_ishrink(*ishrinks_[i])) {
            ishrinks_.erase(ishrinks_.begin() + static_cast<std::ptrdiff_t>(i));
            ++n;
        } else {
            ++i;
        }
    }
    return n;
}

bool Ft::advance_ishrink(PendingShrink& s) {
    Comm& c = *s.comm;
    FtComm& f = state(c);
    auto decision = [&](std::vector<uint64_t>& v) {
        auto it = instances_.find({s.comm_id, s.seq});
        if (it == instances_.end() || !it->second.decided) return false;
        v = it->second.decision;
        return true;
    };
    auto complete_with = [&](Status st) {
        eng_.p2p().complete(*s.req, st);
        return true;
    };
    std::vector<uint64_t> v;
    switch (s.stage) {
        case PendingShrink::Stage::agree_failed: {
            if (!decision(v)) {
                if (!s.deadline.passed()) return false;
                return complete_with(
                    WEFT_FAIL(WEFT_ERR_TIMEOUT, "weft_comm_ishrink: no agreement within the deadline"));
            }
            if (v.empty())
                return complete_with(
                    WEFT_FAIL(WEFT_ERR_BAD_PARAM, "weft_comm_ishrink: the members called different operations"));
            if (failed_in(v, c.rank))
                return complete_with(
                    WEFT_FAIL(WEFT_ERR_PEER_FAILED, "weft_comm_ishrink: the survivors agreed this process failed"));
            const std::vector<uint32_t> survivors = survivors_of(c, v);
            s.build = std::make_unique<Registry::Creation>();
            if (eng_.registry().creation_start(c, survivors.data(), static_cast<uint32_t>(survivors.size()),
                                               shrink_tag(f), *s.build) != WEFT_OK) {
                s.build->done = true;
                s.build->status = WEFT_ERR_PEER_FAILED;
            }
            s.stage = PendingShrink::Stage::build;
            [[fallthrough]];
        }
        case PendingShrink::Stage::build: {
            if (!eng_.registry().creation_advance(*s.build)) {
                if (!s.deadline.passed()) return false;
                eng_.registry().creation_abandon(*s.build);
                s.build->done = true;
                s.build->status = WEFT_ERR_TIMEOUT;
            }
            // A member dying while it is built can fail the build at some
            // members only: agree on the outcome.
            uint32_t total = 0, added = 0;
            update_local(c, total, added);
            s.seq = enter(c, agree_value(f, c.size, s.build->status == WEFT_OK ? 1 : 0), AgreeFor::built);
            s.stage = PendingShrink::Stage::agree_built;
            [[fallthrough]];
        }
        case PendingShrink::Stage::agree_built: {
            if (!decision(v)) {
                if (!s.deadline.passed()) return false;
                if (s.build->comm) eng_.registry().free_comm(*s.build->comm);
                return complete_with(
                    WEFT_FAIL(WEFT_ERR_TIMEOUT, "weft_comm_ishrink: no agreement within the deadline"));
            }
            if (v.empty()) {
                if (s.build->comm) eng_.registry().free_comm(*s.build->comm);
                return complete_with(
                    WEFT_FAIL(WEFT_ERR_BAD_PARAM, "weft_comm_ishrink: the members called different operations"));
            }
            if (v[0] == 1 && s.build->comm) {
                *s.out = new_comm_handle(eng_, s.build->comm, c.handle ? comm_handle(*c.handle) : nullptr);
                return complete_with(WEFT_OK);
            }
            if (s.build->comm) eng_.registry().free_comm(*s.build->comm);
            s.build.reset();
            if (s.deadline.passed())
                return complete_with(
                    WEFT_FAIL(WEFT_ERR_PEER_FAILED, "weft_comm_ishrink: building the shrunk communicator failed"));
            WEFT_LOG(info, "weft_comm_ishrink: a member failed while the communicator was built; agreeing again");
            uint32_t total = 0, added = 0;
            update_local(c, total, added);
            s.seq = enter(c, agree_value(f, c.size, 1), AgreeFor::shrink);
            s.stage = PendingShrink::Stage::agree_failed;
            return false;
        }
    }
    return false;
}

uint32_t Ft::finish_iagrees() {
    uint32_t n = 0;
    for (size_t i = 0; i < iagrees_.size();) {
        PendingAgree& p = iagrees_[i];
        auto it = instances_.find({p.comm_id, p.seq});
        if (it == instances_.end() || !it->second.decided) {
            ++i;
            continue;
        }
        const Status st = agree_outcome(state(*p.comm), *p.comm, it->second.decision, p.flag);
        eng_.p2p().complete(*p.req, st);
        iagrees_[i] = iagrees_.back();
        iagrees_.pop_back();
        ++n;
    }
    return n;
}

Status Ft::agree(Comm& c, std::vector<uint64_t>& value, AgreeFor what) {
    const uint64_t seq = enter(c, value, what);
    Instance& in = instance(c.id, seq);
    if (!eng_.progress_until([&] { return in.decided; }, rt_.op_deadline()))
        return WEFT_FAIL(WEFT_ERR_TIMEOUT, "agreement %llu on communicator %llx (%s): no decision within the deadline",
                         static_cast<unsigned long long>(seq), static_cast<unsigned long long>(c.id),
                         agree_for_name(what));
    if (in.decision.empty())
        return WEFT_FAIL(WEFT_ERR_BAD_PARAM,
                         "agreement %llu on communicator %llx (%s): the members called different operations here",
                         static_cast<unsigned long long>(seq), static_cast<unsigned long long>(c.id),
                         agree_for_name(what));
    value = in.decision;
    return WEFT_OK;
}

// ------------------------------------------------------------- revoke
void Ft::revoke(Comm& c) {
    if (c.revoked) return;
    c.revoked = true;
    state(c).revoked = true;
    if (c.survivors) revoke(*c.survivors);
    eng_.revoke_pending(c);
    // Flood over the communicator's fingers (rank + 2^i): every member is
    // reached in O(log N) relays, around failed ones.
    for (uint32_t step = 1; step < c.size; step <<= 1) {
        const uint32_t r = (c.rank + step) % c.size;
        if (!member_failed(c, r))
            send(c.members[r], revoke_notice, c.id, 0, AgreeFor::unknown, 0, c.rank, false, nullptr, nullptr);
    }
    // Also the next live member after each dead finger, so a dead relay
    // does not cut its part of the ring off.
    for (uint32_t step = 1; step < c.size; step <<= 1) {
        uint32_t r = (c.rank + step) % c.size;
        if (!member_failed(c, r)) continue;
        for (uint32_t k = 0; k < c.size && (member_failed(c, r) || r == c.rank); ++k) r = (r + 1) % c.size;
        if (r != c.rank)
            send(c.members[r], revoke_notice, c.id, 0, AgreeFor::unknown, 0, c.rank, false, nullptr, nullptr);
    }
}

bool Ft::revoked(const Comm& c) const { return c.revoked; }

}  // namespace weft::group

// Defined here, not in engine.cpp: the engine half of revoke.
namespace weft::group {
void Engine::revoke_pending(Comm& c) {
    // Its members' collective counts diverge from here on (one revoked
    // instead of joining a collective), and it runs no collective again but
    // its release: the drain's Collective Clock leaves it out (a zero
    // context word, as after its release; clock_records skips it), or no
    // drain could ever converge.
    if (c.slot != no_slot)
        std::atomic_ref<uint64_t>(*state_word(rt_, WEFT_STATE_CLOCK_OFF(c.slot, WEFT_STATE_CLOCK_CONTEXT)))
            .store(0, std::memory_order_release);
    p2p_.revoke_pending(c);
    coll_.fail_on(c, WEFT_ERR_REVOKED);
}
}  // namespace weft::group
