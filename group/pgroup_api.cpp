// pgroup_api.cpp — the C ABI of weft/group.h over group/pgroup.
//
// Entry points validate the context, the name and every argument (a clear
// status and a log line), take the context's lock, and turn exceptions
// into statuses, as the other api files do. A non-blocking operation's
// handle names the operation by its nonce, so a stale or finalized handle
// is recognised, never dereferenced.
#include "group/ft.hpp"
#include "group/pgroup.hpp"
#include "transport/api_entry.hpp"

#include <weft/group.h>
#include <weft/version.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

using weft::guarded;
using weft::Runtime;
using weft::RuntimeLock;
using weft::Status;
using weft::group::PgOp;
using weft::group::Proc;
using weft::group::ProcessGroups;

struct weft_group_op {
    static constexpr uint64_t live_magic = 0x5745465447524f50ull;
    uint64_t magic = live_magic;
    weft_context_t ctx = nullptr;
    uint64_t nonce = 0;
};

namespace {

Status live_groups(weft_context_t ctx, Runtime*& rt, ProcessGroups*& pg, const char* fn) {
    if (Status st = weft::api::live(ctx, rt, fn)) return st;
    pg = ProcessGroups::of(*rt);
    if (!pg) return WEFT_FAIL(WEFT_ERR_NOT_INITIALIZED, "%s: the group layer is not up", fn);
    return WEFT_OK;
}

Status check_name(const char* name, const char* fn);

// The one shape of an entry on a context's groups: the context, the name
// (when the call takes one), then the lock and body(rt, pg) with no
// exception crossing into C.
template <typename Body>
Status with_groups(weft_context_t ctx, const char* name, bool named, const char* fn, Body&& body) {
    Runtime* rt = nullptr;
    ProcessGroups* pg = nullptr;
    if (Status st = live_groups(ctx, rt, pg, fn)) return st;
    if (named)
        if (Status st = check_name(name, fn)) return st;
    // From an event handler: this thread is inside weft's progress and holds
    // the lock already (join_nb from the INVITED handler is the seed's way).
    if (ProcessGroups::on_handler_thread()) return guarded([&]() -> Status { return body(*rt, *pg); });
    RuntimeLock lock(*rt);
    return guarded([&]() -> Status { return body(*rt, *pg); });
}

Status check_name(const char* name, const char* fn) {
    if (!name) return WEFT_FAIL(WEFT_ERR_INVALID_ARG, "%s: group name is NULL", fn);
    const size_t n = strnlen(name, WEFT_GROUP_NAME_MAX);
    if (n == 0) return WEFT_FAIL(WEFT_ERR_INVALID_ARG, "%s: group name is empty", fn);
    if (n >= WEFT_GROUP_NAME_MAX)
        return WEFT_FAIL(WEFT_ERR_INVALID_ARG, "%s: group name is longer than %d bytes", fn, WEFT_GROUP_NAME_MAX - 1);
    return WEFT_OK;
}

Status procs_of(const weft_proc_t* p, size_t n, const char* what, const char* fn, std::vector<Proc>& out) {
    if (n && !p) return WEFT_FAIL(WEFT_ERR_INVALID_ARG, "%s: %s is NULL with a count of %zu", fn, what, n);
    if (n > (1u << 24)) return WEFT_FAIL(WEFT_ERR_INVALID_ARG, "%s: %s has %zu entries", fn, what, n);
    out.resize(n);
    for (size_t i = 0; i < n; ++i) out[i] = Proc{p[i].job, p[i].rank};
    return WEFT_OK;
}

Status no_handler_blocking(ProcessGroups& pg, const char* fn) {
    if (!pg.in_handler()) return WEFT_OK;
    return WEFT_FAIL(WEFT_ERR_WOULD_BLOCK, "%s: a blocking call from a group event handler; use the _nb form", fn);
}

Status construct_args(const char* name, const weft_proc_t* procs, size_t nprocs, const weft_group_options_t* opts,
                      ProcessGroups::ConstructArgs& a, const char* fn) {
    if (Status st = check_name(name, fn)) return st;
    a.name = name;
    if (Status st = procs_of(procs, nprocs, "procs", fn, a.procs)) return st;
    if (!opts) return WEFT_OK;
    const uint32_t known =
        WEFT_GROUP_ASSIGN_CONTEXT_ID | WEFT_GROUP_FT_COLLECTIVE | WEFT_GROUP_NOTIFY_TERMINATION | WEFT_GROUP_OPTIONAL;
    if (opts->flags & ~known) return WEFT_FAIL(WEFT_ERR_INVALID_ARG, "%s: unknown flags %#x", fn, opts->flags & ~known);
    a.flags = opts->flags;
    a.timeout_ms = opts->timeout_ms;
    a.bootstrap = opts->bootstrap_leaders;
    if (a.bootstrap && !procs)
        return WEFT_FAIL(WEFT_ERR_INVALID_ARG, "%s: a bootstrap leader passes itself in procs (NULL given)", fn);
    if (Status st = procs_of(opts->add_members, opts->n_add_members, "add_members", fn, a.add_members)) return st;
    if (Status st = procs_of(opts->final_order, opts->n_final_order, "final_order", fn, a.order)) return st;
    if (opts->info_len > WEFT_GROUP_INFO_MAX)
        return WEFT_FAIL(WEFT_ERR_INVALID_ARG, "%s: info of %zu bytes is over WEFT_GROUP_INFO_MAX", fn, opts->info_len);
    if (opts->info_len && !opts->info)
        return WEFT_FAIL(WEFT_ERR_INVALID_ARG, "%s: info is NULL with a length of %zu", fn, opts->info_len);
    if (opts->info_len) {
        const auto* b = static_cast<const uint8_t*>(opts->info);
        a.info.assign(b, b + opts->info_len);
    }
    if (opts->n_expand_groups && !opts->expand_groups)
        return WEFT_FAIL(WEFT_ERR_INVALID_ARG, "%s: expand_groups is NULL with a count of %zu", fn,
                         opts->n_expand_groups);
    for (size_t i = 0; i < opts->n_expand_groups; ++i) {
        if (Status st = check_name(opts->expand_groups[i], fn)) return st;
        a.expand.emplace_back(opts->expand_groups[i]);
    }
    return WEFT_OK;
}

weft_group_op_t new_op_handle(weft_context_t ctx, uint64_t nonce) {
    auto* h = new weft_group_op;
    h->ctx = ctx;
    h->nonce = nonce;
    return h;
}

// A live op handle's op, or a status (a freed handle or a finalized
// context); the caller holds the lock.
Status op_of(weft_group_op_t h, ProcessGroups*& pg, PgOp*& op, const char* fn) {
    if (!h || h->magic != weft_group_op::live_magic)
        return WEFT_FAIL(WEFT_ERR_INVALID_ARG, "%s: operation handle is null or already completed", fn);
    Runtime* rt = weft::runtime_of(h->ctx);
    pg = rt ? ProcessGroups::of(*rt) : nullptr;
    if (!pg) return WEFT_FAIL(WEFT_ERR_NOT_INITIALIZED, "%s: the operation's context is finalized", fn);
    op = pg->op_by_nonce(h->nonce);
    if (!op) return WEFT_FAIL(WEFT_ERR_NOT_FOUND, "%s: no such operation", fn);
    return WEFT_OK;
}

void release_handle(weft_group_op_t* h) {
    (*h)->magic = 0;
    delete *h;
    *h = nullptr;
}

// A query on a constructed group: body(group).
template <typename Body>
Status on_group(weft_context_t ctx, const char* name, const char* fn, Body&& body) {
    return with_groups(ctx, name, true, fn, [&](Runtime& rt, ProcessGroups& pg) -> Status {
        rt.progress();  // a LEFT or an outcome may be waiting
        const weft::group::PGroup* g = pg.find(name);
        if (!g) return WEFT_FAIL(WEFT_ERR_NOT_FOUND, "%s: this process is not in a group %s", fn, name);
        return body(*g);
    });
}

// The end of every call that starts an operation: the non-blocking form
// (op) gets its handle; the blocking one waits (not from a handler).
Status started_or_waited(weft_context_t ctx, ProcessGroups& pg, PgOp* o, weft_group_op_t* op) {
    if (op) {
        *op = new_op_handle(ctx, o->nonce);
        return WEFT_OK;
    }
    return pg.wait(*o);
}

// construct and invite, blocking (op null) or not.
Status build_entry(weft_context_t ctx, const char* name, const weft_proc_t* procs, size_t nprocs,
                   const weft_group_options_t* opts, weft_group_op_t* op, bool invite, const char* fn) {
    if (op) *op = nullptr;
    return with_groups(ctx, name, false, fn, [&](Runtime&, ProcessGroups& pg) -> Status {
        ProcessGroups::ConstructArgs a;
        if (Status st = construct_args(name, procs, nprocs, opts, a, fn)) return st;
        if (!op)
            if (Status st = no_handler_blocking(pg, fn)) return st;
        PgOp* o = nullptr;
        if (Status st = invite ? pg.start_invite(std::move(a), o) : pg.start_construct(std::move(a), o)) return st;
        return started_or_waited(ctx, pg, o, op);
    });
}

}  // namespace

extern "C" {

weft_status_t weft_group_construct_nb(weft_context_t ctx, const char* name, const weft_proc_t* procs, size_t nprocs,
                                      const weft_group_options_t* opts, weft_group_op_t* op) {
    if (Status st = weft::api::not_null(op, "op", __func__)) return st;
    return build_entry(ctx, name, procs, nprocs, opts, op, false, __func__);
}

weft_status_t weft_group_construct(weft_context_t ctx, const char* name, const weft_proc_t* procs, size_t nprocs,
                                   const weft_group_options_t* opts) {
    return build_entry(ctx, name, procs, nprocs, opts, nullptr, false, __func__);
}

namespace {
Status destruct_entry(weft_context_t ctx, const char* name, uint32_t timeout_ms, weft_group_op_t* op, const char* fn) {
    if (op) *op = nullptr;
    return with_groups(ctx, name, true, fn, [&](Runtime&, ProcessGroups& pg) -> Status {
        if (!op)
            if (Status st = no_handler_blocking(pg, fn)) return st;
        PgOp* o = nullptr;
        if (Status st = pg.start_destruct(name, timeout_ms, o)) return st;
        return started_or_waited(ctx, pg, o, op);
    });
}
}  // namespace

weft_status_t weft_group_destruct_nb(weft_context_t ctx, const char* name, uint32_t timeout_ms, weft_group_op_t* op) {
    if (Status st = weft::api::not_null(op, "op", __func__)) return st;
    return destruct_entry(ctx, name, timeout_ms, op, __func__);
}

weft_status_t weft_group_destruct(weft_context_t ctx, const char* name, uint32_t timeout_ms) {
    return destruct_entry(ctx, name, timeout_ms, nullptr, __func__);
}

weft_status_t weft_group_invite_nb(weft_context_t ctx, const char* name, const weft_proc_t* procs, size_t nprocs,
                                   const weft_group_options_t* opts, weft_group_op_t* op) {
    if (Status st = weft::api::not_null(op, "op", __func__)) return st;
    return build_entry(ctx, name, procs, nprocs, opts, op, true, __func__);
}

weft_status_t weft_group_invite(weft_context_t ctx, const char* name, const weft_proc_t* procs, size_t nprocs,
                                const weft_group_options_t* opts) {
    return build_entry(ctx, name, procs, nprocs, opts, nullptr, true, __func__);
}

namespace {
// join and join_nb: the answer; op (null for the blocking form) gets the
// accepted join's handle, or a handle already complete for a decline.
Status join_entry(weft_context_t ctx, const char* name, weft_proc_t leader, int accept,
                  const weft_group_options_t* opts, weft_group_op_t* op, const char* fn) {
    return with_groups(ctx, name, true, fn, [&](Runtime&, ProcessGroups& pg) -> Status {
        if (opts && opts->info_len > WEFT_GROUP_INFO_MAX)
            return WEFT_FAIL(WEFT_ERR_INVALID_ARG, "%s: info of %zu bytes is over WEFT_GROUP_INFO_MAX", fn,
                             opts->info_len);
        if (opts && opts->info_len && !opts->info)
            return WEFT_FAIL(WEFT_ERR_INVALID_ARG, "%s: info is NULL with a length of %zu", fn, opts->info_len);
        if (!op && accept)
            if (Status st = no_handler_blocking(pg, fn)) return st;
        std::vector<uint8_t> info;
        if (opts && opts->info_len) {
            const auto* b = static_cast<const uint8_t*>(opts->info);
            info.assign(b, b + opts->info_len);
        }
        PgOp* o = nullptr;
        if (Status st = pg.join(name, Proc{leader.job, leader.rank}, accept != 0, std::move(info),
                                opts ? opts->timeout_ms : 0, o))
            return st;
        if (!o) {
            if (op) *op = nullptr;  // declined: nothing in flight
            return WEFT_OK;
        }
        return started_or_waited(ctx, pg, o, op);
    });
}
}  // namespace

weft_status_t weft_group_join_nb(weft_context_t ctx, const char* name, weft_proc_t leader, int accept,
                                 const weft_group_options_t* opts, weft_group_op_t* op) {
    const char* fn = __func__;
    if (Status st = weft::api::not_null(op, "op", fn)) return st;
    *op = nullptr;
    return join_entry(ctx, name, leader, accept, opts, op, fn);
}

weft_status_t weft_group_join(weft_context_t ctx, const char* name, weft_proc_t leader, int accept,
                              const weft_group_options_t* opts) {
    return join_entry(ctx, name, leader, accept, opts, nullptr, __func__);
}

weft_status_t weft_group_leave(weft_context_t ctx, const char* name) {
    return with_groups(ctx, name, true, __func__,
                       [&](Runtime&, ProcessGroups& pg) -> Status { return pg.leave(name); });
}

weft_status_t weft_group_comm(weft_context_t ctx, const char* name, weft_comm_t* comm) {
    const char* fn = __func__;
    if (Status st = weft::api::not_null(comm, "comm", fn)) return st;
    *comm = nullptr;
    return with_groups(ctx, name, true, fn, [&](Runtime&, ProcessGroups& pg) -> Status {
        if (Status st = no_handler_blocking(pg, fn)) return st;
        weft::group::Comm* c = nullptr;
        if (Status st = pg.make_comm(name, c)) return st;
        *comm = weft::group::new_comm_handle(pg.engine(), c, nullptr);
        return WEFT_OK;
    });
}

weft_status_t weft_group_nominate(weft_context_t ctx, const char* name) {
    return with_groups(ctx, name, true, __func__,
                       [&](Runtime&, ProcessGroups& pg) -> Status { return pg.nominate(name); });
}

weft_status_t weft_group_abort(weft_context_t ctx, const char* name) {
    return with_groups(ctx, name, true, __func__,
                       [&](Runtime&, ProcessGroups& pg) -> Status { return pg.abort_construct(name); });
}

weft_status_t weft_group_op_test(weft_group_op_t* op, int* done) {
    const char* fn = __func__;
    if (Status st = weft::api::not_null(op, "op", fn)) return st;
    if (Status st = weft::api::not_null(done, "done", fn)) return st;
    *done = 0;
    Runtime* rt = (*op && (*op)->magic == weft_group_op::live_magic) ? weft::runtime_of((*op)->ctx) : nullptr;
    if (!rt) {
        ProcessGroups* pg = nullptr;
        PgOp* o = nullptr;
        return op_of(*op, pg, o, fn);  // the reason, logged
    }
    RuntimeLock lock(*rt);
    return guarded([&]() -> Status {
        ProcessGroups* pg = nullptr;
        PgOp* o = nullptr;
        if (Status st = op_of(*op, pg, o, fn)) return st;
        if (!o->done) rt->progress();
        if (!o->done) return WEFT_OK;
        *done = 1;
        release_handle(op);
        return pg->reap(*o);
    });
}

weft_status_t weft_group_op_wait(weft_group_op_t* op) {
    const char* fn = __func__;
    if (Status st = weft::api::not_null(op, "op", fn)) return st;
    Runtime* rt = (*op && (*op)->magic == weft_group_op::live_magic) ? weft::runtime_of((*op)->ctx) : nullptr;
    if (!rt) {
        ProcessGroups* pg = nullptr;
        PgOp* o = nullptr;
        return op_of(*op, pg, o, fn);
    }
    RuntimeLock lock(*rt);
    return guarded([&]() -> Status {
        ProcessGroups* pg = nullptr;
        PgOp* o = nullptr;
        if (Status st = op_of(*op, pg, o, fn)) return st;
        if (!o->done)
            if (Status st = no_handler_blocking(*pg, fn)) return st;
        release_handle(op);
        return pg->wait(*o);
    });
}

weft_status_t weft_group_op_cancel(weft_group_op_t op) {
    const char* fn = __func__;
    Runtime* rt = (op && op->magic == weft_group_op::live_magic) ? weft::runtime_of(op->ctx) : nullptr;
    if (!rt) {
        ProcessGroups* pg = nullptr;
        PgOp* o = nullptr;
        return op_of(op, pg, o, fn);
    }
    RuntimeLock lock(*rt);
    return guarded([&]() -> Status {
        ProcessGroups* pg = nullptr;
        PgOp* o = nullptr;
        if (Status st = op_of(op, pg, o, fn)) return st;
        return pg->cancel(*o);
    });
}

// ------------------------------------------------------------- queries
weft_status_t weft_group_size(weft_context_t ctx, const char* name, uint32_t* size) {
    const char* fn = __func__;
    if (Status st = weft::api::not_null(size, "size", fn)) return st;
    return on_group(ctx, name, fn, [&](const weft::group::PGroup& g) -> Status {
        *size = static_cast<uint32_t>(g.members.size());
        return WEFT_OK;
    });
}

weft_status_t weft_group_members(weft_context_t ctx, const char* name, weft_proc_t* members, size_t cap, size_t* n) {
    const char* fn = __func__;
    if (Status st = weft::api::not_null(n, "n", fn)) return st;
    if (cap && !members) return WEFT_FAIL(WEFT_ERR_INVALID_ARG, "%s: members is NULL with a capacity of %zu", fn, cap);
    return on_group(ctx, name, fn, [&](const weft::group::PGroup& g) -> Status {
        *n = g.members.size();
        for (size_t i = 0; i < cap && i < g.members.size(); ++i) members[i] = {g.members[i].job, g.members[i].rank};
        return WEFT_OK;
    });
}

weft_status_t weft_group_context_id(weft_context_t ctx, const char* name, uint64_t* id) {
    const char* fn = __func__;
    if (Status st = weft::api::not_null(id, "id", fn)) return st;
    return on_group(ctx, name, fn, [&](const weft::group::PGroup& g) -> Status {
        if (!g.context_id)
            return WEFT_FAIL(WEFT_ERR_NOT_FOUND, "%s: group %s was built without WEFT_GROUP_ASSIGN_CONTEXT_ID", fn,
                             name);
        *id = g.context_id;
        return WEFT_OK;
    });
}

weft_status_t weft_group_info(weft_context_t ctx, const char* name, uint32_t index, const void** info, size_t* len) {
    const char* fn = __func__;
    if (Status st = weft::api::not_null(info, "info", fn)) return st;
    if (Status st = weft::api::not_null(len, "len", fn)) return st;
    return on_group(ctx, name, fn, [&](const weft::group::PGroup& g) -> Status {
        if (index >= g.members.size())
            return WEFT_FAIL(WEFT_ERR_INVALID_RANK, "%s: index %u >= group size %zu", fn, index, g.members.size());
        const auto& b = g.infos[index];
        *info = b.empty() ? nullptr : b.data();
        *len = b.size();
        return WEFT_OK;
    });
}

weft_status_t weft_group_jobs(weft_context_t ctx, const char* name, weft_group_job_t* jobs, size_t cap, size_t* n) {
    const char* fn = __func__;
    if (Status st = weft::api::not_null(n, "n", fn)) return st;
    if (cap && !jobs) return WEFT_FAIL(WEFT_ERR_INVALID_ARG, "%s: jobs is NULL with a capacity of %zu", fn, cap);
    Runtime* rt = weft::runtime_of(ctx);
    return on_group(ctx, name, fn, [&](const weft::group::PGroup& g) -> Status {
        const auto& sizes = rt->bootstrap().job_sizes();
        std::map<uint32_t, uint32_t> members;  // job -> members in the group
        for (const Proc& p : g.members) ++members[p.job];
        *n = members.size();
        size_t i = 0;
        for (const auto& [job, count] : members) {
            if (i >= cap) break;
            std::set<std::string> hosts;
            for (uint32_t r = 0; r < sizes[job]; ++r)
                hosts.insert(rt->peer(rt->peer_of_universe(rt->bootstrap().universe_index(job, r))).host);
            jobs[i++] = weft_group_job_t{job, sizes[job], count, static_cast<uint32_t>(hosts.size())};
        }
        return WEFT_OK;
    });
}

weft_status_t weft_proc_node(weft_context_t ctx, weft_proc_t proc, uint32_t* node) {
    const char* fn = __func__;
    if (Status st = weft::api::not_null(node, "node", fn)) return st;
    return with_groups(ctx, nullptr, false, fn, [&](Runtime& rt, ProcessGroups&) -> Status {
        const auto& sizes = rt.bootstrap().job_sizes();
        if (proc.job >= sizes.size() || proc.rank >= sizes[proc.job])
            return WEFT_FAIL(WEFT_ERR_INVALID_RANK, "%s: no job %u rank %u in this launch", fn, proc.job, proc.rank);
        const std::string& host = rt.peer(rt.peer_of_universe(rt.bootstrap().universe_index(proc.job, proc.rank))).host;
        // Hosts numbered by their first process in universe order.
        std::vector<const std::string*> seen;
        for (uint32_t u = 0; u < rt.universe_size(); ++u) {
            const std::string& h = rt.peer(rt.peer_of_universe(u)).host;
            if (std::none_of(seen.begin(), seen.end(), [&](const std::string* x) { return *x == h; }))
                seen.push_back(&h);
            if (h == host) break;
        }
        *node = static_cast<uint32_t>(seen.size() - 1);
        return WEFT_OK;
    });
}

weft_status_t weft_group_event_register(weft_context_t ctx, weft_group_event_fn handler, void* arg, uint64_t* id) {
    const char* fn = __func__;
    if (Status st = weft::api::not_null(handler, "handler", fn)) return st;
    if (Status st = weft::api::not_null(id, "id", fn)) return st;
    return with_groups(ctx, nullptr, false, fn, [&](Runtime&, ProcessGroups& pg) -> Status {
        *id = pg.add_handler(handler, arg);
        return WEFT_OK;
    });
}

weft_status_t weft_group_event_deregister(weft_context_t ctx, uint64_t id) {
    const char* fn = __func__;
    return with_groups(ctx, nullptr, false, fn, [&](Runtime&, ProcessGroups& pg) -> Status {
        if (!pg.remove_handler(id))
            return WEFT_FAIL(WEFT_ERR_NOT_FOUND, "%s: no group event handler %llu", fn,
                             static_cast<unsigned long long>(id));
        return WEFT_OK;
    });
}

weft_status_t weft_group_ft_supported(int* present) {
    if (Status st = weft::api::not_null(present, "present", __func__)) return st;
    *present = WEFT_CAP_GROUP_FT;
    return WEFT_OK;
}

}  // extern "C"
