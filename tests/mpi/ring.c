/*
 * ring.c — an MPI program written here, nothing of weft in it: what
 * libweft-mpi must drain without changing its result (tests/mpi/
 * drain_signal_test.sh).
 *
 *   mpiexec -n 4 mpi_ring [STEPS]
 *
 * Every step: a ring exchange with Irecv/Isend and Waitall, Waitany or
 * Waitsome in turn, an Allreduce, and a Sendrecv with a partner on a
 * duplicate of MPI_COMM_WORLD; every 8th step an Allgatherv and a Scan;
 * every 16th step
 * a Bcast on a split communicator and a Barrier; every 32nd step rank 0
 * sends rank N-1 a message it receives only 16 steps later (in flight
 * across drains), by a matched probe (MPI_Mprobe and MPI_Mrecv, or
 * MPI_Improbe and MPI_Imrecv, in turn). Every step also passes a word
 * around the ring the other way by two persistent requests (MPI_Send_init,
 * MPI_Recv_init) on the duplicate, started with MPI_Startall and completed
 * by MPI_Waitall or by MPI_Wait on each, in turn; and an MPI_Iallgather of
 * each step's sum, started at the end of the step and left open through
 * its "compute" (a drain then completes it by itself), completed with the
 * next step's ring exchange. On a periodic 1-D MPI_Cart_create of all
 * ranks, every 4th step an MPI_Neighbor_allgather, and every 8th an
 * MPI_Ineighbor_alltoall left open through the compute like the
 * MPI_Iallgather and completed by MPI_Wait at the next step. Every 64th
 * step an MPI_Comm_idup of the duplicate, open through the compute too,
 * seen complete at the next step by MPI_Request_get_status, used by an
 * Allreduce, then waited for and freed. A persistent collective
 * (MPI-4's MPI_Allreduce_init under MPICH, Open MPI's MPIX_Allreduce_init;
 * tests/mpi/persistent.h) on the duplicate is started every 4th step, open through the compute and
 * completed at the next step. All
 * arithmetic is on unsigned 64-bit integers, so the
 * checksum does not depend on the order in which a reduction adds: a run
 * under the layer (which runs collectives in their non-blocking forms)
 * must print exactly the checksum of a run without it.
 *
 * With WEFT_MPI_TEST_PIDDIR set, each rank writes its pid to DIR/pid.RANK
 * once MPI_Init has returned (the test signals those processes); rank 0
 * prints "ring: started" once every rank has (the test then signals the
 * launcher, which forwards to every rank).
 */
#define _POSIX_C_SOURCE 200809L
#include <mpi.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "persistent.h"

enum { WIDTH = 64 };

int main(int argc, char** argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const int steps = argc > 1 ? atoi(argv[1]) : 2000;
    const char* dir = getenv("WEFT_MPI_TEST_PIDDIR");
    if (dir) {
        char path[4096];
        snprintf(path, sizeof path, "%s/pid.%d", dir, rank);
        FILE* f = fopen(path, "w");
        if (f) {
            fprintf(f, "%ld\n", (long)getpid());
            fclose(f);
        }
    }
    MPI_Comm half, twin;
    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
    MPI_Comm_dup(MPI_COMM_WORLD, &twin);
    MPI_Comm ring;
    const int dims[1] = {size}, periods[1] = {1};
    MPI_Cart_create(MPI_COMM_WORLD, 1, dims, periods, 0, &ring);
    MPI_Barrier(MPI_COMM_WORLD); /* every rank past MPI_Init: a signal now finds the layer's handler */
    if (rank == 0) {
        printf("ring: started\n");
        fflush(stdout);
    }

    uint64_t field[WIDTH], in[WIDTH], checksum = 0;
    for (int i = 0; i < WIDTH; ++i) field[i] = (uint64_t)(rank + 1) * 1000003u + (uint64_t)i;
    const int right = (rank + 1) % size, left = (rank + size - 1) % size, partner = rank ^ 1;
    uint64_t in_flight = 0, back_out = 0, back_in = 0, sum_out = 0;
    uint64_t* sums_in = calloc((size_t)size, sizeof *sums_in);
    MPI_Request gathered = MPI_REQUEST_NULL; /* the last step's MPI_Iallgather, open across the compute */
    MPI_Request back[2];                     /* persistent: the word that goes the other way round */
    MPI_Request swapped = MPI_REQUEST_NULL;  /* an MPI_Ineighbor_alltoall, open across the compute */
    uint64_t to_neighbours[2] = {0, 0}, from_neighbours[2] = {0, 0};
    MPI_Request duplicated = MPI_REQUEST_NULL; /* an MPI_Comm_idup, open across the compute */
    MPI_Comm fresh = MPI_COMM_NULL;
#ifdef PERSISTENT_COLLECTIVES
    uint64_t summed_out = 0, summed_in = 0;
    MPI_Request summed; /* persistent, started every 4th step and open across the compute */
    ALLREDUCE_INIT(&summed_out, &summed_in, 1, MPI_UINT64_T, MPI_SUM, twin, MPI_INFO_NULL, &summed);
    int summing = 0;
#endif
    MPI_Recv_init(&back_in, 1, MPI_UINT64_T, right, 11, twin, &back[0]);
    MPI_Send_init(&back_out, 1, MPI_UINT64_T, left, 11, twin, &back[1]);
    const struct timespec pause = {0, 100000}; /* 0.1 ms of "compute" per step */

    for (int s = 0; s < steps; ++s) {
        if (swapped != MPI_REQUEST_NULL) {
            MPI_Wait(&swapped, MPI_STATUS_IGNORE);
            checksum += from_neighbours[0] * 7u + from_neighbours[1] * 13u;
        }
#ifdef PERSISTENT_COLLECTIVES
        if (summing) {
            MPI_Wait(&summed, MPI_STATUS_IGNORE);
            checksum += summed_in * 11u;
            summing = 0;
        }
#endif
        if (duplicated != MPI_REQUEST_NULL) {
            /* Complete by MPI_Request_get_status, which frees nothing: the
             * duplicate may be used then, before the MPI_Wait that frees it. */
            for (int done = 0; !done;) MPI_Request_get_status(duplicated, &done, MPI_STATUS_IGNORE);
            uint64_t mine = checksum & 0xffff, all = 0;
            MPI_Allreduce(&mine, &all, 1, MPI_UINT64_T, MPI_SUM, fresh);
            checksum ^= all << 3;
            MPI_Wait(&duplicated, MPI_STATUS_IGNORE);
            MPI_Comm_free(&fresh);
        }
        MPI_Request reqs[3];
        MPI_Irecv(in, WIDTH, MPI_UINT64_T, left, s % 7, MPI_COMM_WORLD, &reqs[0]);
        MPI_Isend(field, WIDTH, MPI_UINT64_T, right, s % 7, MPI_COMM_WORLD, &reqs[1]);
        reqs[2] = gathered;
        const int active = gathered == MPI_REQUEST_NULL ? 2 : 3;
        MPI_Status sts[3]; /* not MPI_STATUSES_IGNORE: GCC 12 flags it in MPICH's header */
        if (s % 3 == 0) {
            MPI_Waitall(3, reqs, sts);
        } else if (s % 3 == 1) {
            for (int k = 0, index; k < active; ++k) MPI_Waitany(3, reqs, &index, &sts[0]);
        } else {
            int done = 0, outcount, indices[3];
            while (done < active) {
                MPI_Waitsome(3, reqs, &outcount, indices, sts);
                done += outcount;
            }
        }
        gathered = MPI_REQUEST_NULL;
        for (int r = 0; s > 0 && r < size; ++r) checksum += sums_in[r] * (uint64_t)(2 * r + 1);
        back_out = field[s % WIDTH] + (uint64_t)rank;
        MPI_Startall(2, back);
        if (s % 2 == 0) {
            MPI_Waitall(2, back, sts);
        } else {
            MPI_Wait(&back[0], &sts[0]);
            MPI_Wait(&back[1], &sts[1]);
        }
        if (sts[0].MPI_SOURCE != right || sts[0].MPI_TAG != 11) {
            fprintf(stderr, "ring rank %d: step %d: the persistent receive's status: source %d tag %d\n", rank, s,
                    sts[0].MPI_SOURCE, sts[0].MPI_TAG);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
        field[0] ^= back_in;
        uint64_t local = 0;
        for (int i = 0; i < WIDTH; ++i) {
            field[i] = field[i] * 31u + in[i] + (uint64_t)s;
            local += field[i];
        }
        uint64_t global = 0;
        MPI_Allreduce(&local, &global, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
        checksum = checksum * 1099511628211u ^ global;
        if (partner < size) {
            uint64_t mine = global + (uint64_t)rank, theirs = 0;
            MPI_Status st;
            MPI_Sendrecv(&mine, 1, MPI_UINT64_T, partner, 5, &theirs, 1, MPI_UINT64_T, partner, 5, twin, &st);
            if (st.MPI_SOURCE != partner || theirs != global + (uint64_t)partner) {
                fprintf(stderr, "ring rank %d: step %d: Sendrecv got %llu from %d\n", rank, s,
                        (unsigned long long)theirs, st.MPI_SOURCE);
                MPI_Abort(MPI_COMM_WORLD, 2);
            }
        }
        if (s % 8 == 4) {
            uint64_t* every = malloc((size_t)size * sizeof *every);
            int* counts = malloc((size_t)size * sizeof *counts);
            int* displs = malloc((size_t)size * sizeof *displs);
            for (int r = 0; r < size; ++r) counts[r] = 1, displs[r] = r;
            MPI_Allgatherv(&local, 1, MPI_UINT64_T, every, counts, displs, MPI_UINT64_T, MPI_COMM_WORLD);
            uint64_t prefix = 0;
            MPI_Scan(&local, &prefix, 1, MPI_UINT64_T, MPI_SUM, twin);
            uint64_t all = 0;
            MPI_Allreduce(&prefix, &all, 1, MPI_UINT64_T, MPI_BXOR, MPI_COMM_WORLD);
            for (int r = 0; r < size; ++r) checksum += every[r] * (uint64_t)(r + 1);
            checksum ^= all;
            free(every);
            free(counts);
            free(displs);
        }
        if (s % 16 == 0) {
            uint64_t v = rank == 0 || rank == 1 ? checksum : 0;
            MPI_Bcast(&v, 1, MPI_UINT64_T, 0, half);
            checksum ^= v >> 7;
            MPI_Barrier(twin);
        }
        if (size > 1 && s % 32 == 0 && rank == 0) {
            const uint64_t v = checksum;
            MPI_Send(&v, 1, MPI_UINT64_T, size - 1, 100 + s, MPI_COMM_WORLD);
        }
        if (size > 1 && s % 32 == 16 && rank == size - 1) {
            MPI_Status st;
            MPI_Message m;
            if (s % 64 == 16) {
                MPI_Mprobe(0, 100 + s - 16, MPI_COMM_WORLD, &m, &st);
                MPI_Mrecv(&in_flight, 1, MPI_UINT64_T, &m, &st);
            } else {
                int flag = 0;
                while (!flag) MPI_Improbe(0, 100 + s - 16, MPI_COMM_WORLD, &flag, &m, &st);
                MPI_Request r;
                MPI_Imrecv(&in_flight, 1, MPI_UINT64_T, &m, &r);
                MPI_Wait(&r, &st);
            }
            if (st.MPI_TAG != 100 + s - 16) {
                fprintf(stderr, "ring rank %d: step %d: tag %d\n", rank, s, st.MPI_TAG);
                MPI_Abort(MPI_COMM_WORLD, 2);
            }
            checksum += in_flight;
        }
        if (s % 4 == 1) {
            uint64_t around[2] = {0, 0}; /* the left neighbour's, the right's */
            MPI_Neighbor_allgather(&local, 1, MPI_UINT64_T, around, 1, MPI_UINT64_T, ring);
            checksum += around[0] * 3u + around[1] * 5u;
        }
        sum_out = local;
        MPI_Iallgather(&sum_out, 1, MPI_UINT64_T, sums_in, 1, MPI_UINT64_T, MPI_COMM_WORLD, &gathered);
        if (s % 8 == 2) {
            to_neighbours[0] = local + 1u;
            to_neighbours[1] = local * 3u;
            MPI_Ineighbor_alltoall(to_neighbours, 1, MPI_UINT64_T, from_neighbours, 1, MPI_UINT64_T, ring, &swapped);
        }
        if (s % 64 == 40) MPI_Comm_idup(twin, &fresh, &duplicated);
#ifdef PERSISTENT_COLLECTIVES
        if (s % 4 == 3) {
            summed_out = local ^ (uint64_t)s;
            MPI_Start(&summed);
            summing = 1;
        }
#endif
        nanosleep(&pause, NULL);
    }
    MPI_Wait(&gathered, MPI_STATUS_IGNORE);
#ifdef PERSISTENT_COLLECTIVES
    if (summing) MPI_Wait(&summed, MPI_STATUS_IGNORE);
    MPI_Request_free(&summed);
#endif
    if (swapped != MPI_REQUEST_NULL) {
        MPI_Wait(&swapped, MPI_STATUS_IGNORE);
        checksum += from_neighbours[0] * 7u + from_neighbours[1] * 13u;
    }
    if (duplicated != MPI_REQUEST_NULL) {
        MPI_Wait(&duplicated, MPI_STATUS_IGNORE);
        MPI_Comm_free(&fresh);
    }
    for (int r = 0; r < size; ++r) checksum += sums_in[r] * (uint64_t)(2 * r + 1);
    free(sums_in);
    uint64_t all = 0;
    MPI_Allreduce(&checksum, &all, 1, MPI_UINT64_T, MPI_BXOR, MPI_COMM_WORLD);
    if (rank == 0) printf("ring: %d ranks, %d steps, checksum %016llx\n", size, steps, (unsigned long long)all);
    MPI_Request_free(&back[0]);
    MPI_Request_free(&back[1]);
    MPI_Comm_free(&half);
    MPI_Comm_free(&twin);
    MPI_Comm_free(&ring);
    MPI_Finalize();
    return 0;
}
