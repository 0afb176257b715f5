// api.cpp — the C ABI of weft.h over the C++ runtime (the context's life,
// weft_init and weft_finalize, is context/'s).
//
// Every entry validates its handle and arguments, turns any C++ exception
// into a status (none may cross into C), and logs where it rejects input.
// The RMA entries are the hot path: the checks are a few compares on data
// already in the window's first cache lines, then one call through the
// window's bound RmaOps.
#include "transport/api_entry.hpp"
#include "transport/runtime.hpp"

#include <cstring>
#include <new>

using weft::guarded;
using weft::Runtime;
using weft::Status;

namespace {

namespace api = weft::api;

// Common checks for an RMA access of len bytes at offset of rank's region.
// `proc_null`: the target failed and weft_window_validate recognised it;
// the operation does nothing and returns WEFT_OK.
inline Status check_access(weft_window_t w, uint32_t rank, uint64_t offset, size_t len, const char* fn,
                           bool& proc_null) {
    if (__builtin_expect(rank >= w->nranks, 0))
        return WEFT_FAIL(WEFT_ERR_INVALID_RANK, "%s: rank %u outside window of %u ranks", fn, rank, w->nranks);
    const uint64_t size = w->remote[rank].size;
    if (__builtin_expect(len > size || offset > size - len, 0))
        return WEFT_FAIL(WEFT_ERR_OUT_OF_RANGE, "%s: [%llu, +%zu) outside rank %u's %llu-byte region", fn,
                         static_cast<unsigned long long>(offset), len, rank, static_cast<unsigned long long>(size));
    if (__builtin_expect(w->rt->peer_failed(rank), 0)) {
        proc_null = rank < w->proc_null.size() && w->proc_null[rank];
        if (proc_null) return WEFT_OK;
        return WEFT_FAIL(WEFT_ERR_PEER_FAILED, "%s: rank %u has failed", fn, rank);
    }
    return WEFT_OK;
}

inline Status check_atomic(weft_window_t w, uint32_t rank, uint64_t offset, uint64_t* old, const char* fn,
                           bool& proc_null) {
    if (__builtin_expect(!old, 0)) return WEFT_FAIL(WEFT_ERR_INVALID_ARG, "%s: old_value is NULL", fn);
    if (__builtin_expect((offset & 7) != 0, 0))
        return WEFT_FAIL(WEFT_ERR_UNALIGNED, "%s: offset %llu is not 8-byte aligned", fn,
                         static_cast<unsigned long long>(offset));
    return check_access(w, rank, offset, 8, fn, proc_null);
}

}  // namespace

extern "C" {

weft_status_t weft_rank(weft_context_t ctx, uint32_t* rank) {
    Runtime* rt = nullptr;
    if (Status st = api::live(ctx, rt, __func__)) return st;
    if (Status st = api::not_null(rank, "rank", __func__)) return st;
    *rank = rt->rank();
    return WEFT_OK;
}

weft_status_t weft_size(weft_context_t ctx, uint32_t* size) {
    Runtime* rt = nullptr;
    if (Status st = api::live(ctx, rt, __func__)) return st;
    if (Status st = api::not_null(size, "size", __func__)) return st;
    *size = rt->size();
    return WEFT_OK;
}

weft_status_t weft_job_id(weft_context_t ctx, uint32_t* job) {
    Runtime* rt = nullptr;
    if (Status st = api::live(ctx, rt, __func__)) return st;
    if (Status st = api::not_null(job, "job", __func__)) return st;
    *job = rt->job();
    return WEFT_OK;
}

weft_status_t weft_universe_size(weft_context_t ctx, uint32_t* n) {
    Runtime* rt = nullptr;
    if (Status st = api::live(ctx, rt, __func__)) return st;
    if (Status st = api::not_null(n, "n", __func__)) return st;
    *n = rt->universe_size();
    return WEFT_OK;
}

weft_status_t weft_peer_lookup(weft_context_t ctx, uint32_t job, uint32_t rank, uint32_t* peer) {
    Runtime* rt = nullptr;
    if (Status st = api::live(ctx, rt, __func__)) return st;
    if (Status st = api::not_null(peer, "peer", __func__)) return st;
    const auto& sizes = rt->bootstrap().job_sizes();
    if (job >= sizes.size() || rank >= sizes[job])
        return WEFT_FAIL(WEFT_ERR_INVALID_RANK, "weft_peer_lookup: no job %u rank %u", job, rank);
    *peer = rt->peer_of_universe(rt->bootstrap().universe_index(job, rank));
    return WEFT_OK;
}

weft_status_t weft_peer_identity(weft_context_t ctx, uint32_t peer, uint32_t* job, uint32_t* rank) {
    Runtime* rt = nullptr;
    if (Status st = api::live(ctx, rt, __func__)) return st;
    if (Status st = api::not_null(job, "job", __func__)) return st;
    if (Status st = api::not_null(rank, "rank", __func__)) return st;
    if (peer >= rt->universe_size())
        return WEFT_FAIL(WEFT_ERR_INVALID_RANK, "weft_peer_identity: peer %u >= universe %u", peer,
                         rt->universe_size());
    *job = rt->peer(peer).job;
    *rank = rt->peer(peer).rank;
    return WEFT_OK;
}

weft_status_t weft_query_caps(weft_context_t ctx, weft_caps_t* caps) {
    Runtime* rt = nullptr;
    if (Status st = api::live(ctx, rt, __func__)) return st;
    if (Status st = api::not_null(caps, "caps", __func__)) return st;
    rt->backend().query_caps(*caps);
    return WEFT_OK;
}

weft_status_t weft_window_allocate(weft_context_t ctx, size_t size, void** base_out, weft_window_t* win_out) {
    Runtime* rt = nullptr;
    if (Status st = api::live(ctx, rt, __func__)) return st;
    weft::RuntimeLock lock(*rt);
    if (Status st = api::not_null(base_out, "base_out", __func__)) return st;
    if (Status st = api::not_null(win_out, "win_out", __func__)) return st;
    return guarded([&]() -> Status {
        weft_window* w = nullptr;
        Status st = rt->window_create(true, nullptr, size, w);
        if (st != WEFT_OK) return st;
        *base_out = w->local_base;
        *win_out = w;
        return WEFT_OK;
    });
}

weft_status_t weft_window_register(weft_context_t ctx, void* base, size_t size, weft_window_t* win_out) {
    Runtime* rt = nullptr;
    if (Status st = api::live(ctx, rt, __func__)) return st;
    weft::RuntimeLock lock(*rt);
    if (Status st = api::not_null(win_out, "win_out", __func__)) return st;
    if (!base && size > 0) return WEFT_FAIL(WEFT_ERR_INVALID_ARG, "weft_window_register: base is NULL");
    return guarded([&]() -> Status {
        weft_window* w = nullptr;
        Status st = rt->window_create(false, base, size, w);
        if (st != WEFT_OK) return st;
        *win_out = w;
        return WEFT_OK;
    });
}

weft_status_t weft_window_free(weft_window_t win) {
    if (Status st = api::live(win, __func__)) return st;
    weft::RuntimeLock lock(*win->rt);
    return guarded([&]() -> Status { return win->rt->window_free(win); });
}

weft_status_t weft_state_window(weft_context_t ctx, weft_window_t* win_out) {
    Runtime* rt = nullptr;
    if (Status st = api::live(ctx, rt, __func__)) return st;
    if (Status st = api::not_null(win_out, "win_out", __func__)) return st;
    *win_out = rt->state_window();
    return WEFT_OK;
}

weft_status_t weft_window_local(weft_window_t win, void** base, size_t* size) {
    if (Status st = api::live(win, __func__)) return st;
    if (Status st = api::not_null(base, "base", __func__)) return st;
    if (Status st = api::not_null(size, "size", __func__)) return st;
    *base = win->local_base;
    *size = win->local_size;
    return WEFT_OK;
}

weft_status_t weft_put(weft_window_t win, uint32_t rank, uint64_t offset, const void* src, size_t len) {
    if (Status st = api::live(win, __func__)) return st;
    weft::RuntimeLock lock(*win->rt);
    if (__builtin_expect(!src && len, 0)) return WEFT_FAIL(WEFT_ERR_INVALID_ARG, "weft_put: src is NULL");
    bool proc_null = false;
    Status st = check_access(win, rank, offset, len, __func__, proc_null);
    if (__builtin_expect(st != WEFT_OK || proc_null, 0)) return st;
    if (len == 0) return WEFT_OK;
    return win->ops->put(win, rank, offset, src, len);
}

weft_status_t weft_get(weft_window_t win, uint32_t rank, uint64_t offset, void* dst, size_t len) {
    if (Status st = api::live(win, __func__)) return st;
    weft::RuntimeLock lock(*win->rt);
    if (__builtin_expect(!dst && len, 0)) return WEFT_FAIL(WEFT_ERR_INVALID_ARG, "weft_get: dst is NULL");
    bool proc_null = false;
    Status st = check_access(win, rank, offset, len, __func__, proc_null);
    if (__builtin_expect(st != WEFT_OK || proc_null, 0)) return st;
    if (len == 0) return WEFT_OK;
    return win->ops->get(win, rank, offset, dst, len);
}

weft_status_t weft_atomic_fetch_add(weft_window_t win, uint32_t rank, uint64_t offset, uint64_t value,
                                    uint64_t* old_value) {
    if (Status st = api::live(win, __func__)) return st;
    weft::RuntimeLock lock(*win->rt);
    bool proc_null = false;
    Status st = check_atomic(win, rank, offset, old_value, __func__, proc_null);
    if (__builtin_expect(st != WEFT_OK || proc_null, 0)) return st;
    return win->ops->fetch_add(win, rank, offset, value, old_value);
}

weft_status_t weft_atomic_compare_swap(weft_window_t win, uint32_t rank, uint64_t offset, uint64_t expected,
                                       uint64_t desired, uint64_t* old_value) {
    if (Status st = api::live(win, __func__)) return st;
    weft::RuntimeLock lock(*win->rt);
    bool proc_null = false;
    Status st = check_atomic(win, rank, offset, old_value, __func__, proc_null);
    if (__builtin_expect(st != WEFT_OK || proc_null, 0)) return st;
    return win->ops->compare_swap(win, rank, offset, expected, desired, old_value);
}

weft_status_t weft_atomic_swap(weft_window_t win, uint32_t rank, uint64_t offset, uint64_t value, uint64_t* old_value) {
    if (Status st = api::live(win, __func__)) return st;
    weft::RuntimeLock lock(*win->rt);
    bool proc_null = false;
    Status st = check_atomic(win, rank, offset, old_value, __func__, proc_null);
    if (__builtin_expect(st != WEFT_OK || proc_null, 0)) return st;
    return win->ops->swap(win, rank, offset, value, old_value);
}

weft_status_t weft_flush(weft_window_t win, uint32_t rank) {
    if (Status st = api::live(win, __func__)) return st;
    weft::RuntimeLock lock(*win->rt);
    if (rank != WEFT_RANK_ALL && rank >= win->nranks)
        return WEFT_FAIL(WEFT_ERR_INVALID_RANK, "weft_flush: rank %u outside window of %u ranks", rank, win->nranks);
    return guarded([&]() -> Status {
        weft::Runtime& rt = *win->rt;
        // A failed target: its operations cannot be known complete (unless
        // validated: PROC_NULL, nothing to complete).
        if (rank != WEFT_RANK_ALL && rt.peer_failed(rank)) {
            if (rank < win->proc_null.size() && win->proc_null[rank]) return WEFT_OK;
            return WEFT_FAIL(WEFT_ERR_PEER_FAILED, "weft_flush: rank %u has failed", rank);
        }
        Status st = rt.backend().flush(*win, rank);
        if (rank != WEFT_RANK_ALL) return st;
        // Every live target completed; a target that failed since the last
        // flush of all is reported now, once (docs/fault-tolerance.md: RMA errors at
        // the next synchronisation; operations to live targets still complete).
        if (win->failure_reported.size() != win->nranks) win->failure_reported.assign(win->nranks, 0);
        for (uint32_t r = 0; r < win->nranks; ++r) {
            if (!rt.peer_failed(r) || win->failure_reported[r] || (r < win->proc_null.size() && win->proc_null[r]))
                continue;
            win->failure_reported[r] = 1;
            st = WEFT_FAIL(WEFT_ERR_PEER_FAILED,
                           "weft_flush: rank %u failed (its operations since the last flush are lost)", r);
        }
        return st;
    });
}

weft_status_t weft_am_register(weft_context_t ctx, uint32_t id, weft_am_handler_t handler, void* arg) {
    Runtime* rt = nullptr;
    if (Status st = api::live(ctx, rt, __func__)) return st;
    weft::RuntimeLock lock(*rt);
    return rt->am_register(id, handler, arg);
}

weft_status_t weft_am_send(weft_context_t ctx, uint32_t peer, uint32_t id, const void* payload, size_t len) {
    Runtime* rt = nullptr;
    if (Status st = api::live(ctx, rt, __func__)) return st;
    weft::RuntimeLock lock(*rt);
    if (__builtin_expect(peer >= rt->universe_size(), 0))
        return WEFT_FAIL(WEFT_ERR_INVALID_RANK, "weft_am_send: peer %u >= universe %u", peer, rt->universe_size());
    if (__builtin_expect(id >= WEFT_AM_MAX_HANDLERS, 0))
        return WEFT_FAIL(WEFT_ERR_INVALID_ARG, "weft_am_send: id %u >= %u", id, WEFT_AM_MAX_HANDLERS);
    if (__builtin_expect(len == 0, 0)) return WEFT_FAIL(WEFT_ERR_MSG_SIZE, "weft_am_send: zero-length message");
    if (__builtin_expect(len > WEFT_AM_MAX_SIZE, 0))
        return WEFT_FAIL(WEFT_ERR_MSG_SIZE, "weft_am_send: %zu bytes exceeds the %zu-byte maximum", len,
                         WEFT_AM_MAX_SIZE);
    if (__builtin_expect(!payload, 0)) return WEFT_FAIL(WEFT_ERR_INVALID_ARG, "weft_am_send: payload is NULL");
    if (__builtin_expect(rt->peer_failed(peer), 0))
        return WEFT_FAIL(WEFT_ERR_PEER_FAILED, "weft_am_send: peer %u has failed", peer);
    return guarded([&]() -> Status { return rt->backend().am_send(peer, id, payload, len); });
}

weft_status_t weft_progress(weft_context_t ctx, uint32_t* events) {
    Runtime* rt = nullptr;
    if (Status st = api::live(ctx, rt, __func__)) return st;
    weft::RuntimeLock lock(*rt);
    return guarded([&]() -> Status {
        uint32_t n = rt->progress();
        if (events) *events = n;
        return WEFT_OK;
    });
}

weft_status_t weft_wait(weft_context_t ctx, uint64_t timeout_ns) {
    Runtime* rt = nullptr;
    if (Status st = api::live(ctx, rt, __func__)) return st;
    weft::RuntimeLock lock(*rt);
    return guarded([&]() -> Status { return rt->wait(timeout_ns); });
}

weft_status_t weft_set_peer_failure_handler(weft_context_t ctx, weft_peer_failure_handler_t handler, void* arg) {
    Runtime* rt = nullptr;
    if (Status st = api::live(ctx, rt, __func__)) return st;
    weft::RuntimeLock lock(*rt);
    rt->set_failure_handler(handler, arg);
    return WEFT_OK;
}

weft_status_t weft_event_register(weft_context_t ctx, weft_event_t event, weft_event_handler_t handler, void* arg,
                                  uint64_t* id) {
    Runtime* rt = nullptr;
    if (Status st = api::live(ctx, rt, __func__)) return st;
    if (Status st = api::not_null(handler, "handler", __func__)) return st;
    if (Status st = api::not_null(id, "id", __func__)) return st;
    if (event != WEFT_EVENT_PROC_FAILED)
        return WEFT_FAIL(WEFT_ERR_INVALID_ARG, "weft_event_register: unknown event %d", static_cast<int>(event));
    weft::RuntimeLock lock(*rt);
    *id = rt->event_register(event, handler, arg);
    return WEFT_OK;
}

weft_status_t weft_event_deregister(weft_context_t ctx, uint64_t id) {
    Runtime* rt = nullptr;
    if (Status st = api::live(ctx, rt, __func__)) return st;
    weft::RuntimeLock lock(*rt);
    if (!rt->event_deregister(id))
        return WEFT_FAIL(WEFT_ERR_NOT_FOUND, "weft_event_deregister: no registration %llu",
                         static_cast<unsigned long long>(id));
    return WEFT_OK;
}

weft_status_t weft_peer_failed(weft_context_t ctx, uint32_t peer, int* failed) {
    Runtime* rt = nullptr;
    if (Status st = api::live(ctx, rt, __func__)) return st;
    if (Status st = api::not_null(failed, "failed", __func__)) return st;
    if (peer >= rt->universe_size())
        return WEFT_FAIL(WEFT_ERR_INVALID_RANK, "weft_peer_failed: peer %u >= universe %u", peer, rt->universe_size());
    *failed = rt->peer_failed(peer) ? 1 : 0;
    return WEFT_OK;
}

weft_status_t weft_bootstrap_barrier(weft_context_t ctx) {
    Runtime* rt = nullptr;
    if (Status st = api::live(ctx, rt, __func__)) return st;
    weft::RuntimeLock lock(*rt);
    return guarded([&]() -> Status { return rt->bootstrap().barrier(rt->op_deadline()); });
}

void weft_fault_point(const char* name) {
    if (name) WEFT_FAULT_POINT(name);
}

}  // extern "C"
