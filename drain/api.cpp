// api.cpp — the C ABI of drain.h, and the drain layer's attach/detach.
#include "drain/drain.hpp"
#include "drain/layer.hpp"

using weft::guarded;
using weft::Status;
using weft::drain::Drain;

namespace weft::drain {

void attach(weft_context* ctx) {
    if (env_u64("WEFT_DRAIN", 1) == 0 || !ctx->engine) return;
    auto* d = new Drain(*ctx->rt, *ctx->engine);
    ctx->drain = d;
    d->start();
}

void detach(weft_context* ctx) {
    delete static_cast<Drain*>(ctx->drain);
    ctx->drain = nullptr;
}

}  // namespace weft::drain

namespace {

Status drain_of(weft_context_t ctx, Drain*& out, const char* fn) {
    if (!ctx || ctx->magic != weft_context::live_magic || !ctx->rt)
        return WEFT_FAIL(WEFT_ERR_NOT_INITIALIZED, "%s: context is null or finalized", fn);
    out = static_cast<Drain*>(ctx->drain);
    if (!out) return WEFT_FAIL(WEFT_ERR_UNSUPPORTED, "%s: the drain thread is off (WEFT_DRAIN=0)", fn);
    return WEFT_OK;
}

}  // namespace

extern "C" {

weft_status_t weft_drain_request(weft_context_t ctx, uint64_t* drain_number) {
    Drain* d = nullptr;
    Status st = drain_of(ctx, d, __func__);
    if (st != WEFT_OK) return st;
    if (!drain_number) return WEFT_FAIL(WEFT_ERR_INVALID_ARG, "%s: drain_number is NULL", __func__);
    return guarded([&] { return d->request(*drain_number); });
}

weft_status_t weft_drain_wait(weft_context_t ctx, uint64_t drain_number, uint64_t timeout_ms,
                              weft_drain_result_t* result) {
    Drain* d = nullptr;
    Status st = drain_of(ctx, d, __func__);
    if (st != WEFT_OK) return st;
    if (!result) return WEFT_FAIL(WEFT_ERR_INVALID_ARG, "%s: result is NULL", __func__);
    if (drain_number == 0) return WEFT_FAIL(WEFT_ERR_INVALID_ARG, "%s: drains are numbered from 1", __func__);
    return guarded([&] { return d->wait(drain_number, timeout_ms, *result); });
}

weft_status_t weft_drain(weft_context_t ctx, weft_drain_result_t* result) {
    uint64_t n = 0;
    Status st = weft_drain_request(ctx, &n);
    if (st != WEFT_OK) return st;
    return weft_drain_wait(ctx, n, 0, result);
}

weft_status_t weft_drain_set_callback(weft_context_t ctx, weft_drain_quiescent_fn fn, void* arg) {
    Drain* d = nullptr;
    Status st = drain_of(ctx, d, __func__);
    if (st != WEFT_OK) return st;
    d->set_callback(fn, arg);
    return WEFT_OK;
}

}  // extern "C"
