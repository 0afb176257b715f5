// layer.hpp — how context/ brings the group layer up and down around the
// transport, and how the layers above find it.
#pragma once

#include "transport/runtime.hpp"

#include <string>

namespace weft::group {

class Engine;
// group's state in one context: the engine, the failure detector, fault
// tolerance and the optional progress thread (group/api.cpp). Registered
// as a layer of the Runtime (on_teardown stops the detector's beats).
struct Layer;

// Inside Runtime::init, before its last barrier: the engine (world
// communicator, matching, handlers, hooks).
Status attach(Runtime& rt, bool multi_threaded);
// After Runtime::init: with WEFT_PROGRESS_THREAD=1, the progress thread.
void start(Runtime& rt);
// Before Runtime::finalize: stops the progress thread, sends owed replies.
void detach(Runtime& rt);
// After Runtime::finalize (or after a failed init).
void destroy(Runtime& rt);

// The engine of a context's Runtime, or null (the layer is not up).
Engine* engine_of(Runtime& rt);

// What this rank holds that a checkpoint cannot save yet (weft/ckpt.h):
// the first such state, described, or empty when there is none (only the
// world communicator, no process group, nothing in construction). The
// world's requests and buffered messages are saved (snapshot.hpp).
std::string unsaved_state(Runtime& rt);

}  // namespace weft::group
