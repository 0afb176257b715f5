/*
 * ckpt_app.c — an MPI program that checkpoints its state through
 * libweft-mpi and weft's ckpt (weft/mpi_layer.h), and restarts from it.
 *
 *   mpi_ckpt_app DIR STEPS K1 K2 [restart] [stop=K]
 *
 * Its whole state (step, checksum, a field of WIDTH words) is one protected
 * region. Each step exchanges the field around a ring of MPI_COMM_WORLD
 * (Irecv/Isend/Waitall) and all-reduces on a split of it, folding both
 * into the checksum. At steps K1 and K2 it checkpoints (weft_mpi_checkpoint
 * into DIR) right after one member of each half of the split sent the
 * other a message the other receives only after the checkpoint: at the
 * checkpoint that message is in transit, so it is drained into the layer's
 * buffer and saved with it. "restart" restores the newest generation of
 * DIR first (weft_mpi_restart) and goes on from the step it was taken at;
 * the message then comes out of the restored buffer. "stop=K" ends the run
 * right after the checkpoint at step K (a job that ended there). Rank 0
 * prints the checksum at the end: every way of reaching STEPS (straight
 * through, or stopped and restarted at K1 and again at K2) must print the
 * same one.
 */
#define _POSIX_C_SOURCE 200809L
#include <weft/ckpt.h>
#include <weft/mpi_layer.h>

#include <mpi.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { WIDTH = 32, STATE_REGION = 1 };

static struct {
    int32_t step, pad;
    uint64_t checksum;
    uint64_t field[WIDTH];
} state;

static void die(const char* what, weft_status_t st) {
    fprintf(stderr, "ckpt_app: %s: %s\n", what, weft_strerror(st));
    MPI_Abort(MPI_COMM_WORLD, 2);
}

int main(int argc, char** argv) {
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc < 5 || size < 4) {
        if (rank == 0) fprintf(stderr, "usage: mpi_ckpt_app DIR STEPS K1 K2 [restart] [stop=K] (4+ ranks)\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    const char* dir = argv[1];
    const int steps = atoi(argv[2]), k1 = atoi(argv[3]), k2 = atoi(argv[4]);
    int restart = 0, stop = -1;
    for (int i = 5; i < argc; ++i) {
        if (strcmp(argv[i], "restart") == 0) restart = 1;
        if (strncmp(argv[i], "stop=", 5) == 0) stop = atoi(argv[i] + 5);
    }
    /* Communicators first, in the same order in every run: the drained
     * messages find theirs again by it. */
    MPI_Comm half;
    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
    int hrank;
    MPI_Comm_rank(half, &hrank);

    weft_context_t ctx = weft_mpi_context();
    state.step = 0;
    for (int i = 0; i < WIDTH; ++i) state.field[i] = (uint64_t)(rank + 1) * 2654435761u + (uint64_t)i;
    weft_status_t st = weft_ckpt_region_register(ctx, STATE_REGION, &state, sizeof state);
    if (st != WEFT_OK) die("weft_ckpt_region_register", st);
    int resumed_at = -1;
    if (restart) {
        weft_restart_info_t info;
        st = weft_mpi_restart(dir, &info);
        if (st != WEFT_OK || !info.restarted) die("weft_mpi_restart", st);
        resumed_at = state.step;
        if (rank == 0)
            printf("ckpt_app: restarted from generation %llu at step %d (%.3f ms: find %.3f, verify %.3f, load %.3f)\n",
                   (unsigned long long)info.generation, state.step, (double)info.total_ns / 1e6,
                   (double)info.find_ns / 1e6, (double)info.verify_ns / 1e6, (double)info.load_ns / 1e6);
    }
    const int right = (rank + 1) % size, left = (rank + size - 1) % size;
    while (state.step < steps) {
        const int s = state.step;
        if (s == k1 || s == k2) {
            if (s != resumed_at) {
                uint64_t note = (uint64_t)s * 7u + 1u;
                if (hrank == 0) MPI_Send(&note, 1, MPI_UINT64_T, 1, 900 + s, half);
                weft_ckpt_profile_t prof;
                st = weft_mpi_checkpoint(dir, &prof);
                if (st != WEFT_OK) die("weft_mpi_checkpoint", st);
                if (rank == 0)
                    printf(
                        "ckpt_app: checkpoint at step %d: generation %llu, %llu bytes here (%.3f ms: drain %.3f, "
                        "write %.3f, fsync %.3f, commit %.3f)\n",
                        s, (unsigned long long)prof.generation, (unsigned long long)prof.bytes,
                        (double)prof.total_ns / 1e6, (double)prof.drain_ns / 1e6, (double)prof.write_ns / 1e6,
                        (double)prof.fsync_ns / 1e6, (double)prof.commit_ns / 1e6);
                if (s == stop) {
                    fflush(stdout);
                    MPI_Comm_free(&half);
                    MPI_Finalize();
                    return 0;
                }
            }
            if (hrank == 1) {
                uint64_t note = 0;
                MPI_Status mst;
                MPI_Recv(&note, 1, MPI_UINT64_T, 0, 900 + s, half, &mst);
                if (note != (uint64_t)s * 7u + 1u) {
                    fprintf(stderr, "ckpt_app: rank %d: the message in transit at step %d's checkpoint: %llu\n", rank,
                            s, (unsigned long long)note);
                    MPI_Abort(MPI_COMM_WORLD, 3);
                }
                state.checksum = state.checksum * 1099511628211u ^ note;
            }
        }
        uint64_t in[WIDTH];
        MPI_Request reqs[2];
        MPI_Irecv(in, WIDTH, MPI_UINT64_T, left, 1, MPI_COMM_WORLD, &reqs[0]);
        MPI_Isend(state.field, WIDTH, MPI_UINT64_T, right, 1, MPI_COMM_WORLD, &reqs[1]);
        MPI_Status sts[2];
        MPI_Waitall(2, reqs, sts);
        for (int i = 0; i < WIDTH; ++i) state.field[i] = state.field[i] * 31u + in[i] + (uint64_t)s;
        uint64_t sum = 0;
        MPI_Allreduce(&state.field[s % WIDTH], &sum, 1, MPI_UINT64_T, MPI_SUM, half);
        state.checksum = state.checksum * 1099511628211u ^ sum;
        ++state.step;
    }
    uint64_t all = 0;
    MPI_Allreduce(&state.checksum, &all, 1, MPI_UINT64_T, MPI_BXOR, MPI_COMM_WORLD);
    if (rank == 0) printf("ckpt_app: %d ranks, %d steps, checksum %016llx\n", size, steps, (unsigned long long)all);
    MPI_Comm_free(&half);
    MPI_Finalize();
    return 0;
}
