// snapshot.cpp — the group layer's saved state taken from the engine and
// put back into it (snapshot.hpp); the bytes are snapshot_format.cpp's.
#include "group/snapshot.hpp"

#include "group/engine.hpp"
#include "group/errhandler.hpp"
#include "group/layer.hpp"
#include "group/pgroup.hpp"
#include "group/snapshot_format.hpp"

#include <algorithm>
#include <cstring>
#include <unordered_map>

namespace weft::group {

// The format's numbers are its own; these tie them to the engine's.
static_assert(saved::send == uint8_t(ReqKind::send) && saved::recv == uint8_t(ReqKind::recv) &&
              saved::coll == uint8_t(ReqKind::coll));
static_assert(uint32_t(saved::eager) == P2p::eager && uint32_t(saved::eager_sync) == P2p::eager_sync);
static_assert(saved::max_requests == uint64_t(RequestPool::max_chunks) * RequestPool::chunk_size);
static_assert(saved::max_engine_slots == Engine::max_engines);
static_assert(saved::clock_slots == WEFT_STATE_COMM_SLOTS && saved::no_slot == no_slot);
static_assert(saved::max_slot_use == (1u << clock_use_bits) - 1);

namespace {

// The saved communicators' places: 0 for the world, i + 1 for the i-th.
struct CommIndex {
    std::vector<const Comm*> comms;  // [0] is the world
    std::unordered_map<const Comm*, uint32_t> place;
    void add(const Comm* c) {
        place.emplace(c, static_cast<uint32_t>(comms.size()));
        comms.push_back(c);
    }
    uint32_t of(const Comm* c) const {
        auto it = place.find(c);
        return it == place.end() ? UINT32_MAX : it->second;
    }
};

}  // namespace

Status save_snapshot(Runtime& rt, const RegionMap& regions, std::vector<uint8_t>& out, SnapshotCounts& counts) {
    out.clear();
    counts = SnapshotCounts{};
    Engine* e = engine_of(rt);
    if (!e) return WEFT_OK;
    auto unsupported = [](const char* fmt, auto... args) {
        char what[192];
        std::snprintf(what, sizeof what, fmt, args...);
        return WEFT_FAIL(WEFT_ERR_UNSUPPORTED, "checkpoint: this rank holds state weft cannot save yet: %s", what);
    };
    const std::string held = unsaved_state(rt);
    if (!held.empty()) return unsupported("%s", held.c_str());
    Comm& world = e->world();
    Registry& registry = e->registry();
    P2p& p2p = e->p2p();
    if (p2p.early_contexts())
        return unsupported("%zu message(s) for communicators not created here yet", p2p.early_contexts());
    if (const DrainPort::Transfers t = e->drain_port().transfers(); t.pulls + t.replies + t.exposed + t.announced)
        return unsupported(
            "transfers in progress: %llu pull(s), %llu reply(ies) owed, %llu send(s) exposed, %llu "
            "rendezvous announced",
            static_cast<unsigned long long>(t.pulls), static_cast<unsigned long long>(t.replies),
            static_cast<unsigned long long>(t.exposed), static_cast<unsigned long long>(t.announced));

    Snapshot snap;
    snap.engine_slot = e->slot();
    snap.world_handle = world.handle->value.load(std::memory_order_relaxed);
    snap.next_context = registry.next_context();
    snap.slot_uses = registry.slot_use_table();
    if (const ProcessGroups* pg = ProcessGroups::of(rt)) {
        // unsaved_state refused groups with members of another job.
        snap.next_group_context = pg->next_context();
        for (const auto& [name, g] : pg->constructed()) {
            SavedGroup sg;
            sg.name = name;
            for (const Proc& m : g.members) sg.members.push_back(m.rank);
            sg.infos = g.infos;
            sg.context_id = g.context_id;
            sg.flags = g.flags;
            snap.groups.push_back(std::move(sg));
        }
    }
    CommIndex index;
    index.add(&world);
    for (const auto& owned : registry.comms()) {
        const Comm& c = *owned;
        if (c.world || c.stack_clock) continue;  // a stack's clock: the stack makes it again
        const auto id = static_cast<unsigned long long>(c.id);
        if (!c.handle) return unsupported("communicator %llx, which weft made for itself", id);
        if (c.freeing) return unsupported("communicator %llx, freed but not yet released", id);
        if (c.revoked || c.survivors || c.recognised)
            return unsupported("communicator %llx, revoked or with failures acknowledged on it", id);
        SavedComm sc;
        sc.handle = c.handle->value.load(std::memory_order_relaxed);
        sc.id = c.id;
        sc.rank = c.rank;
        sc.slot = c.slot;
        sc.flags = c.slots_known ? saved::comm_slots_known : 0;
        sc.members = c.members;
        sc.slots = c.slots;
        sc.slot_uses = c.slot_uses;
        snap.comms.push_back(std::move(sc));
        index.add(&c);
    }
    for (const Comm* c : index.comms)
        for (const MatchQueue* q : {&c->coll, &c->create})
            if (!q->posted.empty() || !q->unexpected.empty())
                return unsupported("%s traffic of a collective in progress on communicator %llx",
                                   q == &c->coll ? "collective" : "creation", static_cast<unsigned long long>(c->id));

    // Requests: every live one is the program's, of a kind saved here.
    std::vector<int32_t> place(p2p.pool().created(), -1);  // pool index -> place in snap.requests
    Status st = WEFT_OK;
    p2p.pool().for_each([&](const Request& r) {
        if (st != WEFT_OK || r.magic != Request::live_magic) return;
        const uint32_t comm = index.of(r.comm);
        if (!r.user || comm == UINT32_MAX) {
            st = unsupported("a request weft holds for itself (a collective, or a receive blocked on another thread)");
            return;
        }
        SavedRequest q;
        q.index = r.index;
        q.generation = r.generation;
        q.kind = static_cast<uint8_t>(r.kind);
        q.flags = (r.done ? saved::flag_done : 0) | (r.sync ? saved::flag_sync : 0);
        q.src = r.src;
        q.tag = r.tag;
        q.dest_peer = r.dest_peer;
        q.cap = r.cap;
        q.cookie = r.cookie;
        q.status = r.status;
        q.comm = comm;
        if (r.done) {
            if (r.scatter) st = unsupported("a completed survivors' allgather not yet waited for");
        } else if (r.kind == ReqKind::recv) {
            if (r.matched || r.queue != &r.comm->p2p) {
                st = unsupported("a receive whose message is being pulled");
            } else if (r.cap) {
                if (!regions.locate || !regions.locate(regions.arg, r.buf, r.cap, q.region, q.offset))
                    st = WEFT_FAIL(WEFT_ERR_INVALID_ARG,
                                   "checkpoint: a posted receive (communicator %llx, rank %d, tag %d, %zu bytes at %p) "
                                   "is in no protected region (weft_ckpt_region_register): a restart could not "
                                   "deliver into it",
                                   static_cast<unsigned long long>(r.comm->id), r.src, r.tag, r.cap,
                                   static_cast<const void*>(r.buf));
            }
        } else if (r.kind == ReqKind::send) {
            if (!r.sync || !r.cookie || r.exposed_live) st = unsupported("a send still being transferred");
        } else {
            st = unsupported("a collective in progress");
        }
        place[r.index] = static_cast<int32_t>(snap.requests.size());
        snap.requests.push_back(q);
    });
    if (st != WEFT_OK) return st;
    for (uint32_t i = 0; i < index.comms.size(); ++i) {
        const Comm& c = *index.comms[i];
        for (const Request* r : c.p2p.posted) snap.posted.push_back(static_cast<uint32_t>(place[r->index]));
        for (const Unexpected& u : c.p2p.unexpected) {
            if (P2p::is_rts(u.kind)) return unsupported("a rendezvous message the drain did not pull");
            snap.messages.push_back(
                SavedMessage{u.src, u.tag, u.kind, u.source_peer, u.len, u.cookie, u.data.data(), i});
            counts.buffered_bytes += u.len;
        }
    }
    out = encode_snapshot(snap);
    counts.requests = static_cast<uint32_t>(snap.requests.size());
    counts.posted = static_cast<uint32_t>(snap.posted.size());
    counts.buffered = static_cast<uint32_t>(snap.messages.size());
    counts.comms = static_cast<uint32_t>(snap.comms.size());
    counts.groups = static_cast<uint32_t>(snap.groups.size());
    return WEFT_OK;
}

Status check_snapshot(Runtime& rt, const uint8_t* data, size_t len, const RegionMap& regions, const char* what,
                      Snapshot& p, SnapshotCounts& counts) {
    counts = SnapshotCounts{};
    Engine* e = engine_of(rt);
    if (!e) return WEFT_FAIL(WEFT_ERR_NOT_INITIALIZED, "%s: restart: this context has no communicators", what);
    if (Status st = parse_snapshot(data, len, e->world().size, what, p)) return st;
    const Comm& world = e->world();
    const uint64_t world_handle = world.handle->value.load(std::memory_order_relaxed);
    if (p.engine_slot != e->slot() || p.world_handle != world_handle)
        return WEFT_FAIL(WEFT_ERR_INVALID_ARG,
                         "%s: restart: the checkpoint was taken in the process's context #%u (world handle %#llx), "
                         "this is #%u (%#llx): make contexts in the same order, the saved handles name their "
                         "context by it",
                         what, p.engine_slot, static_cast<unsigned long long>(p.world_handle), e->slot(),
                         static_cast<unsigned long long>(world_handle));
    for (const SavedRequest& q : p.requests) {
        if ((q.flags & saved::flag_done) || q.kind != saved::recv || !q.cap) continue;
        if (!regions.resolve || !regions.resolve(regions.arg, q.region, q.offset, q.cap))
            return WEFT_FAIL(WEFT_ERR_INVALID_ARG,
                             "%s: restart: a posted receive of %llu bytes at offset %llu of region %u has no place "
                             "here (the region is not registered, or is smaller)",
                             what, static_cast<unsigned long long>(q.cap), static_cast<unsigned long long>(q.offset),
                             q.region);
    }
    for (const SavedGroup& g : p.groups)
        if (std::find(g.members.begin(), g.members.end(), rt.rank()) == g.members.end())
            return WEFT_FAIL(WEFT_ERR_CORRUPT, "%s: restart: process group %s does not hold this rank (%u)", what,
                             g.name.c_str(), rt.rank());
    const ProcessGroups* pg = ProcessGroups::of(rt);
    if (!p.groups.empty() && !pg)
        return WEFT_FAIL(WEFT_ERR_NOT_INITIALIZED, "%s: restart: this context has no process groups", what);
    if (pg && (pg->groups() || pg->ops()))
        return WEFT_FAIL(WEFT_ERR_BUSY,
                         "%s: restart: this rank already has %zu process group(s) and %zu group operation(s) (call "
                         "weft_restart before constructing groups)",
                         what, pg->groups(), pg->ops());
    for (const SavedComm& c : p.comms)
        if (c.members[c.rank] != rt.rank())
            return WEFT_FAIL(WEFT_ERR_CORRUPT, "%s: restart: communicator %llx names job rank %u as this rank (%u)",
                             what, static_cast<unsigned long long>(c.id), c.members[c.rank], rt.rank());
    // The saved state goes into a runtime that holds none of its own.
    uint64_t held = 0;
    e->p2p().pool().for_each([&](const Request& r) { held += r.magic == Request::live_magic && r.user; });
    size_t comms = 0;  // besides the world and the stack's clocks, made again before a restart
    for (const auto& owned : e->registry().comms()) comms += !owned->world && !owned->stack_clock;
    if (held || comms || !world.p2p.posted.empty() || !world.p2p.unexpected.empty())
        return WEFT_FAIL(WEFT_ERR_BUSY,
                         "%s: restart: this rank already has %llu request(s), %zu communicator(s) besides the world "
                         "and %zu buffered message(s) (call weft_restart before making communicators or sending)",
                         what, static_cast<unsigned long long>(held), comms, world.p2p.unexpected.size());
    for (const SavedComm& c : p.comms) {
        if (!comm_place_free(c.handle))
            return WEFT_FAIL(WEFT_ERR_BUSY,
                             "%s: restart: the handle of communicator %llx (%#llx) names a communicator here already",
                             what, static_cast<unsigned long long>(c.id), static_cast<unsigned long long>(c.handle));
        if (c.slot != saved::no_slot && e->registry().slot_taken(c.slot))
            return WEFT_FAIL(WEFT_ERR_BUSY, "%s: restart: clock slot %u of communicator %llx is taken here", what,
                             c.slot, static_cast<unsigned long long>(c.id));
    }
    counts.requests = static_cast<uint32_t>(p.requests.size());
    counts.posted = static_cast<uint32_t>(p.posted.size());
    counts.buffered = static_cast<uint32_t>(p.messages.size());
    counts.comms = static_cast<uint32_t>(p.comms.size());
    counts.groups = static_cast<uint32_t>(p.groups.size());
    for (const SavedMessage& m : p.messages) counts.buffered_bytes += m.len;
    return WEFT_OK;
}

Status restore_snapshot(Runtime& rt, Snapshot& p, const RegionMap& regions) {
    Engine* e = engine_of(rt);
    if (!e) return WEFT_ERR_NOT_INITIALIZED;
    Comm& world = e->world();
    if (ProcessGroups* pg = ProcessGroups::of(rt)) {
        std::vector<PGroup> groups;
        for (SavedGroup& sg : p.groups) {
            PGroup g;
            g.name = std::move(sg.name);
            for (uint32_t m : sg.members) g.members.push_back(Proc{rt.job(), m});
            g.infos = std::move(sg.infos);
            g.context_id = sg.context_id;
            g.flags = sg.flags;
            groups.push_back(std::move(g));
        }
        pg->restore(std::move(groups), p.next_group_context);
    }
    Registry& registry = e->registry();
    registry.restore_counters(p.next_context, p.slot_uses);
    std::vector<Comm*> comms{&world};
    const weft_comm_t world_handle = comm_handle(*world.handle);
    for (SavedComm& sc : p.comms) {
        Comm* c = nullptr;
        if (Status st = registry.restore(sc.id, std::move(sc.members), std::move(sc.slots), std::move(sc.slot_uses),
                                         sc.slot, sc.flags & saved::comm_slots_known, c))
            return st;
        if (!place_comm_shell(*e, *c, sc.handle))
            return WEFT_FAIL(WEFT_ERR_BUSY, "restart: communicator %llx: its handle is taken here",
                             static_cast<unsigned long long>(sc.id));
        // Error handlers are functions of the old process: a restored
        // communicator starts with the world's, as a new one would.
        inherit_errhandler(comm_handle(*c->handle), world_handle);
        comms.push_back(c);
    }
    P2p& p2p = e->p2p();
    std::vector<Request*> made(p.requests.size(), nullptr);
    for (size_t i = 0; i < p.requests.size(); ++i) {
        const SavedRequest& q = p.requests[i];
        Request* r = p2p.adopt(q.index, static_cast<ReqKind>(q.kind), comms[q.comm]);
        if (!r)
            return WEFT_FAIL(WEFT_ERR_BUSY, "restart: request %u is in use here (weft's own traffic holds it)",
                             q.index);
        r->user = true;
        r->done = q.flags & saved::flag_done;
        r->sync = q.flags & saved::flag_sync;
        r->src = q.src;
        r->tag = q.tag;
        r->dest_peer = q.dest_peer;
        r->cap = q.cap;
        r->generation = q.generation;
        r->cookie = q.cookie;
        r->status = q.status;
        if (!r->done && r->kind == ReqKind::recv && q.cap)
            r->buf = static_cast<uint8_t*>(regions.resolve(regions.arg, q.region, q.offset, q.cap));
        made[i] = r;
    }
    for (uint32_t which : p.posted) {
        Comm& c = *comms[p.requests[which].comm];
        made[which]->queue = &c.p2p;
        c.p2p.posted.push_back(made[which]);
    }
    // Saved messages first, in their order: they arrived before anything
    // that may have come since (nothing should: every peer's new traffic
    // waits for restart's closing allreduce).
    std::vector<std::deque<Unexpected>> saved_msgs(comms.size());
    for (const SavedMessage& m : p.messages) {
        Unexpected u{m.src, m.tag, m.kind, m.source_peer, m.len, m.cookie, 0, e->buffers().take(m.len)};
        if (m.len) std::memcpy(u.data.data(), m.data, m.len);
        saved_msgs[m.comm].push_back(std::move(u));
    }
    for (size_t i = 0; i < comms.size(); ++i) {
        if (saved_msgs[i].empty()) continue;
        auto& q = comms[i]->p2p.unexpected;
        for (auto& u : q) saved_msgs[i].push_back(std::move(u));
        q = std::move(saved_msgs[i]);
    }
    return WEFT_OK;
}

}  // namespace weft::group
