/*
 * inflight.c — messages in transit at a drain, on a sub-communicator, must
 * come out of the drain's buffer after it, in order, through the wrapped
 * receive and probe calls (run under libweft-mpi only: it raises SIGUSR1).
 *
 *   LD_PRELOAD=libweft-mpi-KIND.so mpiexec -n 2 mpi_inflight [ssend]
 *
 * Ranks 0 and 1 split off a communicator of their own. Rank 0 sends N
 * messages to rank 1 on it and asks for a drain (raise(SIGUSR1)); every
 * rank "computes" (rank 1 for 1 s, the others 2 s), so the drain finds the
 * messages unreceived and no collective begun, and rank 1's hook takes the
 * messages out of MPI. Then rank 1 probes (MPI_Iprobe must see the
 * first one), receives the first half with MPI_Irecv (requests the buffer
 * completes at once) and MPI_Waitall (a quarter) and MPI_Waitany (a quarter:
 * each index once), and the rest with MPI_Recv, with
 * MPI_ANY_TAG: every payload and tag must come in the order sent. With
 * "ssend", rank 0 calls MPI_Ssend, which weft-mpi refuses loudly (abort).
 */
#define _POSIX_C_SOURCE 200809L
#include <mpi.h>

#include <signal.h>
#include <stdio.h>
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
    if (argc > 1 && strcmp(argv[1], "ssend") == 0 && rank == 0) {
        int v = 1;
        MPI_Ssend(&v, 1, MPI_INT, 1, 0, pair); /* refused: aborts the job */
    }
    /* Every rank past its set-up (the layer adopted `pair`) before the drain. */
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
        for (int i = 0; i < N; ++i) {
            long payload[4] = {i, 10 * i, 100 * i, -i};
            MPI_Send(payload, 4, MPI_LONG, 1, 10 + i % 3, pair);
        }
        raise(SIGUSR1);
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
    MPI_Comm_free(&pair);
    MPI_Finalize();
    return any;
}
