/*
 * inflight.c — messages in transit at a drain, on a sub-communicator, must
 * come out of the drain's buffer after it, in order, through the wrapped
 * receive and probe calls (run under libweft-mpi only: it raises SIGUSR1).
 *
 *   LD_PRELOAD=libweft-mpi-KIND.so mpiexec -n 3 mpi_inflight [ialltoall]
 *
 * Ranks 0 and 1 split off a communicator of their own. Rank 0 sends N
 * messages to rank 1 on it and asks for a drain (raise(SIGUSR1)); every
 * rank "computes" (rank 1 for 1 s, the others 2 s), so the drain finds the
 * messages unreceived and no collective begun, and rank 1's hook takes the
 * messages out of MPI. Then rank 1 probes (MPI_Iprobe must see the
 * first one), receives the first half with MPI_Irecv (requests the buffer
 * completes at once) and MPI_Waitall (a quarter) and MPI_Waitany (a quarter:
 * each index once), and the rest with MPI_Recv, with
 * MPI_ANY_TAG: every payload and tag must come in the order sent. A
 * quarter of them go by MPI_Bsend, one by MPI_Isend whose request rank 0
 * frees (MPI_Request_free).
 *
 * Besides: a 1-D cartesian communicator of all ranks but the last
 * (MPI_Cart_create; the last gets MPI_COMM_NULL), on which rank 0 sends
 * rank 1 four messages by MPI_Rsend into receives rank 1 posted before the
 * barrier (they complete inside MPI: counted, not buffered); a duplicate
 * of MPI_COMM_WORLD made after it, used by a barrier (its clock is found
 * only if every rank counted the cartesian creation, MPI_COMM_NULL or
 * not); and a message rank 1 sends itself on MPI_COMM_SELF before the
 * drain and receives after it (buffered: 17 messages in all). With
 * "ialltoall", every rank calls MPI_Ialltoall, refused by a wrapper
 * generated from the MPI's header (mpi/coverage.py).
 */
#define _POSIX_C_SOURCE 200809L
#include <mpi.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { N = 16 };

int main(int argc, char** argv) {
    MPI_Init(&argc, &argv);
    int rank, size, bad = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm pair;
    MPI_Comm_split(MPI_COMM_WORLD, rank < 2 ? 0 : 1, rank, &pair);
    if (argc > 1 && strcmp(argv[1], "ialltoall") == 0) {
        int out[64] = {0}, in[64];
        MPI_Request r;
        MPI_Ialltoall(out, 1, MPI_INT, in, 1, MPI_INT, MPI_COMM_WORLD, &r); /* refused (generated): aborts */
        MPI_Wait(&r, MPI_STATUS_IGNORE);
    }
    MPI_Comm cart, dupw;
    const int dims[1] = {size - 1}, periods[1] = {1};
    MPI_Cart_create(MPI_COMM_WORLD, 1, dims, periods, 0, &cart);
    if ((cart == MPI_COMM_NULL) != (rank == size - 1)) {
        fprintf(stderr, "inflight: rank %d: Cart_create gave %s\n", rank, cart == MPI_COMM_NULL ? "NULL" : "a comm");
        bad = 1;
    }
    MPI_Comm_dup(MPI_COMM_WORLD, &dupw);
    MPI_Barrier(dupw);
    int ready[4] = {-1, -1, -1, -1}, self_got = -1;
    MPI_Request ready_reqs[4];
    if (rank == 1)
        for (int i = 0; i < 4; ++i) MPI_Irecv(&ready[i], 1, MPI_INT, 0, 50 + i, cart, &ready_reqs[i]);
    const int bsize = N * (4 * (int)sizeof(long) + MPI_BSEND_OVERHEAD);
    void* bbuf = malloc((size_t)bsize);
    MPI_Buffer_attach(bbuf, bsize);
    /* Every rank past its set-up (the layer adopted `pair`) before the drain. */
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
        for (int i = 0; i < 4; ++i) MPI_Rsend(&i, 1, MPI_INT, 1, 50 + i, cart);
        for (int i = 0; i < N; ++i) {
            long payload[4] = {i, 10 * i, 100 * i, -i};
            if (i == 5) { /* its buffer must outlive the send, which nobody waits for */
                static long kept[4];
                memcpy(kept, payload, sizeof kept);
                MPI_Request r;
                MPI_Isend(kept, 4, MPI_LONG, 1, 10 + i % 3, pair, &r);
                MPI_Request_free(&r);
            } else if (i % 4 == 1) {
                MPI_Bsend(payload, 4, MPI_LONG, 1, 10 + i % 3, pair);
            } else {
                MPI_Send(payload, 4, MPI_LONG, 1, 10 + i % 3, pair);
            }
        }
        raise(SIGUSR1);
    }
    if (rank == 1) {
        const int mine = 77;
        MPI_Request r;
        MPI_Isend(&mine, 1, MPI_INT, 0, 3, MPI_COMM_SELF, &r);
        MPI_Wait(&r, MPI_STATUS_IGNORE);
    }
    if (rank != 1) {
        /* No new collective until the drain is over: one begun here would
         * hold the drain until rank 1 joins it (as MANA's would). */
        const struct timespec compute = {2, 0};
        nanosleep(&compute, NULL);
    } else {
        const struct timespec compute = {1, 0};
        nanosleep(&compute, NULL);
        int flag = 0;
        MPI_Status st;
        MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, pair, &flag, &st);
        if (!flag || st.MPI_SOURCE != 0 || st.MPI_TAG != 10) {
            fprintf(stderr, "inflight: Iprobe: flag %d source %d tag %d\n", flag, st.MPI_SOURCE, st.MPI_TAG);
            bad = 1;
        }
        long got[N][4];
        MPI_Request reqs[N / 2];
        MPI_Status sts[N];
        for (int i = 0; i < N / 2; ++i) MPI_Irecv(got[i], 4, MPI_LONG, 0, MPI_ANY_TAG, pair, &reqs[i]);
        MPI_Waitall(N / 4, reqs, sts);
        for (int k = N / 4; k < N / 2; ++k) { /* the second quarter by MPI_Waitany: the right index each time */
            int index = -1;
            MPI_Status one;
            MPI_Waitany(N / 2, reqs, &index, &one);
            if (index < N / 4 || index >= N / 2) {
                fprintf(stderr, "inflight: Waitany returned index %d\n", index);
                bad = 1;
                break;
            }
            sts[index] = one;
        }
        for (int i = N / 2; i < N; ++i) MPI_Recv(got[i], 4, MPI_LONG, MPI_ANY_SOURCE, MPI_ANY_TAG, pair, &sts[i]);
        MPI_Recv(&self_got, 1, MPI_INT, 0, 3, MPI_COMM_SELF, MPI_STATUS_IGNORE);
        MPI_Status ready_sts[4];
        MPI_Waitall(4, ready_reqs, ready_sts);
        for (int i = 0; i < 4; ++i)
            if (ready[i] != i) {
                fprintf(stderr, "inflight: ready-mode message %d: %d\n", i, ready[i]);
                bad = 1;
            }
        if (self_got != 77) {
            fprintf(stderr, "inflight: the message to itself on MPI_COMM_SELF: %d\n", self_got);
            bad = 1;
        }
        for (int i = 0; i < N; ++i) {
            int count = -1;
            MPI_Get_count(&sts[i], MPI_LONG, &count);
            if (got[i][0] != i || got[i][1] != 10 * i || got[i][2] != 100 * i || got[i][3] != -i ||
                sts[i].MPI_TAG != 10 + i % 3 || sts[i].MPI_SOURCE != 0 || count != 4) {
                fprintf(stderr, "inflight: message %d: %ld %ld %ld %ld tag %d source %d count %d\n", i, got[i][0],
                        got[i][1], got[i][2], got[i][3], sts[i].MPI_TAG, sts[i].MPI_SOURCE, count);
                bad = 1;
            }
        }
    }
    int any = 0;
    MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0) printf("inflight: %d messages across a drain: %s\n", N, any ? "FAILED" : "ok");
    int bdsize = 0;
    MPI_Buffer_detach(&bbuf, &bdsize);
    free(bbuf);
    MPI_Comm_free(&pair);
    MPI_Comm_free(&dupw);
    if (cart != MPI_COMM_NULL) MPI_Comm_free(&cart);
    MPI_Finalize();
    return any;
}
