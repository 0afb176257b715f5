/*
 * sendrecv_pingpong.c — an 8-byte MPI_Send/MPI_Recv ping-pong between ranks
 * 0 and 1 (bench/mpi/run_pingpong_overhead.sh): prints half a round trip in
 * ns, to a tenth of a ns (OSU's osu_latency prints two decimals of a µs).
 *   pingpong single|serialized [ROUND_TRIPS]
 * asks the MPI for MPI_THREAD_SINGLE or MPI_THREAD_SERIALIZED (the level
 * libweft-mpi asks for, whatever the program asked). A tenth of the round
 * trips run first as warm-up. The payload is checked on every trip.
 */
#include <mpi.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char** argv) {
    const int level = argc > 1 && strcmp(argv[1], "serialized") == 0 ? MPI_THREAD_SERIALIZED : MPI_THREAD_SINGLE;
    const long trips = argc > 2 ? atol(argv[2]) : 400000;
    int provided = 0, rank = 0, size = 0;
    MPI_Init_thread(&argc, &argv, level, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size != 2 || trips < 10) {
        if (rank == 0) fprintf(stderr, "pingpong: 2 ranks and at least 10 round trips\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    long word = 0;
    double ns = 0;
    for (int timed = 0; timed < 2; ++timed) {
        const long n = timed ? trips : trips / 10;
        MPI_Barrier(MPI_COMM_WORLD);
        const double start = MPI_Wtime();
        for (long i = 0; i < n; ++i) {
            if (rank == 0) {
                word = i;
                MPI_Send(&word, 1, MPI_LONG, 1, 1, MPI_COMM_WORLD);
                MPI_Recv(&word, 1, MPI_LONG, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                if (word != i + 1) {
                    fprintf(stderr, "pingpong: trip %ld came back as %ld\n", i, word);
                    MPI_Abort(MPI_COMM_WORLD, 1);
                }
            } else {
                MPI_Recv(&word, 1, MPI_LONG, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                ++word;
                MPI_Send(&word, 1, MPI_LONG, 0, 1, MPI_COMM_WORLD);
            }
        }
        ns = (MPI_Wtime() - start) / (double)n / 2 * 1e9;
    }
    if (rank == 0) printf("half round trip %.1f ns\n", ns);
    MPI_Finalize();
    return 0;
}
