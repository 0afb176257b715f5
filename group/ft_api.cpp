// ft_api.cpp — the C ABI of weft/ft.h over group/ft.
//
// Entry points validate handles and arguments (a clear status and a log
// line), take the context's lock when it is MULTIPLE, and turn exceptions
// into statuses, as group/api.cpp does.
#include "group/api_entry.hpp"
#include "group/ft.hpp"
#include "transport/backend.hpp"

#include <weft/ft.h>

#include <algorithm>
#include <cstring>
#include <unordered_map>

using weft::guarded;
using weft::Status;
using weft::group::Comm;
using weft::group::Engine;
using weft::group::failed_in;
using weft::group::Ft;
using weft::group::FtComm;
using weft::group::routed;
using weft::group::shrink_tag;
using weft::group::survivors_of;

namespace {

// A thread's view of one communicator's sets: prefix lengths of the
// append-only L and G orders at its last two validate calls. FAILED_NEW is
// [prev, cur) of them; so each thread sees each new failure once.
struct Cursor {
    size_t l_prev = 0, l_cur = 0, g_prev = 0, g_cur = 0;
    std::weak_ptr<const FtComm> of;
};
// Keyed by FtComm::serial (unique in the process, never reused).
thread_local std::unordered_map<uint64_t, Cursor> cursors;

// This thread's cursor for f (the caller holds the context's lock). A new
// one first drops the cursors of communicators freed or rebuilt since
// (their sets are gone, or have a new serial), so a thread that validates
// many short-lived communicators keeps only the live ones' cursors.
Cursor& cursor_of(const FtComm& f) {
    auto it = cursors.find(f.serial);
    if (it != cursors.end()) return it->second;
    for (auto i = cursors.begin(); i != cursors.end();) {
        const std::shared_ptr<const FtComm> c = i->second.of.lock();
        i = !c || c->serial != i->first ? cursors.erase(i) : std::next(i);
    }
    Cursor& cur = cursors[f.serial];
    cur.of = f.weak_from_this();
    return cur;
}

struct Target {
    Comm* c = nullptr;
    Engine* eng = nullptr;
    Ft* ft = nullptr;
};

Status target_of(weft_comm_t h, Target& t, const char* fn) {
    if (Status st = weft::group::live_comm(h, t.c, fn)) return st;
    t.eng = t.c->engine;
    t.ft = Ft::of(*t.eng);
    if (!t.ft) return WEFT_FAIL(WEFT_ERR_NOT_INITIALIZED, "%s: the context has no fault-tolerance layer", fn);
    return WEFT_OK;
}

// Every entry's common part: the communicator's FT state, the context's
// lock (MULTIPLE), exceptions turned into statuses.
template <typename F>
Status with_target(weft_comm_t h, const char* fn, F&& body) {
    Target t;
    Status st = target_of(h, t, fn);
    if (st != WEFT_OK) return st;
    weft::RuntimeLock lock(t.eng->rt());
    return guarded([&]() -> Status { return body(t); });
}

using weft::api::raw;

// The agreement value: a flag, then the members this rank knows failed.
std::vector<uint64_t> value_of(const FtComm& f, uint32_t size, uint64_t flag) {
    return weft::group::agree_value(f, size, flag);
}

// L = G = the agreed set (it contains our L: our contribution is in it).
void adopt_global(FtComm& f, const Comm& c, const std::vector<uint64_t>& v) {
    for (uint32_t r = 0; r < c.size; ++r) {
        if (r == c.rank || !failed_in(v, r)) continue;
        if (!f.in_g[r]) {
            f.in_g[r] = 1;
            f.g_order.push_back(r);
        }
        if (!f.in_l[r]) {
            f.in_l[r] = 1;
            f.l_order.push_back(r);
        }
    }
}

// Builds the communicator of `members` (ranks of t.c, identical on every
// survivor) and agrees on whether every survivor did: either all get it
// (out) or none does (a member died meanwhile; the status says why).
Status build_agreed(Target& t, const std::vector<uint32_t>& members, Comm*& out) {
    FtComm& f = t.ft->state(*t.c);
    // The list's first member names the context ID.
    out = nullptr;
    Status s = t.eng->registry().create_from_ranks(*t.c, members.data(), static_cast<uint32_t>(members.size()),
                                                   shrink_tag(f), out);
    // A member dying while the communicator is built can fail the build at
    // some members only: agree on the outcome.
    std::vector<uint64_t> ok = value_of(f, t.c->size, s == WEFT_OK ? 1 : 0);
    Status as = t.ft->agree(*t.c, ok, weft::group::AgreeFor::built);
    if (as == WEFT_OK && ok[0] == 1) return WEFT_OK;
    if (out) t.eng->registry().free_comm(*out);
    out = nullptr;
    if (as != WEFT_OK) return as;
    return s == WEFT_OK ? WEFT_ERR_PEER_FAILED : s;
}

// The seed's model: once G holds failures, collectives on the communicator
// run over its survivors — a hidden communicator of the members not in G,
// rebuilt when G grows (group/api.cpp redirects to Comm::survivors).
Status rebuild_survivors(Target& t) {
    Comm& c = *t.c;
    FtComm& f = t.ft->state(c);
    if (f.g_order.empty() || f.survivors_for == f.g_order.size()) return WEFT_OK;
    if (c.survivors) {
        t.eng->registry().free_comm(*c.survivors);
        c.survivors = nullptr;
    }
    std::vector<uint32_t> members;
    for (uint32_t r = 0; r < c.size; ++r)
        if (!f.in_g[r]) members.push_back(r);
    Comm* out = nullptr;
    Status s = build_agreed(t, members, out);
    if (s != WEFT_OK)
        return WEFT_FAIL(s, "validate_global: the survivors' communicator could not be built (validate again)");
    c.survivors = out;
    f.survivors_for = f.g_order.size();
    return WEFT_OK;
}

}  // namespace

size_t weft::group::Ft::thread_cursors() { return cursors.size(); }

// validate_global's work, without the error handler (weft_window_validate
// calls it too, and routes its failure once).
static Status validate_global(weft_comm_t comm, uint32_t* num_failed, uint32_t* num_new, const char* fn) {
    return with_target(comm, fn, [&](Target& t) -> Status {
        uint32_t total = 0, added = 0;
        t.ft->update_local(*t.c, total, added);
        FtComm& f = t.ft->state(*t.c);
        std::vector<uint64_t> v = value_of(f, t.c->size, 1);
        Status s = t.ft->agree(*t.c, v, weft::group::AgreeFor::validate);
        if (s != WEFT_OK) return s;
        adopt_global(f, *t.c, v);
        // After validate_global L = G = the cleared set (docs/fault-tolerance.md).
        for (uint32_t r : f.g_order) t.ft->clear(*t.c, f, r);
        s = rebuild_survivors(t);
        if (s != WEFT_OK) return s;
        Cursor& cur = cursor_of(f);
        cur.l_prev = cur.l_cur;
        cur.l_cur = f.l_order.size();
        cur.g_prev = cur.g_cur;
        cur.g_cur = f.g_order.size();
        if (num_failed) *num_failed = static_cast<uint32_t>(f.l_order.size());
        if (num_new) *num_new = static_cast<uint32_t>(cur.l_cur - cur.l_prev);
        return WEFT_OK;
    });
}

extern "C" {

weft_status_t weft_comm_validate_local(weft_comm_t comm, uint32_t* num_failed, uint32_t* num_new) {
    const char* fn = __func__;
    return routed(comm, fn, [&]() -> Status {
        return with_target(comm, fn, [&](Target& t) -> Status {
            uint32_t total = 0, added = 0;
            t.ft->update_local(*t.c, total, added);
            FtComm& f = t.ft->state(*t.c);
            Cursor& cur = cursor_of(f);
            cur.l_prev = cur.l_cur;
            cur.l_cur = f.l_order.size();
            if (num_failed) *num_failed = total;
            // This thread's news: another thread's validate may have added some.
            if (num_new) *num_new = static_cast<uint32_t>(cur.l_cur - cur.l_prev);
            return WEFT_OK;
        });
    });
}

weft_status_t weft_comm_validate_global(weft_comm_t comm, uint32_t* num_failed, uint32_t* num_new) {
    const char* fn = __func__;
    return routed(comm, fn, [&]() -> Status { return validate_global(comm, num_failed, num_new, fn); });
}

weft_status_t weft_comm_get_failed(weft_comm_t comm, weft_failed_set_t which, weft_failed_kind_t kind, uint32_t* ranks,
                                   size_t capacity, size_t* count) {
    const char* fn = __func__;
    return routed(comm, fn, [&]() -> Status {
        if (!count) return WEFT_FAIL(WEFT_ERR_INVALID_ARG, "%s: count is NULL", fn);
        const int w = raw(which), k = raw(kind);
        if (w < WEFT_FAILED_LOCAL || w > WEFT_FAILED_UNCLEARED)
            return WEFT_FAIL(WEFT_ERR_INVALID_ARG, "%s: set %d is not a WEFT_FAILED_* set", fn, w);
        if (k != WEFT_FAILED_ALL && k != WEFT_FAILED_NEW)
            return WEFT_FAIL(WEFT_ERR_INVALID_ARG, "%s: kind %d is neither WEFT_FAILED_ALL nor WEFT_FAILED_NEW", fn, k);
        if (w >= WEFT_FAILED_CLEARED && k != WEFT_FAILED_ALL)
            return WEFT_FAIL(WEFT_ERR_INVALID_ARG, "%s: the cleared / uncleared sets take WEFT_FAILED_ALL only", fn);
        if (!ranks && capacity)
            return WEFT_FAIL(WEFT_ERR_INVALID_ARG, "%s: ranks is NULL with capacity %zu", fn, capacity);
        return with_target(comm, fn, [&](Target& t) -> Status {
            FtComm& f = t.ft->state(*t.c);
            const Cursor& cur = cursor_of(f);
            std::vector<uint32_t> out;
            if (w == WEFT_FAILED_CLEARED || w == WEFT_FAILED_UNCLEARED) {
                // The thread's L, split by the per-rank state.
                for (size_t i = 0; i < cur.l_cur; ++i)
                    if ((f.cleared[f.l_order[i]] != 0) == (w == WEFT_FAILED_CLEARED)) out.push_back(f.l_order[i]);
            } else {
                const std::vector<uint32_t>& order = w == WEFT_FAILED_LOCAL ? f.l_order : f.g_order;
                const size_t end = w == WEFT_FAILED_LOCAL ? cur.l_cur : cur.g_cur;
                const size_t begin = k == WEFT_FAILED_ALL ? 0 : (w == WEFT_FAILED_LOCAL ? cur.l_prev : cur.g_prev);
                out.assign(order.begin() + static_cast<ptrdiff_t>(begin), order.begin() + static_cast<ptrdiff_t>(end));
            }
            const size_t n = out.size();
            *count = n;                  // the size needed, also when the buffer is too small
            if (!ranks) return WEFT_OK;  // (NULL, 0): a size query
            if (n > capacity)
                return WEFT_FAIL(WEFT_ERR_TRUNCATE, "%s: room for %zu ranks, %zu needed (*count says so)", fn, capacity,
                                 n);
            std::sort(out.begin(), out.end());
            std::copy(out.begin(), out.end(), ranks);
            return WEFT_OK;
        });
    });
}

weft_status_t weft_comm_validate_clear(weft_comm_t comm, const uint32_t* ranks, size_t n) {
    const char* fn = __func__;
    return routed(comm, fn, [&]() -> Status {
        if (!ranks && n) return WEFT_FAIL(WEFT_ERR_INVALID_ARG, "%s: ranks is NULL with %zu ranks", fn, n);
        return with_target(comm, fn, [&](Target& t) -> Status {
            FtComm& f = t.ft->state(*t.c);
            // All or nothing: check every rank first.
            for (size_t i = 0; i < n; ++i) {
                if (ranks[i] >= t.c->size)
                    return WEFT_FAIL(WEFT_ERR_INVALID_RANK, "%s: rank %u outside a communicator of %u", fn, ranks[i],
                                     t.c->size);
                if (!f.in_l[ranks[i]])
                    return WEFT_FAIL(WEFT_ERR_INVALID_ARG, "%s: rank %u is not in L (not known failed: validate first)",
                                     fn, ranks[i]);
            }
            for (size_t i = 0; i < n; ++i) t.ft->clear(*t.c, f, ranks[i]);
            return WEFT_OK;
        });
    });
}

weft_status_t weft_comm_rank_states(weft_comm_t comm, const uint32_t* ranks, size_t n, weft_rank_state_t* states) {
    const char* fn = __func__;
    return routed(comm, fn, [&]() -> Status {
        if (n && (!ranks || !states)) return WEFT_FAIL(WEFT_ERR_INVALID_ARG, "%s: ranks or states is NULL", fn);
        return with_target(comm, fn, [&](Target& t) -> Status {
            FtComm& f = t.ft->state(*t.c);
            for (size_t i = 0; i < n; ++i)
                if (ranks[i] >= t.c->size)
                    return WEFT_FAIL(WEFT_ERR_INVALID_RANK, "%s: rank %u outside a communicator of %u", fn, ranks[i],
                                     t.c->size);
            for (size_t i = 0; i < n; ++i)
                states[i] = !f.in_l[ranks[i]]     ? WEFT_RANK_OK
                            : f.cleared[ranks[i]] ? WEFT_RANK_CLEARED
                                                  : WEFT_RANK_FAILED;
            return WEFT_OK;
        });
    });
}

weft_status_t weft_comm_agree(weft_comm_t comm, int* flag) {
    const char* fn = __func__;
    return routed(comm, fn, [&]() -> Status {
        if (!flag) return WEFT_FAIL(WEFT_ERR_INVALID_ARG, "%s: flag is NULL", fn);
        return with_target(comm, fn, [&](Target& t) -> Status {
            uint32_t total = 0, added = 0;
            // Our contribution names what the detector knows now, not only L
            // (L changes only in validate calls; the contribution is not L).
            t.ft->update_local(*t.c, total, added);
            FtComm& f = t.ft->state(*t.c);
            std::vector<uint64_t> v = value_of(f, t.c->size, static_cast<uint32_t>(*flag));
            Status s = t.ft->agree(*t.c, v, weft::group::AgreeFor::agree);
            if (s != WEFT_OK) return s;
            // Uniform: every survivor compares the same agreed set with the
            // same G (G changes only in validate_global, itself uniform).
            return weft::group::agree_outcome(f, *t.c, v, flag);
        });
    });
}

weft_status_t weft_comm_iagree(weft_comm_t comm, int* flag, weft_request_t* req) {
    const char* fn = __func__;
    return routed(comm, fn, [&]() -> Status {
        if (!flag) return WEFT_FAIL(WEFT_ERR_INVALID_ARG, "%s: flag is NULL", fn);
        if (!req) return WEFT_FAIL(WEFT_ERR_INVALID_ARG, "%s: req is NULL", fn);
        return with_target(comm, fn, [&](Target& t) -> Status {
            weft::group::Request* r = nullptr;
            Status s = t.ft->iagree(*t.c, flag, r);
            if (s != WEFT_OK) return s;
            *req = weft::group::handle_of(r);
            return WEFT_OK;
        });
    });
}

weft_status_t weft_comm_revoke(weft_comm_t comm) {
    const char* fn = __func__;
    return routed(comm, fn, [&]() -> Status {
        return with_target(comm, fn, [&](Target& t) -> Status {
            if (t.c->world)
                WEFT_LOG(info,
                         "weft_comm_revoke: revoking the world communicator (only shrink, agree and validate work on "
                         "it now)");
            t.ft->revoke(*t.c);
            return WEFT_OK;
        });
    });
}

weft_status_t weft_comm_is_revoked(weft_comm_t comm, int* flag) {
    const char* fn = __func__;
    return routed(comm, fn, [&]() -> Status {
        if (!flag) return WEFT_FAIL(WEFT_ERR_INVALID_ARG, "%s: flag is NULL", fn);
        return with_target(comm, fn, [&](Target& t) -> Status {
            t.eng->poll();  // a notice may be waiting
            *flag = t.c->revoked ? 1 : 0;
            return WEFT_OK;
        });
    });
}

weft_status_t weft_comm_shrink(weft_comm_t comm, weft_comm_t* newcomm) {
    const char* fn = __func__;
    return routed(comm, fn, [&]() -> Status {
        if (!newcomm) return WEFT_FAIL(WEFT_ERR_INVALID_ARG, "%s: newcomm is NULL", fn);
        return with_target(comm, fn, [&](Target& t) -> Status {
            const weft::Deadline d = t.eng->rt().op_deadline();
            // Ends: the new communicator, an agreement's error (each has the
            // deadline), or a failed build past the deadline d.
            for (uint32_t attempt = 0;; ++attempt) {
                uint32_t total = 0, added = 0;
                t.ft->update_local(*t.c, total, added);
                FtComm& f = t.ft->state(*t.c);
                std::vector<uint64_t> v = value_of(f, t.c->size, 1);
                Status s = t.ft->agree(*t.c, v, weft::group::AgreeFor::shrink);
                if (s != WEFT_OK) return s;
                const std::vector<uint32_t> survivors = survivors_of(*t.c, v);
                if (failed_in(v, t.c->rank))
                    return WEFT_FAIL(WEFT_ERR_PEER_FAILED, "%s: the survivors agreed this process failed", fn);
                // Either every survivor returns the new communicator or all try
                // again (the failure is then in the next agreement's set).
                Comm* out = nullptr;
                s = build_agreed(t, survivors, out);
                if (s == WEFT_OK) {
                    *newcomm = weft::group::new_comm_handle(*t.eng, out, comm);
                    return WEFT_OK;
                }
                if ((s != WEFT_ERR_PEER_FAILED && s != WEFT_ERR_TIMEOUT) || d.passed())
                    return WEFT_FAIL(s, "%s: building the shrunk communicator failed (attempt %u)", fn, attempt);
                WEFT_LOG(info, "%s: a member failed while the communicator was built; agreeing again", fn);
            }
        });
    });
}
weft_status_t weft_comm_ishrink(weft_comm_t comm, weft_comm_t* newcomm, weft_request_t* req) {
    const char* fn = __func__;
    return routed(comm, fn, [&]() -> Status {
        if (!newcomm) return WEFT_FAIL(WEFT_ERR_INVALID_ARG, "%s: newcomm is NULL", fn);
        if (!req) return WEFT_FAIL(WEFT_ERR_INVALID_ARG, "%s: req is NULL", fn);
        return with_target(comm, fn, [&](Target& t) -> Status {
            // The handle is made when the survivors have the communicator.
            weft::group::Request* r = nullptr;
            Status s = t.ft->ishrink(*t.c, newcomm, r);
            if (s != WEFT_OK) return s;
            *req = weft::group::handle_of(r);
            return WEFT_OK;
        });
    });
}

weft_status_t weft_window_validate(weft_window_t win, weft_comm_t comm, uint32_t* num_failed) {
    if (!win || win->magic != weft_window::live_magic)
        return weft::group::route_error(
            comm, WEFT_FAIL(WEFT_ERR_NOT_INITIALIZED, "%s: window is null or freed", __func__), __func__);
    // G first (collective, fault tolerant), then the window learns it.
    uint32_t total = 0, added = 0;
    Status st = validate_global(comm, &total, &added, __func__);
    if (st == WEFT_OK)
        st = with_target(comm, __func__, [&](Target& t) -> Status {
            if (win->rt != &t.eng->rt())
                return WEFT_FAIL(WEFT_ERR_INVALID_ARG,
                                 "%s: the window and the communicator belong to different contexts", __func__);
            for (uint32_t m : t.c->members)
                if (m >= win->nranks)
                    return WEFT_FAIL(WEFT_ERR_INVALID_RANK,
                                     "%s: job rank %u of the communicator is outside the window's %u ranks", __func__,
                                     m, win->nranks);
            FtComm& f = t.ft->state(*t.c);
            if (win->proc_null.size() != win->nranks) win->proc_null.assign(win->nranks, 0);
            for (uint32_t r : f.g_order) win->proc_null[t.c->members[r]] = 1;
            if (num_failed)
                *num_failed =
                    static_cast<uint32_t>(std::count(win->proc_null.begin(), win->proc_null.end(), uint8_t(1)));
            return WEFT_OK;
        });
    return weft::group::route_error(comm, st, __func__);
}

}  // extern "C"
