// api.cpp — the C ABI of ckpt.h, and the checkpoint layer's attach/detach.
#include "ckpt/ckpt.hpp"
#include "ckpt/layer.hpp"
#include "transport/api_entry.hpp"

#include <memory>

using weft::guarded;
using weft::Status;
using weft::ckpt::Ckpt;

namespace weft::ckpt {

inline constexpr Runtime::LayerKey<Ckpt> ckpt_layer{"ckpt"};

Status attach(Runtime& rt) {
    auto c = std::make_unique<Ckpt>(rt);
    Status st = rt.add_layer(ckpt_layer, c.get(), {});
    if (st != WEFT_OK) return st;
    c.release();  // owned through the Runtime's layers until detach()
    return WEFT_OK;
}

void detach(Runtime& rt) {
    Ckpt* c = rt.layer(ckpt_layer);
    if (!c) return;
    rt.remove_layer(ckpt_layer);
    delete c;
}

}  // namespace weft::ckpt

namespace {

Status ckpt_of(weft_context_t ctx, Ckpt*& out, const char* fn) {
    weft::Runtime* rt = nullptr;
    if (Status st = weft::api::live(ctx, rt, fn)) return st;
    out = rt->layer(weft::ckpt::ckpt_layer);
    if (!out) return WEFT_FAIL(WEFT_ERR_NOT_INITIALIZED, "%s: the checkpoint layer is not up", fn);
    return WEFT_OK;
}

// NULL: the launcher's directory (Ckpt::directory); "" is a mistake.
Status directory_argument(const char* dir, const char* fn) {
    if (dir && !*dir) return WEFT_FAIL(WEFT_ERR_INVALID_ARG, "%s: dir is empty", fn);
    return WEFT_OK;
}

// weft_checkpoint and weft_restart: the same checks, then one of Ckpt's
// collectives, its report copied out when asked for. They run outside the
// context's lock: their steps are ordinary entries (weft_bcast,
// weft_drain_wait, ...) that take it.
template <typename Report>
Status collective(weft_context_t ctx, const char* dir, Report* out, const char* fn,
                  Status (Ckpt::*run)(weft_context_t, const std::string&, Report&)) {
    Ckpt* c = nullptr;
    if (Status st = ckpt_of(ctx, c, fn)) return st;
    if (Status st = directory_argument(dir, fn)) return st;
    return guarded([&] {
        Report r{};
        Status st = (c->*run)(ctx, dir ? dir : "", r);
        if (out) *out = r;
        return st;
    });
}

}  // namespace

extern "C" {

weft_status_t weft_ckpt_region_register(weft_context_t ctx, uint32_t id, void* base, size_t size) {
    Ckpt* c = nullptr;
    if (Status st = ckpt_of(ctx, c, __func__)) return st;
    return guarded([&] { return c->region_register(id, base, size); });
}

weft_status_t weft_ckpt_region_resize(weft_context_t ctx, uint32_t id, void* base, size_t size) {
    Ckpt* c = nullptr;
    if (Status st = ckpt_of(ctx, c, __func__)) return st;
    return guarded([&] { return c->region_resize(id, base, size); });
}

weft_status_t weft_ckpt_region_remove(weft_context_t ctx, uint32_t id) {
    Ckpt* c = nullptr;
    if (Status st = ckpt_of(ctx, c, __func__)) return st;
    return guarded([&] { return c->region_remove(id); });
}

weft_status_t weft_checkpoint(weft_context_t ctx, const char* dir, weft_ckpt_profile_t* profile) {
    return collective(ctx, dir, profile, __func__, &Ckpt::checkpoint);
}

weft_status_t weft_restart(weft_context_t ctx, const char* dir, weft_restart_info_t* info) {
    return collective(ctx, dir, info, __func__, &Ckpt::restart);
}

weft_status_t weft_ckpt_flush_dir(weft_context_t ctx, const char* dir) {
    Ckpt* c = nullptr;
    if (Status st = ckpt_of(ctx, c, __func__)) return st;
    if (dir && !*dir) return WEFT_FAIL(WEFT_ERR_INVALID_ARG, "weft_ckpt_flush_dir: dir is empty (NULL stops flushing)");
    return guarded([&] { return c->set_flush_dir(dir ? dir : ""); });
}

weft_status_t weft_ckpt_flush_wait(weft_context_t ctx, uint64_t generation, uint64_t timeout_ms,
                                   weft_ckpt_flush_info_t* info) {
    Ckpt* c = nullptr;
    if (Status st = ckpt_of(ctx, c, __func__)) return st;
    return guarded([&] {
        weft_ckpt_flush_info_t r{};
        Status st = c->flush_wait(generation, timeout_ms, r);
        if (info) *info = r;
        return st;
    });
}

weft_status_t weft_ckpt_release(weft_context_t ctx) {
    Ckpt* c = nullptr;
    if (Status st = ckpt_of(ctx, c, __func__)) return st;
    return guarded([&] { return c->transparent().release(ctx); });
}

weft_status_t weft_ckpt_rebuild(weft_context_t ctx) {
    Ckpt* c = nullptr;
    if (Status st = ckpt_of(ctx, c, __func__)) return st;
    return guarded([&] { return c->transparent().rebuild(); });
}

weft_status_t weft_ckpt_need(weft_context_t ctx, int* need) {
    Ckpt* c = nullptr;
    if (Status st = ckpt_of(ctx, c, __func__)) return st;
    if (Status st = weft::api::not_null(need, "need", __func__)) return st;
    return guarded([&] { return c->need(ctx, *need); });
}

}  // extern "C"
