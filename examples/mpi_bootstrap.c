/*
 * mpi_bootstrap.c — weft started on an MPI library's own all-gather
 * (weft/bootstrap.h), as an MPI stack or an MPI program links weft:
 * whatever launched MPI (MPICH's hydra, Open MPI's mpirun) launched weft.
 *
 *   mpiexec.mpich -n 3 build/mpi/mpi_bootstrap_mpich
 *   mpirun.openmpi --oversubscribe -n 3 build/mpi/mpi_bootstrap_openmpi
 *
 * weft's exchanges go through MPI_Iallgather on a duplicate of
 * MPI_COMM_WORLD, tested with MPI_Test while weft progresses its own
 * transport. Then the ranks check weft for real: each puts its rank into
 * the next rank's window, all fetch-add one word of rank 0's, each sends an
 * active message around the ring, and weft_bootstrap_barrier (itself an all-gather through MPI) separates the steps.
 * Exit status 0 when every check held on every rank (MPI_Allreduce of the
 * verdicts).
 */
#include <weft/bootstrap.h>
#include <weft/weft.h>

#include <mpi.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static MPI_Comm boot_comm; /* weft's own: its all-gathers never meet the program's */
static int me, nranks;

static int mpi_iallgather(void* arg, const void* mine, size_t len, void* all, void** request) {
    MPI_Request* r = malloc(sizeof *r);
    (void)arg;
    if (!r || len > (size_t)0x7fffffff) {
        free(r);
        return 1;
    }
    if (MPI_Iallgather(mine, (int)len, MPI_BYTE, all, (int)len, MPI_BYTE, boot_comm, r) != MPI_SUCCESS) {
        free(r);
        return 1;
    }
    *request = r;
    return 0;
}

static int mpi_test(void* arg, void* request, int* done) {
    MPI_Request* r = request;
    (void)arg;
    if (MPI_Test(r, done, MPI_STATUS_IGNORE) != MPI_SUCCESS) return 1;
    if (*done) free(r);
    return 0;
}

static int failed;
#define CHECK(call)                                                                            \
    do {                                                                                       \
        weft_status_t st_ = (call);                                                            \
        if (st_ != WEFT_OK) {                                                                  \
            fprintf(stderr, "mpi_bootstrap rank %d: %s: %s\n", me, #call, weft_strerror(st_)); \
            MPI_Abort(MPI_COMM_WORLD, 1);                                                      \
        }                                                                                      \
    } while (0)
#define EXPECT(cond, ...)                                   \
    do {                                                    \
        if (!(cond)) {                                      \
            fprintf(stderr, "mpi_bootstrap rank %d: ", me); \
            fprintf(stderr, __VA_ARGS__);                   \
            fputc('\n', stderr);                            \
            failed = 1;                                     \
        }                                                   \
    } while (0)

static int ring_from = -1;
static void on_ring(void* arg, uint32_t source, const void* payload, size_t len) {
    uint32_t v = 0;
    (void)arg;
    if (len == sizeof v) memcpy(&v, payload, sizeof v);
    ring_from = len == sizeof v && v == source ? (int)source : -2;
}

int main(int argc, char** argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    MPI_Comm_dup(MPI_COMM_WORLD, &boot_comm);

    weft_bootstrap_ops_t ops;
    memset(&ops, 0, sizeof ops);
    ops.rank = (uint32_t)me;
    ops.size = (uint32_t)nranks;
    ops.iallgather = mpi_iallgather;
    ops.test = mpi_test;
    weft_context_t ctx;
    CHECK(weft_init_with_bootstrap(&ops, WEFT_THREAD_SERIALIZED, NULL, &ctx));
    uint32_t rank = 0, size = 0;
    CHECK(weft_rank(ctx, &rank));
    CHECK(weft_size(ctx, &size));
    EXPECT(rank == (uint32_t)me && size == (uint32_t)nranks, "weft says rank %u of %u, MPI %d of %d", rank, size, me,
           nranks);

    void* base = NULL;
    weft_window_t win;
    CHECK(weft_window_allocate(ctx, 4096, &base, &win));
    memset(base, 0, 4096);
    CHECK(weft_bootstrap_barrier(ctx));

    /* A put into the next rank's window, and a fetch-add on rank 0's word. */
    const uint32_t next = (rank + 1) % size, prev = (rank + size - 1) % size;
    const uint64_t mark = 1000 + rank;
    CHECK(weft_put(win, next, 0, &mark, sizeof mark));
    CHECK(weft_flush(win, next));
    uint64_t old = 0;
    CHECK(weft_atomic_fetch_add(win, 0, 64, 1, &old));
    EXPECT(old < size, "fetch-add returned %llu with %u ranks", (unsigned long long)old, size);
    CHECK(weft_bootstrap_barrier(ctx));
    uint64_t got = 0;
    memcpy(&got, base, sizeof got);
    EXPECT(got == 1000 + prev, "rank %u's put: found %llu", prev, (unsigned long long)got);
    if (rank == 0) {
        uint64_t sum = 0;
        CHECK(weft_atomic_fetch_add(win, 0, 64, 0, &sum));
        EXPECT(sum == size, "%llu fetch-adds landed of %u", (unsigned long long)sum, size);
    }

    /* An active message around the ring. */
    CHECK(weft_am_register(ctx, 7, on_ring, NULL));
    CHECK(weft_bootstrap_barrier(ctx));
    CHECK(weft_am_send(ctx, next, 7, &rank, sizeof rank));
    while (ring_from == -1) CHECK(weft_wait(ctx, 1000000000ull));
    EXPECT(ring_from == (int)prev, "the ring's message came from %d, not %u", ring_from, prev);
    CHECK(weft_bootstrap_barrier(ctx));

    CHECK(weft_window_free(win));
    CHECK(weft_finalize(ctx));
    MPI_Comm_free(&boot_comm);

    int any_failed = 0;
    MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (me == 0) printf("mpi_bootstrap: %d ranks on MPI's all-gather: %s\n", nranks, any_failed ? "FAILED" : "ok");
    MPI_Finalize();
    return any_failed;
}
