// api_entry.hpp — the one shape of every C entry point (weft.h, comm.h,
// ft.h, drain.h): validate the handles and arguments, take the context's
// lock, run the body with no exception crossing into C.
//
//   weft_status_t weft_thing(weft_context_t ctx, uint32_t* out) {
//       Runtime* rt = nullptr;
//       if (Status st = api::live(ctx, rt, __func__)) return st;
//       if (Status st = api::not_null(out, "out", __func__)) return st;
//       RuntimeLock lock(*rt);                    // entry gate + MULTIPLE's mutex
//       return guarded([&]() -> Status { ... });  // exceptions become statuses
//   }
//
// Every rejection returns a clear status and logs one line naming the entry
// point. The checks are inline and predicted to pass: the RMA entries are the
// hot path. Entry points on a communicator add group/'s routing to its error
// handler (group/api_entry.hpp). A blocking call that waits lets other
// threads in with StepOut (transport/runtime.hpp).
#pragma once

#include "transport/runtime.hpp"

#include <cstring>

namespace weft::api {

[[gnu::cold]] inline Status null_argument(const char* what, const char* fn) {
    return WEFT_FAIL(WEFT_ERR_INVALID_ARG, "%s: %s is NULL", fn, what);
}

// WEFT_ERR_INVALID_ARG when p is NULL, naming the argument.
template <typename Pointer>  // any object or function pointer
inline Status not_null(Pointer p, const char* what, const char* fn) {
    if (__builtin_expect(p != nullptr, 1)) return WEFT_OK;
    return null_argument(what, fn);
}

// The Runtime of a live context handle, or WEFT_ERR_NOT_INITIALIZED (null,
// finalized, or not a context).
inline Status live(const weft_context* ctx, Runtime*& rt, const char* fn) {
    rt = runtime_of(ctx);
    if (__builtin_expect(rt != nullptr, 1)) return WEFT_OK;
    return WEFT_FAIL(WEFT_ERR_NOT_INITIALIZED, "%s: context is null or finalized", fn);
}

// A live window handle, or WEFT_ERR_NOT_INITIALIZED (null or freed).
inline Status live(const weft_window* w, const char* fn) {
    if (__builtin_expect(w && w->magic == weft_window::live_magic, 1)) return WEFT_OK;
    return WEFT_FAIL(WEFT_ERR_NOT_INITIALIZED, "%s: window is null or freed", fn);
}

// An enum argument's value as an int, read without loading the enum: a C
// caller may pass any int, which is undefined behaviour to load as the C++
// enum type. By reference: an entry point's body is a lambda that captures
// its arguments by reference, and passing the enum by value would load it.
template <typename E>
int raw(const E& e) {
    static_assert(sizeof(E) == sizeof(int));
    int v;
    std::memcpy(&v, &e, sizeof v);
    return v;
}

}  // namespace weft::api
