// snapshot.cpp — the group layer's saved state taken from the engine and
// put back into it (snapshot.hpp); the bytes are snapshot_format.cpp's.
#include "group/snapshot.hpp"

#include "group/engine.hpp"
#include "group/layer.hpp"
#include "group/snapshot_format.hpp"

#include <algorithm>
#include <cstring>

namespace weft::group {

// The format's numbers are its own; these tie them to the engine's.
static_assert(saved::send == uint8_t(ReqKind::send) && saved::recv == uint8_t(ReqKind::recv) &&
              saved::coll == uint8_t(ReqKind::coll));
static_assert(uint32_t(saved::eager) == P2p::eager && uint32_t(saved::eager_sync) == P2p::eager_sync);
static_assert(saved::max_requests == uint64_t(RequestPool::max_chunks) * RequestPool::chunk_size);
static_assert(saved::max_engine_slots == Engine::max_engines);

Status save_snapshot(Runtime& rt, const RegionMap& regions, std::vector<uint8_t>& out, SnapshotCounts& counts) {
    out.clear();
    counts = SnapshotCounts{};
    Engine* e = engine_of(rt);
    if (!e) return WEFT_OK;
    auto unsupported = [](const char* fmt, auto... args) {
        char what[160];
        std::snprintf(what, sizeof what, fmt, args...);
        return WEFT_FAIL(WEFT_ERR_UNSUPPORTED, "checkpoint: this rank holds state weft cannot save yet: %s", what);
    };
    const std::string held = unsaved_state(rt);
    if (!held.empty()) return unsupported("%s", held.c_str());
    Comm& world = e->world();
    P2p& p2p = e->p2p();
    if (p2p.early_contexts())
        return unsupported("%zu message(s) for communicators not created here yet", p2p.early_contexts());
    if (const DrainPort::Transfers t = e->drain_port().transfers(); t.pulls + t.replies + t.exposed + t.announced)
        return unsupported(
            "transfers in progress: %llu pull(s), %llu reply(ies) owed, %llu send(s) exposed, %llu "
            "rendezvous announced",
            static_cast<unsigned long long>(t.pulls), static_cast<unsigned long long>(t.replies),
            static_cast<unsigned long long>(t.exposed), static_cast<unsigned long long>(t.announced));
    for (const MatchQueue* q : {&world.coll, &world.create})
        if (!q->posted.empty() || !q->unexpected.empty())
            return unsupported("%s traffic of a collective in progress", q == &world.coll ? "collective" : "creation");

    // Requests: every live one is the program's, of a kind saved here.
    Snapshot snap;
    snap.engine_slot = e->slot();
    std::vector<int32_t> place(p2p.pool().created(), -1);  // pool index -> place in snap.requests
    Status st = WEFT_OK;
    p2p.pool().for_each([&](const Request& r) {
        if (st != WEFT_OK || r.magic != Request::live_magic) return;
        if (!r.user || r.comm != &world) {
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
        if (r.done) {
            if (r.scatter) st = unsupported("a completed survivors' allgather not yet waited for");
        } else if (r.kind == ReqKind::recv) {
            if (r.matched || r.queue != &world.p2p) {
                st = unsupported("a receive whose message is being pulled");
            } else if (r.cap) {
                if (!regions.locate || !regions.locate(regions.arg, r.buf, r.cap, q.region, q.offset))
                    st = WEFT_FAIL(WEFT_ERR_INVALID_ARG,
                                   "checkpoint: a posted receive (rank %d, tag %d, %zu bytes at %p) is in no protected "
                                   "region (weft_ckpt_region_register): a restart could not deliver into it",
                                   r.src, r.tag, r.cap, static_cast<const void*>(r.buf));
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
    for (const Request* r : world.p2p.posted) snap.posted.push_back(static_cast<uint32_t>(place[r->index]));
    for (const Unexpected& u : world.p2p.unexpected) {
        if (P2p::is_rts(u.kind)) return unsupported("a rendezvous message the drain did not pull");
        snap.messages.push_back(SavedMessage{u.src, u.tag, u.kind, u.source_peer, u.len, u.cookie, u.data.data()});
        counts.buffered_bytes += u.len;
    }
    out = encode_snapshot(snap);
    counts.requests = static_cast<uint32_t>(snap.requests.size());
    counts.posted = static_cast<uint32_t>(snap.posted.size());
    counts.buffered = static_cast<uint32_t>(snap.messages.size());
    return WEFT_OK;
}

Status check_snapshot(Runtime& rt, const uint8_t* data, size_t len, const RegionMap& regions, const char* what,
                      SnapshotCounts& counts) {
    counts = SnapshotCounts{};
    Engine* e = engine_of(rt);
    if (!e) return WEFT_FAIL(WEFT_ERR_NOT_INITIALIZED, "%s: restart: this context has no communicators", what);
    Snapshot p;
    if (Status st = parse_snapshot(data, len, e->world().size, what, p)) return st;
    if (p.engine_slot != e->slot())
        return WEFT_FAIL(WEFT_ERR_INVALID_ARG,
                         "%s: restart: the checkpoint was taken in the process's context #%u, this is #%u (make "
                         "contexts in the same order: the saved request handles name their context by it)",
                         what, p.engine_slot, e->slot());
    for (const SavedRequest& q : p.requests) {
        if ((q.flags & saved::flag_done) || q.kind != saved::recv || !q.cap) continue;
        if (!regions.resolve || !regions.resolve(regions.arg, q.region, q.offset, q.cap))
            return WEFT_FAIL(WEFT_ERR_INVALID_ARG,
                             "%s: restart: a posted receive of %llu bytes at offset %llu of region %u has no place "
                             "here (the region is not registered, or is smaller)",
                             what, static_cast<unsigned long long>(q.cap), static_cast<unsigned long long>(q.offset),
                             q.region);
    }
    // The saved state goes into a runtime that holds none of its own.
    uint64_t held = 0;
    e->p2p().pool().for_each([&](const Request& r) { held += r.magic == Request::live_magic && r.user; });
    const Comm& world = e->world();
    if (held || !world.p2p.posted.empty() || !world.p2p.unexpected.empty())
        return WEFT_FAIL(WEFT_ERR_BUSY,
                         "%s: restart: this rank already has %llu request(s) and %zu buffered message(s) on the world "
                         "(call weft_restart before any point-to-point traffic)",
                         what, static_cast<unsigned long long>(held), world.p2p.unexpected.size());
    counts.requests = static_cast<uint32_t>(p.requests.size());
    counts.posted = static_cast<uint32_t>(p.posted.size());
    counts.buffered = static_cast<uint32_t>(p.messages.size());
    for (const SavedMessage& m : p.messages) counts.buffered_bytes += m.len;
    return WEFT_OK;
}

Status restore_snapshot(Runtime& rt, const uint8_t* data, size_t len, const RegionMap& regions) {
    Engine* e = engine_of(rt);
    if (!e) return WEFT_ERR_NOT_INITIALIZED;
    Comm& world = e->world();
    Snapshot p;
    if (Status st = parse_snapshot(data, len, world.size, "restart", p)) return st;
    P2p& p2p = e->p2p();
    std::vector<Request*> made(p.requests.size(), nullptr);
    for (size_t i = 0; i < p.requests.size(); ++i) {
        const SavedRequest& q = p.requests[i];
        Request* r = p2p.adopt(q.index, static_cast<ReqKind>(q.kind), &world);
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
        made[which]->queue = &world.p2p;
        world.p2p.posted.push_back(made[which]);
    }
    for (const SavedMessage& m : p.messages) {
        Unexpected u{m.src, m.tag, m.kind, m.source_peer, m.len, m.cookie, 0, e->buffers().take(m.len)};
        if (m.len) std::memcpy(u.data.data(), m.data, m.len);
        world.p2p.unexpected.push_back(std::move(u));
    }
    return WEFT_OK;
}

}  // namespace weft::group
