/*
 * comm.h — communicators, tagged point-to-point and collectives (C ABI).
 *
 * A communicator is an ordered set of this job's ranks with a context ID
 * unique in the launch and its own Collective-Clock record in the pinned
 * state window (weft/state_window.h). A process group's communicator
 * (weft/group.h) may also hold other jobs' processes: it has no
 * Collective-Clock record (weft_group_comm says what that changes). Messages on one communicator never match
 * receives on another. The rules are MPI's:
 *   - non-overtaking: two messages from one sender on one communicator that
 *     both match a receive are matched in the order they were sent;
 *   - a message is matched against pending receives in posting order, and a
 *     posted receive against queued (unexpected) messages in arrival order;
 *   - WEFT_ANY_SOURCE and WEFT_ANY_TAG are wildcards for receives and probes.
 *
 * Buffers are described by (pointer, count, datatype). A receive into a
 * buffer smaller than the message delivers what fits and completes with
 * WEFT_ERR_TRUNCATE; nothing is ever written past count elements.
 *
 * Threading: the functions here are safe to call from several threads at
 * once when the context was initialised with weft_init_thread(
 * WEFT_THREAD_MULTIPLE, ...) (one lock per context; blocking calls release
 * it while they wait), or when WEFT_PROGRESS_THREAD=1 started a progress
 * thread. Otherwise the level is SERIALIZED, as for the rest of weft.h.
 *
 * Lifetime: the world communicator belongs to the context. Every other
 * communicator lives until weft_comm_free; requests until the test/wait that
 * completes them (which sets the handle to NULL).
 */
#ifndef WEFT_COMM_H
#define WEFT_COMM_H

#include <weft/weft.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct weft_comm* weft_comm_t;
typedef struct weft_request* weft_request_t;

#define WEFT_ANY_SOURCE (-1)
#define WEFT_ANY_TAG (-1)
#define WEFT_UNDEFINED (-32766)        /* split colour: this rank joins no communicator */
#define WEFT_TAG_UB 0x7fffffff         /* largest tag a user may send */
#define WEFT_IN_PLACE ((const void*)1) /* send buffer of reduce/allreduce/allgather */

typedef enum weft_datatype {
    WEFT_BYTE = 0,
    WEFT_INT32 = 1,
    WEFT_UINT32 = 2,
    WEFT_INT64 = 3,
    WEFT_UINT64 = 4,
    WEFT_DOUBLE = 5,
    WEFT_DATATYPE_COUNT_ = 6
} weft_datatype_t;

typedef enum weft_op {
    WEFT_OP_SUM = 0,
    WEFT_OP_MIN = 1,
    WEFT_OP_MAX = 2,
    WEFT_OP_BAND = 3, /* integer types only */
    WEFT_OP_BOR = 4,  /* integer types only */
    WEFT_OP_COUNT_ = 5
} weft_op_t;

/* What a completed receive (or probe) learned. */
typedef struct weft_msg_status {
    int32_t source; /* rank in the communicator */
    int32_t tag;
    size_t bytes;        /* bytes delivered (probe: bytes in the message) */
    weft_status_t error; /* WEFT_OK, WEFT_ERR_TRUNCATE, WEFT_ERR_PEER_FAILED... */
    int cancelled;       /* 1 when the receive was cancelled before matching */
} weft_msg_status_t;

/* Elements of `type` in a status; WEFT_ERR_TRUNCATE when the byte count is
 * not a whole number of elements (MPI_UNDEFINED). */
weft_status_t weft_msg_status_count(const weft_msg_status_t* status, weft_datatype_t type, size_t* count);
weft_status_t weft_datatype_size(weft_datatype_t type, size_t* bytes);

/* ------------------------------------------------------------ threads */

typedef enum weft_thread_level { WEFT_THREAD_SERIALIZED = 0, WEFT_THREAD_MULTIPLE = 1 } weft_thread_level_t;

/* weft_init with a thread level. *provided is what the context gives. */
weft_status_t weft_init_thread(weft_thread_level_t required, weft_thread_level_t* provided, weft_context_t* ctx_out);

/* ------------------------------------------------------ communicators */

/* The job's world: every rank, in rank order. Owned by the context. */
weft_status_t weft_comm_world(weft_context_t ctx, weft_comm_t* world);
weft_status_t weft_comm_rank(weft_comm_t comm, uint32_t* rank);
weft_status_t weft_comm_size(weft_comm_t comm, uint32_t* size);
/* Unique in the launch while comm lives (never reused; the world is 0 in
 * every job). */
weft_status_t weft_comm_context_id(weft_comm_t comm, uint64_t* id);
/* The job rank of `rank` of comm. WEFT_ERR_INVALID_RANK for a member of
 * another job (a process group's communicator, weft/group.h): ask
 * weft_comm_proc for its job and rank. */
weft_status_t weft_comm_job_rank(weft_comm_t comm, uint32_t rank, uint32_t* job_rank);
/* The pinned-state-window slot holding comm's Collective-Clock record
 * (WEFT_STATE_CLOCK_OFF(slot, ...)) on this rank. */
weft_status_t weft_comm_clock_slot(weft_comm_t comm, uint32_t* slot);

/* Collective over comm: the same members, in the same order. If comm is
 * revoked (or a member dies) while a dup or split runs, it may finish at
 * some members and fail at others (WEFT_ERR_REVOKED, WEFT_ERR_PEER_FAILED);
 * where it finished, the new communicator is revoked soon after (the
 * others tell them), so it can be freed and nothing waits in it for a
 * member that does not have it (docs/fault-tolerance.md). */
weft_status_t weft_comm_dup(weft_comm_t comm, weft_comm_t* out);
/* Collective over comm: one communicator per colour, ordered by (key, rank).
 * colour WEFT_UNDEFINED sets *out = NULL. Colours must be >= 0 otherwise. */
weft_status_t weft_comm_split(weft_comm_t comm, int32_t color, int32_t key, weft_comm_t* out);
/* Collective over the listed ranks only (MPI_Comm_create_group): ranks of
 * comm, distinct, in the order they get in the new communicator. The caller
 * must be one of them. Concurrent creations over overlapping lists on one
 * parent must use different tags. */
weft_status_t weft_comm_create_from_ranks(weft_comm_t comm, const uint32_t* ranks, uint32_t n, int32_t tag,
                                          weft_comm_t* out);
/* Collective. Returns at once; the communicator's resources are released
 * when a barrier on it completes (peers may still be using it, as in MANA).
 * Pending operations on it still complete. Sets *comm = NULL. */
weft_status_t weft_comm_free(weft_comm_t* comm);

/* ------------------------------------------------------ point-to-point */

weft_status_t weft_send(weft_comm_t comm, const void* buf, size_t count, weft_datatype_t type, uint32_t dest,
                        int32_t tag);
/* Completes only when the receiver has matched the message. */
weft_status_t weft_ssend(weft_comm_t comm, const void* buf, size_t count, weft_datatype_t type, uint32_t dest,
                         int32_t tag);
weft_status_t weft_isend(weft_comm_t comm, const void* buf, size_t count, weft_datatype_t type, uint32_t dest,
                         int32_t tag, weft_request_t* req);
weft_status_t weft_issend(weft_comm_t comm, const void* buf, size_t count, weft_datatype_t type, uint32_t dest,
                          int32_t tag, weft_request_t* req);
/* source: a rank or WEFT_ANY_SOURCE; tag: >= 0 or WEFT_ANY_TAG. status may
 * be NULL. The return value is status->error. */
weft_status_t weft_recv(weft_comm_t comm, void* buf, size_t count, weft_datatype_t type, int32_t source, int32_t tag,
                        weft_msg_status_t* status);
weft_status_t weft_irecv(weft_comm_t comm, void* buf, size_t count, weft_datatype_t type, int32_t source, int32_t tag,
                         weft_request_t* req);
weft_status_t weft_probe(weft_comm_t comm, int32_t source, int32_t tag, weft_msg_status_t* status);
weft_status_t weft_iprobe(weft_comm_t comm, int32_t source, int32_t tag, int* flag, weft_msg_status_t* status);

/* ----------------------------------------------------------- requests */

/* Completion frees the request and sets *req = NULL. A NULL *req is an
 * inactive request: test/wait complete at once with an empty status. The
 * return value is the operation's own status (status->error). */
weft_status_t weft_request_test(weft_request_t* req, int* flag, weft_msg_status_t* status);
weft_status_t weft_request_wait(weft_request_t* req, weft_msg_status_t* status);
/* statuses may be NULL. Returns the first error of any request (each
 * status has its own). */
weft_status_t weft_request_waitall(size_t n, weft_request_t* reqs, weft_msg_status_t* statuses);
/* *index = the completed request, or SIZE_MAX when all were NULL. */
weft_status_t weft_request_waitany(size_t n, weft_request_t* reqs, size_t* index, weft_msg_status_t* status);
weft_status_t weft_request_testany(size_t n, weft_request_t* reqs, size_t* index, int* flag, weft_msg_status_t* status);
/* Cancels a receive that has not matched yet (its wait then returns with
 * status->cancelled = 1); a matched receive or a send is not cancelled.
 * The request must still be completed with test/wait. */
weft_status_t weft_request_cancel(weft_request_t req);

/* --------------------------------------------------------- collectives */

/* Every collective enters and leaves through the communicator's
 * Collective Clock (commit_begin/commit_finish). All members must call the
 * same collectives in the same order. */
weft_status_t weft_barrier(weft_comm_t comm);
weft_status_t weft_bcast(weft_comm_t comm, void* buf, size_t count, weft_datatype_t type, uint32_t root);
/* recvbuf matters only at root; sendbuf may be WEFT_IN_PLACE at root. */
weft_status_t weft_reduce(weft_comm_t comm, const void* sendbuf, void* recvbuf, size_t count, weft_datatype_t type,
                          weft_op_t op, uint32_t root);
weft_status_t weft_allreduce(weft_comm_t comm, const void* sendbuf, void* recvbuf, size_t count, weft_datatype_t type,
                             weft_op_t op);
/* recvbuf holds size*count elements, rank r's at r*count. sendbuf may be
 * WEFT_IN_PLACE (the rank's part is already in recvbuf). */
weft_status_t weft_allgather(weft_comm_t comm, const void* sendbuf, size_t count, weft_datatype_t type, void* recvbuf);

weft_status_t weft_ibarrier(weft_comm_t comm, weft_request_t* req);
weft_status_t weft_ibcast(weft_comm_t comm, void* buf, size_t count, weft_datatype_t type, uint32_t root,
                          weft_request_t* req);
weft_status_t weft_iallreduce(weft_comm_t comm, const void* sendbuf, void* recvbuf, size_t count, weft_datatype_t type,
                              weft_op_t op, weft_request_t* req);
weft_status_t weft_iallgather(weft_comm_t comm, const void* sendbuf, size_t count, weft_datatype_t type, void* recvbuf,
                              weft_request_t* req);

/* ------------------------------------------------------ error handlers
 * What a communicator's calls do when they fail (MPI's error handlers, seed
 * 003's rules for their handles). Every communicator has one: the world's is
 * WEFT_ERRORS_RETURN, and a communicator made from another (dup, split,
 * create_from_ranks, shrink) starts with its parent's.
 *   WEFT_ERRORS_RETURN     the call returns its status (weft's default);
 *   WEFT_ERRORS_ARE_FATAL  the failure is logged and the process aborts
 *                          (the launcher reports it and ends the job);
 *   user handlers          fn(comm, &status, arg) runs on the calling thread
 *                          once the call is over (it may call weft, and may
 *                          change the status the call then returns).
 * Routed through the handler: point-to-point, probes, collectives, the
 * constructors and free, fault-tolerance calls on the communicator, and the
 * completion (wait/test) of its requests. Not routed: a NULL or invalid
 * communicator handle (there is no handler to ask).
 * Handles: create and get each give the caller a reference, which
 * weft_errhandler_free releases (and sets to NULL); a handler goes when its
 * last reference does (communicators hold one while it is theirs). Freeing
 * a predefined handler obtained from get is valid; freeing the predefined
 * handler itself (more often than get handed it out) is WEFT_ERR_INVALID_ARG. */
typedef struct weft_errhandler* weft_errhandler_t;
typedef void (*weft_comm_errhandler_fn)(weft_comm_t comm, weft_status_t* status, void* arg);
extern struct weft_errhandler weft_errors_return_;
extern struct weft_errhandler weft_errors_are_fatal_;
#define WEFT_ERRORS_RETURN (&weft_errors_return_)
#define WEFT_ERRORS_ARE_FATAL (&weft_errors_are_fatal_)

weft_status_t weft_comm_create_errhandler(weft_comm_errhandler_fn fn, void* arg, weft_errhandler_t* errhandler);
weft_status_t weft_comm_set_errhandler(weft_comm_t comm, weft_errhandler_t errhandler);
weft_status_t weft_comm_get_errhandler(weft_comm_t comm, weft_errhandler_t* errhandler);
weft_status_t weft_errhandler_free(weft_errhandler_t* errhandler);
/* *same = 1 when a and b are the same handler. */
weft_status_t weft_errhandler_compare(weft_errhandler_t a, weft_errhandler_t b, int* same);

#ifdef __cplusplus
}
#endif

/* Fault tolerance on communicators: validate, get_failed, agree, revoke,
 * shrink. */
#include <weft/ft.h>

#endif /* WEFT_COMM_H */
