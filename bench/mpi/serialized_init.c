/*
 * serialized_init.c — a baseline for bench/mpi/run_osu_overhead.sh: an
 * LD_PRELOAD shim whose MPI_Init asks the MPI for MPI_THREAD_SERIALIZED,
 * the level libweft-mpi asks for (its drain thread calls MPI). Open MPI 4.1
 * takes its own locks above MPI_THREAD_SINGLE (bench/RESULTS.md), so the
 * layer's own cost is what it adds to this.
 */
#include <mpi.h>

int MPI_Init(int* argc, char*** argv) {
    int provided = 0;
    return PMPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided);
}
