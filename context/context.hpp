// context.hpp — bringing a context's layers up and down, in order. The C
// entries (weft_init, weft_init_thread, weft_finalize) are thin shells over
// these; restart (ckpt/) rebuilds a context through them.
#pragma once

#include "transport/runtime.hpp"

namespace weft::context {

// Transport init with the group layer attached inside it (before its last
// barrier), then the group layer's threads and the drain. On failure every
// layer is down again and the Runtime only needs destroying.
Status bring_up(Runtime& rt, bool multi_threaded);
// The reverse: drain, group, the transport's finalize, then group's state.
// The windows' shells are kept so stale handles stay recognisable.
Status tear_down(Runtime& rt);

}  // namespace weft::context
