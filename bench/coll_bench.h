/*
 * coll_bench.h — one methodology for point-to-point and collective latency,
 * shared by weft's program (coll_weft.cpp) and the MPI one (mpi/coll_mpi.c,
 * built against Open MPI and MPICH). A program fills a coll_ops with its
 * library's calls and hands it to coll_bench_run; the loops, the timing, the
 * result checks and the output are all here, so every library is measured by
 * the same code. C99 and C++.
 *
 * Tests (every rank of the job takes part in each; a barrier lines them up
 * before each test):
 *   pingpong8_half   8 bytes, rank 0 -> 1 -> 0 (blocking send/recv, tag 0);
 *                    ranks 2.. wait in one barrier meanwhile. Reported as
 *                    HALF a round trip, rank 0's numbers.
 *   barrier          one barrier.
 *   allreduce8_u64   one uint64, sum.
 *   allreduce8_f64   one double, sum.
 *   allreduce_1MiB   131072 doubles (2^20 bytes), sum; also stat=bw.
 *   bcast8, bcast_64KiB, bcast_1MiB   from rank 0 (the 1 MiB one also
 *                    stat=bw: 2^20 bytes / mean).
 *   allgather8, allgather_64KiB, allgather_1MiB   8 bytes per rank, and
 *                    2^16 and 2^20 bytes in all (the total divided by the
 *                    ranks, rounded down to 8 bytes, per rank; stat=bw over
 *                    the bytes each rank receives in all).
 *   (bcast and allgather only when the program provides them.)
 * Every result is checked after its loop (the ping-pong echoes a counter; the
 * allreduces are compared with the known sum; bcast and allgather results
 * with each rank's known pattern, every element); a wrong answer aborts the
 * job.
 *
 * Timing, as in bench/RESULTS.md "How to read the numbers": each rank runs
 * `warmup` untimed iterations, then `iters` timed ones — both cut down when
 * the test would take longer than the time budget (coll_plan; the RESULT
 * line says how many ran).
 *   mean  two clock reads around the timed loop / iters — the number to trust
 *         below a microsecond; averaged over the ranks.
 *   p50, p99  from 1 iteration in 16 timed on its own (every iteration of the
 *         1 MiB allreduce), so each sample carries one clock read (~30-100 ns
 *         on this VM); the largest over the ranks.
 *   bw    2^20 bytes / mean, in GB/s (1e9 bytes/s).
 *
 * Output, rank 0 only, one line per number:
 *   RESULT impl=openmpi test=barrier ranks=4 stat=mean unit=ns value=812.3 iters=10000
 *
 * Arguments (defaults): --iters N (20000) --warmup N (1000) for the latency
 * tests, --bw-iters N (200) --bw-warmup N (10) for the 1 MiB allreduce,
 * --budget-ms N (3000) per test, --label NAME (replaces the program's impl=),
 * --only TEST (run just that test, e.g. under a profiler).
 */
#ifndef WEFT_COLL_BENCH_H
#define WEFT_COLL_BENCH_H

#include "bench_stats.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum coll_type { COLL_U64, COLL_F64 } coll_type;
typedef enum coll_op { COLL_SUM, COLL_MAX } coll_op;

/* What a library provides. Every call returns 0 on success, else the
 * library's own error code (printed, then the job is aborted). */
typedef struct coll_ops {
    const char* impl; /* the impl= label unless --label */
    int rank, size;
    int (*send)(const void* buf, size_t bytes, int dest);
    int (*recv)(void* buf, size_t bytes, int source);
    int (*barrier)(void);
    int (*allreduce)(const void* in, void* out, size_t count, coll_type type, coll_op op);
    int (*bcast)(void* buf, size_t bytes, int root);                    /* NULL: no bcast rows */
    int (*allgather)(const void* in, size_t bytes_per_rank, void* out); /* NULL: no allgather rows */
    void (*abort_job)(int code);                                        /* must not return */
} coll_ops;

#define COLL_BW_COUNT ((size_t)1 << 17) /* doubles: 1 MiB */

typedef struct coll_bench {
    const coll_ops* ops;
    const char* impl;
    const char* only; /* --only: run just this test (NULL: all) */
    long warmup, iters, bw_warmup, bw_iters;
    uint64_t budget_ns; /* per test; see coll_plan */
    /* buffers of the current test */
    uint64_t seq, echo; /* ping-pong: what rank 0 sent last, what came back */
    uint64_t u64_in, u64_out;
    double f64_in, f64_out;
    double *bw_in, *bw_out;
    size_t move_bytes; /* bcast: the message; allgather: per rank */
    uint8_t *move_in, *move_out;
    bench_hist_t hist;
} coll_bench;

static void coll_fail(const coll_bench* b, const char* what, int code) {
    fprintf(stderr, "coll_bench: rank %d: %s (code %d)\n", b->ops->rank, what, code);
    fflush(stderr);
    b->ops->abort_job(1);
    exit(1); /* abort_job must not return; never continue with a bad result */
}

static void coll_call(const coll_bench* b, int rc, const char* what) {
    if (rc != 0) coll_fail(b, what, rc);
}

/* ------------------------------------------------------------- one step */

typedef int (*coll_step_fn)(coll_bench* b);

static int coll_step_pingpong(coll_bench* b) {
    const coll_ops* o = b->ops;
    int rc;
    if (o->rank == 0) {
        ++b->seq;
        if ((rc = o->send(&b->seq, sizeof b->seq, 1)) != 0) return rc;
        return o->recv(&b->echo, sizeof b->echo, 1);
    }
    if ((rc = o->recv(&b->echo, sizeof b->echo, 0)) != 0) return rc;
    return o->send(&b->echo, sizeof b->echo, 0);
}

static int coll_step_barrier(coll_bench* b) { return b->ops->barrier(); }

static int coll_step_allreduce_u64(coll_bench* b) {
    return b->ops->allreduce(&b->u64_in, &b->u64_out, 1, COLL_U64, COLL_SUM);
}

static int coll_step_allreduce_f64(coll_bench* b) {
    return b->ops->allreduce(&b->f64_in, &b->f64_out, 1, COLL_F64, COLL_SUM);
}

static int coll_step_allreduce_bw(coll_bench* b) {
    return b->ops->allreduce(b->bw_in, b->bw_out, COLL_BW_COUNT, COLL_F64, COLL_SUM);
}

static int coll_step_bcast(coll_bench* b) { return b->ops->bcast(b->move_out, b->move_bytes, 0); }

static int coll_step_allgather(coll_bench* b) { return b->ops->allgather(b->move_in, b->move_bytes, b->move_out); }

/* ------------------------------------------------------------- the loop */

/* Runs warmup + iters steps; samples one iteration in `every` (a power of
 * two) into b->hist. Returns the mean ns per timed iteration. */
static double coll_timed(coll_bench* b, coll_step_fn step, long warmup, long iters, uint64_t every, const char* name) {
    memset(&b->hist, 0, sizeof b->hist);
    for (long i = 0; i < warmup; ++i) coll_call(b, step(b), name);
    const uint64_t mask = every - 1;
    const uint64_t begin = bench_now_ns();
    for (long i = 0; i < iters; ++i) {
        int rc;
        if (((uint64_t)i & mask) == 0) {
            const uint64_t t0 = bench_now_ns();
            rc = step(b);
            bench_hist_add(&b->hist, bench_now_ns() - t0);
        } else {
            rc = step(b);
        }
        if (rc != 0) coll_fail(b, name, rc);
    }
    return (double)(bench_now_ns() - begin) / (double)iters;
}

/* The time budget: a library that needs milliseconds per step (MPICH's
 * busy-polling ranks oversubscribed on 2 cores) would take hours for the
 * requested counts. So first COLL_PROBE steps run untimed and COLL_PROBE
 * more are timed one by one (on the ranks that take part; the others
 * contribute 0); the median step of the slowest rank decides (a median, so
 * that one descheduling of a fast library does not cut its run), through
 * an allreduce over every rank, so all agree: *iters becomes at most
 * budget / that time, *warmup at most a tenth of it. The RESULT lines carry
 * the count actually run. Collective. */
#define COLL_PROBE 10

static void coll_plan(coll_bench* b, coll_step_fn step, int takes_part, long* warmup, long* iters, const char* name) {
    double per = 0, worst = 0;
    if (takes_part) {
        /* The first steps pay for connections and first touches: untimed. */
        for (int i = 0; i < COLL_PROBE; ++i) coll_call(b, step(b), name);
        bench_hist_t* h = &b->hist; /* free until the timed loop */
        memset(h, 0, sizeof *h);
        for (int i = 0; i < COLL_PROBE; ++i) {
            const uint64_t t0 = bench_now_ns();
            coll_call(b, step(b), name);
            bench_hist_add(h, bench_now_ns() - t0);
        }
        per = bench_hist_percentile(h, 0.5);
    }
    coll_call(b, b->ops->allreduce(&per, &worst, 1, COLL_F64, COLL_MAX), "allreduce of the probe");
    const double fit = worst > 0 ? (double)b->budget_ns / worst : (double)*iters;
    if (fit < (double)*iters) {
        *iters = fit >= 1 ? (long)fit : 1;
        if (*warmup > *iters / 10) *warmup = *iters / 10;
    }
}

/* Plans (coll_plan), lines the ranks up with a barrier, and runs the timed
 * loop on the ranks that take part. */
static double coll_measure(coll_bench* b, coll_step_fn step, int takes_part, long* warmup, long* iters, uint64_t every,
                           const char* name) {
    coll_plan(b, step, takes_part, warmup, iters, name);
    coll_call(b, b->ops->barrier(), "barrier");
    return takes_part ? coll_timed(b, step, *warmup, *iters, every, name) : 0;
}

static void coll_print(const coll_bench* b, const char* test, const char* stat, const char* unit, double value,
                       long iters) {
    if (b->ops->rank != 0) return;
    printf("RESULT impl=%s test=%s ranks=%d stat=%s unit=%s value=%.3f iters=%ld\n", b->impl, test, b->ops->size, stat,
           unit, value, iters);
    fflush(stdout);
}

/* Combines every rank's numbers (average of the means, largest p50/p99),
 * prints them, and returns the combined mean. Collective. */
static double coll_report(coll_bench* b, const char* test, double mean, long iters) {
    const double pct[2] = {bench_hist_percentile(&b->hist, 0.50), bench_hist_percentile(&b->hist, 0.99)};
    double sum = 0, worst[2] = {0, 0};
    coll_call(b, b->ops->allreduce(&mean, &sum, 1, COLL_F64, COLL_SUM), "allreduce of the results");
    coll_call(b, b->ops->allreduce(pct, worst, 2, COLL_F64, COLL_MAX), "allreduce of the results");
    const double avg = sum / b->ops->size;
    coll_print(b, test, "mean", "ns", avg, iters);
    coll_print(b, test, "p50", "ns", worst[0], iters);
    coll_print(b, test, "p99", "ns", worst[1], iters);
    return avg;
}

/* ------------------------------------------------------------ the tests */

static int coll_wanted(const coll_bench* b, const char* test) { return !b->only || strcmp(b->only, test) == 0; }

static void coll_run_pingpong(coll_bench* b) {
    const coll_ops* o = b->ops;
    const char* name = "pingpong8_half";
    if (o->size < 2 || !coll_wanted(b, name)) return;
    long warmup = b->warmup, iters = b->iters;
    b->seq = b->echo = 0;
    const double mean = coll_measure(b, coll_step_pingpong, o->rank < 2, &warmup, &iters, 16, name);
    if (o->rank == 0) {
        if (b->echo != b->seq) coll_fail(b, "ping-pong: rank 1 echoed a stale value", 0);
        coll_print(b, name, "mean", "ns", mean / 2, iters);
        coll_print(b, name, "p50", "ns", bench_hist_percentile(&b->hist, 0.50) / 2, iters);
        coll_print(b, name, "p99", "ns", bench_hist_percentile(&b->hist, 0.99) / 2, iters);
    }
    /* ranks 2.. have been waiting here all along */
    coll_call(b, o->barrier(), "barrier after the ping-pong");
}

/* One latency test: plan, measure, check, report. */
static void coll_latency_test(coll_bench* b, coll_step_fn step, const char* name, int (*ok)(const coll_bench*)) {
    if (!coll_wanted(b, name)) return;
    long warmup = b->warmup, iters = b->iters;
    const double mean = coll_measure(b, step, 1, &warmup, &iters, 16, name);
    if (ok && !ok(b)) coll_fail(b, name, 0);
    coll_report(b, name, mean, iters);
}

static uint64_t coll_rank_sum(const coll_bench* b) {
    const uint64_t n = (uint64_t)b->ops->size;
    return n * (n + 1) / 2; /* every rank contributes rank + 1 */
}
static int coll_ok_u64(const coll_bench* b) { return b->u64_out == coll_rank_sum(b); }
static int coll_ok_f64(const coll_bench* b) { return b->f64_out == (double)coll_rank_sum(b); }

static void coll_run_latency(coll_bench* b) {
    b->u64_in = (uint64_t)b->ops->rank + 1;
    b->f64_in = (double)b->u64_in;
    b->u64_out = 0;
    b->f64_out = 0;
    coll_latency_test(b, coll_step_barrier, "barrier", NULL);
    coll_latency_test(b, coll_step_allreduce_u64, "allreduce8_u64", coll_ok_u64);
    coll_latency_test(b, coll_step_allreduce_f64, "allreduce8_f64", coll_ok_f64);
}

static void coll_run_bandwidth(coll_bench* b) {
    const coll_ops* o = b->ops;
    const char* name = "allreduce_1MiB";
    if (!coll_wanted(b, name)) return;
    b->bw_in = (double*)malloc(COLL_BW_COUNT * sizeof(double));
    b->bw_out = (double*)malloc(COLL_BW_COUNT * sizeof(double));
    if (!b->bw_in || !b->bw_out) coll_fail(b, "out of memory", 0);
    /* Small integers: every partial sum is exact in any reduction order. */
    for (size_t i = 0; i < COLL_BW_COUNT; ++i) {
        b->bw_in[i] = (double)(o->rank + 1 + (int)(i % 7));
        b->bw_out[i] = -1;
    }
    long warmup = b->bw_warmup, iters = b->bw_iters;
    const double mean = coll_measure(b, coll_step_allreduce_bw, 1, &warmup, &iters, 1, name);
    const double n = o->size, base = n * (n + 1) / 2;
    for (size_t i = 0; i < COLL_BW_COUNT; ++i)
        if (b->bw_out[i] != base + n * (double)(i % 7)) coll_fail(b, "allreduce_1MiB: wrong sum", (int)i);
    const double avg = coll_report(b, name, mean, iters);
    coll_print(b, name, "bw", "GB/s", (double)(COLL_BW_COUNT * sizeof(double)) / avg, iters);
    free(b->bw_in);
    free(b->bw_out);
    b->bw_in = b->bw_out = NULL;
}

/* Byte i of rank r's data in the bcast and allgather tests. */
static uint8_t coll_pattern(int r, size_t i) { return (uint8_t)(r * 37 + (int)(i % 251) + 1); }

/* One bcast or allgather test of `bytes` (bcast: the message, allgather: per
 * rank); every element is checked after the loop. */
static void coll_move_test(coll_bench* b, int gather, size_t bytes, const char* name, int bw) {
    const coll_ops* o = b->ops;
    if (!coll_wanted(b, name) || (gather ? !o->allgather : !o->bcast)) return;
    const size_t out_bytes = gather ? bytes * (size_t)o->size : bytes;
    b->move_bytes = bytes;
    b->move_in = (uint8_t*)malloc(bytes ? bytes : 1);
    b->move_out = (uint8_t*)malloc(out_bytes ? out_bytes : 1);
    if (!b->move_in || !b->move_out) coll_fail(b, "out of memory", 0);
    for (size_t i = 0; i < bytes; ++i) b->move_in[i] = coll_pattern(o->rank, i);
    for (size_t i = 0; i < out_bytes; ++i) b->move_out[i] = gather || o->rank ? 0 : coll_pattern(0, i);
    long warmup = bw ? b->bw_warmup : b->warmup, iters = bw ? b->bw_iters : b->iters;
    const double mean =
        coll_measure(b, gather ? coll_step_allgather : coll_step_bcast, 1, &warmup, &iters, bw ? 1 : 16, name);
    for (size_t i = 0; i < out_bytes; ++i) {
        const uint8_t want = gather ? coll_pattern((int)(i / bytes), i % bytes) : coll_pattern(0, i);
        if (b->move_out[i] != want) coll_fail(b, gather ? "allgather: wrong data" : "bcast: wrong data", (int)i);
    }
    const double avg = coll_report(b, name, mean, iters);
    if (bw) coll_print(b, name, "bw", "GB/s", (double)out_bytes / avg, iters);
    free(b->move_in);
    free(b->move_out);
    b->move_in = b->move_out = NULL;
}

static void coll_run_moves(coll_bench* b) {
    const size_t n = (size_t)b->ops->size;
    coll_move_test(b, 0, 8, "bcast8", 0);
    coll_move_test(b, 0, (size_t)1 << 16, "bcast_64KiB", 0);
    coll_move_test(b, 0, (size_t)1 << 20, "bcast_1MiB", 1);
    coll_move_test(b, 1, 8, "allgather8", 0);
    coll_move_test(b, 1, ((size_t)1 << 16) / n / 8 * 8, "allgather_64KiB", 0);
    coll_move_test(b, 1, ((size_t)1 << 20) / n / 8 * 8, "allgather_1MiB", 1);
}

/* ----------------------------------------------------------- the driver */

static long coll_count_arg(const coll_bench* b, const char* flag, const char* value) {
    char* end = NULL;
    const long v = value ? strtol(value, &end, 10) : -1;
    if (!value || *end != '\0' || v < 1) {
        if (b->ops->rank == 0) fprintf(stderr, "coll_bench: %s wants a positive count\n", flag);
        b->ops->abort_job(2);
        exit(2);
    }
    return v;
}

/* Parses argv (see the top of this file), runs every test, returns 0. The
 * library must be initialised; the caller finalises it afterwards. b is
 * large (a histogram): give it static storage. */
static int coll_bench_run(coll_bench* b, const coll_ops* ops, int argc, char** argv) {
    memset(b, 0, sizeof *b);
    b->ops = ops;
    b->impl = ops->impl;
    b->warmup = 1000;
    b->iters = 20000;
    b->bw_warmup = 10;
    b->bw_iters = 200;
    b->budget_ns = 3000000000ull;
    for (int i = 1; i < argc; ++i) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--label") == 0 && v)
            b->impl = v;
        else if (strcmp(a, "--only") == 0 && v)
            b->only = v;
        else if (strcmp(a, "--warmup") == 0)
            b->warmup = coll_count_arg(b, a, v);
        else if (strcmp(a, "--iters") == 0)
            b->iters = coll_count_arg(b, a, v);
        else if (strcmp(a, "--bw-warmup") == 0)
            b->bw_warmup = coll_count_arg(b, a, v);
        else if (strcmp(a, "--bw-iters") == 0)
            b->bw_iters = coll_count_arg(b, a, v);
        else if (strcmp(a, "--budget-ms") == 0)
            b->budget_ns = (uint64_t)coll_count_arg(b, a, v) * 1000000ull;
        else {
            if (ops->rank == 0) fprintf(stderr, "coll_bench: unknown argument %s\n", a);
            ops->abort_job(2);
            exit(2);
        }
        ++i;
    }
    if (ops->rank == 0) {
        printf("# coll_bench impl=%s ranks=%d warmup=%ld iters=%ld bw_warmup=%ld bw_iters=%ld budget_ms=%llu\n",
               b->impl, ops->size, b->warmup, b->iters, b->bw_warmup, b->bw_iters,
               (unsigned long long)(b->budget_ns / 1000000u));
        fflush(stdout);
    }
    coll_run_pingpong(b);
    coll_run_latency(b);
    coll_run_bandwidth(b);
    coll_run_moves(b);
    return 0;
}

#endif /* WEFT_COLL_BENCH_H */
