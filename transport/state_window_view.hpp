// state_window_view.hpp — the one way weft's C++ core reaches words of the
// pinned state window: this rank's, and its peers' (layout in
// weft/state_window.h, who writes each word and how in docs/state-window.md).
//
// A view is two pointers: copy it freely. It is valid while the window is
// (from Runtime::init until finalize destroys it). Any thread may use the
// local and mapped words (each with the atomics its row of the layout
// allows); get() goes through the transport, so it runs where the caller
// may use the transport (the API lock held, or the drain's gate closed).
#pragma once

#include <weft/state_window.h>

#include "transport/runtime.hpp"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <initializer_list>

namespace weft {

class StateWindowView {
public:
    StateWindowView() = default;
    explicit StateWindowView(weft_window* w) : w_(w) {}

    weft_window* window() const { return w_; }

    // This rank's word at `off` (a WEFT_STATE_*_OFF), for std::atomic_ref
    // (or a futex on its low half).
    uint64_t* word(uint64_t off) const { return reinterpret_cast<uint64_t*>(w_->local_base + off); }
    std::atomic_ref<uint64_t> at(uint64_t off) const { return std::atomic_ref<uint64_t>(*word(off)); }

    // Rank r's word where r's window is mapped into this process (shm, UCX
    // to a same-host peer; on verbs only this rank's own), else null.
    uint64_t* mapped_word(uint32_t r, uint64_t off) const {
        uint8_t* base = w_->remote[r].direct;
        return base ? reinterpret_cast<uint64_t*>(base + off) : nullptr;
    }
    // Every rank's window is mapped here: peers' words can be read and
    // changed with CPU atomics, without the transport.
    bool all_mapped() const {
        for (uint32_t r = 0; r < w_->nranks; ++r)
            if (!w_->remote[r].direct) return false;
        return true;
    }

    // Remote reads of rank r's words through the transport, complete when
    // they return (one flush): `words` consecutive words from `off`, or the
    // words at the named offsets, in order. On an error dst is undefined.
    Status get(uint32_t r, uint64_t off, uint64_t* dst, size_t words) const {
        Status st = w_->ops->get(w_, r, off, dst, words * 8);
        return st == WEFT_OK ? w_->rt->backend().flush(*w_, r) : st;
    }
    Status get(uint32_t r, std::initializer_list<uint64_t> offs, uint64_t* dst) const {
        for (uint64_t off : offs)
            if (Status st = w_->ops->get(w_, r, off, dst++, 8); st != WEFT_OK) return st;
        return w_->rt->backend().flush(*w_, r);
    }

private:
    weft_window* w_ = nullptr;
};

}  // namespace weft
