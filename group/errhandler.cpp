// errhandler.cpp — per-communicator error handlers (weft/comm.h).
//
// Handlers live in a registry so that a stale or made-up handle is an
// argument error, not a crash. One mutex guards the registry, the reference
// counts and every change of a communicator's handler pointer; a call that
// succeeds never takes it, and neither does a failed one on a communicator
// with no handler or a predefined one (the pointer is atomic, predefined
// handlers never go away): a failure storm on many threads does not
// serialise on it. Only user handlers, which need a reference while they
// run, are called under it.
#include "group/errhandler.hpp"

#include "group/engine.hpp"

#include <cstdlib>
#include <mutex>
#include <unordered_set>

struct weft_errhandler weft_errors_return_ {
    weft_errhandler::Kind::returns, nullptr, nullptr, 0
};
struct weft_errhandler weft_errors_are_fatal_ {
    weft_errhandler::Kind::fatal, nullptr, nullptr, 0
};

namespace weft::group {
namespace {

std::mutex& registry_mutex() {
    static std::mutex m;
    return m;
}
std::unordered_set<weft_errhandler*>& user_handlers() {
    static std::unordered_set<weft_errhandler*> s;
    return s;
}

bool predefined(const weft_errhandler* e) { return e == &weft_errors_return_ || e == &weft_errors_are_fatal_; }
bool known(weft_errhandler* e) { return predefined(e) || user_handlers().count(e) != 0; }

// Under the registry mutex: one reference fewer; a user handler goes with
// its last.
void drop(weft_errhandler* e) {
    if (!e || predefined(e)) return;
    if (--e->refs == 0) {
        user_handlers().erase(e);
        delete e;
    }
}

// The shell of a live handle, or null.
CommShell* live(weft_comm_t comm) {
    CommShell* s = shell_of(comm);
    return s && s->magic == CommShell::live_magic && s->comm ? s : nullptr;
}

}  // namespace

Status route_failure(weft_comm_t comm, Status st, const char* fn) {
    // No handler to ask for a NULL, freed or foreign handle.
    CommShell* shell = live(comm);
    if (!shell) return st;
    weft_errhandler* e = shell->errhandler.load(std::memory_order_acquire);
    if (!e || e == &weft_errors_return_) return st;
    std::unique_lock<std::mutex> g(registry_mutex(), std::defer_lock);
    if (!predefined(e)) {
        // A user handler: look again under the mutex, which keeps it alive.
        g.lock();
        e = shell->errhandler.load(std::memory_order_relaxed);
        if (!live(comm) || !e) return st;
    }
    switch (e->kind) {
        case weft_errhandler::Kind::returns:
            return st;
        case weft_errhandler::Kind::fatal:
            WEFT_LOG(error, "%s: %s; the communicator's handler is WEFT_ERRORS_ARE_FATAL: aborting", fn,
                     weft_strerror(st));
            std::abort();
        case weft_errhandler::Kind::user:
            break;
    }
    // The handler may call weft, even set another handler or free this
    // one: it runs without the mutex, on a reference of its own.
    ++e->refs;
    g.unlock();
    weft_status_t s = st;
    e->fn(comm, &s, e->arg);
    g.lock();
    drop(e);
    return s;
}

void inherit_errhandler(weft_comm_t child, weft_comm_t parent) {
    std::lock_guard<std::mutex> g(registry_mutex());
    CommShell* c = live(child);
    CommShell* p = live(parent);
    weft_errhandler* e = c && p ? p->errhandler.load() : nullptr;
    if (!e) return;
    if (!predefined(e)) ++e->refs;
    c->errhandler.store(e, std::memory_order_release);
}

void release_errhandler(weft_comm_t comm) {
    std::lock_guard<std::mutex> g(registry_mutex());
    CommShell* s = shell_of(comm);
    if (!s) return;
    drop(s->errhandler.load());
    s->errhandler.store(nullptr, std::memory_order_release);
}

}  // namespace weft::group

using weft::Status;
using namespace weft::group;

extern "C" {

weft_status_t weft_comm_create_errhandler(weft_comm_errhandler_fn fn, void* arg, weft_errhandler_t* errhandler) {
    if (!fn) return WEFT_FAIL(WEFT_ERR_INVALID_ARG, "%s: fn is NULL", __func__);
    if (!errhandler) return WEFT_FAIL(WEFT_ERR_INVALID_ARG, "%s: errhandler is NULL", __func__);
    auto* e = new weft_errhandler{weft_errhandler::Kind::user, fn, arg, 1};
    std::lock_guard<std::mutex> g(registry_mutex());
    user_handlers().insert(e);
    *errhandler = e;
    return WEFT_OK;
}

weft_status_t weft_comm_set_errhandler(weft_comm_t comm, weft_errhandler_t errhandler) {
    std::lock_guard<std::mutex> g(registry_mutex());
    CommShell* shell = live(comm);
    if (!shell) return WEFT_FAIL(WEFT_ERR_NOT_INITIALIZED, "%s: communicator is null or freed", __func__);
    if (!known(errhandler)) return WEFT_FAIL(WEFT_ERR_INVALID_ARG, "%s: not an error handler (freed?)", __func__);
    if (!predefined(errhandler)) ++errhandler->refs;
    drop(shell->errhandler.load());
    shell->errhandler.store(errhandler, std::memory_order_release);
    return WEFT_OK;
}

weft_status_t weft_comm_get_errhandler(weft_comm_t comm, weft_errhandler_t* errhandler) {
    if (!errhandler) return WEFT_FAIL(WEFT_ERR_INVALID_ARG, "%s: errhandler is NULL", __func__);
    std::lock_guard<std::mutex> g(registry_mutex());
    CommShell* shell = live(comm);
    if (!shell) return WEFT_FAIL(WEFT_ERR_NOT_INITIALIZED, "%s: communicator is null or freed", __func__);
    weft_errhandler* e = shell->errhandler.load();
    if (!e) e = &weft_errors_return_;
    ++e->refs;  // the caller's reference, predefined or not
    *errhandler = e;
    return WEFT_OK;
}

weft_status_t weft_errhandler_free(weft_errhandler_t* errhandler) {
    if (!errhandler) return WEFT_FAIL(WEFT_ERR_INVALID_ARG, "%s: errhandler is NULL", __func__);
    std::lock_guard<std::mutex> g(registry_mutex());
    weft_errhandler* e = *errhandler;
    if (!known(e)) return WEFT_FAIL(WEFT_ERR_INVALID_ARG, "%s: not an error handler (freed already?)", __func__);
    if (predefined(e)) {
        // Seed 003: a handle from get may be freed; the predefined handler
        // itself may not.
        if (e->refs == 0)
            return WEFT_FAIL(WEFT_ERR_INVALID_ARG,
                             "%s: a predefined error handler cannot be freed (only a handle "
                             "weft_comm_get_errhandler returned)",
                             __func__);
        --e->refs;
    } else {
        drop(e);
    }
    *errhandler = nullptr;
    return WEFT_OK;
}

weft_status_t weft_errhandler_compare(weft_errhandler_t a, weft_errhandler_t b, int* same) {
    if (!same) return WEFT_FAIL(WEFT_ERR_INVALID_ARG, "%s: same is NULL", __func__);
    std::lock_guard<std::mutex> g(registry_mutex());
    if (!known(a) || !known(b)) return WEFT_FAIL(WEFT_ERR_INVALID_ARG, "%s: not an error handler", __func__);
    *same = a == b ? 1 : 0;
    return WEFT_OK;
}

}  // extern "C"
