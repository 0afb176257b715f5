/*
 * weft.h — the stable C ABI of libweft.
 *
 * Plain C (C99), opaque handles, every call returns a weft_status_t, output
 * parameters last. No C++ exception ever crosses this boundary.
 *
 * Threading: a context is SERIALIZED — any thread may call into it, but only
 * one at a time (the MPI_THREAD_SERIALIZED level) — unless it was created by
 * weft_init_thread(WEFT_THREAD_MULTIPLE, ...) (weft/comm.h) or with
 * WEFT_PROGRESS_THREAD=1: then every call takes the context's lock, so
 * threads may call concurrently (MPI_THREAD_MULTIPLE). Blocking calls of
 * comm.h release the lock while they wait; weft_wait and
 * weft_bootstrap_barrier hold it. weft starts one internal thread per
 * context (the peer monitor) that never calls user code, plus the progress
 * thread when asked; active-message handlers run on whichever thread
 * progresses, under the lock.
 *
 * Lifetime: handles stay valid until their free/finalize call. Calling a
 * function on a finalized context or freed window returns
 * WEFT_ERR_NOT_INITIALIZED (never undefined behaviour): weft keeps a small
 * tombstone of each released handle for exactly that reason.
 */
#ifndef WEFT_WEFT_H
#define WEFT_WEFT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define WEFT_ABI_VERSION 1

typedef enum weft_status {
    WEFT_OK = 0,
    WEFT_ERR_INVALID_ARG = 1,     /* null pointer, bad flag, bad id */
    WEFT_ERR_NOT_INITIALIZED = 2, /* null/finalized context, freed window */
    WEFT_ERR_INVALID_RANK = 3,    /* rank/peer outside the job or universe */
    WEFT_ERR_OUT_OF_RANGE = 4,    /* offset+length outside a remote region */
    WEFT_ERR_UNALIGNED = 5,       /* atomic on an address not 8-byte aligned */
    WEFT_ERR_MSG_SIZE = 6,        /* zero-length or oversized message */
    WEFT_ERR_UNSUPPORTED = 7,     /* the backend cannot do this here */
    WEFT_ERR_NO_MEMORY = 8,
    WEFT_ERR_PEER_FAILED = 9,        /* the target process has failed */
    WEFT_ERR_TIMEOUT = 10,           /* a deadline passed */
    WEFT_ERR_TRANSPORT = 11,         /* the fabric reported an error */
    WEFT_ERR_BOOTSTRAP = 12,         /* launcher / PMIx exchange failed */
    WEFT_ERR_PROTOCOL = 13,          /* a corrupted or truncated message */
    WEFT_ERR_UNKNOWN_TRANSPORT = 14, /* WEFT_TRANSPORT names no backend */
    WEFT_ERR_BUSY = 15,              /* resource in use (e.g. handler id taken) */
    WEFT_ERR_NOT_FOUND = 16,
    WEFT_ERR_TRUNCATE = 17,            /* a message longer than the receive buffer */
    WEFT_ERR_REVOKED = 18,             /* the communicator was revoked (weft/ft.h) */
    WEFT_ERR_PEER_FAILED_PENDING = 19, /* ANY_SOURCE receive with an unrecognised failure (weft/ft.h) */
    WEFT_ERR_NOT_A_MEMBER = 20,        /* the caller is not among an operation's participants (weft/group.h) */
    WEFT_ERR_CONSTRUCT_ABORT = 21,     /* a group construct was aborted: a participant was lost (weft/group.h) */
    WEFT_ERR_CANCELED = 22,            /* the operation was cancelled */
    WEFT_ERR_WOULD_BLOCK = 23,         /* a blocking call from an event handler */
    WEFT_ERR_BAD_PARAM = 24,           /* participants' arguments disagree (weft/group.h) */
    WEFT_ERR_CORRUPT = 25,             /* a checkpoint image or manifest failed verification (weft/ckpt.h) */
    WEFT_ERR_IO = 26,                  /* a file system call failed: disk full, permissions (weft/ckpt.h) */
    WEFT_ERR_LAST_ = WEFT_ERR_IO
} weft_status_t;

/* A static, never-NULL text for any status value (unknown values included). */
const char* weft_strerror(weft_status_t status);

typedef struct weft_context* weft_context_t;
typedef struct weft_window* weft_window_t;

/* ------------------------------------------------------------------ init */

/*
 * Initialise weft for this process. Reads the environment:
 *   WEFT_TRANSPORT   shm | ucx | verbs | auto (default auto: shm when all ranks share
 *                    this host, else ucx)
 *   WEFT_TIMEOUT_MS  deadline of every blocking call (default 30000)
 *   WEFT_LOG         error | warn | info | debug (default warn)
 * and the bootstrap environment set by weft-run or a PMIx launcher. Without
 * either, the process is a job of one rank.
 */
weft_status_t weft_init(weft_context_t* ctx_out);

/* Collective over the job only in the sense that peers may still be talking
 * to this rank; finalize never waits for a failed peer. */
weft_status_t weft_finalize(weft_context_t ctx);

weft_status_t weft_rank(weft_context_t ctx, uint32_t* rank);
weft_status_t weft_size(weft_context_t ctx, uint32_t* size);
weft_status_t weft_job_id(weft_context_t ctx, uint32_t* job);

/*
 * Peers. Every operation addresses a *peer index*. Indices 0..size-1 are the
 * ranks of this job (peer == rank). Processes of other jobs started by the
 * same launch (weft-run a : b) follow, from `size` up to universe_size-1;
 * weft_peer_lookup maps (job, rank) to their index. Windows span this job
 * only; active messages reach the whole universe.
 */
weft_status_t weft_universe_size(weft_context_t ctx, uint32_t* n);
weft_status_t weft_peer_lookup(weft_context_t ctx, uint32_t job, uint32_t rank, uint32_t* peer);
weft_status_t weft_peer_identity(weft_context_t ctx, uint32_t peer, uint32_t* job, uint32_t* rank);

/* ------------------------------------------------------------ capability */

typedef enum weft_atomic_impl {
    WEFT_ATOMICS_CPU = 0,      /* direct CPU atomics on shared memory */
    WEFT_ATOMICS_HARDWARE = 1, /* NIC atomics */
    WEFT_ATOMICS_EMULATED = 2, /* software: moves only when the target progresses */
    WEFT_ATOMICS_NONE = 3      /* not available on this kind of window */
} weft_atomic_impl_t;

typedef enum weft_atomic_scope {
    WEFT_ATOMIC_SCOPE_GLOBAL = 0, /* remote atomics are coherent with CPU atomics */
    WEFT_ATOMIC_SCOPE_DEVICE = 1  /* only with other device atomics on the word */
} weft_atomic_scope_t;

typedef struct weft_caps {
    const char* transport;                 /* "shm", "ucx", "verbs" */
    weft_atomic_impl_t atomics;            /* on weft-allocated windows */
    weft_atomic_impl_t atomics_registered; /* on weft_window_register memory */
    weft_atomic_scope_t atomic_scope;
    int ordered_puts;           /* puts from one origin to one target land in order */
    int peer_failure_immediate; /* local peer death reported without a timeout */
    size_t am_eager_limit;      /* larger active messages use rendezvous */
    size_t am_max_size;
} weft_caps_t;

weft_status_t weft_query_caps(weft_context_t ctx, weft_caps_t* caps);

/* ------------------------------------------------------- memory windows */

/*
 * Collective over the job: every rank calls with its own size (sizes may
 * differ; 0 is allowed). Memory comes from weft (registered, shared where
 * possible), so remote atomics on it are direct. *base_out is 64-byte aligned
 * and zero-filled.
 */
weft_status_t weft_window_allocate(weft_context_t ctx, size_t size, void** base_out, weft_window_t* win_out);

/* Collective: expose memory the program owns. On shm, put/get use
 * cross-memory attach and atomics are not available (weft_caps_t says so). */
weft_status_t weft_window_register(weft_context_t ctx, void* base, size_t size, weft_window_t* win_out);

/* Collective. Completes outstanding operations first. */
weft_status_t weft_window_free(weft_window_t win);

/* The rank's pinned state window (layout in weft/state_window.h). Owned by the
 * context; never freed by the caller. */
weft_status_t weft_state_window(weft_context_t ctx, weft_window_t* win_out);

weft_status_t weft_window_local(weft_window_t win, void** base, size_t* size);

/* ------------------------------------------------------------------ RMA */

/* Returns when src may be reused; remote completion at weft_flush.
 * A zero-length put/get at an offset within the region is a successful
 * no-op (offsets past the end are still WEFT_ERR_OUT_OF_RANGE). */
weft_status_t weft_put(weft_window_t win, uint32_t rank, uint64_t offset, const void* src, size_t len);
/* Returns when dst holds the data. */
weft_status_t weft_get(weft_window_t win, uint32_t rank, uint64_t offset, void* dst, size_t len);

/* 64-bit remote atomics; offset must be 8-byte aligned. Each returns the
 * previous value. */
weft_status_t weft_atomic_fetch_add(weft_window_t win, uint32_t rank, uint64_t offset, uint64_t value,
                                    uint64_t* old_value);
weft_status_t weft_atomic_compare_swap(weft_window_t win, uint32_t rank, uint64_t offset, uint64_t expected,
                                       uint64_t desired, uint64_t* old_value);
weft_status_t weft_atomic_swap(weft_window_t win, uint32_t rank, uint64_t offset, uint64_t value, uint64_t* old_value);

#define WEFT_RANK_ALL UINT32_MAX
/* Remote completion of every put issued to rank (or all ranks). */
weft_status_t weft_flush(weft_window_t win, uint32_t rank);

/* ------------------------------------------------------ active messages */

#define WEFT_AM_MAX_HANDLERS 64
#define WEFT_AM_MAX_SIZE ((size_t)1 << 30) /* 1 GiB */

/* Runs inside weft_progress/weft_wait on the calling thread. `payload` is
 * valid only during the call. A handler may send active messages. */
typedef void (*weft_am_handler_t)(void* arg, uint32_t source_peer, const void* payload, size_t len);

/* Installs the handler for id (handler NULL removes it; a second handler for
 * a taken id is WEFT_ERR_BUSY). Registration is local: a peer cannot know
 * when it happened (two jobs of one launch share no barrier, and weft_init's
 * barrier comes before any registration), so a message that arrives for an
 * id without a handler is held, not dropped: in arrival order, until a
 * handler for the id is registered, and then delivered by the next
 * weft_progress/weft_wait (never from inside this call), before any later
 * message for that id. The hold is bounded by WEFT_AM_HOLD_BYTES (default
 * 64 MiB, counting each message's payload and a 32-byte record);
 * past it a message is dropped and an error is logged naming the id, the
 * sender and the bound (and again, with the count, when the id's handler
 * is registered). Messages still held at weft_finalize are reported as
 * errors. A fenced (failed) sender's held messages are dropped, like its
 * new ones. */
weft_status_t weft_am_register(weft_context_t ctx, uint32_t id, weft_am_handler_t handler, void* arg);

/* Returns when payload may be reused. Messages from one sender to one
 * receiver are delivered in order. Payloads above the eager limit go by
 * rendezvous (the receiver pulls them with RMA). len must be > 0. */
weft_status_t weft_am_send(weft_context_t ctx, uint32_t peer, uint32_t id, const void* payload, size_t len);

/* ------------------------------------------------------------- progress */

/* Runs handlers for arrived messages and failure notices; never blocks.
 * *events (may be NULL) gets the number of events handled. */
weft_status_t weft_progress(weft_context_t ctx, uint32_t* events);

/* Progresses until at least one event was handled or timeout_ns passed
 * (WEFT_ERR_TIMEOUT). Spins briefly, then yields, then sleeps in the kernel:
 * safe with more ranks than cores. */
weft_status_t weft_wait(weft_context_t ctx, uint64_t timeout_ns);

/* Called from weft_progress once per failed peer. */
typedef void (*weft_peer_failure_handler_t)(void* arg, uint32_t peer);
weft_status_t weft_set_peer_failure_handler(weft_context_t ctx, weft_peer_failure_handler_t handler, void* arg);
/* Events (PMIx's event notification, for the events weft raises).
 * WEFT_EVENT_PROC_FAILED: a peer failed (a peer that finalized and exited
 * departed: no event). Every handler registered for it is called once per
 * failed peer, in registration order, after the peer failure handler, from
 * whichever call progresses weft on this process; `peer` is numbered as for
 * weft_set_peer_failure_handler. Failures dispatched before a registration
 * are not replayed (weft_comm_get_failed lists them). A handler must not
 * call weft: it records, and the application acts after. */
typedef enum weft_event { WEFT_EVENT_PROC_FAILED = 1 } weft_event_t;
typedef void (*weft_event_handler_t)(void* arg, weft_event_t event, uint32_t peer);
/* *id names the registration for weft_event_deregister. */
weft_status_t weft_event_register(weft_context_t ctx, weft_event_t event, weft_event_handler_t handler, void* arg,
                                  uint64_t* id);
/* WEFT_ERR_NOT_FOUND for an id that is not registered (or no longer). */
weft_status_t weft_event_deregister(weft_context_t ctx, uint64_t id);

/* *failed = 1 once weft knows peer has failed. */
weft_status_t weft_peer_failed(weft_context_t ctx, uint32_t peer, int* failed);

/* Job-wide barrier over the bootstrap channel (control path, slow). */
weft_status_t weft_bootstrap_barrier(weft_context_t ctx);

/* A named fault point: when weft-run was asked to
 * `--fault kill:rank=R:at=NAME[:count=K]` (or stop:...), rank R SIGKILLs
 * (SIGSTOPs) itself on the K-th call with NAME. Otherwise a no-op costing one
 * load. weft's own code has points such as "transport.init.done". */
void weft_fault_point(const char* name);

#ifdef __cplusplus
}
#endif
#endif /* WEFT_WEFT_H */
