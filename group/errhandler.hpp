// errhandler.hpp — per-communicator error handlers (weft/comm.h): what a
// failed call on a communicator does. Every C entry point that takes a
// communicator returns through route_error (group/api_entry.hpp: routed).
#pragma once

#include "transport/common.hpp"

#include <weft/comm.h>

struct weft_errhandler {
    enum class Kind { returns, fatal, user };
    Kind kind = Kind::user;
    weft_comm_errhandler_fn fn = nullptr;
    void* arg = nullptr;
    // References (registry mutex): user handlers count every handle and
    // every communicator holding them, and go at zero; predefined ones
    // count only what get handed out, so that free can tell a handle from
    // get (valid) from the predefined handler itself (an argument error).
    uint32_t refs = 0;
};

namespace weft::group {

// A failed call's status, after the handler of `comm` has seen it (the
// caller holds no weft lock). OK passes through at the cost of one branch.
Status route_failure(weft_comm_t comm, Status st, const char* fn);
inline Status route_error(weft_comm_t comm, Status st, const char* fn) {
    return __builtin_expect(st == WEFT_OK, 1) ? st : route_failure(comm, st, fn);
}
// A communicator made from `parent` starts with its handler.
void inherit_errhandler(weft_comm_t child, weft_comm_t parent);
// The communicator is freed: it drops its reference.
void release_errhandler(weft_comm_t comm);

}  // namespace weft::group
