/*
 * mpi_layer.h — what a program linked with libweft-mpi (the PMPI layer,
 * docs/mpi-layer.md) may ask of it (C ABI). An unmodified program needs none
 * of it: the layer drains it on SIGUSR1. A program that knows about the
 * layer links libweft-mpi-KIND.so (KIND: openmpi or mpich, the MPI it is
 * built with) and may
 *   - run its own code at every drain's quiescent point (an application-
 *     level checkpoint, a transparent checkpointer's hook);
 *   - ask for a drain from code instead of a signal, or drain at a point
 *     of its own choosing (collectively);
 *   - checkpoint its protected regions through weft's ckpt at a quiescent
 *     point, MPI messages in transit included, and restart from them;
 *   - use weft beside its MPI through the layer's weft context: failure
 *     events (weft_event_register, WEFT_EVENT_PROC_FAILED) and failed sets
 *     on weft's world communicator (weft/ft.h), which an MPI without ULFM
 *     does not have. weft dispatches events from weft_progress: call it
 *     from the program's own loop.
 * Every call is valid between MPI_Init (or MPI_Init_thread) and
 * MPI_Finalize only.
 */
#ifndef WEFT_MPI_LAYER_H
#define WEFT_MPI_LAYER_H

#include <weft/ckpt.h>
#include <weft/drain.h>
#include <weft/weft.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The layer's weft context (weft started on MPI's all-gather at MPI_Init:
 * weft's job ranks are MPI_COMM_WORLD's ranks); NULL outside
 * MPI_Init..MPI_Finalize. The program may call weft with it, serialized
 * with its MPI calls as MPI's thread level says; it must not finalize it. */
weft_context_t weft_mpi_context(void);

/* Runs on the drain thread at each drain's quiescent point, after the
 * layer's own report and before the job resumes: every application thread
 * is outside MPI and no message is in transit. It must not call MPI or
 * weft. NULL removes it. WEFT_ERR_INVALID_ARG outside MPI_Init..Finalize. */
weft_status_t weft_mpi_set_quiescent_callback(weft_drain_quiescent_fn fn, void* arg);

/* Asks for a drain, as SIGUSR1 does, and returns at once with its number
 * (weft_drain_request). Any rank may call it, alone, at any time: the drain
 * takes every rank out of MPI at its next call or wait, and the program
 * learns that it happened from its callback (above). It must not wait for
 * the drain itself: ranks already inside a collective it has not reached
 * would wait for it there. WEFT_ERR_UNSUPPORTED when MPI gave a thread
 * level below MPI_THREAD_SERIALIZED (drains are off). */
weft_status_t weft_mpi_drain_request(uint64_t* drain_number);

/* Collective over MPI_COMM_WORLD: every rank calls it at the same point of
 * its program (an application-level checkpoint's place); one drain brings
 * the job to a quiescent point there, and each rank returns once it has
 * resumed from it, with its result (result may be NULL). Returns the
 * drain's status (weft_drain_wait). */
weft_status_t weft_mpi_drain(weft_drain_result_t* result);

/* Application-level checkpoint through weft's ckpt (weft/ckpt.h) at a
 * quiescent point. The program registers the memory that holds its state
 * as protected regions (weft_ckpt_region_register with weft_mpi_context();
 * IDs from 0xf0000000 up are the layer's). Collective over MPI_COMM_WORLD,
 * at the same point of every rank's program, with no MPI receive posted
 * and no MPI request held: drains the job (MPI messages in transit land in
 * the layer's buffer), saves that buffer as a region of the layer's own
 * (WEFT_MPI_CKPT_BUFFER_BYTES per rank, default 1 MiB; the same value at
 * restart), then weft_checkpoint(dir). The same status on every rank:
 * weft_checkpoint's, or WEFT_ERR_UNSUPPORTED (a rank held MPI requests),
 * WEFT_ERR_NO_MEMORY (a rank's buffered messages did not fit), each logged
 * by the rank concerned. */
weft_status_t weft_mpi_checkpoint(const char* dir, weft_ckpt_profile_t* profile);

/* The restart's side, collective like it: after MPI_Init, with the
 * program's regions registered and its communicators made again in the
 * same order as before the checkpoint (their drained messages find them by
 * that order), before any message: weft_restart(dir), then the layer's
 * buffer is put back, so receives get the messages that were in transit at
 * the checkpoint, in order. Statuses: weft_restart's (WEFT_ERR_NOT_FOUND,
 * info->restarted = 0: nothing to restart from); WEFT_ERR_NOT_FOUND also
 * when a saved message's communicator was not made again (logged). */
weft_status_t weft_mpi_restart(const char* dir, weft_restart_info_t* info);

#ifdef __cplusplus
}
#endif

#endif /* WEFT_MPI_LAYER_H */
