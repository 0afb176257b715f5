// entry_gate.hpp — keeps application threads out of weft while a drain
// owns it (MANA's LOWER_HALF_DISABLE_CKPT / lower_half_closed).
//
// Every C entry point enters the gate (RuntimeLock does it) and leaves it on
// return; entries nest. The drain closes the gate, then waits until every
// thread is outside; a thread that arrives while it is closed waits at the
// door, and a thread that waits inside a blocking call steps out between
// polls (Engine::pause) so it never holds weft while the drain needs it.
//
// Cost on the hot path: a thread-local depth store and one load of the
// closed flag, no locked instruction. The store-then-load handshake with
// close() is a Dekker pair made asymmetric with membarrier(): the closer
// pays for the fence that every entering thread would otherwise need. When
// the kernel lacks membarrier, entering threads use a full fence instead.
//
// One gate per process: a drain of one context keeps threads out of all
// (a process normally has one context).
#pragma once

#include <atomic>
#include <cstdint>

namespace weft::gate {

struct ThreadDepth;

namespace detail {
extern std::atomic<uint32_t> closed;
extern bool cheap_fence;  // membarrier is registered: entering needs only a compiler barrier
[[gnu::cold]] ThreadDepth* register_thread();
[[gnu::cold]] void wait_open(ThreadDepth* t);
}  // namespace detail

// Per thread: how deep it is inside weft, and whether it owns the gate.
struct ThreadDepth {
    std::atomic<uint32_t> depth{0};
    // Blocked in a receive inside weft (the drain's blocking mode): counts
    // as outside for close(), and touches weft only under the context's
    // lock, which the drain holds while it works.
    std::atomic<bool> blocked{false};
    bool owner = false;  // the drain thread that closed the gate
    ThreadDepth* next = nullptr;
};

// constinit: no dynamic initialiser, so a use needs no call to a TLS
// wrapper function (one per entry, on the hot path, before this).
extern thread_local constinit ThreadDepth* tls_depth __attribute__((tls_model("initial-exec")));

inline ThreadDepth* self() {
    ThreadDepth* t = tls_depth;
    return t ? t : detail::register_thread();
}

inline void fence_after_entry() {
    if (detail::cheap_fence)
        std::atomic_signal_fence(std::memory_order_seq_cst);
    else
        std::atomic_thread_fence(std::memory_order_seq_cst);
}

// Entering weft: the outermost entry checks the door.
inline void enter() {
    ThreadDepth* t = self();
    const uint32_t d = t->depth.load(std::memory_order_relaxed);
    t->depth.store(d + 1, std::memory_order_relaxed);
    if (d != 0 || t->owner) return;
    fence_after_entry();
    // Acquire: pairs with open()'s release, so whatever the drain did while
    // it held weft happens before what this thread does inside.
    if (__builtin_expect(detail::closed.load(std::memory_order_acquire) != 0, 0)) detail::wait_open(t);
}

inline void leave() {
    ThreadDepth* t = tls_depth;
    t->depth.store(t->depth.load(std::memory_order_relaxed) - 1, std::memory_order_release);
}

inline bool closing() { return detail::closed.load(std::memory_order_relaxed) != 0; }
inline bool blocked_here() { return tls_depth && tls_depth->blocked.load(std::memory_order_relaxed); }
// The calling thread is (no longer) blocked in a receive inside weft.
void set_blocked(bool on);

// A thread that is about to wait for something the drain must be able to
// run past steps out completely (whatever its depth) and later comes back
// in at the same depth, through the door. Both are no-ops for the owner.
uint32_t step_out();
void step_in(uint32_t depth);
// A drain is closing the gate and this thread (not blocked in a receive,
// which the drain releases itself) must step out (weft_drain_closing).
inline bool should_step_out() { return __builtin_expect(closing(), 0) && !blocked_here(); }
// Between polls of a blocking wait: if a drain is closing the gate, step
// out until it opens again.
inline void yield_if_closing() {
    if (should_step_out()) step_in(step_out());
}

// The drain: close() returns when no other thread is inside; the caller
// owns weft until open(). Not reentrant (one drain at a time per process).
void close();
// close() only if no thread is inside right now; false leaves it open.
bool try_close();
// The owner, gate closed: waits until every thread not blocked has left
// (threads it just released from a blocked receive).
void wait_until_empty();
void open();
bool owned_by_me();
// A full fence on every running thread of the process (membarrier): pairs
// with fence_after_entry() in a store-then-load handshake.
void heavy_fence();

}  // namespace weft::gate
