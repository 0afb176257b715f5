/*
 * inflight.c — messages in transit at a drain, on a sub-communicator, must
 * come out of the drain's buffer after it, in order, through the wrapped
 * receive and probe calls (run under libweft-mpi only: it raises SIGUSR1).
 *
 *   LD_PRELOAD=libweft-mpi-KIND.so mpiexec -n 3 mpi_inflight [intercomm]
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
 * "intercomm", every rank calls MPI_Intercomm_create, refused by a wrapper
 * generated from the MPI's header (mpi/coverage.py).
 *
 * Then a second drain, for matched probes and persistent requests: rank 0
 * sends rank 1 M messages on `pair` (the first by MPI_Send, the others by
 * one persistent request, MPI_Send_init and MPI_Start); rank 1 matches the
 * first with MPI_Mprobe before the drain (MPI holds it: the drain's hook
 * must receive it into the layer) and the drain buffers the rest. After
 * it rank 1 receives them all, in order, with their tags and counts:
 * MPI_Mrecv of the handle matched before the drain, MPI_Improbe and
 * MPI_Imrecv, MPI_Mprobe and MPI_Mrecv, then two persistent receives
 * (MPI_Recv_init) completed from the buffer: MPI_Startall and MPI_Waitany
 * (each index once), MPI_Start and MPI_Test, MPI_Start,
 * MPI_Request_get_status and MPI_Wait, MPI_Start of the other and
 * MPI_Waitall with the first inactive.
 *
 * Then a third drain, with non-blocking collectives open: rank 0 starts an
 * MPI_Ibarrier and an MPI_Iallreduce on the world, an MPI_Ibcast on
 * `pair`, an MPI_Comm_idup of the world, an MPI_Ineighbor_allgather on a
 * periodic 1-D MPI_Cart_create of all ranks and a persistent broadcast
 * (MPI_Bcast_init, or Open MPI's MPIX_Bcast_init) started, asks for a drain and computes for 2 s without
 * testing them; the
 * others start theirs 1 s later and compute again. The drain can end only
 * once they have completed, and only the drain's own progress can complete
 * them: rank 0 must see the drain's quiescent point before it is back
 * (inflight_test.sh compares the order of its lines), and the results must
 * be right: the duplicate then carries an Allreduce and the persistent
 * broadcast is started once more.
 */
#define _POSIX_C_SOURCE 200809L
#include <mpi.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nap.h"
#include "persistent.h"

enum { N = 16, M = 8 };

/* Message i of the second drain's, received with status st: 1 if wrong. */
static int check_second(int i, long got, const MPI_Status* st, const char* how) {
    int count = -1;
    MPI_Get_count(st, MPI_LONG, &count);
    if (got == 1000 + i && st->MPI_SOURCE == 0 && st->MPI_TAG == 40 + i % 3 && count == 1) return 0;
    fprintf(stderr, "inflight: second drain's message %d (%s): %ld tag %d source %d count %d\n", i, how, got,
            st->MPI_TAG, st->MPI_SOURCE, count);
    return 1;
}

/* The third drain (see the top): non-blocking collectives open through it. */
static int nonblocking_collectives(int rank, int size, MPI_Comm pair) {
    int bad = 0;
    long mine = rank + 1, sum = 0, root_says = rank == 0 ? 42 : 0, around[2] = {0, 0};
    MPI_Comm ring, copy = MPI_COMM_NULL;
    const int dims[1] = {size}, periods[1] = {1};
    MPI_Cart_create(MPI_COMM_WORLD, 1, dims, periods, 0, &ring);
#ifdef PERSISTENT_COLLECTIVES
    enum { OPEN = 6 };
#else
    enum { OPEN = 5 };
#endif
    MPI_Request r[OPEN];
#ifdef PERSISTENT_COLLECTIVES
    long persistent_says = rank == 0 ? 7 : 0;
    BCAST_INIT(&persistent_says, 1, MPI_LONG, 0, MPI_COMM_WORLD, MPI_INFO_NULL, &r[5]);
#endif
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank != 0) nap(1.0);
    MPI_Ibarrier(MPI_COMM_WORLD, &r[0]);
    MPI_Iallreduce(&mine, &sum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD, &r[1]);
    MPI_Ibcast(&root_says, 1, MPI_LONG, 0, pair, &r[2]);
    MPI_Comm_idup(MPI_COMM_WORLD, &copy, &r[3]);
    MPI_Ineighbor_allgather(&mine, 1, MPI_LONG, around, 1, MPI_LONG, ring, &r[4]);
#ifdef PERSISTENT_COLLECTIVES
    MPI_Start(&r[5]);
#endif
    if (rank == 0) {
        raise(SIGUSR1);
        nap(2.0);
        fprintf(stderr, "inflight: rank 0 back from computing, its non-blocking collectives untested\n");
    } else {
        nap(1.5);
    }
    MPI_Status sts[OPEN];
    MPI_Waitall(OPEN, r, sts);
    const long left = (rank + size - 1) % size + 1, right = (rank + 1) % size + 1;
    if (sum != (long)size * (size + 1) / 2 || root_says != (rank < 2 ? 42 : 0) || around[0] != left ||
        around[1] != right) {
        fprintf(stderr, "inflight: rank %d: MPI_Iallreduce gave %ld, MPI_Ibcast %ld, MPI_Ineighbor_allgather %ld %ld\n",
                rank, sum, root_says, around[0], around[1]);
        bad = 1;
    }
    long twice = 0; /* the duplicate MPI_Comm_idup made through the drain, in use */
    MPI_Allreduce(&mine, &twice, 1, MPI_LONG, MPI_SUM, copy);
    if (twice != sum) {
        fprintf(stderr, "inflight: rank %d: an Allreduce on the MPI_Comm_idup duplicate gave %ld\n", rank, twice);
        bad = 1;
    }
#ifdef PERSISTENT_COLLECTIVES
    if (persistent_says != 7) {
        fprintf(stderr, "inflight: rank %d: the persistent MPI_Bcast_init gave %ld\n", rank, persistent_says);
        bad = 1;
    }
    persistent_says = rank == 0 ? 8 : 0; /* started again after the drain */
    MPI_Start(&r[5]);
    MPI_Wait(&r[5], &sts[5]);
    if (persistent_says != 8) {
        fprintf(stderr, "inflight: rank %d: the persistent MPI_Bcast_init's second start gave %ld\n", rank,
                persistent_says);
        bad = 1;
    }
    MPI_Request_free(&r[5]);
#endif
    MPI_Comm_free(&copy);
    MPI_Comm_free(&ring);
    return bad;
}

/* The second drain (see the top): matched probes and persistent requests. */
static int matched_and_persistent(int rank, MPI_Comm pair) {
    int bad = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
        long first = 1000;
        MPI_Send(&first, 1, MPI_LONG, 1, 40, pair);
        for (int i = 1; i < M; ++i) { /* one persistent request per tag, each started in turn */
            static long out;
            MPI_Request p;
            out = 1000 + i;
            MPI_Send_init(&out, 1, MPI_LONG, 1, 40 + i % 3, pair, &p);
            MPI_Start(&p);
            MPI_Wait(&p, MPI_STATUS_IGNORE);
            MPI_Request_free(&p);
        }
        /* Under Open MPI these sends complete only as rank 1 progresses:
         * rank 1 stays inside MPI until this word says they have, and this
         * rank asks for the drain only once rank 1 has matched the first. */
        int matched = 0;
        const int sent = 1;
        MPI_Recv(&matched, 1, MPI_INT, 1, 99, pair, MPI_STATUS_IGNORE);
        MPI_Send(&sent, 1, MPI_INT, 1, 98, pair);
        raise(SIGUSR1);
        nap(2.0);
    } else if (rank == 1) {
        MPI_Message held, m;
        MPI_Status sts[M];
        long got[M], slot[2];
        MPI_Mprobe(0, 40, pair, &held, &sts[0]);
        const int matched = 1;
        int sent = 0;
        MPI_Send(&matched, 1, MPI_INT, 0, 99, pair);
        MPI_Recv(&sent, 1, MPI_INT, 0, 98, pair, MPI_STATUS_IGNORE); /* a posted receive: not buffered */
        nap(1.0); /* the drain: it receives `held` into the layer and buffers the rest */
        MPI_Mrecv(&got[0], 1, MPI_LONG, &held, &sts[0]);
        bad |= check_second(0, got[0], &sts[0], "MPI_Mrecv of a handle matched before the drain");
        bad |= held != MPI_MESSAGE_NULL;
        int flag = 0;
        MPI_Improbe(0, MPI_ANY_TAG, pair, &flag, &m, &sts[1]);
        MPI_Request r = MPI_REQUEST_NULL;
        if (flag) MPI_Imrecv(&got[1], 1, MPI_LONG, &m, &r);
        MPI_Wait(&r, &sts[1]);
        bad |= !flag || check_second(1, got[1], &sts[1], "MPI_Improbe, MPI_Imrecv");
        MPI_Mprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, pair, &m, &sts[2]);
        MPI_Mrecv(&got[2], 1, MPI_LONG, &m, &sts[2]);
        bad |= check_second(2, got[2], &sts[2], "MPI_Mprobe, MPI_Mrecv");
        MPI_Request p[2];
        MPI_Recv_init(&slot[0], 1, MPI_LONG, 0, MPI_ANY_TAG, pair, &p[0]);
        MPI_Recv_init(&slot[1], 1, MPI_LONG, MPI_ANY_SOURCE, MPI_ANY_TAG, pair, &p[1]);
        MPI_Startall(2, p);
        int seen[2] = {0, 0};
        for (int k = 0; k < 2; ++k) {
            int index = -1;
            MPI_Status st;
            MPI_Waitany(2, p, &index, &st);
            if (index < 0 || index > 1 || seen[index]) {
                fprintf(stderr, "inflight: Waitany over persistent receives returned index %d\n", index);
                bad = 1;
                break;
            }
            seen[index] = 1;
            sts[3 + index] = st;
        }
        got[3] = slot[0];
        got[4] = slot[1];
        bad |= check_second(3, got[3], &sts[3], "MPI_Startall, MPI_Waitany");
        bad |= check_second(4, got[4], &sts[4], "MPI_Startall, MPI_Waitany");
        bad |= p[0] == MPI_REQUEST_NULL || p[1] == MPI_REQUEST_NULL; /* persistent: kept */
        MPI_Start(&p[0]);
        for (flag = 0; !flag;) MPI_Test(&p[0], &flag, &sts[5]);
        got[5] = slot[0];
        bad |= check_second(5, got[5], &sts[5], "MPI_Start, MPI_Test");
        MPI_Start(&p[0]);
        MPI_Status peek;
        flag = 0;
        MPI_Request_get_status(p[0], &flag, &peek);
        MPI_Wait(&p[0], &sts[6]);
        got[6] = slot[0];
        bad |= !flag || check_second(6, got[6], &sts[6], "MPI_Start, MPI_Request_get_status, MPI_Wait");
        MPI_Start(&p[1]);
        MPI_Status two[2];
        MPI_Waitall(2, p, two);
        got[7] = slot[1];
        bad |= check_second(7, got[7], &two[1], "MPI_Start, MPI_Waitall with the other inactive");
        MPI_Request_free(&p[0]);
        MPI_Request_free(&p[1]);
    } else {
        nap(2.0);
    }
    return bad;
}

int main(int argc, char** argv) {
    MPI_Init(&argc, &argv);
    int rank, size, bad = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm pair;
    MPI_Comm_split(MPI_COMM_WORLD, rank < 2 ? 0 : 1, rank, &pair);
    if (argc > 1 && strcmp(argv[1], "intercomm") == 0) {
        MPI_Comm inter; /* each rank alone on its side, rank 0 the other side's leader */
        MPI_Intercomm_create(MPI_COMM_SELF, 0, MPI_COMM_WORLD, rank == 0 ? 1 : 0, 9, &inter); /* refused: aborts */
        MPI_Comm_free(&inter);
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
    const int second = matched_and_persistent(rank, pair);
    int any_second = 0;
    MPI_Allreduce(&second, &any_second, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0)
        printf("inflight: matched probes and persistent requests across a drain: %s\n", any_second ? "FAILED" : "ok");
    any |= any_second;
    const int third = nonblocking_collectives(rank, size, pair);
    int any_third = 0;
    MPI_Allreduce(&third, &any_third, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0) printf("inflight: non-blocking collectives across a drain: %s\n", any_third ? "FAILED" : "ok");
    any |= any_third;
    int bdsize = 0;
    MPI_Buffer_detach(&bbuf, &bdsize);
    free(bbuf);
    MPI_Comm_free(&pair);
    MPI_Comm_free(&dupw);
    if (cart != MPI_COMM_NULL) MPI_Comm_free(&cart);
    MPI_Finalize();
    return any;
}
