/*
 * bootstrap.h — starting weft on a launcher's or an MPI library's own
 * exchange (C ABI).
 *
 * weft_init finds its start-up exchange in the environment: weft-run's
 * socket, a PMIx server (Open MPI's mpirun, PRRTE, Slurm), or none (a job of
 * one). A stack that already has an all-gather — an MPI library linking
 * weft, or a program launched by MPICH's hydra, whose PMI weft does not
 * speak — hands it to weft_init_with_bootstrap instead. weft then uses it
 * for every exchange of its life: at init, at window creation, and in its
 * barriers and finalize, always from the thread that called into weft.
 *
 * The all-gather is split in two so that weft keeps its transport
 * progressing and its deadline (WEFT_TIMEOUT_MS) while it waits:
 * iallgather starts one, test looks whether it is complete. With MPI:
 * MPI_Iallgather on a communicator of the job's processes, and MPI_Test
 * (examples/mpi_bootstrap.c). A wait that passes the deadline returns
 * WEFT_ERR_TIMEOUT and leaves the all-gather outstanding: its buffers stay
 * allocated, so a late completion writes into memory weft still owns.
 *
 * The job is the `size` processes that call it (rank 0 .. size-1, the same
 * order as the all-gather's); it is one job of one launch: job ID 0.
 */
#ifndef WEFT_BOOTSTRAP_H
#define WEFT_BOOTSTRAP_H

#include <weft/comm.h> /* weft_thread_level_t */

#ifdef __cplusplus
extern "C" {
#endif

typedef struct weft_bootstrap_ops {
    uint32_t rank; /* this process, 0 .. size-1 */
    uint32_t size; /* the job's processes, all of which call weft_init_with_bootstrap */
    /* Starts an all-gather: every process contributes len bytes at `mine`
     * (len is the same on every process of one all-gather); when it is
     * complete, `all` holds size * len bytes, process r's at r * len.
     * Returns 0 and sets *request on success, nonzero on failure. */
    int (*iallgather)(void* arg, const void* mine, size_t len, void* all, void** request);
    /* Sets *done to 1 once the all-gather of `request` is complete (the
     * request is then finished with), 0 while it is not. Returns 0, or
     * nonzero on failure. */
    int (*test)(void* arg, void* request, int* done);
    void* arg; /* passed to both */
} weft_bootstrap_ops_t;

/* weft_init_thread (weft/comm.h) on `ops` instead of the environment's
 * bootstrap. ops is copied; its functions are called until weft_finalize
 * returns. WEFT_ERR_INVALID_ARG for a NULL ops or ctx_out, a missing
 * function, size 0 or rank >= size; WEFT_ERR_BOOTSTRAP when an all-gather
 * fails. */
weft_status_t weft_init_with_bootstrap(const weft_bootstrap_ops_t* ops, weft_thread_level_t required,
                                       weft_thread_level_t* provided, weft_context_t* ctx_out);

#ifdef __cplusplus
}
#endif

#endif /* WEFT_BOOTSTRAP_H */
