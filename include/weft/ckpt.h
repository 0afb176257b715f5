/*
 * weft/ckpt.h — checkpoint and restart (docs/checkpoint.md).
 *
 * A program registers the memory that holds its state as *protected
 * regions*, by ID. weft_checkpoint, collective over the job, drains the job
 * to a quiescent point (weft/drain.h) and writes one image per rank — a
 * header, the runtime's state and every protected region — into a new
 * *generation* of a checkpoint directory, then commits the generation with
 * a manifest once every rank's image is on disk. weft_restart, collective
 * too, finds the newest generation that is valid on every rank and copies
 * its regions back into the regions the restarted program registered under
 * the same IDs.
 *
 * The runtime's state is saved too, and a restart puts it back: the
 * communicators (members, context IDs, clock slots), the process groups
 * of this job's processes (members, infos, context IDs), the requests the
 * program holds (completed ones not yet waited for, posted receives,
 * synchronous sends whose receiver owes the acknowledgment), each
 * communicator's posted receives in posting order and the messages in
 * weft's buffer in arrival order. Communicator and request handles name
 * their object by its place, not its address, so handles the program kept
 * in a protected region name the same objects after the restart (make the
 * process's contexts in the same order, and call weft_restart before
 * making communicators or sending). A restored communicator starts with
 * the world's error handler (handlers are functions of the old process).
 * A posted receive's buffer must lie inside a protected region, or the
 * checkpoint fails on every rank before anything is written
 * (WEFT_ERR_INVALID_ARG). A checkpoint is refused the same way
 * (WEFT_ERR_UNSUPPORTED, the log names it) while a rank holds state weft
 * cannot save yet: a group with members of another job or a group
 * operation in progress, a known process failure or a revoked
 * communicator, a collective in progress.
 *
 * Thread affinity: the region calls from any thread (they take the
 * context's lock); weft_checkpoint and weft_restart from one thread per
 * rank, in the same order on every rank, like a collective.
 */
#ifndef WEFT_CKPT_H
#define WEFT_CKPT_H

#include <weft/weft.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------ protected regions */

/* Registers [base, base+size) as region `id`. size 0 is allowed (an empty
 * region: base may be NULL). WEFT_ERR_BUSY if the ID is registered. The
 * memory stays the program's; weft reads it at a checkpoint and writes it
 * at a restart, nowhere else. */
weft_status_t weft_ckpt_region_register(weft_context_t ctx, uint32_t id, void* base, size_t size);
/* Moves or resizes region `id` (after a realloc). WEFT_ERR_NOT_FOUND if it
 * is not registered. */
weft_status_t weft_ckpt_region_resize(weft_context_t ctx, uint32_t id, void* base, size_t size);
/* Unregisters region `id`. WEFT_ERR_NOT_FOUND if it is not registered. */
weft_status_t weft_ckpt_region_remove(weft_context_t ctx, uint32_t id);

/* --------------------------------------------------------------- checkpoint */

/* Every phase of one checkpoint on this rank, in nanoseconds. */
typedef struct weft_ckpt_profile {
    uint64_t generation; /* the generation written (1, 2, ...) */
    uint64_t bytes;      /* this rank's image */
    uint64_t drain_ns;   /* request to quiescent point, encoding the runtime state, and the agreement */
    uint64_t write_ns;   /* building the image and its write calls (checksums included) */
    uint64_t fsync_ns;   /* fsync of the image and its rename */
    uint64_t commit_ns;  /* every rank's image known on disk; rank 0: the folder's fsync, the manifest, pruning */
    uint64_t total_ns;
    /* What the image holds of the runtime: */
    uint32_t requests; /* requests the program holds (completed, posted, or synchronous sends awaiting their ack) */
    uint32_t receives; /* of which posted receives */
    uint32_t messages; /* messages in weft's buffer, not yet received */
    uint32_t communicators; /* besides the world */
    uint32_t groups;        /* process groups (weft/group.h) */
} weft_ckpt_profile_t;

/*
 * `dir` may be NULL in both calls below: the directory weft-run named
 * (--checkpoint-dir DIR or --restart DIR, exported to the ranks as
 * WEFT_CKPT_DIR); WEFT_ERR_INVALID_ARG when there is none.
 *
 * Collective over the job: writes generation G+1 of `dir` (created if
 * missing; the same path on every rank, on a file system every rank sees),
 * G being the newest generation present. Returns WEFT_OK on every rank only
 * once the generation is committed. Any failure (a disk full or unwritable
 * directory on any rank, a rank that died, unsaved state) fails it on every
 * live rank, leaves no valid generation behind and lets the job continue.
 * Keeps the newest WEFT_CKPT_KEEP committed generations (default 2) and
 * removes older and uncommitted ones. `profile` may be NULL.
 */
weft_status_t weft_checkpoint(weft_context_t ctx, const char* dir, weft_ckpt_profile_t* profile);

/*
 * Collective over the job: *need = 1 on every rank when a checkpoint is due
 * — weft-run was asked for one (--checkpoint-on SIG) since the last call,
 * or WEFT_CKPT_INTERVAL_S seconds (if set) passed since this rank's last
 * checkpoint or init on some rank — else 0. One 8-byte allreduce: call it
 * where the program could checkpoint (between steps), then weft_checkpoint
 * if it says so.
 */
weft_status_t weft_ckpt_need(weft_context_t ctx, int* need);

/* -------------------------------------------------- flush to a second directory */

/*
 * Every generation committed from now on is also copied, in the background,
 * to `dir` (a parallel file system in production, where the checkpoint
 * directory is node-local or faster): each rank copies its own image there
 * the durable way and verifies the copy; rank 0 then verifies every rank's
 * copy and writes the manifest there last, so a flushed generation is valid
 * only when all of it is; the newest WEFT_CKPT_KEEP stay. The copy runs on
 * a thread of weft's that touches only files: weft_checkpoint returns at
 * its commit, not after the flush. A generation still waiting when a newer
 * one commits is skipped. weft_restart tries `dir` when the checkpoint
 * directory has no valid generation. NULL stops flushing. Local (not
 * collective); WEFT_CKPT_FLUSH_DIR sets it at init. Rank 0 waits for the
 * other ranks' copies of a generation at most WEFT_CKPT_FLUSH_TIMEOUT_S
 * seconds (default 120).
 */
weft_status_t weft_ckpt_flush_dir(weft_context_t ctx, const char* dir);

typedef struct weft_ckpt_flush_info {
    uint64_t copy_ns;   /* this rank's copy: read, write, fsync, rename */
    uint64_t verify_ns; /* re-reading and checking it (rank 0: and every rank's copy) */
} weft_ckpt_flush_info_t;

/*
 * Waits at most timeout_ms for this rank's part of generation's flush:
 * WEFT_OK once its copy is verified (rank 0: once the generation is
 * committed in the flush directory), or the flush's failure (WEFT_ERR_IO,
 * WEFT_ERR_CORRUPT, WEFT_ERR_TIMEOUT), WEFT_ERR_NOT_FOUND for a generation
 * never handed to the flush or skipped for a newer one. Local. `info` may
 * be NULL.
 */
weft_status_t weft_ckpt_flush_wait(weft_context_t ctx, uint64_t generation, uint64_t timeout_ms,
                                   weft_ckpt_flush_info_t* info);

/* ------------------------------------------- transparent checkpointers */

/*
 * For a checkpointer that saves the whole process (DMTCP, CRIU): before it
 * takes the image, weft lets go of every fabric resource; after the image
 * (or a restore from it), weft makes them again.
 *
 * weft_ckpt_release: collective over the job; call it on every rank (from
 * any one thread per rank; a DMTCP plugin's checkpoint thread will do). It
 * drains the job (drain.h) and, at the quiescent point, every rank:
 * completes and takes in everything in transit, stops weft's threads that
 * touch the fabric by themselves (the failure detector, the pidfd monitor),
 * and lets go of the fabric — peers' shared memory, its own segment,
 * registrations, endpoints, workers, devices — and of its connection to
 * the launcher. Windows keep their memory, contents and addresses (as
 * private memory of the process). It returns once this rank has let go.
 * From then until weft_ckpt_rebuild every other call into weft waits (as
 * during a drain); a window's operations answer WEFT_ERR_BUSY.
 *   WEFT_OK            released
 *   WEFT_ERR_UNSUPPORTED  this context cannot (the reason is logged): the
 *                      transport or bootstrap cannot let go yet, the
 *                      launch has several jobs, or WEFT_DRAIN=0
 *   WEFT_ERR_BUSY      released already
 *   other              the drain failed (WEFT_ERR_PEER_FAILED, WEFT_ERR_TIMEOUT)
 *                      or the job could not quiesce: nothing was let go, the
 *                      job goes on
 *
 * weft_ckpt_rebuild: collective; call it on every rank, in the process
 * that released or in one restored from its image. The launcher connection,
 * the transport and every window come back (each window at its old local
 * address, with its contents), weft's threads start again, and the job
 * resumes where it was. WEFT_ERR_INVALID_ARG when not released.
 *
 * A failed rebuild (a peer or the launcher gone meanwhile), or a release
 * that failed half-way, is final for the context: the threads waiting in
 * weft go on, and every operation of the context fails from then on
 * (WEFT_ERR_TRANSPORT; a window's WEFT_ERR_BUSY; drains are refused); only
 * weft_finalize is left, which tears the context down locally, as it does
 * for a context finalized while released.
 *
 * Transports that can release today: shm, UCX and verbs, with weft-run's
 * bootstrap or the caller's (weft_init_with_bootstrap); verbs connected by
 * rdma_cm (librdmacm keeps its device contexts until exit) and the PMIx
 * bootstrap answer WEFT_ERR_UNSUPPORTED. A restored process must keep its
 * pid for weft-run to take it back (CRIU does; DMTCP's virtual pids do not).
 */
weft_status_t weft_ckpt_release(weft_context_t ctx);
weft_status_t weft_ckpt_rebuild(weft_context_t ctx);

/* ------------------------------------------------------------------ restart */

typedef struct weft_restart_info {
    int restarted;    /* 1: the regions hold generation `generation` */
    uint32_t skipped; /* newer generations passed over (invalid on some rank) */
    uint64_t generation;
    uint64_t bytes;     /* this rank's image */
    uint64_t find_ns;   /* listing the generations */
    uint64_t verify_ns; /* reading and checking the manifest and this rank's image, and agreeing */
    uint64_t load_ns;   /* copying the regions back */
    uint64_t total_ns;
    uint64_t replay_ns;     /* re-creating the saved requests, re-posting receives, re-buffering messages, agreeing */
    uint32_t requests;      /* requests re-created at their handles */
    uint32_t receives;      /* of which receives re-posted, in posting order */
    uint32_t messages;      /* buffered messages put back, in arrival order */
    uint32_t communicators; /* besides the world, re-created at their handles */
    uint32_t groups;        /* process groups, constructed again under their names */
} weft_restart_info_t;

/*
 * Collective over the job: restores the newest generation of `dir` whose
 * manifest and images verify on every rank, into the regions registered
 * now (each saved region must be registered under its ID with its saved
 * size). Newer generations that fail on any rank are skipped by all ranks
 * together; nothing is copied until every rank has verified its image.
 *   WEFT_OK          restored (info->restarted = 1)
 *   WEFT_ERR_NOT_FOUND  no valid generation, in `dir` nor in the flush directory
 *                       (a first start; info->restarted = 0; logged as an
 *                       error when weft-run was told --restart)
 *   WEFT_ERR_BAD_PARAM  the newest manifest was written by a job of another size
 *   WEFT_ERR_INVALID_ARG  a saved region is not registered here, or its size differs,
 *                       or this is not the process's context the checkpoint was taken in
 *   WEFT_ERR_BUSY       a rank already holds requests, communicators besides the world or
 *                       buffered messages (nothing restored)
 * After WEFT_OK the saved requests are live again at their old handles and
 * the saved messages wait in weft's buffer: the program waits and receives
 * as it would have without the checkpoint.
 * `info` may be NULL.
 */
weft_status_t weft_restart(weft_context_t ctx, const char* dir, weft_restart_info_t* info);

#ifdef __cplusplus
}
#endif

#endif /* WEFT_CKPT_H */
