/*
 * stream_copy.c — this machine's memory-copy bound, measured next to the
 * collectives by bench/run_mpi_compare.sh: a STREAM-like copy (b[i] = a[i],
 * memcpy) of 1 MiB (the size of the 1 MiB rows: after the first pass it sits
 * in the caches, as the benchmark's buffers do) and of 64 MiB (main memory).
 * An allreduce of N bytes reads its input and writes its output at least
 * once, so one copy of N bytes is a lower bound on its time.
 *
 *   cc -O2 bench/stream_copy.c -o stream_copy && ./stream_copy [--label L] [--ranks N]
 *
 * Prints RESULT lines in coll_bench.h's format: test=copy_1MiB / copy_64MiB,
 * stat=bw (bytes copied / median time of one pass, GB/s) and stat=mean (ns).
 * --ranks N runs N copying processes at once (the per-process figure is
 * printed), as N ranks of a collective would share the cores.
 */
#include "bench_stats.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static int cmp_u64(const void* a, const void* b) {
    const uint64_t x = *(const uint64_t*)a, y = *(const uint64_t*)b;
    return x < y ? -1 : x > y;
}

/* Median ns of one copy of `bytes`, over `passes` passes after 3 untimed. */
static uint64_t copy_ns(size_t bytes, int passes) {
    char* a = (char*)malloc(bytes);
    char* b = (char*)malloc(bytes);
    uint64_t* t = (uint64_t*)malloc(sizeof(uint64_t) * (size_t)passes);
    if (!a || !b || !t) {
        fprintf(stderr, "stream_copy: out of memory\n");
        exit(1);
    }
    memset(a, 1, bytes);
    memset(b, 2, bytes);
    for (int i = 0; i < 3; ++i) memcpy(b, a, bytes);
    for (int i = 0; i < passes; ++i) {
        const uint64_t t0 = bench_now_ns();
        memcpy(b, a, bytes);
        __asm__ volatile("" ::"r"(b) : "memory");
        t[i] = bench_now_ns() - t0;
    }
    if (memcmp(a, b, bytes) != 0) {
        fprintf(stderr, "stream_copy: copy check failed\n");
        exit(1);
    }
    qsort(t, (size_t)passes, sizeof *t, cmp_u64);
    const uint64_t med = t[passes / 2];
    free(a);
    free(b);
    free(t);
    return med;
}

int main(int argc, char** argv) {
    const char* label = "stream";
    int ranks = 1;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--label") == 0) label = argv[i + 1];
        if (strcmp(argv[i], "--ranks") == 0) ranks = atoi(argv[i + 1]);
    }
    if (ranks < 1) ranks = 1;
    for (int r = 1; r < ranks; ++r) /* the others copy alongside and print nothing */
        if (fork() == 0) {
            copy_ns((size_t)1 << 20, 2000);
            copy_ns((size_t)64 << 20, 20);
            _exit(0);
        }
    const size_t sizes[2] = {(size_t)1 << 20, (size_t)64 << 20};
    const char* names[2] = {"copy_1MiB", "copy_64MiB"};
    const int passes[2] = {2000, 20};
    for (int k = 0; k < 2; ++k) {
        const uint64_t ns = copy_ns(sizes[k], passes[k]);
        printf("RESULT impl=%s test=%s ranks=%d stat=mean unit=ns value=%.3f iters=%d\n", label, names[k], ranks,
               (double)ns, passes[k]);
        printf("RESULT impl=%s test=%s ranks=%d stat=bw unit=GB/s value=%.3f iters=%d\n", label, names[k], ranks,
               (double)sizes[k] / (double)ns, passes[k]);
    }
    while (wait(NULL) > 0) {
    }
    return 0;
}
