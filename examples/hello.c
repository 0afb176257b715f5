/* hello.c — the C ABI from plain C: each rank adds its rank number to a
 * counter on rank 0 with a remote fetch-add; rank 0 checks the total.
 *   cc hello.c -I include -L build -lweft && weft-run -n 4 ./a.out */
#include <weft/weft.h>

#include <stdio.h>

int main(void) {
    weft_context_t ctx;
    weft_status_t st = weft_init(&ctx);
    if (st != WEFT_OK) {
        fprintf(stderr, "weft_init: %s\n", weft_strerror(st));
        return 1;
    }
    uint32_t rank = 0, size = 0;
    weft_rank(ctx, &rank);
    weft_size(ctx, &size);
    void* base = NULL;
    weft_window_t win = NULL;
    if (weft_window_allocate(ctx, 64, &base, &win) != WEFT_OK) return 1;
    uint64_t old = 0;
    st = weft_atomic_fetch_add(win, 0, 0, rank, &old);
    if (st != WEFT_OK) return 1;
    weft_bootstrap_barrier(ctx);
    int rc = 0;
    if (rank == 0) {
        uint64_t total = *(volatile uint64_t*)base;
        uint64_t want = (uint64_t)size * (size - 1) / 2;
        printf("hello from %u ranks: sum of ranks %llu (%s)\n", size, (unsigned long long)total,
               total == want ? "ok" : "WRONG");
        rc = total == want ? 0 : 1;
    }
    weft_window_free(win);
    weft_finalize(ctx);
    return rc;
}
