// layer.hpp — how context/ brings the drain thread up and down (after the
// group layer starts; before it stops).
#pragma once

#include "transport/runtime.hpp"

namespace weft::drain {

// Starts the drain thread unless WEFT_DRAIN=0 (or the group layer is not
// up: the drain stands on its communicators).
Status attach(Runtime& rt);
// Lets a drain in progress finish, then stops the thread.
void detach(Runtime& rt);

}  // namespace weft::drain
