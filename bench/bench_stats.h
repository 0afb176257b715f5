/*
 * bench_stats.h — the clock and the per-iteration latency histogram that
 * every benchmark in bench/ uses, in plain C (C99 and C++) so that the MPI
 * comparison programs (bench/mpi/, built with mpicc) time and count exactly
 * like the weft ones. bench_util.hpp wraps it for the C++ benchmarks.
 */
#ifndef WEFT_BENCH_STATS_H
#define WEFT_BENCH_STATS_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

static inline uint64_t bench_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/*
 * Per-iteration samples as a histogram: exact to 1 ns below 1024 ns, then
 * 64 buckets per power of two (under 1.6% error). A histogram rather than a
 * sample array because the timed loop must stay in cache: storing samples
 * into a megabytes-long buffer takes a store miss every few iterations, and
 * the next locked instruction (every fetch-add) waits for that store to
 * drain — it doubled the measured floor. The counts are ~18 KB, of which a
 * run touches a few lines. Zero-initialise it (`= {0}`, memset, calloc).
 */
#define BENCH_HIST_LINEAR 1024u /* 1-ns buckets below this */
#define BENCH_HIST_SUB 64u      /* buckets per power of two above */
#define BENCH_HIST_BUCKETS (BENCH_HIST_LINEAR + (64u - 10u) * BENCH_HIST_SUB)

typedef struct bench_hist {
    uint32_t counts[BENCH_HIST_BUCKETS];
    uint64_t n;
} bench_hist_t;

static inline size_t bench_hist_index(uint64_t ns) {
    if (ns < BENCH_HIST_LINEAR) return (size_t)ns;
    const unsigned msb = 63u - (unsigned)__builtin_clzll(ns);
    return BENCH_HIST_LINEAR + (msb - 10u) * BENCH_HIST_SUB + ((ns >> (msb - 6u)) & (BENCH_HIST_SUB - 1u));
}

/* The smallest value bucket i holds. */
static inline uint64_t bench_hist_value(size_t i) {
    if (i < BENCH_HIST_LINEAR) return (uint64_t)i;
    const uint64_t k = i - BENCH_HIST_LINEAR, msb = 10u + k / BENCH_HIST_SUB;
    return (BENCH_HIST_SUB + k % BENCH_HIST_SUB) << (msb - 6u);
}

static inline void bench_hist_add(bench_hist_t* h, uint64_t ns) {
    ++h->counts[bench_hist_index(ns)];
    ++h->n;
}

/* q in [0, 1]: the smallest bucket value with at least q of the samples at
 * or below it; 0 without samples. */
static inline double bench_hist_percentile(const bench_hist_t* h, double q) {
    if (h->n == 0) return 0;
    uint64_t want = (uint64_t)(q * (double)h->n);
    if (want == 0) want = 1;
    uint64_t seen = 0;
    for (size_t i = 0; i < BENCH_HIST_BUCKETS; ++i) {
        seen += h->counts[i];
        if (seen >= want) return (double)bench_hist_value(i);
    }
    return (double)bench_hist_value(BENCH_HIST_BUCKETS - 1);
}

#endif /* WEFT_BENCH_STATS_H */
