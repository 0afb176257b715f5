// layer.hpp — how context/ brings the checkpoint layer up and down (after
// the drain starts; before it stops).
#pragma once

#include "transport/runtime.hpp"

namespace weft::ckpt {

// Registers the layer's state (the protected regions) with the Runtime.
Status attach(Runtime& rt);
void detach(Runtime& rt);

}  // namespace weft::ckpt
