/*
 * ssend.c — synchronous mode across a drain, under libweft-mpi (it raises
 * SIGUSR1), 3 ranks:
 *
 *   LD_PRELOAD=libweft-mpi-KIND.so mpiexec -n 3 mpi_ssend
 *
 * Rank 0 sends rank 1, all with tag 5: 100 by MPI_Isend, 101 by
 * MPI_Issend, 102 by MPI_Isend, 103 by a persistent synchronous send
 * (MPI_Ssend_init, MPI_Start); then asks for a drain. Rank 1 "computes"
 * for 1.5 s, so the drain takes all four into its buffer, and MPI, which
 * has received them, completes rank 0's synchronous sends. The program must
 * not see that: rank 0 tests both requests for 0.5 s after the drain, and
 * each must stay incomplete until rank 1 receives its message (from the
 * buffer); then MPI_Wait returns, and not before rank 1's receive (their
 * CLOCK_MONOTONIC times are compared: one machine). The persistent request
 * is started once more afterwards (104, received when it comes). Rank 2 sends rank 1 a message by
 * MPI_Ssend, not drained (received when it comes), which completes as
 * usual. Before all that, a receive nobody will match and a send are
 * cancelled (MPI_Cancel): the drain must still balance. Prints
 * "synchronous sends across a drain: ok".
 */
#define _POSIX_C_SOURCE 200809L
#include <mpi.h>

#include <signal.h>
#include <stdio.h>
#include <time.h>

#include "nap.h"

int main(int argc, char** argv) {
    MPI_Init(&argc, &argv);
    int rank, size, bad = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    /* Connections first: MPICH over UCX wires a pair up on its first
     * message, which then waits for the receiver's progress (rank 1 is
     * asleep below); the sends must reach it before the drain. */
    if (rank == 0 || rank == 2) {
        int ping = rank;
        MPI_Sendrecv_replace(&ping, 1, MPI_INT, 1, 9, 1, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else if (rank == 1) {
        for (int peer = 0; peer <= 2; peer += 2) {
            int ping = 0;
            MPI_Recv(&ping, 1, MPI_INT, peer, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(&ping, 1, MPI_INT, peer, 9, MPI_COMM_WORLD);
        }
    }
    /* MPI_Cancel as HPCC uses it: a receive nobody will match, cancelled
     * (it must not count as an arrival, or the drain below never balances),
     * and a send, cancelled if MPI can (counted as arrived then). */
    int send_cancelled = 0, recv_cancelled = 1;
    if (rank == 2) {
        int never = 0;
        MPI_Request r;
        MPI_Status st;
        MPI_Irecv(&never, 1, MPI_INT, 0, 77, MPI_COMM_WORLD, &r);
        MPI_Cancel(&r);
        MPI_Wait(&r, &st);
        MPI_Test_cancelled(&st, &recv_cancelled);
    } else if (rank == 0) {
        static int maybe = 300;
        MPI_Request r;
        MPI_Status st;
        MPI_Isend(&maybe, 1, MPI_INT, 2, 78, MPI_COMM_WORLD, &r);
        MPI_Cancel(&r);
        MPI_Wait(&r, &st);
        MPI_Test_cancelled(&st, &send_cancelled);
    }
    MPI_Bcast(&send_cancelled, 1, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    /* rank 0: its Issend, its persistent synchronous send seen complete;
     * rank 1: 101, 103 received */
    double times[4] = {0, 0, 0, 0};
    if (rank == 0) {
        /* Standard mode may wait for the receive too (MPICH over UCX does
         * after a synchronous send): non-blocking, waited for at the end. */
        int a = 100, b = 101, c = 102, d = 103;
        MPI_Request r, std[2], persistent;
        MPI_Isend(&a, 1, MPI_INT, 1, 5, MPI_COMM_WORLD, &std[0]);
        MPI_Issend(&b, 1, MPI_INT, 1, 5, MPI_COMM_WORLD, &r);
        MPI_Isend(&c, 1, MPI_INT, 1, 5, MPI_COMM_WORLD, &std[1]);
        MPI_Ssend_init(&d, 1, MPI_INT, 1, 5, MPI_COMM_WORLD, &persistent);
        MPI_Start(&persistent);
        raise(SIGUSR1);
        nap(0.5); /* the drain: a few milliseconds */
        const double until = now_s() + 0.5;
        while (now_s() < until && !bad) {
            int flag[2] = {0, 0};
            MPI_Test(&r, &flag[0], MPI_STATUS_IGNORE);
            MPI_Test(&persistent, &flag[1], MPI_STATUS_IGNORE);
            for (int k = 0; k < 2; ++k)
                if (flag[k]) {
                    fprintf(stderr, "ssend: rank 0: the %s completed while rank 1 had received nothing\n",
                            k ? "persistent synchronous send" : "Issend");
                    bad = 1;
                }
            nap(0.01);
        }
        if (!bad) MPI_Wait(&r, MPI_STATUS_IGNORE);
        times[0] = now_s();
        if (!bad) MPI_Wait(&persistent, MPI_STATUS_IGNORE);
        times[2] = now_s();
        d = 104; /* once more, not drained */
        MPI_Start(&persistent);
        MPI_Wait(&persistent, MPI_STATUS_IGNORE);
        MPI_Request_free(&persistent);
        MPI_Status std_sts[2];
        MPI_Waitall(2, std, std_sts);
    } else if (rank == 1) {
        nap(1.5);
        int got[5] = {0, 0, 0, 0, 0}, late = 0;
        for (int i = 0; i < 4; ++i) {
            MPI_Recv(&got[i], 1, MPI_INT, 0, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            if (i == 1) times[1] = now_s();
            if (i == 2) nap(0.2); /* 103 stays unreceived a while: its sender must wait */
            if (i == 3) times[3] = now_s();
        }
        MPI_Recv(&got[4], 1, MPI_INT, 0, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Recv(&late, 1, MPI_INT, 2, 6, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        if (got[0] != 100 || got[1] != 101 || got[2] != 102 || got[3] != 103 || got[4] != 104 || late != 200) {
            fprintf(stderr, "ssend: rank 1 received %d %d %d %d %d and %d\n", got[0], got[1], got[2], got[3], got[4],
                    late);
            bad = 1;
        }
    } else if (rank == 2) {
        nap(1.0); /* after the drain: an ordinary synchronous send */
        int v = 200;
        MPI_Ssend(&v, 1, MPI_INT, 1, 6, MPI_COMM_WORLD);
        if (!recv_cancelled) {
            fprintf(stderr, "ssend: rank 2: a receive nobody matched was not cancelled\n");
            bad = 1;
        }
        if (!send_cancelled) { /* MPI could not cancel it: it arrives */
            int maybe = 0;
            MPI_Recv(&maybe, 1, MPI_INT, 0, 78, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            if (maybe != 300) bad = 1;
        }
    }
    double all[4];
    MPI_Allreduce(times, all, 4, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0 && !bad && all[0] < all[1]) {
        fprintf(stderr, "ssend: rank 0's Issend completed %.3f ms before rank 1 received its message\n",
                (all[1] - all[0]) * 1e3);
        bad = 1;
    }
    if (rank == 0 && !bad && all[2] < all[3]) {
        fprintf(stderr, "ssend: rank 0's persistent synchronous send completed %.3f ms before rank 1 received it\n",
                (all[3] - all[2]) * 1e3);
        bad = 1;
    }
    int any = 0;
    MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0)
        printf("ssend: synchronous sends across a drain: %s (completed %.3f ms after the receive; a send %s)\n",
               any ? "FAILED" : "ok", (all[0] - all[1]) * 1e3,
               send_cancelled ? "cancelled" : "MPI could not cancel, received");
    MPI_Finalize();
    return any;
}
