// api.cpp — the C ABI of drain.h, and the drain layer's attach/detach.
#include "drain/drain.hpp"
#include "transport/api_entry.hpp"
#include "drain/layer.hpp"

#include <cstddef>

// failed_rank took the struct's tail padding: programs built against the
// header without it still pass a struct of this size and layout.
static_assert(sizeof(weft_drain_result_t) == 104 && offsetof(weft_drain_result_t, deadlock) == 96 &&
              offsetof(weft_drain_result_t, failed_rank) == 100);

using weft::guarded;
using weft::Status;
using weft::drain::Drain;

namespace weft::drain {

Status attach(Runtime& rt) {
    group::DrainPort* port = group::drain_port_of(rt);
    if (env_u64("WEFT_DRAIN", 1) == 0 || !port) return WEFT_OK;
    auto d = std::make_unique<Drain>(rt, *port);
    Status st = rt.add_layer(drain_layer, d.get(), {});
    if (st != WEFT_OK) return st;
    d.release()->start();  // owned through the Runtime's layers until detach()
    return WEFT_OK;
}

void detach(Runtime& rt) {
    Drain* d = rt.layer(drain_layer);
    if (!d) return;
    rt.remove_layer(drain_layer);
    delete d;
}

}  // namespace weft::drain

namespace {

Status drain_of(weft_context_t ctx, Drain*& out, const char* fn) {
    weft::Runtime* rt = nullptr;
    if (Status st = weft::api::live(ctx, rt, fn)) return st;
    out = rt->layer(weft::drain::drain_layer);
    if (!out) return WEFT_FAIL(WEFT_ERR_UNSUPPORTED, "%s: the drain thread is off (WEFT_DRAIN=0)", fn);
    return WEFT_OK;
}

}  // namespace

extern "C" {

weft_status_t weft_drain_request(weft_context_t ctx, uint64_t* drain_number) {
    Drain* d = nullptr;
    if (Status st = drain_of(ctx, d, __func__)) return st;
    if (Status st = weft::api::not_null(drain_number, "drain_number", __func__)) return st;
    return guarded([&] { return d->request(*drain_number); });
}

weft_status_t weft_drain_wait(weft_context_t ctx, uint64_t drain_number, uint64_t timeout_ms,
                              weft_drain_result_t* result) {
    Drain* d = nullptr;
    if (Status st = drain_of(ctx, d, __func__)) return st;
    if (Status st = weft::api::not_null(result, "result", __func__)) return st;
    if (drain_number == 0) return WEFT_FAIL(WEFT_ERR_INVALID_ARG, "%s: drains are numbered from 1", __func__);
    return guarded([&] { return d->wait(drain_number, timeout_ms, *result); });
}

weft_status_t weft_drain_get_profile(weft_context_t ctx, uint64_t drain_number, weft_drain_profile_t* profile) {
    Drain* d = nullptr;
    if (Status st = drain_of(ctx, d, __func__)) return st;
    if (Status st = weft::api::not_null(profile, "profile", __func__)) return st;
    return guarded([&] { return d->profile(drain_number, *profile); });
}

weft_status_t weft_drain(weft_context_t ctx, weft_drain_result_t* result) {
    uint64_t n = 0;
    Status st = weft_drain_request(ctx, &n);
    if (st != WEFT_OK) return st;
    return weft_drain_wait(ctx, n, 0, result);
}

weft_status_t weft_drain_set_callback(weft_context_t ctx, weft_drain_quiescent_fn fn, void* arg) {
    Drain* d = nullptr;
    if (Status st = drain_of(ctx, d, __func__)) return st;
    d->set_callback(fn, arg);
    return WEFT_OK;
}

}  // extern "C"

// ------------------------------------------------ external stack hooks
struct weft_drain_clock {
    static constexpr uint64_t live_magic = 0x574654444e434c4bull;  // "WFTDNCLK"
    uint64_t magic = live_magic;
    weft_context* ctx = nullptr;
    weft_comm_t comm = nullptr;              // a hidden communicator: its clock record is the stack's
    weft::group::DrainPort* port = nullptr;  // its context's (valid while the context is live)
};

namespace {

// A live clock handle, or WEFT_ERR_INVALID_ARG (null or freed).
Status live_clock(weft_drain_clock_t c, const char* fn) {
    if (c && c->magic == weft_drain_clock::live_magic && c->comm) return WEFT_OK;
    return WEFT_FAIL(WEFT_ERR_INVALID_ARG, "%s: clock is NULL or freed", fn);
}

// A live context whose group layer is up, and its drain port.
Status live_port(weft_context_t ctx, weft::group::DrainPort*& port, const char* fn) {
    weft::Runtime* rt = nullptr;
    if (Status st = weft::api::live(ctx, rt, fn)) return st;
    port = weft::group::drain_port_of(*rt);
    if (!port) return WEFT_FAIL(WEFT_ERR_NOT_INITIALIZED, "%s: context is null or finalized", fn);
    return WEFT_OK;
}

}  // namespace

extern "C" {

weft_status_t weft_drain_clock_create(weft_context_t ctx, const uint32_t* job_ranks, uint32_t n, int32_t tag,
                                      weft_drain_clock_t* clock) {
    weft::group::DrainPort* port = nullptr;
    if (Status st = live_port(ctx, port, __func__)) return st;
    if (Status st = weft::api::not_null(clock, "clock", __func__)) return st;
    *clock = nullptr;
    weft_comm_t world = nullptr, comm = nullptr;
    if (Status st = weft_comm_world(ctx, &world)) return st;
    // Validates the list (NULL, duplicates, unknown ranks, caller absent).
    if (Status st = weft_comm_create_from_ranks(world, job_ranks, n, tag, &comm)) return st;
    weft::group::comm_of(comm)->stack_clock = true;
    auto* c = new weft_drain_clock;
    c->ctx = ctx;
    c->comm = comm;
    c->port = port;
    *clock = c;
    return WEFT_OK;
}

weft_status_t weft_drain_clock_free(weft_drain_clock_t* clock) {
    if (Status st = weft::api::not_null(clock, "clock", __func__)) return st;
    if (Status st = live_clock(*clock, __func__)) return st;
    weft_drain_clock* c = *clock;
    Status st = weft_comm_free(&c->comm);  // a collective on it, like MPI_Comm_free
    c->magic = 0;
    delete c;
    *clock = nullptr;
    return st;
}

weft_status_t weft_drain_clock_slot(weft_drain_clock_t clock, uint32_t* slot) {
    if (Status st = live_clock(clock, __func__)) return st;
    weft_drain_clock* c = clock;
    return weft_comm_clock_slot(c->comm, slot);
}

weft_status_t weft_drain_commit_begin(weft_drain_clock_t clock) {
    if (Status st = live_clock(clock, __func__)) return st;
    weft_drain_clock* c = clock;
    weft::Runtime* rt = weft::runtime_of(c->ctx);
    weft::group::Comm* comm = weft::group::comm_of(c->comm);
    if (!rt || !comm) return WEFT_FAIL(WEFT_ERR_NOT_INITIALIZED, "%s: the clock's context is finalized", __func__);
    return guarded([&] {
        weft::RuntimeLock lock(*rt);
        c->port->commit_begin(*comm);
        return WEFT_OK;
    });
}

weft_status_t weft_drain_commit_finish(weft_drain_clock_t clock) {
    if (Status st = live_clock(clock, __func__)) return st;
    weft_drain_clock* c = clock;
    weft::Runtime* rt = weft::runtime_of(c->ctx);
    weft::group::Comm* comm = weft::group::comm_of(c->comm);
    if (!rt || !comm) return WEFT_FAIL(WEFT_ERR_NOT_INITIALIZED, "%s: the clock's context is finalized", __func__);
    weft::RuntimeLock lock(*rt);
    c->port->commit_finish(*comm);
    return WEFT_OK;
}

weft_status_t weft_drain_count(weft_context_t ctx, uint64_t sent, uint64_t arrived) {
    weft::group::DrainPort* port = nullptr;
    if (Status st = live_port(ctx, port, __func__)) return st;
    weft::RuntimeLock lock(*ctx->rt);
    port->count_external(sent, arrived);
    return WEFT_OK;
}

// The gate's calls need a live context, not its drain port: they check
// only the handle (a stack brackets every call into MPI with them, so the
// layer lookup of live_port would be paid several times per message).
weft_status_t weft_drain_enter(weft_context_t ctx) {
    weft::Runtime* rt = nullptr;
    if (Status st = weft::api::live(ctx, rt, __func__)) return st;
    weft::gate::enter();
    return WEFT_OK;
}

weft_status_t weft_drain_leave(weft_context_t ctx) {
    weft::Runtime* rt = nullptr;
    if (Status st = weft::api::live(ctx, rt, __func__)) return st;
    weft::gate::ThreadDepth* t = weft::gate::self();
    if (t->depth.load() == 0) return WEFT_FAIL(WEFT_ERR_INVALID_ARG, "%s: not inside (unbalanced leave)", __func__);
    weft::gate::leave();
    return WEFT_OK;
}

weft_status_t weft_drain_yield(weft_context_t ctx) {
    weft::Runtime* rt = nullptr;
    if (Status st = weft::api::live(ctx, rt, __func__)) return st;
    weft::gate::yield_if_closing();
    return WEFT_OK;
}

int weft_drain_closing(weft_context_t ctx) {
    // No log for a dead context: this is polled, and the next
    // weft_drain_yield reports it.
    return weft::runtime_of(ctx) && weft::gate::should_step_out() ? 1 : 0;
}

weft_status_t weft_drain_set_hooks(weft_context_t ctx, const weft_drain_hooks_t* hooks) {
    Drain* d = nullptr;
    if (Status st = drain_of(ctx, d, __func__)) return st;
    d->set_hooks(hooks ? *hooks : weft_drain_hooks_t{});
    return WEFT_OK;
}

}  // extern "C"
