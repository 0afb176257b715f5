/* stencil.c — a 2-D Jacobi stencil that checkpoints and restarts
 * (weft/ckpt.h, docs/checkpoint.md).
 *
 *   weft-run -n 4 stencil STEPS EVERY DIR
 *   weft-run -n 4 --checkpoint-on SIGUSR2 --checkpoint-dir DIR stencil STEPS 0 -
 *   weft-run -n 4 --restart DIR stencil STEPS 0 -
 *
 * The NX x NY grid is split by rows: each rank holds its rows plus one halo
 * row above and below, exchanged with isend/irecv every step; an allreduce
 * sums the residual every step. Every EVERY steps (0: never) the ranks
 * checkpoint into DIR, and whenever weft_ckpt_need says one is due (weft-run
 * was signalled); at start they restart from DIR's newest valid generation
 * when there is one. DIR "-" is the directory weft-run names. The grid and the step counter are the
 * protected regions, nothing else: a run killed anywhere (weft-run --fault
 * kill:rank=R:at=stencil.step:count=K) and restarted ends with exactly the
 * bits of an uninterrupted run. Rank 0 prints the final grid's digest. */
#include <weft/ckpt.h>
#include <weft/comm.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { NX = 256, NY = 512 };

static int check(weft_status_t st, const char* what, uint32_t rank) {
    if (st == WEFT_OK) return 0;
    fprintf(stderr, "stencil: rank %u: %s: %s\n", (unsigned)rank, what, weft_strerror(st));
    return 1;
}

/* FNV-1a over bytes: the digest of a rank's rows. */
static uint64_t fnv1a(uint64_t h, const void* p, size_t n) {
    const unsigned char* b = (const unsigned char*)p;
    for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

int main(int argc, char** argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: stencil STEPS EVERY DIR\n");
        return 2;
    }
    const uint64_t steps = strtoull(argv[1], NULL, 10), every = strtoull(argv[2], NULL, 10);
    const char* dir = strcmp(argv[3], "-") == 0 ? NULL : argv[3];
    weft_context_t ctx;
    weft_status_t st = weft_init(&ctx);
    if (st != WEFT_OK) {
        fprintf(stderr, "weft_init: %s\n", weft_strerror(st));
        return 1;
    }
    uint32_t rank = 0, size = 0;
    weft_rank(ctx, &rank);
    weft_size(ctx, &size);
    weft_comm_t world;
    weft_comm_world(ctx, &world);

    /* Rows [first, first + rows) of the grid, with halos at 0 and rows + 1. */
    const uint32_t first = (uint32_t)((uint64_t)NY * rank / size);
    const uint32_t rows = (uint32_t)((uint64_t)NY * (rank + 1) / size) - first;
    const size_t row_bytes = NX * sizeof(double);
    double* grid = calloc((size_t)(rows + 2) * NX, sizeof(double));
    double* next = calloc((size_t)(rows + 2) * NX, sizeof(double));
    uint64_t step = 0;
    if (!grid || !next) return 1;
    int failed = 0;
    failed |= check(weft_ckpt_region_register(ctx, 1, grid + NX, rows * row_bytes), "register grid", rank);
    failed |= check(weft_ckpt_region_register(ctx, 2, &step, sizeof step), "register step", rank);

    weft_restart_info_t info;
    st = weft_restart(ctx, dir, &info);
    if (st == WEFT_OK) {
        if (rank == 0)
            printf("stencil: restarted from generation %llu at step %llu (verify %.0f us, load %.0f us)\n",
                   (unsigned long long)info.generation, (unsigned long long)step, info.verify_ns / 1e3,
                   info.load_ns / 1e3);
        fflush(stdout);
    } else if (st == WEFT_ERR_NOT_FOUND) {
        /* A first start: a hot spot in the middle, the rest cold. */
        for (uint32_t r = 1; r <= rows; ++r)
            for (uint32_t x = 0; x < NX; ++x) {
                const uint32_t y = first + r - 1;
                grid[(size_t)r * NX + x] = (x > NX / 3 && x < 2 * NX / 3 && y > NY / 3 && y < 2 * NY / 3) ? 100.0 : 0.0;
            }
    } else {
        failed |= check(st, "restart", rank);
    }

    if (rank == 0) {
        printf("stencil: running from step %llu\n", (unsigned long long)step);
        fflush(stdout);
    }
    const uint32_t up = rank > 0 ? rank - 1 : UINT32_MAX, down = rank + 1 < size ? rank + 1 : UINT32_MAX;
    double residual = 0;
    while (!failed && step < steps) {
        weft_fault_point("stencil.step");
        /* Halos: my first row goes up, my last row down. The edges of the
         * whole grid keep a zero halo (a cold boundary). */
        weft_request_t reqs[4];
        size_t n = 0;
        if (up != UINT32_MAX) {
            failed |= check(weft_irecv(world, grid, NX, WEFT_DOUBLE, (int32_t)up, 1, &reqs[n++]), "irecv", rank);
            failed |= check(weft_isend(world, grid + NX, NX, WEFT_DOUBLE, up, 2, &reqs[n++]), "isend", rank);
        }
        if (down != UINT32_MAX) {
            failed |=
                check(weft_irecv(world, grid + (size_t)(rows + 1) * NX, NX, WEFT_DOUBLE, (int32_t)down, 2, &reqs[n++]),
                      "irecv", rank);
            failed |=
                check(weft_isend(world, grid + (size_t)rows * NX, NX, WEFT_DOUBLE, down, 1, &reqs[n++]), "isend", rank);
        }
        if (failed) break;
        failed |= check(weft_request_waitall(n, reqs, NULL), "halo exchange", rank);
        double local = 0;
        for (uint32_t r = 1; r <= rows; ++r)
            for (uint32_t x = 0; x < NX; ++x) {
                const size_t i = (size_t)r * NX + x;
                const double left = x > 0 ? grid[i - 1] : 0, right = x + 1 < NX ? grid[i + 1] : 0;
                next[i] = 0.25 * (left + right + grid[i - NX] + grid[i + NX]);
                local += (next[i] - grid[i]) * (next[i] - grid[i]);
            }
        memcpy(grid + NX, next + NX, rows * row_bytes); /* in place: the region stays where it is */
        failed |= check(weft_allreduce(world, &local, &residual, 1, WEFT_DOUBLE, WEFT_OP_SUM), "allreduce", rank);
        ++step;
        int due = every && step % every == 0;
        if (!failed && !due) failed |= check(weft_ckpt_need(ctx, &due), "weft_ckpt_need", rank);
        if (!failed && due) {
            weft_ckpt_profile_t p;
            failed |= check(weft_checkpoint(ctx, dir, &p), "checkpoint", rank);
            if (!failed && rank == 0)
                printf(
                    "stencil: step %llu: generation %llu, %llu bytes per rank, drain %.0f us, write %.0f us, "
                    "fsync %.0f us, commit %.0f us\n",
                    (unsigned long long)step, (unsigned long long)p.generation, (unsigned long long)p.bytes,
                    p.drain_ns / 1e3, p.write_ns / 1e3, p.fsync_ns / 1e3, p.commit_ns / 1e3);
            fflush(stdout); /* a rank may be killed next: keep what was said */
        }
    }

    /* The digest of the whole grid: each rank's rows, combined in rank order. */
    uint64_t mine = fnv1a(1469598103934665603ull, grid + NX, rows * row_bytes);
    uint64_t* all = calloc(size, sizeof(uint64_t));
    if (!failed) failed |= check(weft_allgather(world, &mine, 1, WEFT_UINT64, all), "allgather", rank);
    if (!failed && rank == 0) {
        uint64_t h = 1469598103934665603ull;
        for (uint32_t r = 0; r < size; ++r) h = fnv1a(h, &all[r], sizeof all[r]);
        printf("stencil: %llu steps on %u ranks, residual %.6e, digest %016llx\n", (unsigned long long)step,
               (unsigned)size, residual, (unsigned long long)h);
    }
    free(all);
    weft_ckpt_region_remove(ctx, 1);
    weft_ckpt_region_remove(ctx, 2);
    free(grid);
    free(next);
    weft_finalize(ctx);
    return failed;
}
