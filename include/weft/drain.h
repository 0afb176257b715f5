/*
 * drain.h — bringing the whole job to a quiescent point (C ABI).
 *
 * A drain is MANA's: afterwards no thread is inside weft, every collective
 * that started on a rank is complete on every member of its communicator,
 * and no point-to-point message is in transit (each is in the receiver's
 * buffer or already received). Unlike MANA it has no coordinator: the
 * Collective Clock's targets, the counter sums and the decisions live in
 * the ranks' pinned state windows and move by one-sided atomics and reads
 * (docs/drain.md).
 *
 * Every rank runs a drain thread (disable with WEFT_DRAIN=0). Any rank may
 * ask for a drain; all ranks then take part, whatever their application
 * threads are doing: a rank that computes is observed one-sidedly, a rank
 * that reaches its targets waits at its next collective, a rank below them
 * runs on. At the quiescent point each rank's callback runs (a checkpoint
 * writes its image there); when every rank's callback has returned, the
 * job resumes.
 *
 * Environment: WEFT_DRAIN_ATTEMPT_MS (5000: an attempt that has not
 * converged by then is abandoned), WEFT_DRAIN_FREE_RUN_MS (100: the job
 * runs freely between attempts), WEFT_DRAIN_TIMEOUT_MS (60000: a drain
 * that has not reached its quiescent point by then gives up, status
 * WEFT_ERR_TIMEOUT, and the job resumes; the wait for every rank's callback
 * at the quiescent point has as long again),
 * WEFT_DRAIN_IDLE_US (1000: how often an idle drain thread looks for a
 * request), WEFT_DRAIN_MODE (polling: threads never block inside weft, a
 * blocking call steps out between polls; blocking: a blocking receive waits
 * inside weft and the drain releases it with a dummy completion once
 * nothing is in transit, after which it receives again — this mode makes
 * the context MULTIPLE).
 */
#ifndef WEFT_DRAIN_H
#define WEFT_DRAIN_H

#include <weft/weft.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct weft_drain_result {
    uint64_t drain;             /* the job-wide drain number: 1, 2, ... */
    weft_status_t status;       /* WEFT_OK, or why the drain gave up */
    uint32_t attempts;          /* collective-phase attempts (1 = no retry) */
    uint64_t rounds;            /* observation rounds this rank made, all attempts */
    uint64_t round_work_ns;     /* time those rounds took, without the pauses between them
                                   (nor, with the tree observer, the waits for partners) */
    uint64_t raises;            /* targets this rank's threads raised */
    uint64_t collective_ns;     /* start -> every collective drained (this rank's view) */
    uint64_t total_ns;          /* start -> quiescent on every rank */
    uint64_t buffered_messages; /* in this rank's buffer at the quiescent point */
    uint64_t buffered_bytes;
    uint64_t pulled;                /* rendezvous payloads the drain pulled into the buffer */
    uint64_t job_buffered_messages; /* the sum over all ranks */
    uint64_t dummies;               /* blocking mode: blocked receives released here (they receive again after) */
    int deadlock;                   /* blocking mode: every rank was blocked in a receive with nothing in transit */
    uint32_t failed_rank;           /* status WEFT_ERR_PEER_FAILED: a member that failed (or left), as a job
                                   rank; UINT32_MAX otherwise. Fills what was the struct's tail
                                   padding: its size and every other offset are unchanged. */
} weft_drain_result_t;

/* Runs on the drain thread at the quiescent point, before the job resumes;
 * it must not call weft. */
typedef void (*weft_drain_quiescent_fn)(void* arg, const weft_drain_result_t* result);

/* Asks every rank for a drain. Returns at once with the number of the drain
 * that will serve this request (one already requested but not yet started
 * is joined). Any thread may call it, at any time (the drain thread sends
 * the request). */
weft_status_t weft_drain_request(weft_context_t ctx, uint64_t* drain_number);
/* Waits until drain `drain_number` has finished on this rank (the job has
 * resumed) and returns its result; WEFT_ERR_TIMEOUT after timeout_ms
 * (0: wait as long as it takes: a drain that has started ends within its
 * bounds, WEFT_DRAIN_TIMEOUT_MS). Must not be called with any weft call of
 * this thread still in progress.
 * The drain's own status is returned and in result->status: WEFT_OK at a
 * quiescent point; WEFT_ERR_PEER_FAILED when a member failed or left before
 * it (result->failed_rank names one; the drain ends as soon as this rank
 * or another knows, and every later drain of the job ends so at once);
 * WEFT_ERR_TIMEOUT when WEFT_DRAIN_TIMEOUT_MS passed; WEFT_ERR_UNSUPPORTED
 * when a rank of the job is in a communicator with members of another job
 * (weft_group_comm; a drain spans one job). After a failed drain
 * the job goes on as after any drain (messages the drain buffered are
 * received as usual). docs/drain.md lists every case. */
weft_status_t weft_drain_wait(weft_context_t ctx, uint64_t drain_number, uint64_t timeout_ms,
                              weft_drain_result_t* result);
/* Request and wait: one rank's request, not a collective. Called by several
 * ranks at once, they may get different drain numbers (a drain that has
 * started is not joined), and a rank that returns from one and enters a
 * collective leaves the others waiting for a drain that needs it to finish
 * that collective: they wait until the drain's timeout. For a drain every
 * rank asks for together, one rank requests and broadcasts the number, and
 * every rank waits for it (weft_checkpoint does so). */
weft_status_t weft_drain(weft_context_t ctx, weft_drain_result_t* result);

/* Where one drain spent its time on this rank, and what it cost in one-sided
 * operations (docs/drain.md, "Profile"). A separate struct, so that
 * weft_drain_result_t keeps its size.
 *
 * Times are CLOCK_MONOTONIC nanoseconds when this rank's drain thread passed
 * each point (0: not reached), comparable across the ranks of one host: the
 * job-wide moment of a point is the maximum over the ranks.
 *
 * Counts are this rank's, for this drain. An "operation" is one access to
 * another rank's state window: a read of consecutive words (one get), a
 * write (one put), a compare-swap. Accesses to this rank's own window are
 * not counted. "Depth" is the longest chain of operations in one round each
 * of which needs the previous one's result: the reads observer's status read
 * then its clock lines (2, whatever N); the tree's ceil(log2 N) steps, each
 * carrying the hop count of what it combined. Counts do not depend on
 * timing except the numbers of rounds and polls. */
typedef struct weft_drain_profile {
    uint64_t drain;
    uint64_t started_ns;     /* the drain thread took the request */
    uint64_t clock_ns;       /* its last attempt's targets pushed, phase 1 published */
    uint64_t collective_ns;  /* every collective drained (the decision seen) */
    uint64_t gate_closed_ns; /* no application thread inside weft here */
    uint64_t p2p_ns;         /* nothing in transit (the decision seen) */
    uint64_t quiescent_ns;   /* the callback returned and this rank said so */
    uint64_t barrier_ns;     /* every rank said so */
    uint64_t resumed_ns;     /* the gate opened again */
    uint64_t clock_rounds;   /* Collective Clock observation rounds, all attempts */
    uint64_t clock_ops;      /* their operations (without settling, nor the tree's polls of the decision) */
    uint64_t clock_depth;    /* the deepest round's critical path */
    uint64_t clock_polls;    /* tree: looks at the decision word while waiting for a partner */
    uint64_t target_ops;     /* compare-swaps pushing targets at attempt starts */
    uint64_t p2p_rounds;
    uint64_t p2p_ops;
    uint64_t barrier_rounds; /* looks of the quiescent barrier */
    uint64_t barrier_ops;
    uint64_t settle_ops; /* reads and compare-swaps of the decision word that settle a phase (any phase) */
} weft_drain_profile_t;
/* The profile of drain `drain_number` once it finished here (one of the last
 * 64); WEFT_ERR_NOT_FOUND otherwise. */
weft_status_t weft_drain_get_profile(weft_context_t ctx, uint64_t drain_number, weft_drain_profile_t* profile);
/* The callback for every later drain (NULL removes it). */
weft_status_t weft_drain_set_callback(weft_context_t ctx, weft_drain_quiescent_fn fn, void* arg);

/* ------------------------------------------------------------------------
 * Hooks for an external MPI stack that links weft (examples/fake_mpi.c).
 * The stack's own communicators, collectives and messages are drained with
 * weft's: its clocks live in the state window beside weft's, its counts join
 * the job's sums, and the drain thread makes it progress and buffer.
 * ---------------------------------------------------------------------- */
typedef struct weft_drain_clock* weft_drain_clock_t;

/* A Collective Clock for one of the stack's communicators. Collective over
 * the listed job ranks, which all pass the same list (its first rank leads)
 * and tag. */
weft_status_t weft_drain_clock_create(weft_context_t ctx, const uint32_t* job_ranks, uint32_t n, int32_t tag,
                                      weft_drain_clock_t* clock);
/* Collective over its members, like MPI_Comm_free (it counts as one). */
weft_status_t weft_drain_clock_free(weft_drain_clock_t* clock);
/* The clock's slot in this rank's state window (weft/state_window.h). */
weft_status_t weft_drain_clock_slot(weft_drain_clock_t clock, uint32_t* slot);
/* Around every collective call on the communicator (and its creation and
 * free). commit_begin may wait while a drain decides; call it outside any
 * lock the drain's hooks need. */
weft_status_t weft_drain_commit_begin(weft_drain_clock_t clock);
weft_status_t weft_drain_commit_finish(weft_drain_clock_t clock);
/* Point-to-point messages the stack sent, and saw arrive (count each once,
 * on arrival, whether matched or buffered). */
weft_status_t weft_drain_count(weft_context_t ctx, uint64_t sent, uint64_t arrived);
/* Bracket every call into the stack's lower layer (they nest), and step out
 * between polls of a blocking wait: the drain keeps threads out of weft and
 * of the stack alike. */
weft_status_t weft_drain_enter(weft_context_t ctx);
weft_status_t weft_drain_leave(weft_context_t ctx);
weft_status_t weft_drain_yield(weft_context_t ctx);
/* 1 while a drain is closing the gate and the calling thread (inside, not
 * blocked in a receive) should step out through weft_drain_yield; else 0
 * (also for a null or finalized context). A load and a branch: a stack
 * whose waits hold a lock its drain hooks need tests this between polls
 * and lets go of the lock only when it says 1. */
int weft_drain_closing(weft_context_t ctx);

/* Run by the drain thread while no application thread is inside. progress:
 * advance the stack (its open collectives). buffer: take every arrived
 * message into the stack's own buffer and return how many transfers of its
 * are still unfinished (0 when nothing is in flight on its side). */
typedef struct weft_drain_hooks {
    void (*progress)(void* arg);
    uint64_t (*buffer)(void* arg);
    void* arg;
} weft_drain_hooks_t;
weft_status_t weft_drain_set_hooks(weft_context_t ctx, const weft_drain_hooks_t* hooks);

#ifdef __cplusplus
}
#endif
#endif /* WEFT_DRAIN_H */
