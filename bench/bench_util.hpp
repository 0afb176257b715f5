// bench_util.hpp — what every benchmark here shares: a clock, bounded spin
// waits, and per-iteration samples for median and tail.
//
// Timing. The mean of every benchmark comes from two clock reads around the
// whole loop. Percentiles come from timing only every `every`-th iteration
// on its own (a clock read before and after it): reading the clock in every
// iteration of a sub-microsecond ping-pong is not free here (KVM, vDSO
// clock_gettime with an ordered TSC read) — it cost ~150 ns per round trip
// on top of a ~190 ns floor, and would have hidden weft's overhead in the
// ratio. The sampled percentiles include one clock read; the floor's carry
// the same, so their ratio is fair.
//
// On x86 the samples read the TSC as perftest's get_cycles does (rdtsc),
// converted to ns at a rate measured against CLOCK_MONOTONIC once per
// process: where the kernel does not use the TSC as its clocksource,
// clock_gettime is a system call (in the soft-RoCE VM, HPET: ~660 ns a read
// against ~22 ns for the TSC), and a sample would carry that while
// perftest's do not. A sample is ticks_begin() ... ticks_end():
// - ticks_begin() is lfence + rdtsc: the stamp is read only once everything
//   before it has finished, so none of the previous iteration's bookkeeping
//   counts, and it retires before the operation's first store can commit.
// - ticks_end() is a plain rdtsc, not rdtscp or a fenced read. Waiting for
//   every earlier instruction there, after a spin-wait, added ~35 ns to
//   each half round trip of an 8-byte put ping-pong here (weft-bench, same
//   run: median 143-171 ns fenced against 110-117 plain), more than the
//   whole loop's untimed mean (~120 ns), so it times the fence, not the
//   put. A plain read after a spin-wait still comes after the operation:
//   it runs only once the wait's exit branch has resolved on the loaded
//   value. After a call that returns a result (a fetch-add) it may run a
//   few ns early; the loop's untimed mean bounds that.
// Both asms clobber memory, so the compiler moves no load or store across.
#pragma once

#include "bench_stats.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <vector>
#include <sched.h>

namespace bench {

inline uint64_t now_ns() { return bench_now_ns(); }

// The sample clock: ticks_begin(), ticks_end() and ns_per_tick() (see the top of the file).
#if defined(__x86_64__) || defined(__i386__)
inline uint64_t ticks_end() {
    uint32_t lo, hi;
    asm volatile("rdtsc" : "=a"(lo), "=d"(hi) : : "memory");
    return (static_cast<uint64_t>(hi) << 32) | lo;
}
inline uint64_t ticks_begin() {
    asm volatile("lfence" : : : "memory");
    return ticks_end();
}
inline double ns_per_tick() {
    static const double rate = [] {
        const uint64_t n0 = now_ns(), t0 = ticks_begin();
        uint64_t n1 = n0;
        while (n1 - n0 < 20000000) n1 = now_ns();
        const uint64_t t1 = ticks_begin();
        return t1 > t0 ? static_cast<double>(n1 - n0) / static_cast<double>(t1 - t0) : 0.0;
    }();
    return rate;
}
#else
inline uint64_t ticks_begin() { return now_ns(); }
inline uint64_t ticks_end() { return now_ns(); }
inline double ns_per_tick() { return 1.0; }
#endif

inline double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0 : v[v.size() / 2];
}

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    asm volatile("yield" ::: "memory");
#endif
}

// Seconds any single wait may take before the benchmark gives up (never
// hang: a lost message or a dead peer becomes an error exit). Generous
// because these machines are shared and a rank can be descheduled for a
// while; override with WEFT_BENCH_WAIT_S.
inline uint64_t wait_limit_ns() {
    static const uint64_t ns = [] {
        const char* s = std::getenv("WEFT_BENCH_WAIT_S");
        const uint64_t sec = s && *s ? std::strtoull(s, nullptr, 10) : 20;
        return (sec ? sec : 20) * 1000000000ull;
    }();
    return ns;
}

// Spins on `done` calling `poll` between checks; after a few thousand idle
// spins each check also yields, so a descheduled peer on the same core gets
// it back (the quantum is 4 ms here) instead of us burning it. Returns false
// when the deadline passed. The clock is read only every 256 spins so that
// a fast answer costs no syscall-like work.
template <typename Done, typename Poll>
inline bool spin_until(Done&& done, Poll&& poll, uint64_t limit_ns = wait_limit_ns()) {
    uint64_t deadline = 0;
    for (uint32_t i = 0;; ++i) {
        if (done()) return true;
        poll();
        if ((i & 255) == 255) {
            const uint64_t t = now_ns();
            if (deadline == 0)
                deadline = t + limit_ns;
            else if (t >= deadline)
                return false;
            if (i >= 4096) sched_yield();
        }
        cpu_relax();
    }
}

// Per-iteration samples (the histogram of bench_stats.h, which says why a
// histogram and not a sample array).
class Samples {
public:
    explicit Samples(uint64_t /*iterations*/) : h_(std::make_unique<bench_hist_t>()) {}
    void add(uint64_t ns) { bench_hist_add(h_.get(), ns); }
    // q in [0, 1]: the smallest bucket value with at least q of the samples
    // at or below it.
    double percentile(double q) const { return bench_hist_percentile(h_.get(), q); }

private:
    std::unique_ptr<bench_hist_t> h_;  // ~18 KB, zeroed
};

// Runs `op` once per benchmark iteration; times every `every`-th one (a
// power of two) into `s`. Returns the mean ns per iteration of the loop.
template <typename State, typename Op>
inline double timed_loop(State& state, Samples& s, uint64_t every, Op&& op) {
    const uint64_t mask = every - 1;
    const double rate = ns_per_tick();
    uint64_t i = 0;
    const uint64_t begin = now_ns();
    for (auto _ : state) {
        if ((i++ & mask) == 0) {
            const uint64_t t0 = ticks_begin();
            op();
            s.add(static_cast<uint64_t>(static_cast<double>(ticks_end() - t0) * rate));
        } else {
            op();
        }
    }
    const uint64_t n = i ? i : 1;
    return static_cast<double>(now_ns() - begin) / static_cast<double>(n);
}

// Latency loops sample 1 iteration in 16; bandwidth loops (microseconds and
// more per iteration) time every one.
inline constexpr uint64_t sample_latency = 16;
inline constexpr uint64_t sample_all = 1;

}  // namespace bench
