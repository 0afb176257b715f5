// entry_gate.cpp — see entry_gate.hpp.
#include "transport/entry_gate.hpp"

#include "transport/common.hpp"

#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <mutex>
#include <thread>

namespace weft::gate {

thread_local constinit ThreadDepth* tls_depth __attribute__((tls_model("initial-exec"))) = nullptr;

namespace detail {
std::atomic<uint32_t> closed{0};
bool cheap_fence = false;
}  // namespace detail

namespace {

std::mutex& list_mutex() {
    static auto* m = new std::mutex;
    return *m;
}
ThreadDepth* threads = nullptr;  // under list_mutex
std::mutex closer;               // one drain at a time

int membarrier(int cmd) { return static_cast<int>(syscall(__NR_membarrier, cmd, 0, 0)); }

// Registered once per process, before the first thread enters.
bool registered = [] {
    detail::cheap_fence = membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0;
    return true;
}();

// Unlinks the thread's record when it exits.
struct Unregister {
    ~Unregister() {
        ThreadDepth* t = tls_depth;
        if (!t) return;
        std::lock_guard<std::mutex> g(list_mutex());
        for (ThreadDepth** p = &threads; *p; p = &(*p)->next)
            if (*p == t) {
                *p = t->next;
                break;
            }
        tls_depth = nullptr;
        delete t;
    }
};
thread_local Unregister unregister_at_exit;

}  // namespace

// Forces a full fence on every running thread of the process, so that a
// thread's store before its flag load is visible to us.
void heavy_fence() {
    if (!detail::cheap_fence || membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) != 0)
        std::atomic_thread_fence(std::memory_order_seq_cst);
}

ThreadDepth* detail::register_thread() {
    (void)registered;
    auto* t = new ThreadDepth;
    {
        std::lock_guard<std::mutex> g(list_mutex());
        t->next = threads;
        threads = t;
    }
    tls_depth = t;
    (void)&unregister_at_exit;  // constructs it: its destructor unlinks t
    return t;
}

void detail::wait_open(ThreadDepth* t) {
    // We announced ourselves (depth 1) but the door is closed: back out so
    // the closer can proceed, wait, and try again.
    // Ends: when the gate opens. Only the drain thread keeps it closed for
    // long (the rest of a drain from its point-to-point phase), and every
    // drain ends within its bounds (WEFT_DRAIN_TIMEOUT_MS to the quiescent
    // point, as long again for the barrier after it, at once when a member
    // fails: docs/drain.md); try_close holds it for one progress call.
    Backoff backoff(Backoff::gate_door);  // Deadline::never(): bounded by the drain, as above
    for (;;) {
        const uint32_t d = t->depth.load(std::memory_order_relaxed);
        t->depth.store(d - 1, std::memory_order_release);
        while (closed.load(std::memory_order_acquire) != 0) backoff.pause();
        t->depth.store(d, std::memory_order_relaxed);
        fence_after_entry();
        if (closed.load(std::memory_order_acquire) == 0) return;
    }
}

uint32_t step_out() {
    ThreadDepth* t = self();
    if (t->owner) return 0;
    const uint32_t d = t->depth.load(std::memory_order_relaxed);
    t->depth.store(0, std::memory_order_release);
    return d;
}

void step_in(uint32_t depth) {
    ThreadDepth* t = self();
    if (t->owner || depth == 0) return;
    t->depth.store(depth, std::memory_order_relaxed);
    fence_after_entry();
    if (detail::closed.load(std::memory_order_acquire) != 0) detail::wait_open(t);
}

namespace {
bool someone_inside(const ThreadDepth* me) {
    std::lock_guard<std::mutex> g(list_mutex());
    for (ThreadDepth* t = threads; t; t = t->next)
        if (t != me && t->depth.load(std::memory_order_acquire) != 0 && !t->blocked.load(std::memory_order_acquire))
            return true;
    return false;
}
}  // namespace

void close() {
    closer.lock();
    ThreadDepth* me = self();
    detail::closed.store(1, std::memory_order_relaxed);
    heavy_fence();
    me->owner = true;
    Backoff backoff(Backoff::gate_door);  // Deadline::never(): bounded as below
    // Ends: when every thread inside has left. A blocking call steps out
    // between its polls, a receive blocked inside (blocking mode) counts as
    // out, and every call ends by WEFT_TIMEOUT_MS; an external stack's
    // weft_drain_enter/leave brackets promise the same (drain.h).
    while (someone_inside(me)) backoff.pause();
    std::atomic_thread_fence(std::memory_order_acquire);
}

bool try_close() {
    if (!closer.try_lock()) return false;
    ThreadDepth* me = self();
    detail::closed.store(1, std::memory_order_relaxed);
    heavy_fence();
    if (someone_inside(me)) {
        detail::closed.store(0, std::memory_order_release);
        closer.unlock();
        return false;
    }
    me->owner = true;
    std::atomic_thread_fence(std::memory_order_acquire);
    return true;
}

void set_blocked(bool on) { self()->blocked.store(on, std::memory_order_release); }

void wait_until_empty() {
    // Ends: the threads it waits for were just released from their blocked
    // receives and leave weft (as close(), which bounds it the same way).
    Backoff backoff(Backoff::gate_door);
    while (someone_inside(self())) backoff.pause();
    std::atomic_thread_fence(std::memory_order_acquire);
}

void open() {
    ThreadDepth* me = self();
    me->owner = false;
    detail::closed.store(0, std::memory_order_release);
    closer.unlock();
}

bool owned_by_me() { return tls_depth && tls_depth->owner; }

}  // namespace weft::gate
