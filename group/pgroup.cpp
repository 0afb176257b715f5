// pgroup.cpp — process groups: the participants' and the tracker's state
// machines (pgroup.hpp has the protocol, docs/groups.md the rules).
#include "group/pgroup.hpp"

#include <algorithm>
#include <cstring>
#include <random>
#include <unistd.h>

namespace weft::group {

namespace {

constexpr uint32_t am_pgroup = Runtime::am_internal_first + 3;
// How long a participant that withdrew (timeout, cancel) waits for the
// tracker's outcome before it returns its own reason: long enough for a
// live tracker's answer, short against any useful timeout.
constexpr uint64_t withdraw_grace_ns = 1000000000ull;
// A decided outcome is kept this long for late resends and a new
// tracker's queries; so is a track nobody here called for.
constexpr uint64_t keep_track_ns = 10000000000ull;
constexpr size_t keep_destructed = 64;

// Little-endian-as-the-host byte writer and a bounds-checked reader: every
// participant runs the same build on one launch.
struct Writer {
    std::vector<uint8_t> b;
    template <typename T>
    void put(T v) {
        const auto* p = reinterpret_cast<const uint8_t*>(&v);
        b.insert(b.end(), p, p + sizeof v);
    }
    void bytes(const void* p, size_t n) {
        put<uint32_t>(static_cast<uint32_t>(n));
        const auto* q = static_cast<const uint8_t*>(p);
        b.insert(b.end(), q, q + n);
    }
    void procs(const std::vector<Proc>& v) {
        put<uint32_t>(static_cast<uint32_t>(v.size()));
        for (const Proc& p : v) {
            put(p.job);
            put(p.rank);
        }
    }
};

struct Reader {
    const uint8_t* p;
    size_t left;
    bool ok = true;
    template <typename T>
    T get() {
        T v{};
        if (left < sizeof v) {
            ok = false;
            return v;
        }
        std::memcpy(&v, p, sizeof v);
        p += sizeof v;
        left -= sizeof v;
        return v;
    }
    std::vector<uint8_t> bytes() {
        const uint32_t n = get<uint32_t>();
        if (!ok || n > left || n > WEFT_GROUP_INFO_MAX) {
            ok = false;
            return {};
        }
        std::vector<uint8_t> v(p, p + n);
        p += n;
        left -= n;
        return v;
    }
    std::vector<Proc> procs() {
        const uint32_t n = get<uint32_t>();
        if (!ok || n > left / 8) {
            ok = false;
            return {};
        }
        std::vector<Proc> v(n);
        for (Proc& q : v) {
            q.job = get<uint32_t>();
            q.rank = get<uint32_t>();
        }
        return v;
    }
};

// Every message starts with its type, the operation's kind, the group's
// name and a nonce.
Writer message(uint8_t type, uint8_t kind, const std::string& name, uint64_t nonce) {
    Writer w;
    w.put(type);
    w.put(kind);
    w.bytes(name.data(), name.size());
    w.put(nonce);
    return w;
}

// A group's context ID: bit 61 (a communicator creation's IDs hold a job
// rank in bits 32-60 and never set it; bits 62-63 name a communicator's
// collective and creation queues), the deciding process's universe index
// in bits 32-60, and that process's counter.
uint64_t group_context_id(uint32_t universe_index, uint32_t counter) {
    return (1ull << 61) | (uint64_t(universe_index & ((1u << 29) - 1)) << 32) | counter;
}

bool contains(const std::vector<Proc>& v, Proc p) { return std::find(v.begin(), v.end(), p) != v.end(); }

std::vector<Proc> sorted_unique(std::vector<Proc> v) {
    std::sort(v.begin(), v.end());
    v.erase(std::unique(v.begin(), v.end()), v.end());
    return v;
}

}  // namespace

ProcessGroups::ProcessGroups(Engine& e) : eng_(e), rt_(e.rt()) {
    // Nonces tell one call from the next of the same name: unique across
    // processes and incarnations of this one.
    std::random_device rd;
    next_nonce_ = (uint64_t(rd()) << 32 | rd()) ^ (uint64_t(getpid()) << 16);
    if (next_nonce_ == 0) next_nonce_ = 1;
}

ProcessGroups::~ProcessGroups() { rt_.remove_layer(pgroup_layer); }

Status ProcessGroups::init() {
    gone_.assign(rt_.universe_size(), 0);
    Status st = rt_.am_register_internal(am_pgroup, on_msg, this);
    if (st != WEFT_OK) return st;
    return rt_.add_layer(pgroup_layer, this, {.on_progress = on_progress, .on_peer_gone = on_peer_gone});
}

ProcessGroups* ProcessGroups::of(Runtime& rt) { return rt.layer(pgroup_layer); }

void ProcessGroups::restore(std::vector<PGroup> groups, uint32_t next_context) {
    for (PGroup& g : groups) {
        std::string name = g.name;
        groups_[name] = std::move(g);
    }
    next_cid_ = std::max(next_cid_, next_context);
}

// ------------------------------------------------------------ helpers
uint32_t ProcessGroups::peer_of(Proc p) const {
    auto& bs = rt_.bootstrap();
    return rt_.peer_of_universe(bs.universe_index(p.job, p.rank));
}

Proc ProcessGroups::self() const { return Proc{rt_.job(), rt_.rank()}; }

bool ProcessGroups::gone(uint32_t peer) const { return peer < gone_.size() && (gone_[peer] || rt_.peer_failed(peer)); }

Status ProcessGroups::check_procs(const std::vector<Proc>& v, const char* what, const char* fn) const {
    const auto& sizes = rt_.bootstrap().job_sizes();
    for (const Proc& p : v)
        if (p.job >= sizes.size() || p.rank >= sizes[p.job])
            return WEFT_FAIL(WEFT_ERR_INVALID_RANK, "%s: %s names job %u rank %u, not a process of this launch", fn,
                             what, p.job, p.rank);
    if (sorted_unique(v).size() != v.size())
        return WEFT_FAIL(WEFT_ERR_INVALID_ARG, "%s: %s names a process twice", fn, what);
    return WEFT_OK;
}

const PGroup* ProcessGroups::find(const std::string& name) const {
    auto it = groups_.find(name);
    return it == groups_.end() ? nullptr : &it->second;
}

PgOp* ProcessGroups::op_by_nonce(uint64_t nonce) {
    for (auto& o : ops_)
        if (o->nonce == nonce) return o.get();
    return nullptr;
}

PgOp* ProcessGroups::op_for(PgOp::Kind kind, const std::string& name) {
    for (auto& o : ops_)
        if (!o->done && o->kind == kind && o->name == name) return o.get();
    return nullptr;
}

uint64_t ProcessGroups::add_handler(weft_group_event_fn fn, void* arg) {
    handlers_.push_back({next_handler_, fn, arg});
    return next_handler_++;
}

bool ProcessGroups::remove_handler(uint64_t id) {
    auto it = std::find_if(handlers_.begin(), handlers_.end(), [&](const Handler& h) { return h.id == id; });
    if (it == handlers_.end()) return false;
    handlers_.erase(it);
    return true;
}

void ProcessGroups::raise(weft_group_event_t ev, const std::string& name, Proc p) { events_.push_back({ev, name, p}); }

namespace {
thread_local uint32_t handler_depth = 0;
}

bool ProcessGroups::on_handler_thread() { return handler_depth > 0; }

void ProcessGroups::deliver_events() {
    // Handlers may call back into weft: none of our maps is being walked.
    while (!events_.empty()) {
        std::vector<Event> evs;
        evs.swap(events_);
        for (const Event& e : evs) {
            WEFT_LOG(debug, "group %s: event %d for job %u rank %u", e.name.c_str(), int(e.ev), e.proc.job,
                     e.proc.rank);
            const auto hs = handlers_;  // a handler may deregister
            for (const Handler& h : hs) {
                ++in_handler_;
                ++handler_depth;
                h.fn(h.arg, e.ev, e.name.c_str(), weft_proc_t{e.proc.job, e.proc.rank});
                --handler_depth;
                --in_handler_;
            }
        }
    }
    // A LEADER_FAILED handler may have nominated this process or aborted:
    // the vote goes out once the handlers ran.
    if (!in_handler_) cast_votes();
}

// ------------------------------------------------------------ the calls
PgOp& ProcessGroups::new_op(PgOp::Kind kind, const std::string& name, uint32_t timeout_ms) {
    auto op = std::make_unique<PgOp>();
    op->kind = kind;
    op->name = name;
    op->nonce = next_nonce_++;
    op->deadline = timeout_ms ? Deadline::after_ns(uint64_t(timeout_ms) * 1000000ull) : rt_.op_deadline();
    ops_.push_back(std::move(op));
    return *ops_.back();
}

Status ProcessGroups::start_construct(ConstructArgs a, PgOp*& out) {
    const char* fn = "weft_group_construct";
    if (groups_.count(a.name)) return WEFT_FAIL(WEFT_ERR_BUSY, "%s: group %s already exists here", fn, a.name.c_str());
    if (op_for(PgOp::Kind::construct, a.name) || op_for(PgOp::Kind::destruct, a.name))
        return WEFT_FAIL(WEFT_ERR_BUSY, "%s: an operation on group %s is in flight here", fn, a.name.c_str());
    if (Status st = check_procs(a.procs, "procs", fn)) return st;
    if (Status st = check_procs(a.add_members, "add_members", fn)) return st;
    if (Status st = check_procs(a.order, "final_order", fn)) return st;
    if (a.procs.empty() && (!a.add_members.empty() || !a.order.empty() || !a.expand.empty()))
        return WEFT_FAIL(WEFT_ERR_INVALID_ARG,
                         "%s: an added member (procs = NULL) cannot name members, an order or groups to expand", fn);
    for (const Proc& p : a.add_members)
        if (contains(a.procs, p))
            return WEFT_FAIL(WEFT_ERR_INVALID_ARG, "%s: job %u rank %u is both a leader and an added member", fn, p.job,
                             p.rank);
    if (a.bootstrap && (a.procs.size() != 1 || a.procs[0] != self() || !a.expand.empty()))
        return WEFT_FAIL(WEFT_ERR_INVALID_ARG, "%s: a bootstrap leader passes only itself in procs (%zu given)", fn,
                         a.procs.size());
    std::vector<Proc> leaders = a.procs;
    for (const std::string& g : a.expand) {
        const PGroup* pg = find(g);
        if (!pg)
            return WEFT_FAIL(WEFT_ERR_NOT_FOUND, "%s: group %s to expand is not a group of this process", fn,
                             g.c_str());
        leaders.insert(leaders.end(), pg->members.begin(), pg->members.end());
    }
    leaders = sorted_unique(std::move(leaders));
    const bool leader = !leaders.empty();
    // The seed's caller verification: skipped when the call adds members.
    if (leader && a.add_members.empty() && !contains(leaders, self()))
        return WEFT_FAIL(WEFT_ERR_NOT_A_MEMBER, "%s: this process (job %u rank %u) is not among the participants of %s",
                         fn, rt_.job(), rt_.rank(), a.name.c_str());
    PgOp& o = new_op(PgOp::Kind::construct, a.name, a.timeout_ms);
    o.leader = leader;
    o.leaders = std::move(leaders);
    o.add_members = sorted_unique(std::move(a.add_members));
    o.order = std::move(a.order);
    o.flags = a.flags;
    o.info = std::move(a.info);
    o.bootstrap = a.bootstrap;
    out = &o;
    WEFT_LOG(debug, "group %s: construct as %s (%zu leaders, %zu added)", o.name.c_str(),
             o.bootstrap ? "bootstrap leader"
             : o.leader  ? "leader"
                         : "added member",
             o.bootstrap ? size_t(o.bootstrap) : o.leaders.size(), o.add_members.size());
    if (o.bootstrap) {
        o.discovering = true;
        for (uint32_t p = 0; p < rt_.universe_size(); ++p)
            if (!is_self(p)) send_hello(o, p, false);
        discover(o);
    } else if (o.leader) {
        proceed_as_leader(o);
    } else {
        auto it = added_.find(o.name);
        if (it != added_.end()) {
            o.leaders = std::move(it->second.first);
            added_.erase(it);
            contribute(o);
        }
    }
    deliver_events();
    return WEFT_OK;
}

void ProcessGroups::proceed_as_leader(PgOp& op) {
    // Added members learn the leaders (so their tracker) from us.
    Writer w = message(uint8_t(Type::added), uint8_t(PgOp::Kind::construct), op.name, uint64_t(0));
    w.procs(op.leaders);
    for (const Proc& p : op.add_members)
        if (p != self()) send(peer_of(p), w.b);
    contribute(op);
}

void ProcessGroups::send_hello(const PgOp& op, uint32_t to, bool reply) {
    Writer w = message(uint8_t(Type::hello), uint8_t(PgOp::Kind::construct), op.name, op.nonce);
    w.put(op.bootstrap);
    w.put(uint8_t(reply));
    send(to, w.b);
}

void ProcessGroups::discover(PgOp& op) {
    auto it = hellos_.find(op.name);
    if (it != hellos_.end())
        for (const Hello& h : it->second) {
            if (h.expires.passed() || contains(op.leaders, h.proc)) continue;
            if (h.count != op.bootstrap) {
                WEFT_LOG(error, "group %s: bootstrap leader job %u rank %u counts %u leaders, this one %u",
                         op.name.c_str(), h.proc.job, h.proc.rank, h.count, op.bootstrap);
                finish(op, WEFT_ERR_BAD_PARAM);
                return;
            }
            op.leaders.push_back(h.proc);
        }
    op.leaders = sorted_unique(std::move(op.leaders));
    if (op.leaders.size() > op.bootstrap) {
        WEFT_LOG(error, "group %s: %zu bootstrap leaders called, the count is %u", op.name.c_str(), op.leaders.size(),
                 op.bootstrap);
        finish(op, WEFT_ERR_BAD_PARAM);
        return;
    }
    if (op.leaders.size() < op.bootstrap) return;
    op.discovering = false;
    WEFT_LOG(debug, "group %s: all %u bootstrap leaders found", op.name.c_str(), op.bootstrap);
    proceed_as_leader(op);
}

void ProcessGroups::on_hello(const std::string& name, Proc from, uint32_t peer, uint64_t nonce, uint32_t count,
                             bool reply) {
    auto& hs = hellos_[name];
    auto h = std::find_if(hs.begin(), hs.end(), [&](const Hello& x) { return x.proc == from; });
    const Hello fresh{from, nonce, count, Deadline::after_ns(keep_track_ns)};
    if (h == hs.end())
        hs.push_back(fresh);
    else
        *h = fresh;
    PgOp* op = op_for(PgOp::Kind::construct, name);
    if (!op || !op->bootstrap) return;
    const bool known = contains(op->leaders, from);
    // A leader that called after our broadcast may have missed it.
    if (!reply && !known) send_hello(*op, peer, true);
    if (op->discovering) {
        discover(*op);
    } else if (!known || count != op->bootstrap) {
        // One leader too many, or a count that differs, after we went on:
        // the construct cannot be what every leader asked for.
        WEFT_LOG(error, "group %s: bootstrap leader job %u rank %u (count %u) after %u leaders were found",
                 name.c_str(), from.job, from.rank, count, op->bootstrap);
        withdraw(*op, WEFT_ERR_BAD_PARAM);
    }
}

Status ProcessGroups::start_invite(ConstructArgs a, PgOp*& out) {
    const char* fn = "weft_group_invite";
    if (groups_.count(a.name)) return WEFT_FAIL(WEFT_ERR_BUSY, "%s: group %s already exists here", fn, a.name.c_str());
    if (op_for(PgOp::Kind::construct, a.name) || op_for(PgOp::Kind::destruct, a.name))
        return WEFT_FAIL(WEFT_ERR_BUSY, "%s: an operation on group %s is in flight here", fn, a.name.c_str());
    if (a.procs.empty()) return WEFT_FAIL(WEFT_ERR_INVALID_ARG, "%s: nobody to invite", fn);
    if (Status st = check_procs(a.procs, "procs", fn)) return st;
    if (contains(a.procs, self())) return WEFT_FAIL(WEFT_ERR_INVALID_ARG, "%s: the leader invites itself", fn);
    if (!a.add_members.empty() || !a.order.empty() || !a.expand.empty() || a.bootstrap)
        return WEFT_FAIL(WEFT_ERR_INVALID_ARG, "%s: an invite takes only flags, a timeout and info", fn);
    PgOp& o = new_op(PgOp::Kind::construct, a.name, a.timeout_ms);
    o.leader = true;
    o.inviter = true;
    o.leaders = {self()};
    o.flags = a.flags;
    o.info = std::move(a.info);
    o.invite_nonce = o.nonce;
    out = &o;
    // A fresh track: an older invitation's outcome must not answer this one.
    tracks_.erase({uint8_t(PgOp::Kind::construct), o.name});
    Track& t = track(PgOp::Kind::construct, o.name);
    t.invite = true;
    t.invite_nonce = o.nonce;
    t.flags = o.flags;
    t.invitees = sorted_unique(std::move(a.procs));
    // Each invitee learns the others and the flags: if this process dies
    // they choose a new leader among themselves.
    Writer w = message(uint8_t(Type::invite), uint8_t(PgOp::Kind::construct), o.name, o.nonce);
    w.put(o.flags);
    w.procs(t.invitees);
    for (const Proc& p : t.invitees) send(peer_of(p), w.b);
    WEFT_LOG(debug, "group %s: invited %zu processes", o.name.c_str(), t.invitees.size());
    contribute(o);  // our own contribution: we are the tracker
    deliver_events();
    return WEFT_OK;
}

Status ProcessGroups::join(const std::string& name, Proc leader, bool accept, std::vector<uint8_t> info,
                           uint32_t timeout_ms, PgOp*& out) {
    const char* fn = "weft_group_join";
    out = nullptr;
    auto it = invitations_.find(name);
    // After a re-selection the invitee may name either leader.
    if (it == invitations_.end() || (it->second.leader != leader && it->second.first_leader != leader))
        return WEFT_FAIL(WEFT_ERR_NOT_FOUND, "%s: no invitation to %s from job %u rank %u", fn, name.c_str(),
                         leader.job, leader.rank);
    const Invitation inv = std::move(it->second);
    invitations_.erase(it);
    if (!accept) {
        Writer w = message(uint8_t(Type::decline), uint8_t(PgOp::Kind::construct), name, inv.nonce);
        send(peer_of(inv.leader), w.b);
        WEFT_LOG(debug, "group %s: declined", name.c_str());
        return WEFT_OK;
    }
    if (groups_.count(name) || op_for(PgOp::Kind::construct, name))
        return WEFT_FAIL(WEFT_ERR_BUSY, "%s: group %s exists here or is being built", fn, name.c_str());
    PgOp& o = new_op(PgOp::Kind::construct, name, timeout_ms);
    o.joiner = true;
    o.invite_nonce = inv.nonce;
    o.leaders = {inv.leader};
    o.invitees = inv.invitees;
    o.invite_flags = inv.flags;
    o.round = inv.round;
    o.info = std::move(info);
    out = &o;
    if (gone(inv.leader)) {
        // Its leader is already lost: not an acceptor of the leader that
        // died; it waits for the others' selection (as an unanswered invitee).
        o.late = true;
        WEFT_LOG(debug, "group %s: accepted after the leader died, waiting for a new one", name.c_str());
    } else {
        contribute(o);
    }
    deliver_events();
    return WEFT_OK;
}

void ProcessGroups::step_invite(Track& t) {
    if (t.decided) return;
    Outcome o;
    bool timed_out = false;
    for (const auto& [p, w] : t.withdrawn) {
        if (w.second == WEFT_ERR_TIMEOUT && p == self()) {
            timed_out = true;  // the leader's deadline: the silent ones failed
            continue;
        }
        o.status = w.second;  // a cancel
        decide(t, std::move(o));
        return;
    }
    std::vector<Proc> members{self()}, failed;
    bool pending = false;
    for (const Proc& p : t.invitees) {
        const bool accepted = t.contribs.count(p) != 0;
        if (accepted && !gone(p)) {
            members.push_back(p);
            continue;
        }
        if (!accepted && !gone(p) && !t.declined.count(p) && !timed_out) {
            pending = true;
            continue;
        }
        failed.push_back(p);
        if (t.invite_failed.insert(p).second) raise(WEFT_GROUP_EVENT_INVITE_FAILED, t.name, p);
    }
    if (pending) return;
    if (!failed.empty() && !(t.flags & WEFT_GROUP_OPTIONAL)) {
        o.status = WEFT_ERR_CONSTRUCT_ABORT;
        decide(t, std::move(o));
        return;
    }
    members = sorted_unique(std::move(members));
    for (const Proc& p : members) o.infos.push_back(t.contribs[p].info);
    o.members = std::move(members);
    o.flags = t.flags;
    if (t.flags & WEFT_GROUP_ASSIGN_CONTEXT_ID) {
        o.context_id = group_context_id(rt_.self_universe(), next_cid_++);
        if (next_cid_ == 0) next_cid_ = 1;
    }
    decide(t, std::move(o));
}

Status ProcessGroups::start_destruct(const std::string& name, uint32_t timeout_ms, PgOp*& out) {
    const char* fn = "weft_group_destruct";
    if (!groups_.count(name))
        return WEFT_FAIL(WEFT_ERR_NOT_FOUND, "%s: this process is not in a group %s", fn, name.c_str());
    if (op_for(PgOp::Kind::destruct, name))
        return WEFT_FAIL(WEFT_ERR_BUSY, "%s: a destruct of %s is in flight here", fn, name.c_str());
    PgOp& o = new_op(PgOp::Kind::destruct, name, timeout_ms);
    out = &o;
    contribute(o);
    deliver_events();
    return WEFT_OK;
}

Status ProcessGroups::leave(const std::string& name) {
    if (PgOp* op = op_for(PgOp::Kind::construct, name)) {
        // Leaving a group still being built: the tracker counts us as
        // departed and completes on the others.
        if (op->tracker != UINT32_MAX) {
            op->withdraw = WEFT_ERR_NOT_FOUND;
            send_withdraw(*op);
        }
        finish(*op, WEFT_ERR_CANCELED);
        WEFT_LOG(debug, "group %s: left during its construct", name.c_str());
        deliver_events();
        return WEFT_OK;
    }
    auto it = groups_.find(name);
    if (it == groups_.end())
        return WEFT_FAIL(WEFT_ERR_NOT_FOUND, "weft_group_leave: this process is not in a group %s", name.c_str());
    tell_left(it->second, self());
    if (PgOp* d = op_for(PgOp::Kind::destruct, name)) finish(*d, WEFT_ERR_NOT_FOUND);
    groups_.erase(it);
    tracks_.erase({uint8_t(PgOp::Kind::destruct), name});
    WEFT_LOG(debug, "group %s: left", name.c_str());
    deliver_events();
    return WEFT_OK;
}

Status ProcessGroups::cancel(PgOp& op) {
    if (op.done || op.withdraw != WEFT_OK) return WEFT_OK;
    if (op.kind != PgOp::Kind::construct)
        return WEFT_FAIL(WEFT_ERR_UNSUPPORTED, "weft_group_op_cancel: only a construct can be cancelled");
    withdraw(op, WEFT_ERR_CANCELED);
    deliver_events();
    return WEFT_OK;
}

Status ProcessGroups::wait(PgOp& op) {
    // Every op ends by its own deadline plus the grace; the bound here only
    // guards against a defect in that.
    const Deadline d = Deadline::after_ns(op.deadline.remaining_ns() + 2 * withdraw_grace_ns + 1000000000ull);
    // The participants are inside the same operation: yield to them for a
    // while before sleeping (on an oversubscribed host a futex sleep and
    // wake per message hop costs tens of microseconds; bench/RESULTS.md).
    if (!eng_.progress_until([&] { return op.done; }, d, Backoff::collective_partner)) {
        finish(op, WEFT_FAIL(WEFT_ERR_TIMEOUT, "group %s: no outcome past its deadline and grace", op.name.c_str()));
    }
    return reap(op);
}

Status ProcessGroups::reap(PgOp& op) {
    const Status st = op.status;
    auto it = std::find_if(ops_.begin(), ops_.end(), [&](const auto& p) { return p.get() == &op; });
    if (it != ops_.end()) ops_.erase(it);
    return st;
}

// ------------------------------------------------------ participant side
uint32_t ProcessGroups::tracker_for(const PgOp& op) const {
    if (op.kind == PgOp::Kind::construct) {
        for (const Proc& p : op.leaders)
            if (p == self() || !gone(p)) return peer_of(p);
        return UINT32_MAX;
    }
    const PGroup* g = find(op.name);
    if (!g) return UINT32_MAX;
    std::vector<Proc> m = sorted_unique(g->members);
    for (const Proc& p : m)
        if (p == self() || !gone(p)) return peer_of(p);
    return UINT32_MAX;
}

std::vector<uint8_t> ProcessGroups::encode_contrib(const PgOp& op) const {
    Writer w = message(uint8_t(Type::contrib), uint8_t(op.kind), op.name, op.nonce);
    w.put(uint8_t(op.leader));
    w.put(op.flags);
    w.procs(op.leaders);
    w.procs(op.add_members);
    w.procs(op.order);
    w.bytes(op.info.data(), op.info.size());
    w.put(op.invite_nonce);
    return std::move(w.b);
}

void ProcessGroups::contribute(PgOp& op) {
    op.tracker = tracker_for(op);
    if (op.tracker == UINT32_MAX && op.joiner) {
        lose_leader(op);
        return;
    }
    if (op.tracker == UINT32_MAX) {
        finish(op, op.kind == PgOp::Kind::construct ? WEFT_ERR_CONSTRUCT_ABORT : WEFT_ERR_PEER_FAILED);
        WEFT_LOG(debug, "group %s: every possible tracker is gone", op.name.c_str());
        return;
    }
    if (is_self(op.tracker)) {
        Contribution c;
        c.peer = op.tracker;
        c.nonce = op.nonce;
        c.leader = op.leader;
        c.leaders = op.leaders;
        c.add_members = op.add_members;
        c.order = op.order;
        c.flags = op.flags;
        c.info = op.info;
        c.invite_nonce = op.invite_nonce;
        take(track(op.kind, op.name), self(), std::move(c));
    } else {
        send(op.tracker, encode_contrib(op));
    }
    if (op.kind == PgOp::Kind::construct)
        WEFT_FAULT_POINT("group.construct.contributed");
    else
        WEFT_FAULT_POINT("group.destruct.contributed");
    if (op.withdraw != WEFT_OK && !op.done) send_withdraw(op);
}

void ProcessGroups::send_withdraw(PgOp& op) {
    if (op.tracker == UINT32_MAX) return;
    if (is_self(op.tracker)) {
        Track& t = track(op.kind, op.name);
        withdrawn_by(t, self(), op.nonce, op.withdraw);
        return;
    }
    Writer w = message(uint8_t(Type::withdraw), uint8_t(op.kind), op.name, op.nonce);
    w.put(int32_t(op.withdraw));
    send(op.tracker, w.b);
}

void ProcessGroups::withdraw(PgOp& op, Status why) {
    // Take in the contributions that already arrived: the outcome reaches
    // every participant that called before it.
    if (is_self(op.tracker)) rt_.progress();
    if (op.done) return;
    op.withdraw = why;
    op.grace = Deadline::after_ns(withdraw_grace_ns);
    if (op.tracker == UINT32_MAX) {
        // Nobody to tell: an added member no leader reached.
        finish(op, why);
        return;
    }
    send_withdraw(op);
}

void ProcessGroups::advance(PgOp& op) {
    if (op.done) return;
    if (op.leaderless) try_select(op);
    if (op.done) return;
    if (op.tracker != UINT32_MAX) {
        const uint32_t want = tracker_for(op);
        if (want != op.tracker) {
            WEFT_LOG(debug, "group %s: tracker peer %u gone, contributing to peer %u", op.name.c_str(), op.tracker,
                     want);
            contribute(op);
            if (op.done) return;
        }
    }
    if (op.withdraw == WEFT_OK) {
        if (op.deadline.passed()) {
            WEFT_LOG(debug, "group %s: deadline passed, withdrawing", op.name.c_str());
            withdraw(op, WEFT_ERR_TIMEOUT);
        }
    } else if (op.grace.passed()) {
        WEFT_LOG(debug, "group %s: no outcome from the tracker within the grace", op.name.c_str());
        finish(op, op.withdraw);
    }
}

void ProcessGroups::finish(PgOp& op, Status st) {
    if (op.done) return;
    op.done = true;
    op.status = st;
    // Its leaders' HELLOs are spent: a later construct of the name finds
    // its leaders afresh. Every process kept ours: BYE takes it back.
    if (op.bootstrap) {
        hellos_.erase(op.name);
        Writer w = message(uint8_t(Type::bye), uint8_t(PgOp::Kind::construct), op.name, op.nonce);
        for (uint32_t p = 0; p < rt_.universe_size(); ++p)
            if (!is_self(p)) send(p, w.b);
    }
    if (st != WEFT_OK && st != WEFT_ERR_CANCELED)
        WEFT_LOG(debug, "group %s: %s ended: %s", op.name.c_str(),
                 op.kind == PgOp::Kind::construct ? "construct" : "destruct", weft_strerror(st));
}

void ProcessGroups::apply(PgOp& op, const Outcome& o) {
    if (op.done) return;
    if (op.inviter || op.joiner) {
        const Proc leader = op.inviter ? self() : op.leaders.front();
        if (o.status == WEFT_OK) raise(WEFT_GROUP_EVENT_CONSTRUCT_COMPLETE, op.name, leader);
        if (o.status == WEFT_ERR_CONSTRUCT_ABORT) raise(WEFT_GROUP_EVENT_CONSTRUCT_ABORT, op.name, leader);
        if (o.status != WEFT_OK) remember_join_end(op.invite_nonce, o.status);
    }
    if (op.kind == PgOp::Kind::construct) {
        auto early = early_left_.extract(op.name);
        if (o.status == WEFT_OK) {
            PGroup g;
            g.name = op.name;
            g.members = o.members;
            g.infos = o.infos;
            g.context_id = o.context_id;
            g.flags = o.flags;
            g.invite_nonce = op.invite_nonce;
            for (const Proc& p : o.failed) {
                g.reported_failed.insert(p);
                raise(WEFT_GROUP_EVENT_MEMBER_FAILED, op.name, p);
            }
            for (const Proc& p : o.departed) raise(WEFT_GROUP_EVENT_LEFT, op.name, p);
            // A member may have died before the group existed here.
            if (g.flags & WEFT_GROUP_NOTIFY_TERMINATION) deaths_ = true;
            groups_[op.name] = std::move(g);
            if (early)
                for (const Proc& p : early.mapped()) drop_leaver(op.name, p);
        }
    } else {
        auto it = groups_.find(op.name);
        if (it != groups_.end()) {
            for (const Proc& p : o.failed)
                if (!it->second.reported_failed.count(p)) raise(WEFT_GROUP_EVENT_MEMBER_FAILED, op.name, p);
            if (o.status == WEFT_OK || o.status == WEFT_ERR_PEER_FAILED) groups_.erase(it);
        }
        if (destructed_.size() >= keep_destructed) destructed_.erase(destructed_.begin());
        destructed_.emplace_back(op.name, o.status);
    }
    finish(op, o.status);
}

// ---------------------------------------------------- as a communicator
Status ProcessGroups::make_comm(const std::string& name, Comm*& out) {
    const char* fn = "weft_group_comm";
    out = nullptr;
    const PGroup* g = find(name);
    if (!g) return WEFT_FAIL(WEFT_ERR_NOT_FOUND, "%s: this process is not in a group %s", fn, name.c_str());
    if (!g->context_id)
        return WEFT_FAIL(WEFT_ERR_NOT_FOUND, "%s: group %s has no context ID (construct it with ASSIGN_CONTEXT_ID)", fn,
                         name.c_str());
    // A communicator's members are peer indices: this job's ranks, or
    // another job's processes (Comm::spans_jobs).
    std::vector<uint32_t> members;
    for (const Proc& p : g->members) members.push_back(peer_of(p));
    // The group's context ID is the communicator's: bit 61 keeps it apart
    // from every ID a communicator creation makes.
    return eng_.registry().from_members(g->context_id, std::move(members), out);
}

// ------------------------------------------------- leader re-selection
// Seed 6.5.3.6.2. The acceptors of a leader that died vote: each one's
// LEADER_FAILED handler may nominate it or abort; then it sends its vote
// to every other invitee (who learned each other from the INVITE). An
// invitee that has not accepted answers "pending", one that declined (or
// knows nothing of it) "declined", and one that already holds the outcome
// of that invitation sends the outcome. Once an acceptor holds a vote from
// every live invitee it decides, the same everywhere: any abort aborts;
// else the lowest nominee leads; no nominee aborts. The acceptors then go
// on with the new leader as inviter (round + 1 if it dies too); the
// pending invitees are told the outcome (SELECTED).
void ProcessGroups::lose_leader(PgOp& op) {
    op.tracker = UINT32_MAX;
    if (op.late || op.leaderless) return;
    WEFT_LOG(debug, "group %s: leader job %u rank %u died before the outcome (round %u)", op.name.c_str(),
             op.leaders.front().job, op.leaders.front().rank, op.round);
    op.leaderless = true;
    op.vote = 0;
    op.lost_leaders.insert(op.leaders.front());
    raise(WEFT_GROUP_EVENT_LEADER_FAILED, op.name, op.leaders.front());
}

Status ProcessGroups::nominate(const std::string& name) {
    return answer_selection(name, vote_nominate, "weft_group_nominate");
}

Status ProcessGroups::abort_construct(const std::string& name) {
    return answer_selection(name, vote_abort, "weft_group_abort");
}

Status ProcessGroups::answer_selection(const std::string& name, uint8_t vote, const char* fn) {
    PgOp* op = op_for(PgOp::Kind::construct, name);
    if (!op || !op->leaderless)
        return WEFT_FAIL(WEFT_ERR_NOT_FOUND, "%s: no construct of %s here lost its leader", fn, name.c_str());
    if (op->vote != 0)
        return WEFT_FAIL(WEFT_ERR_BUSY, "%s: this process already answered the selection of %s", fn, name.c_str());
    op->vote = vote;
    WEFT_LOG(debug, "group %s: %s after the leader's death", name.c_str(),
             vote == vote_nominate ? "nominating this process" : "aborting the construct");
    return WEFT_OK;
}

void ProcessGroups::cast_votes() {
    for (size_t i = 0; i < ops_.size(); ++i) {
        PgOp& op = *ops_[i];
        if (op.done || !op.leaderless || op.votes.count({op.round, self()})) continue;
        if (op.vote == 0) op.vote = vote_accepted;
        op.votes[{op.round, self()}] = op.vote;
        const std::vector<uint8_t> msg = vote_message(op.name, op.invite_nonce, op.round, op.vote, false, op.nonce);
        for (const Proc& p : op.invitees)
            if (p != self() && !gone(p)) send(peer_of(p), msg);
    }
}

std::vector<uint8_t> ProcessGroups::vote_message(const std::string& name, uint64_t invite_nonce, uint32_t round,
                                                 uint8_t vote, bool reply, uint64_t voter_nonce) const {
    Writer w = message(uint8_t(Type::vote), uint8_t(PgOp::Kind::construct), name, invite_nonce);
    w.put(round);
    w.put(vote);
    w.put(uint8_t(reply));
    w.put(voter_nonce);
    return std::move(w.b);
}

void ProcessGroups::remember_join_end(uint64_t invite_nonce, Status st) {
    if (joins_ended_.size() >= keep_destructed) joins_ended_.erase(joins_ended_.begin());
    joins_ended_.emplace_back(invite_nonce, st);
}

void ProcessGroups::on_vote(const std::string& name, Proc from, uint32_t peer, uint64_t invite_nonce, uint32_t round,
                            uint8_t vote, bool reply, uint64_t voter_nonce) {
    PgOp* op = op_for(PgOp::Kind::construct, name);
    if (op && op->joiner && op->invite_nonce == invite_nonce) {
        if (op->late) {
            if (!reply) send(peer, vote_message(name, invite_nonce, round, vote_pending, true, op->nonce));
            return;
        }
        // Kept until this acceptor notices the death and votes itself.
        op->votes.emplace(std::make_pair(round, from), vote);
        if (vote == vote_pending) op->pending_voters.insert(from);
        return;
    }
    if (reply || (op && op->inviter)) return;  // a new leader already: the voters decide the same
    auto answer = [&](uint8_t v) { send(peer, vote_message(name, invite_nonce, round, v, true, 0)); };
    auto inv = invitations_.find(name);
    if (inv != invitations_.end() && inv->second.nonce == invite_nonce) return answer(vote_pending);
    // The outcome of that invitation, if this process has it: the voter
    // adopts it (a decided outcome is never replaced).
    Outcome o;
    auto g = groups_.find(name);
    if (g != groups_.end() && g->second.invite_nonce == invite_nonce) {
        o.members = g->second.members;
        o.infos = g->second.infos;
        o.context_id = g->second.context_id;
        o.flags = g->second.flags;
        send(peer, encode_result(PgOp::Kind::construct, name, voter_nonce, o));
        return;
    }
    for (const auto& [n, st] : joins_ended_)
        if (n == invite_nonce) {
            o.status = st;
            send(peer, encode_result(PgOp::Kind::construct, name, voter_nonce, o));
            return;
        }
    answer(vote_declined);
}

void ProcessGroups::try_select(PgOp& op) {
    if (!op.leaderless || !op.votes.count({op.round, self()})) return;
    bool abort = false;
    std::optional<Proc> leader;
    std::set<Proc> declined;
    for (const Proc& p : op.invitees) {
        // A vote that arrived counts even if its voter died since: the
        // others most likely hold it too (if some do not, the nominee they
        // chose is dead and the next round, or the outcome the others
        // hold, settles it).
        auto v = op.votes.find({op.round, p});
        if (v == op.votes.end() && p != self() && gone(p)) continue;
        if (v == op.votes.end()) return;  // still to answer
        if (v->second == vote_abort) abort = true;
        if (v->second == vote_declined) declined.insert(p);
        if (v->second == vote_nominate && !leader) leader = p;  // invitees are sorted: the lowest
    }
    Writer w = message(uint8_t(Type::selected), uint8_t(PgOp::Kind::construct), op.name, op.invite_nonce);
    w.put(uint8_t(leader && !abort));
    w.put(leader ? leader->job : 0u);
    w.put(leader ? leader->rank : 0u);
    w.put(op.round + 1);  // the round a failure of the new leader starts
    for (const Proc& p : op.pending_voters)
        if (!gone(p)) send(peer_of(p), w.b);
    op.pending_voters.clear();
    const Proc lost = op.leaders.front();
    if (abort || !leader) {
        WEFT_LOG(debug, "group %s: %s after the leader's death", op.name.c_str(),
                 abort ? "a participant aborted" : "no leader was nominated");
        raise(WEFT_GROUP_EVENT_CONSTRUCT_ABORT, op.name, lost);
        remember_join_end(op.invite_nonce, WEFT_ERR_CONSTRUCT_ABORT);
        finish(op, WEFT_ERR_CONSTRUCT_ABORT);
        return;
    }
    WEFT_LOG(debug, "group %s: job %u rank %u selected as leader", op.name.c_str(), leader->job, leader->rank);
    raise(WEFT_GROUP_EVENT_LEADER_SELECTED, op.name, *leader);
    op.leaderless = false;
    op.votes.clear();
    ++op.round;
    if (*leader == self()) return become_leader(op, declined);
    op.leaders = {*leader};
    contribute(op);
}

void ProcessGroups::become_leader(PgOp& op, const std::set<Proc>& declined) {
    op.joiner = false;
    op.inviter = true;
    op.leader = true;
    op.leaders = {self()};
    op.flags = op.invite_flags;
    // Acceptances that reached us before we knew we lead are kept.
    std::vector<std::pair<Proc, Contribution>> early;
    auto old = tracks_.find({uint8_t(PgOp::Kind::construct), op.name});
    if (old != tracks_.end()) {
        for (auto& [p, c] : old->second.contribs)
            if (c.invite_nonce == op.invite_nonce) early.emplace_back(p, std::move(c));
        tracks_.erase(old);
    }
    Track& t = track(PgOp::Kind::construct, op.name);
    t.invite = true;
    t.invite_nonce = op.invite_nonce;
    t.flags = op.invite_flags;
    // A nominee that died as it took over was a leader, reported as such
    // (LEADER_FAILED), not a failed invitee.
    for (const Proc& p : op.invitees)
        if (p != self() && !op.lost_leaders.count(p)) t.invitees.push_back(p);
    t.declined = declined;
    for (auto& [p, c] : early) t.contribs[p] = std::move(c);
    WEFT_FAULT_POINT("group.invite.new_leader");
    contribute(op);
}

void ProcessGroups::on_selected(const std::string& name, uint64_t invite_nonce, bool has_leader, Proc leader,
                                uint32_t round) {
    if (PgOp* op = op_for(PgOp::Kind::construct, name); op && op->late && op->invite_nonce == invite_nonce) {
        if (!has_leader) {
            raise(WEFT_GROUP_EVENT_CONSTRUCT_ABORT, name, op->leaders.front());
            remember_join_end(invite_nonce, WEFT_ERR_CONSTRUCT_ABORT);
            finish(*op, WEFT_ERR_CONSTRUCT_ABORT);
            return;
        }
        raise(WEFT_GROUP_EVENT_LEADER_SELECTED, name, leader);
        op->late = false;
        op->leaders = {leader};
        op->round = round;
        if (leader == self()) return;  // cannot be: a late joiner does not vote to lead
        contribute(*op);
        return;
    }
    auto inv = invitations_.find(name);
    if (inv == invitations_.end() || inv->second.nonce != invite_nonce) return;
    if (!has_leader) {
        raise(WEFT_GROUP_EVENT_CONSTRUCT_ABORT, name, inv->second.first_leader);
        invitations_.erase(inv);
        return;
    }
    if (inv->second.leader == leader) return;  // told by another acceptor already
    inv->second.leader = leader;
    inv->second.round = round;
    raise(WEFT_GROUP_EVENT_LEADER_SELECTED, name, leader);
}

// --------------------------------------------------------- tracker side
ProcessGroups::Track& ProcessGroups::track(PgOp::Kind kind, const std::string& name) {
    Track& t = tracks_[{uint8_t(kind), name}];
    if (t.name.empty()) {
        t.kind = kind;
        t.name = name;
        t.expires = Deadline::after_ns(keep_track_ns);
    }
    return t;
}

bool ProcessGroups::am_tracker(const Track& t) const {
    const Proc me = self();
    if (t.kind == PgOp::Kind::destruct) {
        const PGroup* g = find(t.name);
        if (!g) return false;
        for (const Proc& p : sorted_unique(g->members))
            if (p == me || !gone(p)) return p == me;
        return false;
    }
    const std::vector<Proc>* leaders = nullptr;
    for (const auto& [p, c] : t.contribs)
        if (c.leader) {
            leaders = &c.leaders;
            if (p == me) break;  // our own view first
        }
    if (!leaders) return false;
    for (const Proc& p : *leaders)
        if (p == me || !gone(p)) return p == me;
    return false;
}

void ProcessGroups::take(Track& t, Proc from, Contribution c) {
    if (t.invite && from != self()) {
        // Only an invitee's acceptance of this invitation counts; one that
        // comes after the outcome is too late (the leader's timeout).
        if (!contains(t.invitees, from) || c.invite_nonce != t.invite_nonce) return;
        if (t.decided) {
            Outcome late;
            late.status = WEFT_ERR_TIMEOUT;
            send(c.peer, encode_result(t.kind, t.name, c.nonce, late));
            return;
        }
    }
    if (t.decided) {
        auto it = t.contribs.find(from);
        const bool same_call = it != t.contribs.end() && it->second.nonce == c.nonce;
        auto w = t.withdrawn.find(from);
        if (same_call || (w != t.withdrawn.end() && w->second.first == c.nonce)) {
            send_result(t, from, c.nonce, c.peer);
            return;
        }
        // A new call of that name: a new incarnation of the operation.
        const auto kind = t.kind;
        const std::string name = t.name;
        tracks_.erase({uint8_t(kind), name});
        take(track(kind, name), from, std::move(c));
        return;
    }
    t.withdrawn.erase(from);
    t.departed.erase(from);
    t.contribs[from] = std::move(c);
    step(t);
}

void ProcessGroups::withdrawn_by(Track& t, Proc from, uint64_t nonce, Status why) {
    WEFT_LOG(debug, "group %s: job %u rank %u withdrew (%s)%s", t.name.c_str(), from.job, from.rank,
             why == WEFT_ERR_NOT_FOUND ? "left" : weft_strerror(why), t.decided ? ", after the outcome" : "");
    if (t.decided) {
        auto it = t.contribs.find(from);
        if (it == t.contribs.end() || it->second.nonce != nonce) return;
        if (why == WEFT_ERR_NOT_FOUND && t.kind == PgOp::Kind::construct && t.decided->status == WEFT_OK) {
            // It left after the group formed with it: a leave of the group,
            // which we announce for it (it does not know the members).
            auto g = groups_.find(t.name);
            if (g != groups_.end()) {
                tell_left(g->second, from);
                drop_leaver(t.name, from);
            }
            return;
        }
        send_result(t, from, nonce, it->second.peer);
        return;
    }
    auto it = t.contribs.find(from);
    const bool current = it != t.contribs.end() && it->second.nonce == nonce;
    if (why == WEFT_ERR_NOT_FOUND) {  // left
        if (it != t.contribs.end() && !current) return;
        t.contribs.erase(from);
        t.departed.insert(from);
    } else if (!current) {
        return;  // the withdrawal of an earlier call of that name
    } else if (why == WEFT_ERR_TIMEOUT && from != self()) {
        // That participant's own deadline: it alone stops waiting (told so,
        // unless we had decided); the others wait on, each to its own
        // deadline, for it is now missing. Deciding TIMEOUT for all here
        // could not reach participants still to call, whose calls would
        // then look like a new construct.
        const uint32_t peer = it->second.peer;
        t.contribs.erase(it);
        Outcome o;
        o.status = WEFT_ERR_TIMEOUT;
        send(peer, encode_result(t.kind, t.name, nonce, o));
        return;
    } else {
        // A cancel, or the tracker's own deadline: decides for everyone.
        t.withdrawn[from] = {nonce, why};
    }
    step(t);
}

void ProcessGroups::step(Track& t) {
    if (t.invite) return step_invite(t);
    if (t.decided || !am_tracker(t)) return;
    const Proc me = self();
    Outcome o;
    // A cancel, or the tracker's own deadline, decides for everyone.
    for (const auto& [p, w] : t.withdrawn) {
        o.status = w.second;
        decide(t, std::move(o));
        return;
    }
    if (t.kind == PgOp::Kind::destruct) {
        const PGroup* g = find(t.name);
        if (!g) return;
        std::vector<Proc> failed;
        for (const Proc& p : g->members) {
            if (t.contribs.count(p)) continue;
            if (!gone(p)) return;  // still to call
            failed.push_back(p);
        }
        o.failed = failed;
        o.status = failed.empty() || (g->flags & WEFT_GROUP_NOTIFY_TERMINATION) ? WEFT_OK : WEFT_ERR_PEER_FAILED;
        decide(t, std::move(o));
        return;
    }
    // Construct: the leaders, from our own call if we made one.
    const Contribution* mine = nullptr;
    auto mi = t.contribs.find(me);
    if (mi != t.contribs.end() && mi->second.leader) mine = &mi->second;
    const Contribution* ref = mine;
    for (const auto& [p, c] : t.contribs)
        if (!ref && c.leader) ref = &c;
    if (!ref) return;
    const std::vector<Proc>& leaders = ref->leaders;
    std::vector<Proc> expected = leaders;
    uint32_t flags = 0;
    const std::vector<Proc>* order = nullptr;
    // Disagreements are decided like everything else, once every live
    // participant any leader named has called: a decision before that
    // could not reach those still to call.
    const char* bad = nullptr;
    for (const auto& [p, c] : t.contribs) {
        if (!c.leader) continue;
        if (c.leaders != leaders || !contains(leaders, p)) {
            bad = "leaders name different leaders";
            expected.insert(expected.end(), c.leaders.begin(), c.leaders.end());
            expected.push_back(p);
        }
        expected.insert(expected.end(), c.add_members.begin(), c.add_members.end());
        flags |= c.flags;
        if (!c.order.empty()) {
            if (order && *order != c.order) bad = "leaders give different final orders";
            order = &c.order;
        }
    }
    expected = sorted_unique(std::move(expected));
    // New tracker: ask those we have not heard from (they may have sent to
    // the one that is gone, or already have its outcome).
    bool takeover = false;
    for (const Proc& p : leaders) {
        if (p == me) break;
        if (gone(p)) takeover = true;
    }
    std::vector<Proc> lost, members;
    for (const Proc& p : expected) {
        if (t.departed.count(p)) continue;
        const bool in = t.contribs.count(p) != 0;
        if (!in && !gone(p)) {
            if (takeover && p != me && !t.queried.count(p)) {
                t.queried.insert(p);
                Writer w = message(uint8_t(Type::query), uint8_t(t.kind), t.name, uint64_t(0));
                send(peer_of(p), w.b);
            }
            continue;
        }
        if (!in || gone(p)) {
            lost.push_back(p);
            continue;
        }
        members.push_back(p);
    }
    // Still waiting for a live participant (or a leader that may name more).
    for (const Proc& p : expected)
        if (!t.departed.count(p) && !t.contribs.count(p) && !gone(p)) return;
    if (bad) {
        WEFT_LOG(error, "group %s: %s", t.name.c_str(), bad);
        o.status = WEFT_ERR_BAD_PARAM;
        decide(t, std::move(o));
        return;
    }
    for (const Proc& p : lost)
        if (!t.contribs.count(p) && !(flags & WEFT_GROUP_FT_COLLECTIVE)) {
            WEFT_LOG(debug, "group %s: job %u rank %u lost before contributing: abort", t.name.c_str(), p.job, p.rank);
            o.status = WEFT_ERR_CONSTRUCT_ABORT;
            o.failed = lost;
            decide(t, std::move(o));
            return;
        }
    if (order) {
        std::vector<Proc> intended;
        for (const Proc& p : expected)
            if (!t.departed.count(p)) intended.push_back(p);
        if (sorted_unique(*order) != intended || order->size() != intended.size()) {
            WEFT_LOG(error, "group %s: the final order does not list exactly the members", t.name.c_str());
            o.status = WEFT_ERR_BAD_PARAM;
            decide(t, std::move(o));
            return;
        }
        std::vector<Proc> ordered;
        for (const Proc& p : *order)
            if (contains(members, p)) ordered.push_back(p);
        members = std::move(ordered);
    }
    o.members = members;
    for (const Proc& p : members) o.infos.push_back(t.contribs[p].info);
    o.failed = lost;
    o.departed.assign(t.departed.begin(), t.departed.end());
    o.flags = flags;
    if (flags & WEFT_GROUP_ASSIGN_CONTEXT_ID) {
        // Unique in the launch while the group lives, with no allocator: bit
        // 63 (job communicators never set it), the tracker's universe index
        // and its own counter.
        o.context_id = group_context_id(rt_.self_universe(), next_cid_++);
        if (next_cid_ == 0) next_cid_ = 1;
    }
    o.status = WEFT_OK;
    decide(t, std::move(o));
}

void ProcessGroups::decide(Track& t, Outcome o) {
    WEFT_LOG(debug, "group %s: %s decided: %s, %zu members", t.name.c_str(),
             t.kind == PgOp::Kind::construct ? "construct" : "destruct", weft_strerror(o.status), o.members.size());
    t.decided = std::move(o);
    t.expires = Deadline::after_ns(keep_track_ns);
    WEFT_FAULT_POINT("group.tracker.decided");
    for (const auto& [p, c] : t.contribs) send_result(t, p, c.nonce, c.peer);
    for (const auto& [p, w] : t.withdrawn)
        if (!t.contribs.count(p)) send_result(t, p, w.first, peer_of(p));
}

std::vector<uint8_t> ProcessGroups::encode_result(PgOp::Kind kind, const std::string& name, uint64_t nonce,
                                                  const Outcome& o, Type type) const {
    Writer w = message(uint8_t(type), uint8_t(kind), name, nonce);
    w.put(int32_t(o.status));
    w.put(o.context_id);
    w.put(o.flags);
    w.procs(o.members);
    for (const auto& info : o.infos) w.bytes(info.data(), info.size());
    w.procs(o.failed);
    w.procs(o.departed);
    return std::move(w.b);
}

void ProcessGroups::send_result(const Track& t, Proc to, uint64_t nonce, uint32_t peer) {
    if (to == self()) {
        PgOp* op = op_for(t.kind, t.name);
        if (op && op->nonce == nonce) apply(*op, *t.decided);
        return;
    }
    send(peer, encode_result(t.kind, t.name, nonce, *t.decided));
}

// ------------------------------------------------------------ messages
void ProcessGroups::send(uint32_t peer, const std::vector<uint8_t>& bytes) {
    if (gone(peer)) return;
    Status st = rt_.backend().am_send(peer, am_pgroup, bytes.data(), bytes.size());
    // A failed send means the peer is failing: its death is handled there.
    if (st != WEFT_OK) WEFT_LOG(debug, "group message to peer %u not sent: %s", peer, weft_strerror(st));
}

void ProcessGroups::on_msg(void* arg, uint32_t source_peer, const void* payload, size_t len) {
    // Handlers only queue (one can run inside a send); pump() acts.
    auto* self = static_cast<ProcessGroups*>(arg);
    const auto* p = static_cast<const uint8_t*>(payload);
    self->inbox_.push_back(Msg{source_peer, std::vector<uint8_t>(p, p + len)});
}

void ProcessGroups::on_peer_gone(void* arg, uint32_t peer, bool) {
    auto* self = static_cast<ProcessGroups*>(arg);
    if (peer < self->gone_.size()) self->gone_[peer] = 1;
    self->deaths_ = true;
}

uint32_t ProcessGroups::on_progress(void* arg) {
    auto* self = static_cast<ProcessGroups*>(arg);
    // Most polls have nothing to do here: one inline check.
    if (self->inbox_.empty() && self->ops_.empty() && !self->open_tracks_ && !self->deaths_) return 0;
    return self->pump();
}

uint32_t ProcessGroups::pump() {
    uint32_t n = 0;
    if (!inbox_.empty()) {
        std::vector<Msg> msgs;
        msgs.swap(inbox_);
        for (const Msg& m : msgs) handle(m);
        n += static_cast<uint32_t>(msgs.size());
    }
    if (deaths_) {
        deaths_ = false;
        notice_deaths();
    }
    for (size_t i = 0; i < ops_.size(); ++i) advance(*ops_[i]);
    open_tracks_ = 0;
    for (auto it = tracks_.begin(); it != tracks_.end();) {
        Track& t = it->second;
        if (!t.decided) step(t);
        if (!t.decided) ++open_tracks_;
        // Gone once its outcome is old, or nobody here ever called for it.
        const bool ours = op_for(t.kind, t.name) != nullptr;
        if (!ours && t.expires.passed())
            it = tracks_.erase(it);
        else
            ++it;
    }
    for (auto it = added_.begin(); it != added_.end();)
        it = it->second.second.passed() ? added_.erase(it) : std::next(it);
    for (auto it = invitations_.begin(); it != invitations_.end();)
        it = it->second.expires.passed() ? invitations_.erase(it) : std::next(it);
    for (auto it = hellos_.begin(); it != hellos_.end();) {
        auto& hs = it->second;
        hs.erase(std::remove_if(hs.begin(), hs.end(), [](const Hello& h) { return h.expires.passed(); }), hs.end());
        it = hs.empty() ? hellos_.erase(it) : std::next(it);
    }
    deliver_events();
    return n;
}

void ProcessGroups::notice_deaths() {
    // A live group built with NOTIFY_TERMINATION reports a member's death
    // when it is known, once.
    for (auto& [name, g] : groups_) {
        if (!(g.flags & WEFT_GROUP_NOTIFY_TERMINATION)) continue;
        for (const Proc& p : g.members)
            if (p != self() && gone(p) && g.reported_failed.insert(p).second)
                raise(WEFT_GROUP_EVENT_MEMBER_FAILED, name, p);
    }
}

void ProcessGroups::tell_left(const PGroup& g, Proc leaver) {
    Writer w = message(uint8_t(Type::left), uint8_t(PgOp::Kind::construct), g.name, uint64_t(0));
    w.procs({leaver});
    for (const Proc& p : g.members)
        if (p != self() && p != leaver && !gone(p)) send(peer_of(p), w.b);
}

void ProcessGroups::drop_leaver(const std::string& name, Proc leaver) {
    auto g = groups_.find(name);
    if (g == groups_.end() && op_for(PgOp::Kind::construct, name)) {
        // The leaver had the construct's outcome before us (across hosts
        // its LEFT can overtake the tracker's RESULT): keep it for apply().
        WEFT_LOG(debug, "group %s: job %u rank %u left before our construct completed", name.c_str(), leaver.job,
                 leaver.rank);
        early_left_[name].insert(leaver);
        return;
    }
    if (g != groups_.end()) {
        auto& mem = g->second.members;
        auto it = std::find(mem.begin(), mem.end(), leaver);
        if (it != mem.end()) {
            g->second.infos.erase(g->second.infos.begin() + (it - mem.begin()));
            mem.erase(it);
            raise(WEFT_GROUP_EVENT_LEFT, name, leaver);
        }
    }
    auto t = tracks_.find({uint8_t(PgOp::Kind::destruct), name});
    if (t != tracks_.end() && !t->second.decided) {
        t->second.contribs.erase(leaver);
        step(t->second);
    }
}

void ProcessGroups::handle(const Msg& m) {
    Reader r{m.bytes.data(), m.bytes.size()};
    const auto type = static_cast<Type>(r.get<uint8_t>());
    const auto kind = static_cast<PgOp::Kind>(r.get<uint8_t>());
    const std::vector<uint8_t> nb = r.bytes();
    const uint64_t nonce = r.get<uint64_t>();
    const std::string name(nb.begin(), nb.end());
    const Proc from{rt_.peer(m.peer).job, rt_.peer(m.peer).rank};
    auto bad = [&] {
        WEFT_LOG(error, "group message (type %u) from peer %u is corrupted or truncated (%zu bytes): dropped",
                 unsigned(type), m.peer, m.bytes.size());
    };
    if (!r.ok || name.empty() || name.size() >= WEFT_GROUP_NAME_MAX ||
        (kind != PgOp::Kind::construct && kind != PgOp::Kind::destruct))
        return bad();
    switch (type) {
        case Type::contrib: {
            Contribution c;
            c.peer = m.peer;
            c.nonce = nonce;
            c.leader = r.get<uint8_t>() != 0;
            c.flags = r.get<uint32_t>();
            c.leaders = r.procs();
            c.add_members = r.procs();
            c.order = r.procs();
            c.info = r.bytes();
            c.invite_nonce = r.get<uint64_t>();
            if (!r.ok) return bad();
            take(track(kind, name), from, std::move(c));
            return;
        }
        case Type::added: {
            std::vector<Proc> leaders = r.procs();
            if (!r.ok) return bad();
            PgOp* op = op_for(PgOp::Kind::construct, name);
            if (op && !op->leader) {
                if (op->tracker == UINT32_MAX) {
                    op->leaders = std::move(leaders);
                    contribute(*op);
                }
            } else if (!op) {
                // Not called yet: kept until we call (or for a while).
                added_[name] = {std::move(leaders), Deadline::after_ns(keep_track_ns)};
            }
            return;
        }
        case Type::result: {
            Outcome o;
            o.status = static_cast<Status>(r.get<int32_t>());
            o.context_id = r.get<uint64_t>();
            o.flags = r.get<uint32_t>();
            o.members = r.procs();
            for (size_t i = 0; i < o.members.size() && r.ok; ++i) o.infos.push_back(r.bytes());
            o.failed = r.procs();
            o.departed = r.procs();
            if (!r.ok || o.status < WEFT_OK || o.status > WEFT_ERR_LAST_) return bad();
            if (nonce == 0) {
                // A participant's answer to our QUERY: the old tracker's
                // outcome, which we adopt and pass on.
                auto it = tracks_.find({uint8_t(kind), name});
                if (it != tracks_.end() && !it->second.decided) decide(it->second, std::move(o));
                return;
            }
            PgOp* op = op_for(kind, name);
            if (op && op->nonce == nonce) apply(*op, o);
            return;
        }
        case Type::withdraw: {
            const int32_t why = r.get<int32_t>();
            if (!r.ok) return bad();
            if (why <= WEFT_OK || why > WEFT_ERR_LAST_) return bad();
            withdrawn_by(track(kind, name), from, nonce, static_cast<Status>(why));
            return;
        }
        case Type::query: {
            if (PgOp* op = op_for(kind, name)) {
                if (op->tracker != UINT32_MAX) contribute(*op);
                return;
            }
            Outcome o;
            if (kind == PgOp::Kind::construct) {
                const PGroup* g = find(name);
                if (!g) return;  // not called yet: we contribute when we do
                o.members = g->members;
                o.infos = g->infos;
                o.context_id = g->context_id;
                o.flags = g->flags;
            } else {
                auto it = std::find_if(destructed_.rbegin(), destructed_.rend(),
                                       [&](const auto& d) { return d.first == name; });
                if (it == destructed_.rend()) return;
                o.status = it->second;
            }
            send(m.peer, encode_result(kind, name, 0, o));
            return;
        }
        case Type::hello: {
            const uint32_t count = r.get<uint32_t>();
            const bool reply = r.get<uint8_t>() != 0;
            if (!r.ok || count == 0 || kind != PgOp::Kind::construct) return bad();
            on_hello(name, from, m.peer, nonce, count, reply);
            return;
        }
        case Type::bye: {
            // That leader's bootstrap ended: its HELLO must not count for a
            // later construct of the name.
            auto it = hellos_.find(name);
            if (it == hellos_.end()) return;
            auto& hs = it->second;
            hs.erase(std::remove_if(hs.begin(), hs.end(),
                                    [&](const Hello& h) { return h.proc == from && h.nonce == nonce; }),
                     hs.end());
            if (hs.empty()) hellos_.erase(it);
            return;
        }
        case Type::invite: {
            const uint32_t flags = r.get<uint32_t>();
            std::vector<Proc> invitees = r.procs();
            if (!r.ok || kind != PgOp::Kind::construct || !contains(invitees, self())) return bad();
            invitations_[name] =
                Invitation{from, from, nonce, flags, 0, std::move(invitees), Deadline::after_ns(keep_track_ns)};
            raise(WEFT_GROUP_EVENT_INVITED, name, from);
            return;
        }
        case Type::vote: {
            const uint32_t round = r.get<uint32_t>();
            const uint8_t vote = r.get<uint8_t>();
            const bool reply = r.get<uint8_t>() != 0;
            const uint64_t voter_nonce = r.get<uint64_t>();
            if (!r.ok || kind != PgOp::Kind::construct || vote < vote_nominate || vote > vote_pending) return bad();
            on_vote(name, from, m.peer, nonce, round, vote, reply, voter_nonce);
            return;
        }
        case Type::selected: {
            const bool has_leader = r.get<uint8_t>() != 0;
            const Proc leader{r.get<uint32_t>(), r.get<uint32_t>()};
            const uint32_t round = r.get<uint32_t>();
            if (!r.ok || kind != PgOp::Kind::construct) return bad();
            on_selected(name, nonce, has_leader, leader, round);
            return;
        }
        case Type::decline: {
            auto it = tracks_.find({uint8_t(PgOp::Kind::construct), name});
            if (it == tracks_.end() || !it->second.invite || it->second.invite_nonce != nonce) return;
            Track& t = it->second;
            if (t.decided || !contains(t.invitees, from)) return;
            WEFT_LOG(debug, "group %s: job %u rank %u declined", name.c_str(), from.job, from.rank);
            t.declined.insert(from);
            step(t);
            return;
        }
        case Type::left: {
            const std::vector<Proc> who = r.procs();
            if (!r.ok || who.size() != 1) return bad();
            drop_leaver(name, who[0]);
            return;
        }
    }
    bad();
}

}  // namespace weft::group
