// context.cpp — a weft context's life: weft_init, weft_init_thread and
// weft_finalize bring the layers up in order (transport, group, drain, ckpt) and
// down in reverse, and keep the shells of released handles.
//
// This is the only code that knows every layer. A layer finds its own state
// through the Runtime it registered with (Runtime::layer); nothing below
// this folder includes anything above itself (docs/architecture.md).
#include "context/context.hpp"

#include "ckpt/layer.hpp"
#include "drain/layer.hpp"
#include "group/layer.hpp"
#include "transport/bootstrap/bootstrap.hpp"
#include "transport/runtime.hpp"

#include <weft/bootstrap.h>
#include <weft/comm.h>

#include <cstring>
#include <memory>
#include <vector>

using weft::guarded;
using weft::Runtime;
using weft::Status;

namespace weft::context {

namespace {

// Released contexts and windows are kept (a few bytes each) so that a stale
// handle reads a dead magic instead of freed memory. Never destroyed, so the
// shells stay reachable (no leak report) after static destructors run.
std::vector<weft_context*>& context_shells() {
    static auto* t = new std::vector<weft_context*>;
    return *t;
}

std::vector<std::unique_ptr<weft_window>>& window_shells() {
    static auto* t = new std::vector<std::unique_ptr<weft_window>>;
    return *t;
}

}  // namespace

Status bring_up(Runtime& rt, bool multi_threaded) {
    // The group layer registers its message handlers inside the transport's
    // init, before the job-wide barrier that ends it: no peer's first
    // message can arrive before them.
    Status st = rt.init([&] { return group::attach(rt, multi_threaded); });
    if (st != WEFT_OK) {
        group::detach(rt);
        group::destroy(rt);
        return st;  // ~Runtime finalizes the transport
    }
    group::start(rt);
    st = drain::attach(rt);
    if (st != WEFT_OK)
        WEFT_LOG(error, "the drain thread did not start: %s (weft_drain_* return UNSUPPORTED)", weft_strerror(st));
    st = ckpt::attach(rt);
    if (st != WEFT_OK)
        WEFT_LOG(error, "the checkpoint layer did not start: %s (weft_ckpt_* return NOT_INITIALIZED)",
                 weft_strerror(st));
    return WEFT_OK;
}

Status tear_down(Runtime& rt) {
    ckpt::detach(rt);
    drain::detach(rt);
    group::detach(rt);
    Status st = rt.finalize();
    group::destroy(rt);
    for (auto& w : rt.take_window_shells()) {
        w->remote_storage.clear();
        w->remote_storage.shrink_to_fit();
        window_shells().push_back(std::move(w));
    }
    return st;
}

}  // namespace weft::context

extern "C" {

namespace {

// weft_init_thread, with the bootstrap given (weft_init_with_bootstrap) or
// the environment's (ops null).
weft_status_t init_context(const weft_bootstrap_ops_t* ops, weft_thread_level_t required, weft_thread_level_t* provided,
                           weft_context_t* ctx_out) {
    if (!ctx_out) return WEFT_FAIL(WEFT_ERR_INVALID_ARG, "weft_init: ctx_out is NULL");
    int level;  // read as an int: a C caller may pass any value, not loadable as the enum
    std::memcpy(&level, &required, sizeof level);
    if (level != WEFT_THREAD_SERIALIZED && level != WEFT_THREAD_MULTIPLE)
        return WEFT_FAIL(WEFT_ERR_INVALID_ARG, "weft_init_thread: unknown thread level %d", level);
    return guarded([&]() -> Status {
        auto rt = std::make_unique<Runtime>();
        if (ops) {
            std::unique_ptr<weft::Bootstrap> b;
            Status st = weft::make_external_bootstrap(*ops, b);
            if (st != WEFT_OK) return st;
            rt->preset_bootstrap(std::move(b));
        }
        Status st = weft::context::bring_up(*rt, required == WEFT_THREAD_MULTIPLE);
        if (st != WEFT_OK) return st;
        auto c = std::make_unique<weft_context>();
        c->rt = rt.release();
        if (provided) *provided = c->rt->multi_threaded() ? WEFT_THREAD_MULTIPLE : WEFT_THREAD_SERIALIZED;
        *ctx_out = c.release();
        return WEFT_OK;
    });
}

}  // namespace

weft_status_t weft_init_thread(weft_thread_level_t required, weft_thread_level_t* provided, weft_context_t* ctx_out) {
    return init_context(nullptr, required, provided, ctx_out);
}

weft_status_t weft_init_with_bootstrap(const weft_bootstrap_ops_t* ops, weft_thread_level_t required,
                                       weft_thread_level_t* provided, weft_context_t* ctx_out) {
    if (!ops) return WEFT_FAIL(WEFT_ERR_INVALID_ARG, "weft_init_with_bootstrap: ops is NULL");
    return init_context(ops, required, provided, ctx_out);
}

weft_status_t weft_init(weft_context_t* ctx_out) { return weft_init_thread(WEFT_THREAD_SERIALIZED, nullptr, ctx_out); }

weft_status_t weft_finalize(weft_context_t ctx) {
    Runtime* rt = weft::runtime_of(ctx);
    if (!rt) return WEFT_FAIL(WEFT_ERR_NOT_INITIALIZED, "weft_finalize: context is null or finalized");
    return guarded([&]() -> Status {
        Status st = weft::context::tear_down(*rt);
        delete rt;
        ctx->rt = nullptr;
        ctx->magic = weft_context::dead_magic;
        weft::context::context_shells().push_back(ctx);
        return st;
    });
}

}  // extern "C"
