// layer.hpp — how weft_init and weft_finalize bring the drain thread up
// and down (after the group layer starts; before it stops).
#pragma once

#include "transport/runtime.hpp"

namespace weft::drain {

// Starts the drain thread unless WEFT_DRAIN=0.
void attach(weft_context* ctx);
// Lets a drain in progress finish, then stops the thread.
void detach(weft_context* ctx);

}  // namespace weft::drain
