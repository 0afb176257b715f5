/*
 * coll_mpi.c — bench/coll_bench.h's measurements on MPI, for the comparison
 * with weft (bench/coll_weft.cpp). The same source is built against Open MPI
 * (mpicc.openmpi) and MPICH (mpicc.mpich) by bench/run_mpi_compare.sh:
 *   mpicc.openmpi -O2 -I bench bench/mpi/coll_mpi.c -o coll_openmpi
 * Everything here only maps coll_ops onto MPI_COMM_WORLD.
 */
#include <mpi.h>

#include "coll_bench.h"

static int mpi_send(const void* buf, size_t bytes, int dest) {
    return MPI_Send(buf, (int)bytes, MPI_BYTE, dest, 0, MPI_COMM_WORLD);
}

static int mpi_recv(void* buf, size_t bytes, int source) {
    return MPI_Recv(buf, (int)bytes, MPI_BYTE, source, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
}

static int mpi_barrier(void) { return MPI_Barrier(MPI_COMM_WORLD); }

static int mpi_allreduce(const void* in, void* out, size_t count, coll_type type, coll_op op) {
    return MPI_Allreduce(in, out, (int)count, type == COLL_U64 ? MPI_UINT64_T : MPI_DOUBLE,
                         op == COLL_SUM ? MPI_SUM : MPI_MAX, MPI_COMM_WORLD);
}

static int mpi_bcast(void* buf, size_t bytes, int root) {
    return MPI_Bcast(buf, (int)bytes, MPI_BYTE, root, MPI_COMM_WORLD);
}

static int mpi_allgather(const void* in, size_t bytes, void* out) {
    return MPI_Allgather(in, (int)bytes, MPI_BYTE, out, (int)bytes, MPI_BYTE, MPI_COMM_WORLD);
}

static void mpi_abort(int code) { MPI_Abort(MPI_COMM_WORLD, code); }

/* "openmpi" or "mpich" from the library's own version string. */
static const char* library_label(void) {
    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    MPI_Get_library_version(version, &len);
    if (strstr(version, "Open MPI")) return "openmpi";
    if (strstr(version, "MPICH")) return "mpich";
    return "mpi";
}

static coll_bench bench; /* a histogram inside: not on the stack */

int main(int argc, char** argv) {
    MPI_Init(&argc, &argv);
    /* Errors come back as codes (coll_bench aborts the job with a message). */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    coll_ops ops = {0};
    ops.impl = library_label();
    MPI_Comm_rank(MPI_COMM_WORLD, &ops.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ops.size);
    ops.send = mpi_send;
    ops.recv = mpi_recv;
    ops.barrier = mpi_barrier;
    ops.allreduce = mpi_allreduce;
    ops.bcast = mpi_bcast;
    ops.allgather = mpi_allgather;
    ops.abort_job = mpi_abort;
    const int rc = coll_bench_run(&bench, &ops, argc, argv);
    MPI_Finalize();
    return rc;
}
