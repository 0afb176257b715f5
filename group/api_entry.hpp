// api_entry.hpp — group/'s part of the one C entry idiom
// (transport/api_entry.hpp): communicator handles, and a failed call handed
// to the communicator's error handler. An entry point on a communicator is
// written once:
//
//   weft_status_t weft_thing(weft_comm_t comm, uint32_t* out) {
//       const char* fn = __func__;                  // the public name, for the log lines
//       return on_usable_comm(comm, fn, [&](Comm* c) -> Status {
//           ...                                     // ApiLock, guarded, as for any entry
//       });
//   }
//
// routed() alone where the handle needs other checks first.
#pragma once

#include "group/engine.hpp"
#include "group/errhandler.hpp"
#include "transport/api_entry.hpp"

namespace weft::group {

// A live communicator handle's Comm, or WEFT_ERR_NOT_INITIALIZED (null or
// freed).
inline Status live_comm(weft_comm_t h, Comm*& c, const char* fn) {
    if (Comm* live = comm_of(h); __builtin_expect(live != nullptr, 1)) {
        c = live;
        return WEFT_OK;
    }
    return WEFT_FAIL(WEFT_ERR_NOT_INITIALIZED, "%s: communicator is null or freed", fn);
}

// live_comm, and not revoked (weft/ft.h): point-to-point, collectives and
// communicator creation. One predictable branch more.
inline Status usable_comm(weft_comm_t h, Comm*& c, const char* fn) {
    if (Status st = live_comm(h, c, fn)) return st;
    if (__builtin_expect(!c->revoked, 1)) return WEFT_OK;
    return WEFT_FAIL(WEFT_ERR_REVOKED, "%s: communicator %llx was revoked", fn, static_cast<unsigned long long>(c->id));
}

// Once validate_global put failures in G, collectives run over the
// survivors' hidden communicator (docs/fault-tolerance.md).
inline Comm* over_survivors(Comm* c) { return __builtin_expect(c->survivors != nullptr, 0) ? c->survivors : c; }

// Runs an entry point's body (which takes and drops the context's lock
// itself), then hands a failure to `comm`'s error handler with no weft lock
// held (group/errhandler.hpp). OK passes through at the cost of one branch.
template <typename Body>
inline Status routed(weft_comm_t comm, const char* fn, Body&& body) {
    return route_error(comm, body(), fn);
}

// routed, with the communicator checked first (live_comm) and handed to
// the body: body(Comm* c) -> Status.
template <typename Body>
inline Status on_comm(weft_comm_t comm, const char* fn, Body&& body) {
    return routed(comm, fn, [&]() -> Status {
        Comm* c = nullptr;
        if (Status st = live_comm(comm, c, fn)) return st;
        return body(c);
    });
}
// The same for calls a revoked communicator refuses (usable_comm).
template <typename Body>
inline Status on_usable_comm(weft_comm_t comm, const char* fn, Body&& body) {
    return routed(comm, fn, [&]() -> Status {
        Comm* c = nullptr;
        if (Status st = usable_comm(comm, c, fn)) return st;
        return body(c);
    });
}

}  // namespace weft::group
