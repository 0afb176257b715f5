// layer.hpp — how the C ABI's init and finalize bring the group layer up
// and down around the transport.
#pragma once

#include "transport/runtime.hpp"

namespace weft::group {

// Inside Runtime::init, before its last barrier: the engine (world
// communicator, matching, handlers, hooks).
Status attach(weft_context* ctx, bool multi_threaded);
// After Runtime::init: with WEFT_PROGRESS_THREAD=1, the progress thread.
void start(weft_context* ctx);
// Before Runtime::finalize: stops the progress thread, sends owed replies.
void detach(weft_context* ctx);
// After Runtime::finalize.
void destroy(weft_context* ctx);

}  // namespace weft::group
