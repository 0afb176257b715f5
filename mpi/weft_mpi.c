/*
 * weft_mpi.c — libweft-mpi: a PMPI layer that lets weft drain an unmodified
 * MPI program to a quiescent point (MANA's protocol: docs/mpi-layer.md).
 *
 * Linked or LD_PRELOADed into a program of Debian's Open MPI or MPICH (one
 * build per MPI: the same source through each MPI's compiler wrapper). It
 * wraps the calls a program makes:
 *   - MPI_Init starts weft on MPI's own all-gather (weft/bootstrap.h, on a
 *     private duplicate of MPI_COMM_WORLD), so any MPI launcher works;
 *   - every collective and communicator constructor/destructor runs inside
 *     its communicator's Collective Clock (weft_drain_commit_begin/finish):
 *     a blocking one as the MPI's blocking call, which the clock lets
 *     complete; a non-blocking one from its start to its completion (the
 *     program's wait, or the drain's progress hook);
 *   - every point-to-point message is counted when sent and when it arrives
 *     (weft_drain_count); a blocking send or receive is its non-blocking
 *     form, tested with weft_drain_yield between tests; persistent
 *     requests and matched probes are counted and buffered alike;
 *   - during a drain, weft's drain thread runs this layer's hooks while no
 *     application thread is inside MPI: `buffer` receives every unmatched
 *     message (MPI_Iprobe + MPI_Recv) into this layer's buffer and counts
 *     the arrivals that completed into receives the program had posted
 *     (MPI_Request_get_status, which frees nothing);
 *   - afterwards receives and probes look at the buffer first: a buffered
 *     message is older than any still inside MPI from the same sender on
 *     the same communicator, so MPI's order is kept. An MPI_Irecv satisfied
 *     from the buffer returns a generalized request that is already
 *     complete, so the MPI_Wait/Test families report its status natively.
 * SIGUSR1 (to any rank, or forwarded by the launcher; WEFT_MPI_DRAIN_SIGNAL
 * picks another) asks for a drain;
 * each rank prints its outcome and times on stderr ("weft-mpi: drain N").
 *
 * Calls that would break the drain's accounting and are not wrapped yet
 * are refused at call time with a message naming them (MPI_Abort), never
 * run silently: their wrappers are generated from the MPI's own header
 * (mpi/coverage.py), and docs/mpi-coverage.md lists every function as
 * wrapped, refused or passed through.
 */
#define _GNU_SOURCE
#include <weft/bootstrap.h>
#include <weft/ckpt.h>
#include <weft/drain.h>
#include <weft/mpi_layer.h>
#include <weft/weft.h>

#include <mpi.h>
#if defined(OPEN_MPI) && MPI_VERSION < 4
#include <mpi-ext.h> /* Open MPI's MPIX_ persistent collectives (the pcollreq extension) */
#endif
/* Persistent collectives: MPI-4's (MPICH 4), or Open MPI 4.1's MPIX_ forms. */
#if MPI_VERSION >= 4 || defined(OMPI_HAVE_MPI_EXT_PCOLLREQ)
#define WEFT_MPI_PERSISTENT_COLLECTIVES 1
#endif
#if MPI_VERSION < 4 && defined(OMPI_HAVE_MPI_EXT_PCOLLREQ) /* their MPI-4 names, below, are Open MPI's MPIX_ */
#define MPI_Allgather_init MPIX_Allgather_init
#define PMPI_Allgather_init PMPIX_Allgather_init
#define MPI_Allgatherv_init MPIX_Allgatherv_init
#define PMPI_Allgatherv_init PMPIX_Allgatherv_init
#define MPI_Allreduce_init MPIX_Allreduce_init
#define PMPI_Allreduce_init PMPIX_Allreduce_init
#define MPI_Alltoall_init MPIX_Alltoall_init
#define PMPI_Alltoall_init PMPIX_Alltoall_init
#define MPI_Alltoallv_init MPIX_Alltoallv_init
#define PMPI_Alltoallv_init PMPIX_Alltoallv_init
#define MPI_Alltoallw_init MPIX_Alltoallw_init
#define PMPI_Alltoallw_init PMPIX_Alltoallw_init
#define MPI_Barrier_init MPIX_Barrier_init
#define PMPI_Barrier_init PMPIX_Barrier_init
#define MPI_Bcast_init MPIX_Bcast_init
#define PMPI_Bcast_init PMPIX_Bcast_init
#define MPI_Exscan_init MPIX_Exscan_init
#define PMPI_Exscan_init PMPIX_Exscan_init
#define MPI_Gather_init MPIX_Gather_init
#define PMPI_Gather_init PMPIX_Gather_init
#define MPI_Gatherv_init MPIX_Gatherv_init
#define PMPI_Gatherv_init PMPIX_Gatherv_init
#define MPI_Reduce_init MPIX_Reduce_init
#define PMPI_Reduce_init PMPIX_Reduce_init
#define MPI_Reduce_scatter_init MPIX_Reduce_scatter_init
#define PMPI_Reduce_scatter_init PMPIX_Reduce_scatter_init
#define MPI_Reduce_scatter_block_init MPIX_Reduce_scatter_block_init
#define PMPI_Reduce_scatter_block_init PMPIX_Reduce_scatter_block_init
#define MPI_Scan_init MPIX_Scan_init
#define PMPI_Scan_init PMPIX_Scan_init
#define MPI_Scatter_init MPIX_Scatter_init
#define PMPI_Scatter_init PMPIX_Scatter_init
#define MPI_Scatterv_init MPIX_Scatterv_init
#define PMPI_Scatterv_init PMPIX_Scatterv_init
#define MPI_Neighbor_allgather_init MPIX_Neighbor_allgather_init
#define PMPI_Neighbor_allgather_init PMPIX_Neighbor_allgather_init
#define MPI_Neighbor_allgatherv_init MPIX_Neighbor_allgatherv_init
#define PMPI_Neighbor_allgatherv_init PMPIX_Neighbor_allgatherv_init
#define MPI_Neighbor_alltoall_init MPIX_Neighbor_alltoall_init
#define PMPI_Neighbor_alltoall_init PMPIX_Neighbor_alltoall_init
#define MPI_Neighbor_alltoallv_init MPIX_Neighbor_alltoallv_init
#define PMPI_Neighbor_alltoallv_init PMPIX_Neighbor_alltoallv_init
#define MPI_Neighbor_alltoallw_init MPIX_Neighbor_alltoallw_init
#define PMPI_Neighbor_alltoallw_init PMPIX_Neighbor_alltoallw_init
#endif

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static weft_context_t ctx;
static MPI_Comm boot_comm = MPI_COMM_NULL; /* weft's all-gathers: never the program's */
static int world_rank, world_size;
static int drains_ok;  /* MPI gave at least SERIALIZED: the drain thread may call it */
static int layer_live; /* between MPI_Init and MPI_Finalize */

/* Ends the job after a message on stderr. The pause lets the launcher
 * forward the message first: hydra tears down a rank's output as soon as
 * the abort reaches it, and the message was lost in 1 run of 3. */
static void abort_job(void) {
    const struct timespec pause = {0, 200000000};
    nanosleep(&pause, NULL);
    PMPI_Abort(MPI_COMM_WORLD, 1);
}

static int refuse(const char* call, const char* why);

static void fail(const char* what, weft_status_t st) {
    fprintf(stderr, "weft-mpi rank %d: %s: %s\n", world_rank, what, weft_strerror(st));
    abort_job();
}
#define CHECK(call)                           \
    do {                                      \
        weft_status_t st_ = (call);           \
        if (st_ != WEFT_OK) fail(#call, st_); \
    } while (0)

/* Calls into MPI are serialized by this lock: the program's (between
 * ENTER and LEAVE, released while it yields to a drain) and the drain
 * thread's hooks. weft calls the progress hook in the drain's collective
 * phase too, while the program's threads still run: MPI at
 * MPI_THREAD_SERIALIZED must not see two calls at once (MPICH over UCX
 * asserts). The hook only tries the lock: a thread that holds it is inside
 * MPI, progressing it anyway. */
static pthread_mutex_t mpi_lock = PTHREAD_MUTEX_INITIALIZER;
/* Threads blocked on mpi_lock (lock_mpi counts them): a thread testing in a
 * wait loop keeps the lock between tests unless this is non-zero or a
 * drain is closing weft's gate (YIELD). */
static int lock_wanted;
static void lock_mpi(void) {
    if (pthread_mutex_trylock(&mpi_lock) == 0) return;
    __atomic_add_fetch(&lock_wanted, 1, __ATOMIC_RELAXED);
    pthread_mutex_lock(&mpi_lock);
    __atomic_sub_fetch(&lock_wanted, 1, __ATOMIC_RELAXED);
}
/* Synchronous sends in flight are advanced at every call and every wait
 * (their acknowledgments: see "synchronous mode"). */
struct sync_send;
static struct sync_send* sync_sends;
static void sync_progress(void);
#define ENTER()                          \
    do {                                 \
        CHECK(weft_drain_enter(ctx));    \
        lock_mpi();                      \
        if (sync_sends) sync_progress(); \
    } while (0)
/* Communicators MPI_Comm_idup completed inside the call get their clocks
 * on the way out (outside the lock and the gate, as a constructor's). */
static int nidups_complete;
static void adopt_idups(void);
#define LEAVE()                             \
    do {                                    \
        pthread_mutex_unlock(&mpi_lock);    \
        CHECK(weft_drain_leave(ctx));       \
        if (nidups_complete) adopt_idups(); \
    } while (0)
/* Between tests of a wait: a drain may take this thread out here. The
 * thread lets go of the lock only when something needs it (a drain closing
 * weft's gate, another thread), not at every test: an unlock and a lock per
 * test were a quarter of an 8-byte ping-pong's samples under the layer
 * (docs/mpi-layer.md, "Overhead"). The drain's progress hook needs no
 * opening: weft runs it only while no program thread is inside the gate,
 * and a waiting thread is. */
#define YIELD()                                                                                                \
    do {                                                                                                       \
        if (__builtin_expect(weft_drain_closing(ctx) || __atomic_load_n(&lock_wanted, __ATOMIC_RELAXED), 0)) { \
            pthread_mutex_unlock(&mpi_lock);                                                                   \
            CHECK(weft_drain_yield(ctx));                                                                      \
            lock_mpi();                                                                                        \
        }                                                                                                      \
        if (sync_sends) sync_progress();                                                                       \
    } while (0)

/* ------------------------------------------------------------ bootstrap */
static int boot_iallgather(void* arg, const void* mine, size_t len, void* all, void** request) {
    (void)arg;
    MPI_Request* r = malloc(sizeof *r);
    if (!r || len > (size_t)0x7fffffff) {
        free(r);
        return 1;
    }
    lock_mpi(); /* weft calls these outside every wrapper's lock */
    const int rc = PMPI_Iallgather(mine, (int)len, MPI_BYTE, all, (int)len, MPI_BYTE, boot_comm, r);
    pthread_mutex_unlock(&mpi_lock);
    if (rc != MPI_SUCCESS) {
        free(r);
        return 1;
    }
    *request = r;
    return 0;
}

static int boot_test(void* arg, void* request, int* done) {
    (void)arg;
    MPI_Request* r = request;
    lock_mpi();
    const int rc = PMPI_Test(r, done, MPI_STATUS_IGNORE);
    pthread_mutex_unlock(&mpi_lock);
    if (rc != MPI_SUCCESS) return 1;
    if (*done) free(r);
    return 0;
}

/* ------------------------------------------------------- communicators */
/* Every communicator the program made through a wrapped call, with its
 * Collective Clock. Looked up by handle; a program has a few. */
enum { COMM_MAX = 1024 };
static struct {
    MPI_Comm comm;
    weft_drain_clock_t clock;
    int32_t tag;      /* its clock's tag */
    uint32_t created; /* communicators created from it so far */
    int* world;       /* each member's rank in MPI_COMM_WORLD */
    int size;
} comms[COMM_MAX];
static int ncomms;

static int index_of(MPI_Comm comm) {
    for (int i = 0; i < ncomms; ++i)
        if (comms[i].comm == comm) return i;
    return -1;
}

static weft_drain_clock_t clock_of(MPI_Comm comm, const char* call) {
    const int i = index_of(comm);
    if (i >= 0) return comms[i].clock;
    fprintf(stderr,
            "weft-mpi rank %d: %s on a communicator weft-mpi did not see created (made by a call it does not wrap: "
            "docs/mpi-layer.md)\n",
            world_rank, call);
    abort_job();
    return NULL;
}

/* A point-to-point call's communicator must be one the drain's buffer hook
 * looks into; a message on any other could not be drained. The last hit
 * is remembered: a program sends on one or two communicators at a time. */
static int last_known = -1;
static void known(MPI_Comm comm, const char* call) {
    if (last_known >= 0 && last_known < ncomms && comms[last_known].comm == comm) return;
    last_known = index_of(comm);
    if (last_known < 0) (void)clock_of(comm, call);
}

/* The clock tag of the next communicator created from `parent` (-1: the
 * world, -2: MPI_COMM_SELF). Its tag needs no communication: every member
 * of the parent makes the same creations from it, in the same order, so
 * (parent's tag, how many so far) is the same on each. Members of different
 * split colours share the tag but not the member list. Counted also where
 * this rank got MPI_COMM_NULL (a split's MPI_UNDEFINED colour, a
 * Cart_create's spare rank): the parent's members must agree on the count. */
static int32_t next_tag(int parent) {
    if (parent < 0) return -parent; /* the roots: world 1, self 2 */
    const uint32_t h = (uint32_t)comms[parent].tag * 1000003u + ++comms[parent].created;
    return (int32_t)(h & 0x7fffffffu);
}

/* comm's clock, with the tag next_tag gave it: collective over its members. */
static void adopt_tagged(MPI_Comm comm, int32_t tag) {
    if (ncomms == COMM_MAX) {
        fprintf(stderr, "weft-mpi rank %d: more than %d communicators\n", world_rank, COMM_MAX);
        abort_job();
    }
    lock_mpi(); /* local calls, but MPI must not see two at once */
    int n = 0;
    PMPI_Comm_size(comm, &n);
    MPI_Group group, world;
    PMPI_Comm_group(comm, &group);
    PMPI_Comm_group(MPI_COMM_WORLD, &world);
    int* mine = malloc((size_t)n * sizeof *mine);
    int* theirs = malloc((size_t)n * sizeof *theirs);
    uint32_t* ranks = malloc((size_t)n * sizeof *ranks);
    for (int i = 0; i < n; ++i) mine[i] = i;
    PMPI_Group_translate_ranks(group, n, mine, world, theirs);
    PMPI_Group_free(&group);
    PMPI_Group_free(&world);
    pthread_mutex_unlock(&mpi_lock);
    for (int i = 0; i < n; ++i) ranks[i] = (uint32_t)theirs[i];
    CHECK(weft_drain_clock_create(ctx, ranks, (uint32_t)n, tag, &comms[ncomms].clock));
    comms[ncomms].comm = comm;
    comms[ncomms].tag = tag;
    comms[ncomms].world = theirs; /* kept: synchronous mode names peers by world rank */
    comms[ncomms].size = n;
    comms[ncomms++].created = 0;
    free(mine);
    free(ranks);
}

/* The clock of a communicator just created from `parent` (see next_tag). */
static void adopt(MPI_Comm comm, int parent) {
    const int32_t tag = next_tag(parent);
    if (comm != MPI_COMM_NULL) adopt_tagged(comm, tag);
}

static void persistent_collectives_lose(weft_drain_clock_t clock);

static void forget(MPI_Comm comm) {
    const int i = index_of(comm);
    if (i < 0) return;
    persistent_collectives_lose(comms[i].clock);
    CHECK(weft_drain_clock_free(&comms[i].clock));
    free(comms[i].world);
    comms[i] = comms[--ncomms];
}

/* ------------------------------------------------------ the buffer */
/* Messages a drain took out of MPI, oldest first. */
typedef struct buffered {
    MPI_Comm comm;
    int source, tag;
    int bytes;
    uint64_t drain;   /* the drain that took it out of MPI (0: restored from a checkpoint) */
    uint32_t ordinal; /* its place among that drain's messages from its sender with its tag and communicator */
    struct buffered* next;
    unsigned char data[];
} buffered_t;
static buffered_t *buf_head, *buf_tail;
static uint64_t nbuffered; /* in the buffer now */

/* A message's place in the buffer, its bytes still to be filled. */
static buffered_t* buffer_new(MPI_Comm comm, int source, int tag, int bytes) {
    buffered_t* m = malloc(sizeof *m + (size_t)bytes);
    if (!m) return NULL;
    m->comm = comm;
    m->source = source;
    m->tag = tag;
    m->bytes = bytes;
    m->drain = 0;
    m->ordinal = 0;
    m->next = NULL;
    return m;
}

/* After every message already there. */
static void buffer_append(buffered_t* m) {
    if (buf_tail)
        buf_tail->next = m;
    else
        buf_head = m;
    buf_tail = m;
    ++nbuffered;
}

static int matches(const buffered_t* m, MPI_Comm comm, int source, int tag) {
    return m->comm == comm && (source == MPI_ANY_SOURCE || source == m->source) &&
           (tag == MPI_ANY_TAG || tag == m->tag);
}

static buffered_t* buffer_find(MPI_Comm comm, int source, int tag, buffered_t** prev_out) {
    buffered_t* prev = NULL;
    for (buffered_t* m = buf_head; m; prev = m, m = m->next)
        if (matches(m, comm, source, tag)) {
            if (prev_out) *prev_out = prev;
            return m;
        }
    return NULL;
}

/* The oldest buffered message a receive (comm, source, tag) matches, taken
 * out of the buffer; NULL when none does. */
static buffered_t* buffer_take(MPI_Comm comm, int source, int tag) {
    if (source == MPI_PROC_NULL) return NULL;
    buffered_t* prev = NULL;
    buffered_t* m = buffer_find(comm, source, tag, &prev);
    if (!m) return NULL;
    if (prev)
        prev->next = m->next;
    else
        buf_head = m->next;
    if (buf_tail == m) buf_tail = prev;
    --nbuffered;
    return m;
}

static void fill_status(MPI_Status* st, const buffered_t* m) {
    if (st == MPI_STATUS_IGNORE) return;
    st->MPI_SOURCE = m->source;
    st->MPI_TAG = m->tag;
    st->MPI_ERROR = MPI_SUCCESS;
    PMPI_Status_set_elements(st, MPI_BYTE, m->bytes);
    PMPI_Status_set_cancelled(st, 0);
}

static void sync_acknowledge(const buffered_t* m);

/* Delivers m into (buf, count, type) and frees it; MPI_ERR_TRUNCATE if it
 * does not fit (what fits is delivered, as MPI does). Its sender learns
 * that the program has received it (synchronous mode). */
static int deliver(buffered_t* m, void* buf, int count, MPI_Datatype type, MPI_Comm comm, MPI_Status* st) {
    sync_acknowledge(m);
    int type_size = 0, position = 0, rc = MPI_SUCCESS;
    PMPI_Type_size(type, &type_size);
    const long capacity = (long)count * type_size;
    int bytes = m->bytes;
    if (bytes > capacity) {
        bytes = (int)capacity;
        rc = MPI_ERR_TRUNCATE;
    }
    if (bytes > 0 && type_size > 0) PMPI_Unpack(m->data, bytes, &position, buf, bytes / type_size, type, comm);
    fill_status(st, m);
    if (st != MPI_STATUS_IGNORE) st->MPI_ERROR = rc;
    free(m);
    return rc;
}

/* Messages matched by MPI_Mprobe/MPI_Improbe (see "matched probes"). */
typedef struct {
    int used;
    MPI_Message mpi;  /* MPI's, until the program or a drain receives it */
    buffered_t* data; /* the message, once the buffer or a drain had it */
    MPI_Comm comm;
    int source, tag, bytes;
} matched_t;
static matched_t* matched;
static int matched_cap, nmatched, nmatched_in_mpi;

/* ------------------------------------- posted receives and collectives */
/* Receives and non-blocking collectives MPI holds for the program: a drain
 * counts a receive's arrival once it has happened, and finishes a
 * collective's commit on its clock once it has completed, though the
 * program may not have tested them yet. */
enum { POSTED_MAX = 65536 };
static struct {
    MPI_Request req;
    weft_drain_clock_t clock; /* a collective's; NULL: a receive */
    int counted;              /* its arrival counted, or its commit finished */
} posted[POSTED_MAX];
static int nposted;

static void post_request(MPI_Request req, weft_drain_clock_t clock) {
    if (nposted == POSTED_MAX) {
        fprintf(stderr, "weft-mpi rank %d: more than %d receives and collectives outstanding\n", world_rank,
                POSTED_MAX);
        abort_job();
    }
    posted[nposted].req = req;
    posted[nposted].clock = clock;
    posted[nposted++].counted = 0;
}
static void post(MPI_Request req) { post_request(req, NULL); }

/* The end of posted entry i's operation, once: its arrival, or its
 * collective's commit. */
static void settle(int i) {
    if (posted[i].counted) return;
    posted[i].counted = 1;
    if (posted[i].clock)
        CHECK(weft_drain_commit_finish(posted[i].clock));
    else
        CHECK(weft_drain_count(ctx, 0, 1));
}

/* req's place in the posted table; -1 when it is neither a posted receive
 * nor a non-blocking collective. */
static int posted_index(MPI_Request req) {
    for (int i = 0; i < nposted; ++i)
        if (posted[i].req == req) return i;
    return -1;
}

static void unpost(int i) { posted[i] = posted[--nposted]; }

static void idup_complete(MPI_Request req);

/* req completed (the program's test or wait said so): settled once. */
static void completed(MPI_Request req) {
    const int i = posted_index(req);
    if (i < 0) return;
    if (posted[i].clock) idup_complete(req);
    settle(i);
    unpost(i);
}

/* ------------------------------------------------- synchronous mode */
/* MPI_Ssend completes once its receive has begun. A message a drain took
 * into the receiver's buffer has been received by MPI, not by the program,
 * and MPI then completes the send; the layer must not let the program see
 * that. So:
 *   - the receiver's drain hook reports each message it buffers to its
 *     sender (the drain, and the message's ordinal among that drain's
 *     messages from that sender with that communicator and tag), and the
 *     receiver acknowledges it when the program receives it from the buffer;
 *   - the sender counts, for each (communicator, destination, tag) it has
 *     sent a synchronous message on, all its sends there, and notes the
 *     count at each drain. Per such key MPI matches in send order and a
 *     drain takes every unmatched message, so a drain d took the last k_d
 *     sent before it: send number s was taken by d iff
 *     n_d - k_d < s <= n_d, with ordinal s - (n_d - k_d);
 *   - MPI_Issend gives the program a generalized request that the layer
 *     completes once MPI's own request is complete and, if a drain took the
 *     message, its acknowledgment has come. MPI_Ssend is MPI_Issend and
 *     MPI_Wait.
 * Reports and acknowledgments travel on a private communicator, counted
 * like the program's messages, so a drain takes them in too: when a drain
 * ends, every report of it has reached its sender. */
static MPI_Comm sync_comm = MPI_COMM_NULL;
enum { SYNC_REPORT = 1, SYNC_ACK = 2 };
typedef struct {
    int32_t comm_tag, tag;
    uint64_t drain, ordinal;
} sync_word_t;
static uint64_t last_drain; /* the last drain that reached its quiescent point here */

typedef struct {
    uint64_t drain, sent, taken;
} sync_drain_t;
typedef struct sync_key {
    int32_t comm_tag, tag;
    int dest;      /* world rank */
    uint64_t sent; /* sends on this key since its first synchronous one */
    sync_drain_t* drains;
    int ndrains, cap;
    struct sync_key* next;
} sync_key_t;
static sync_key_t* sync_keys;

typedef struct sync_send {
    MPI_Request mpi, program; /* MPI's request; the program's, generalized */
    sync_key_t* key;
    uint64_t seq, after; /* its number among key's sends; the last drain before it began */
    int mpi_done, need_ack;
    uint64_t ack_drain, ack_ordinal;
    struct sync_send* next;
} sync_send_t;

typedef struct sync_ack {
    int source; /* world rank */
    sync_word_t w;
    struct sync_ack* next;
} sync_ack_t;
static sync_ack_t* sync_acks; /* acknowledgments not yet matched to a send */

typedef struct sync_out {
    sync_word_t w;
    MPI_Request req;
    struct sync_out* next;
} sync_out_t;
static sync_out_t* sync_outgoing; /* words whose MPI_Isend is not known complete */

static int world_rank_in(MPI_Comm comm, int rank) {
    const int i = index_of(comm);
    return i >= 0 && rank >= 0 && rank < comms[i].size ? comms[i].world[rank] : -1;
}

static sync_key_t* sync_key_find(int32_t comm_tag, int dest, int tag) {
    for (sync_key_t* k = sync_keys; k; k = k->next)
        if (k->comm_tag == comm_tag && k->dest == dest && k->tag == tag) return k;
    return NULL;
}

/* Every send counts on its key once the key has had a synchronous one. */
static void sync_count_send(MPI_Comm comm, int dest, int tag) {
    if (!sync_keys || dest == MPI_PROC_NULL) return;
    const int i = index_of(comm);
    if (i < 0) return;
    sync_key_t* k = sync_key_find(comms[i].tag, world_rank_in(comm, dest), tag);
    if (k) ++k->sent;
}

/* A word to world rank `to` on the private communicator; counted. */
static void sync_post(int to, int type, sync_word_t w) {
    sync_out_t* o = malloc(sizeof *o);
    if (!o) {
        fprintf(stderr, "weft-mpi rank %d: no memory for a synchronous-mode word\n", world_rank);
        abort_job();
    }
    o->w = w;
    PMPI_Isend(&o->w, (int)sizeof o->w, MPI_BYTE, to, type, sync_comm, &o->req);
    o->next = sync_outgoing;
    sync_outgoing = o;
    CHECK(weft_drain_count(ctx, 1, 0));
}

static void sync_acknowledge(const buffered_t* m) {
    if (m->drain == 0) return; /* restored from a checkpoint: nobody waits for it */
    const int i = index_of(m->comm);
    if (i < 0) return;
    const sync_word_t w = {comms[i].tag, m->tag, m->drain, m->ordinal};
    sync_post(world_rank_in(m->comm, m->source), SYNC_ACK, w);
}

/* Whether s's message was taken by a drain, and so waits for its ack. */
static void sync_resolve(sync_send_t* s) {
    for (int j = 0; j < s->key->ndrains; ++j) {
        const sync_drain_t* r = &s->key->drains[j];
        if (r->drain <= s->after || s->seq > r->sent || s->seq + r->taken <= r->sent) continue;
        s->need_ack = 1;
        s->ack_drain = r->drain;
        s->ack_ordinal = s->seq - (r->sent - r->taken);
        return;
    }
}

/* Takes in reports and acknowledgments (under the lock); how many. */
static uint64_t sync_poll(void) {
    uint64_t got = 0;
    for (;;) {
        int flag = 0;
        MPI_Status st;
        PMPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, sync_comm, &flag, &st);
        if (!flag) break;
        sync_word_t w;
        PMPI_Recv(&w, (int)sizeof w, MPI_BYTE, st.MPI_SOURCE, st.MPI_TAG, sync_comm, MPI_STATUS_IGNORE);
        ++got;
        sync_key_t* k = sync_key_find(w.comm_tag, st.MPI_SOURCE, w.tag);
        if (!k) continue; /* a key that never carried a synchronous send */
        if (st.MPI_TAG == SYNC_REPORT) {
            for (int j = 0; j < k->ndrains; ++j)
                if (k->drains[j].drain == w.drain && w.ordinal > k->drains[j].taken) k->drains[j].taken = w.ordinal;
        } else {
            sync_ack_t* a = malloc(sizeof *a);
            if (!a) abort_job();
            a->source = st.MPI_SOURCE;
            a->w = w;
            a->next = sync_acks;
            sync_acks = a;
        }
    }
    for (sync_out_t** o = &sync_outgoing; *o;) {
        int done = 0;
        PMPI_Test(&(*o)->req, &done, MPI_STATUS_IGNORE);
        if (done) {
            sync_out_t* gone = *o;
            *o = gone->next;
            free(gone);
        } else {
            o = &(*o)->next;
        }
    }
    return got;
}

static int sync_take_ack(const sync_send_t* s) {
    for (sync_ack_t** a = &sync_acks; *a; a = &(*a)->next) {
        const sync_ack_t* x = *a;
        if (x->source == s->key->dest && x->w.comm_tag == s->key->comm_tag && x->w.tag == s->key->tag &&
            x->w.drain == s->ack_drain && x->w.ordinal == s->ack_ordinal) {
            sync_ack_t* gone = *a;
            *a = gone->next;
            free(gone);
            return 1;
        }
    }
    return 0;
}

/* Completes the program's requests of the synchronous sends that are done
 * (under the lock, from the program's threads). */
static void sync_progress(void) {
    const uint64_t got = sync_poll();
    if (got) CHECK(weft_drain_count(ctx, 0, got));
    for (sync_send_t** p = (sync_send_t**)&sync_sends; *p;) {
        sync_send_t* x = *p;
        if (!x->mpi_done) {
            int done = 0;
            PMPI_Test(&x->mpi, &done, MPI_STATUS_IGNORE);
            if (done) {
                x->mpi_done = 1;
                sync_resolve(x);
            }
        }
        if (x->mpi_done && x->need_ack && sync_take_ack(x)) x->need_ack = 0;
        if (x->mpi_done && !x->need_ack) {
            PMPI_Grequest_complete(x->program);
            *p = x->next;
            free(x);
        } else {
            p = &x->next;
        }
    }
}

/* The drain hook's part (drain thread, under the lock): note each key's
 * count at the first call of a drain, and forget what no send can need. */
static uint64_t sync_noted;
static void sync_note_drain(uint64_t drain) {
    if (drain == sync_noted) return;
    sync_noted = drain;
    for (sync_key_t* k = sync_keys; k; k = k->next) {
        uint64_t oldest = UINT64_MAX; /* the earliest drain a pending send of k can need */
        for (sync_send_t* x = (sync_send_t*)sync_sends; x; x = x->next)
            if (x->key == k && x->after < oldest) oldest = x->after;
        int keep = 0;
        for (int j = 0; j < k->ndrains; ++j)
            if (k->drains[j].drain > oldest) k->drains[keep++] = k->drains[j];
        k->ndrains = keep;
        if (oldest == UINT64_MAX) continue; /* no pending send: nothing to note */
        if (k->ndrains == k->cap) {
            const int cap = k->cap ? 2 * k->cap : 4;
            sync_drain_t* more = realloc(k->drains, (size_t)cap * sizeof *more);
            if (!more) abort_job();
            k->drains = more;
            k->cap = cap;
        }
        k->drains[k->ndrains++] = (sync_drain_t){drain, k->sent, 0};
    }
}

/* The ordinals of one drain's buffered messages, per sender and key. */
typedef struct {
    int source;
    int32_t comm_tag, tag;
    uint64_t count;
} sync_ordinal_t;
static sync_ordinal_t* ordinals;
static int nordinals, ordinals_cap;
static uint64_t ordinals_drain;

/* A message the drain hook just buffered: its drain and ordinal, and the
 * report to its sender. */
static void sync_report(buffered_t* m, int comm_index, uint64_t drain) {
    if (ordinals_drain != drain) {
        ordinals_drain = drain;
        nordinals = 0;
    }
    const int source = comms[comm_index].world[m->source];
    const int32_t comm_tag = comms[comm_index].tag;
    sync_ordinal_t* o = NULL;
    for (int j = 0; j < nordinals && !o; ++j)
        if (ordinals[j].source == source && ordinals[j].comm_tag == comm_tag && ordinals[j].tag == m->tag)
            o = &ordinals[j];
    if (!o) {
        if (nordinals == ordinals_cap) {
            const int cap = ordinals_cap ? 2 * ordinals_cap : 16;
            sync_ordinal_t* more = realloc(ordinals, (size_t)cap * sizeof *more);
            if (!more) abort_job();
            ordinals = more;
            ordinals_cap = cap;
        }
        o = &ordinals[nordinals++];
        *o = (sync_ordinal_t){source, comm_tag, m->tag, 0};
    }
    m->drain = drain;
    m->ordinal = ++o->count;
    sync_post(source, SYNC_REPORT, (sync_word_t){comm_tag, m->tag, drain, m->ordinal});
}

/* -------------------------------------------------------- the hooks */
static void hook_progress(void* arg) {
    (void)arg;
    int flag = 0;
    if (pthread_mutex_trylock(&mpi_lock) != 0) return; /* a thread inside MPI progresses it */
    /* Any call drives MPI's progress engine: open collectives advance. */
    PMPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, boot_comm, &flag, MPI_STATUS_IGNORE);
    /* A non-blocking collective the program has not tested may be complete:
     * its clock must say so, or the drain would wait for the program. */
    for (int i = 0; i < nposted; ++i) {
        if (!posted[i].clock || posted[i].counted) continue;
        flag = 0;
        PMPI_Request_get_status(posted[i].req, &flag, MPI_STATUS_IGNORE);
        if (flag) settle(i);
    }
    pthread_mutex_unlock(&mpi_lock);
}

static uint64_t matched_receive_all(void);

static uint64_t hook_buffer(void* arg) {
    (void)arg;
    uint64_t arrived = 0;
    /* Called with every program thread outside (or yielding): free at once. */
    lock_mpi();
    const uint64_t drain = __atomic_load_n(&last_drain, __ATOMIC_RELAXED) + 1;
    sync_note_drain(drain);
    for (int i = 0; i < nposted; ++i) {
        if (posted[i].counted || posted[i].clock) continue;
        int flag = 0;
        PMPI_Request_get_status(posted[i].req, &flag, MPI_STATUS_IGNORE);
        if (flag) {
            posted[i].counted = 1;
            ++arrived;
        }
    }
    for (int c = 0; c < ncomms; ++c) {
        for (;;) {
            int flag = 0, bytes = 0;
            MPI_Status st;
            PMPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, comms[c].comm, &flag, &st);
            if (!flag) break;
            PMPI_Get_count(&st, MPI_BYTE, &bytes);
            buffered_t* m = buffer_new(comms[c].comm, st.MPI_SOURCE, st.MPI_TAG, bytes);
            if (!m) {
                fprintf(stderr, "weft-mpi rank %d: no memory to buffer a %d-byte message\n", world_rank, bytes);
                abort_job();
            }
            PMPI_Recv(m->data, bytes, MPI_BYTE, st.MPI_SOURCE, st.MPI_TAG, comms[c].comm, MPI_STATUS_IGNORE);
            buffer_append(m);
            sync_report(m, c, drain);
            ++arrived;
        }
    }
    arrived += matched_receive_all();
    arrived += sync_poll();
    pthread_mutex_unlock(&mpi_lock);
    if (arrived) CHECK(weft_drain_count(ctx, 0, arrived));
    return 0; /* every transfer MPI had for us is received now */
}

/* The program's own quiescent-point callback (weft/mpi_layer.h). */
static pthread_mutex_t user_quiescent_lock = PTHREAD_MUTEX_INITIALIZER;
static weft_drain_quiescent_fn user_quiescent;
static void* user_quiescent_arg;

/* At the quiescent point (the drain thread; no weft calls here). */
static void on_quiescent(void* arg, const weft_drain_result_t* r) {
    (void)arg;
    __atomic_store_n(&last_drain, r->drain, __ATOMIC_RELAXED);
    char matched_note[64] = "";
    if (nmatched) snprintf(matched_note, sizeof matched_note, ", %d matched by a probe", nmatched);
    fprintf(stderr, "weft-mpi rank %d: at drain %llu's quiescent point: %llu MPI message(s) in this rank's buffer%s\n",
            world_rank, (unsigned long long)r->drain, (unsigned long long)nbuffered, matched_note);
    pthread_mutex_lock(&user_quiescent_lock);
    if (user_quiescent) user_quiescent(user_quiescent_arg, r);
    pthread_mutex_unlock(&user_quiescent_lock);
}

/* ---------------------------------------------- drain on a signal */
static int signal_pipe[2] = {-1, -1};
static pthread_t signal_thread;

/* The drain signal: SIGUSR1 unless WEFT_MPI_DRAIN_SIGNAL says USR2, a
 * number, or none. MPICH's hydra run with -disable-auto-cleanup sends
 * SIGUSR1 itself to tell the survivors of a rank's death; there, choose
 * USR2. Whatever handler the MPI had for it still runs (chained).
 *
 * A launcher (Open MPI's mpirun, MPICH's hydra proxy, Slurm's step daemon)
 * forwards a signal it gets to every rank it started, and those ranks'
 * requests, raised about a drain's length apart, would each start a drain
 * of their own (one not yet started is joined, one running is not). A
 * signal sent by this process's parent is therefore taken as one forwarded
 * to every rank, and world rank 0 alone asks; a signal from anyone else
 * (a user's kill of one rank) is asked for by the rank that got it. */
static int drain_signal;            /* 0: none */
static struct sigaction mpi_action; /* the MPI's own, chained */

static int drain_signal_from_env(void) {
    const char* v = getenv("WEFT_MPI_DRAIN_SIGNAL");
    if (!v || !*v || strcmp(v, "USR1") == 0 || strcmp(v, "SIGUSR1") == 0) return SIGUSR1;
    if (strcmp(v, "USR2") == 0 || strcmp(v, "SIGUSR2") == 0) return SIGUSR2;
    if (strcmp(v, "none") == 0) return 0;
    char* end = NULL;
    const long n = strtol(v, &end, 10);
    if (end && *end == 0 && n > 0 && n < NSIG && n != SIGKILL && n != SIGSTOP) return (int)n;
    fprintf(stderr, "weft-mpi rank %d: WEFT_MPI_DRAIN_SIGNAL=%s is not USR1, USR2, a signal number or none: USR1\n",
            world_rank, v);
    return SIGUSR1;
}

static void on_drain_signal(int sig, siginfo_t* info, void* uctx) {
    const int saved = errno;
    const char c = info && info->si_code == SI_USER && info->si_pid == getppid() ? 'f' : 'd';
    if (write(signal_pipe[1], &c, 1) < 0) { /* full: a drain is asked for already */
    }
    if (mpi_action.sa_flags & SA_SIGINFO) {
        if (mpi_action.sa_sigaction) mpi_action.sa_sigaction(sig, info, uctx);
    } else if (mpi_action.sa_handler != SIG_DFL && mpi_action.sa_handler != SIG_IGN) {
        mpi_action.sa_handler(sig);
    }
    errno = saved;
}

static void* signal_loop(void* arg) {
    (void)arg;
    for (;;) {
        char c;
        const ssize_t n = read(signal_pipe[0], &c, 1);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0 || c == 'q') return NULL;
        if (c == 'f' && world_rank != 0) continue; /* rank 0 got the same signal and asks */
        uint64_t number = 0;
        weft_status_t st = weft_drain_request(ctx, &number);
        if (st != WEFT_OK) {
            fprintf(stderr, "weft-mpi rank %d: drain request: %s\n", world_rank, weft_strerror(st));
            continue;
        }
        weft_drain_result_t r;
        memset(&r, 0, sizeof r);
        st = weft_drain_wait(ctx, number, 0, &r);
        if (st == WEFT_OK)
            fprintf(stderr,
                    "weft-mpi rank %d: drain %llu quiescent: %.3f ms from request to quiescent on every rank, %llu "
                    "round(s)\n",
                    world_rank, (unsigned long long)r.drain, (double)r.total_ns / 1e6, (unsigned long long)r.rounds);
        else
            fprintf(stderr, "weft-mpi rank %d: drain %llu: %s\n", world_rank, (unsigned long long)number,
                    weft_strerror(st));
    }
}

/* ------------------------------------------------------------ waits */
/* Tests until done, stepping out for a drain between tests. */
static int wait_request(MPI_Request* req, MPI_Status* st) {
    for (;;) {
        int done = 0;
        const int rc = PMPI_Test(req, &done, st);
        if (rc != MPI_SUCCESS || done) return rc;
        YIELD();
    }
}

/* ------------------------------------------- weft/mpi_layer.h */
weft_context_t weft_mpi_context(void) { return layer_live ? ctx : NULL; }

/* The weft/mpi_layer.h calls are valid between MPI_Init and MPI_Finalize. */
static weft_status_t live_layer(const char* call) {
    if (layer_live) return WEFT_OK;
    fprintf(stderr, "weft-mpi: %s outside MPI_Init..MPI_Finalize\n", call);
    return WEFT_ERR_INVALID_ARG;
}

weft_status_t weft_mpi_set_quiescent_callback(weft_drain_quiescent_fn fn, void* arg) {
    const weft_status_t st = live_layer("weft_mpi_set_quiescent_callback");
    if (st != WEFT_OK) return st;
    pthread_mutex_lock(&user_quiescent_lock);
    user_quiescent = fn;
    user_quiescent_arg = arg;
    pthread_mutex_unlock(&user_quiescent_lock);
    return WEFT_OK;
}

static weft_status_t drains_allowed(const char* call) {
    const weft_status_t st = live_layer(call);
    if (st != WEFT_OK) return st;
    if (!drains_ok) {
        fprintf(stderr, "weft-mpi rank %d: %s: MPI's thread level is below MPI_THREAD_SERIALIZED\n", world_rank, call);
        return WEFT_ERR_UNSUPPORTED;
    }
    return WEFT_OK;
}

weft_status_t weft_mpi_drain_request(uint64_t* drain_number) {
    weft_status_t st = drains_allowed("weft_mpi_drain_request");
    if (st != WEFT_OK) return st;
    uint64_t mine = 0;
    return weft_drain_request(ctx, drain_number ? drain_number : &mine);
}

/* Every rank is at the same point: no collective is begun anywhere that a
 * rank has not reached, so the drain can be one the program waits for.
 * Once every rank has arrived (a drain raised earlier would find a rank
 * before this point, its callback perhaps not yet registered), rank 0 asks
 * and tells the others which drain to wait for; both on the layer's
 * private communicator: one request, not one per rank. */
weft_status_t weft_mpi_drain(weft_drain_result_t* result) {
    weft_status_t st = drains_allowed("weft_mpi_drain");
    if (st != WEFT_OK) return st;
    /* As any wrapped call: a drain raised meanwhile (a signal) takes this
     * thread out between tests. */
    MPI_Request req;
    ENTER();
    int rc = PMPI_Ibarrier(boot_comm, &req);
    if (rc == MPI_SUCCESS) rc = wait_request(&req, MPI_STATUS_IGNORE);
    LEAVE();
    if (rc != MPI_SUCCESS) return WEFT_ERR_TRANSPORT;
    uint64_t number = 0;
    if (world_rank == 0) st = weft_drain_request(ctx, &number);
    uint64_t word[2] = {(uint64_t)st, number};
    ENTER();
    rc = PMPI_Ibcast(word, 2, MPI_UINT64_T, 0, boot_comm, &req);
    if (rc == MPI_SUCCESS) rc = wait_request(&req, MPI_STATUS_IGNORE);
    LEAVE();
    if (rc != MPI_SUCCESS) return WEFT_ERR_TRANSPORT;
    if (word[0] != WEFT_OK) return (weft_status_t)word[0];
    weft_drain_result_t mine;
    return weft_drain_wait(ctx, word[1], 0, result ? result : &mine);
}

/* ------------------------------------- checkpoint through weft's ckpt */
/* The layer's buffer, saved as a protected region of its own at a
 * checkpoint and put back at a restart. A region's size must be the same
 * at restart, before anything is known of the image: a fixed capacity. */
static const uint32_t BUFFER_REGION = 0xf0000001u;
typedef struct {
    uint64_t magic, count, used; /* used: bytes of records after this header */
} saved_header_t;
typedef struct {
    int32_t comm_tag; /* the communicator's clock tag: the same when the program makes them in the same order */
    int32_t source, tag, bytes;
} saved_record_t;
static const uint64_t saved_magic = 0x7765667462756631ull; /* "weftbuf1" */
static unsigned char* saved;
static size_t saved_capacity;

static weft_status_t saved_region(void) {
    if (saved) return WEFT_OK;
    const char* v = getenv("WEFT_MPI_CKPT_BUFFER_BYTES");
    size_t capacity = v && *v ? (size_t)strtoull(v, NULL, 10) : (size_t)1 << 20;
    if (capacity < sizeof(saved_header_t)) capacity = sizeof(saved_header_t);
    saved = calloc(1, capacity);
    if (!saved) return WEFT_ERR_NO_MEMORY;
    saved_capacity = capacity;
    const weft_status_t st = weft_ckpt_region_register(ctx, BUFFER_REGION, saved, capacity);
    if (st != WEFT_OK) {
        free(saved);
        saved = NULL;
    }
    return st;
}

/* The buffer, oldest first, into the region; NO_MEMORY if it does not fit. */
static weft_status_t buffer_save(void) {
    saved_header_t h = {saved_magic, 0, 0};
    size_t at = sizeof h;
    for (buffered_t* m = buf_head; m; m = m->next) {
        const size_t need = sizeof(saved_record_t) + (((size_t)m->bytes + 7) & ~(size_t)7);
        if (at + need > saved_capacity) {
            fprintf(stderr,
                    "weft-mpi rank %d: checkpoint: %llu buffered MPI message(s) do not fit the layer's %zu-byte "
                    "region (WEFT_MPI_CKPT_BUFFER_BYTES)\n",
                    world_rank, (unsigned long long)nbuffered, saved_capacity);
            return WEFT_ERR_NO_MEMORY;
        }
        const int i = index_of(m->comm);
        saved_record_t r = {i >= 0 ? comms[i].tag : -1, m->source, m->tag, m->bytes};
        memcpy(saved + at, &r, sizeof r);
        memcpy(saved + at + sizeof r, m->data, (size_t)m->bytes);
        at += need;
        ++h.count;
    }
    h.used = at - sizeof h;
    memcpy(saved, &h, sizeof h);
    return WEFT_OK;
}

/* The region's messages back into the (empty) buffer, in their order. */
static weft_status_t buffer_load(void) {
    saved_header_t h;
    memcpy(&h, saved, sizeof h);
    if (h.magic != saved_magic || h.used > saved_capacity - sizeof h) {
        fprintf(stderr, "weft-mpi rank %d: restart: the layer's saved buffer is not one it wrote\n", world_rank);
        return WEFT_ERR_PROTOCOL;
    }
    size_t at = sizeof h;
    for (uint64_t k = 0; k < h.count; ++k) {
        saved_record_t r;
        if (at + sizeof r > sizeof h + h.used) return WEFT_ERR_PROTOCOL;
        memcpy(&r, saved + at, sizeof r);
        const size_t need = sizeof r + (((size_t)r.bytes + 7) & ~(size_t)7);
        if (r.bytes < 0 || at + need > sizeof h + h.used) return WEFT_ERR_PROTOCOL;
        int c = -1;
        for (int i = 0; i < ncomms && c < 0; ++i)
            if (comms[i].tag == r.comm_tag) c = i;
        if (c < 0) {
            fprintf(stderr,
                    "weft-mpi rank %d: restart: a saved message's communicator (clock tag %d) was not made again "
                    "(make the communicators in the same order before weft_mpi_restart)\n",
                    world_rank, (int)r.comm_tag);
            return WEFT_ERR_NOT_FOUND;
        }
        buffered_t* m = buffer_new(comms[c].comm, r.source, r.tag, r.bytes);
        if (!m) return WEFT_ERR_NO_MEMORY;
        memcpy(m->data, saved + at + sizeof r, (size_t)r.bytes);
        buffer_append(m);
        at += need;
    }
    return WEFT_OK;
}

/* The worst status of every rank (a max over the layer's private
 * communicator), so all return the same and none enters a collective of
 * weft's the others skip. */
static weft_status_t agree_status(weft_status_t mine) {
    int in = (int)mine, out = 0;
    MPI_Request req;
    ENTER();
    int rc = PMPI_Iallreduce(&in, &out, 1, MPI_INT, MPI_MAX, boot_comm, &req);
    if (rc == MPI_SUCCESS) rc = wait_request(&req, MPI_STATUS_IGNORE);
    LEAVE();
    return rc == MPI_SUCCESS ? (weft_status_t)out : WEFT_ERR_TRANSPORT;
}

weft_status_t weft_mpi_checkpoint(const char* dir, weft_ckpt_profile_t* profile) {
    weft_status_t st = drains_allowed("weft_mpi_checkpoint");
    if (st != WEFT_OK) return st;
    st = saved_region();
    if (st == WEFT_OK && sync_sends) {
        fprintf(stderr,
                "weft-mpi rank %d: checkpoint: a synchronous send is in flight; a restarted MPI would not have it\n",
                world_rank);
        st = WEFT_ERR_UNSUPPORTED;
    }
    if (st == WEFT_OK && nposted > 0) {
        fprintf(stderr,
                "weft-mpi rank %d: checkpoint: %d MPI receive(s) or non-blocking collective(s) pending; a restarted "
                "MPI would not have them (complete them first)\n",
                world_rank, nposted);
        st = WEFT_ERR_UNSUPPORTED;
    }
    if (st == WEFT_OK && nmatched > 0) {
        fprintf(stderr,
                "weft-mpi rank %d: checkpoint: %d message(s) matched by MPI_Mprobe/MPI_Improbe and not yet received; "
                "a restarted program would not have their handles (receive them first)\n",
                world_rank, nmatched);
        st = WEFT_ERR_UNSUPPORTED;
    }
    if ((st = agree_status(st)) != WEFT_OK) return st;
    weft_drain_result_t r;
    st = weft_mpi_drain(&r); /* every MPI message in transit is in the buffer now */
    if (st == WEFT_OK) {
        ENTER(); /* the buffer is the hooks' too */
        st = buffer_save();
        LEAVE();
    }
    if ((st = agree_status(st)) != WEFT_OK) return st;
    return weft_checkpoint(ctx, dir, profile);
}

weft_status_t weft_mpi_restart(const char* dir, weft_restart_info_t* info) {
    weft_status_t st = live_layer("weft_mpi_restart");
    if (st != WEFT_OK) return st;
    weft_restart_info_t mine;
    if (!info) info = &mine;
    st = agree_status(saved_region());
    if (st != WEFT_OK) return st;
    st = weft_restart(ctx, dir, info);
    if (st != WEFT_OK || !info->restarted) return st;
    ENTER();
    if (nbuffered) {
        fprintf(stderr, "weft-mpi rank %d: restart: the layer already holds MPI messages\n", world_rank);
        st = WEFT_ERR_BUSY;
    } else {
        st = buffer_load();
    }
    LEAVE();
    return agree_status(st);
}

/* --------------------------------------------------------- init/finalize */
static int layer_init(int required, int* provided) {
    int got = MPI_THREAD_SINGLE;
    const int want = required > MPI_THREAD_SERIALIZED ? required : MPI_THREAD_SERIALIZED;
    int rc = PMPI_Init_thread(NULL, NULL, want, &got);
    if (rc != MPI_SUCCESS) return rc;
    if (provided) *provided = got;
    PMPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    PMPI_Comm_size(MPI_COMM_WORLD, &world_size);
    PMPI_Comm_dup(MPI_COMM_WORLD, &boot_comm);
    PMPI_Comm_dup(MPI_COMM_WORLD, &sync_comm);
    drains_ok = got >= MPI_THREAD_SERIALIZED;

    weft_bootstrap_ops_t ops;
    memset(&ops, 0, sizeof ops);
    ops.rank = (uint32_t)world_rank;
    ops.size = (uint32_t)world_size;
    ops.iallgather = boot_iallgather;
    ops.test = boot_test;
    CHECK(weft_init_with_bootstrap(&ops, got == MPI_THREAD_MULTIPLE ? WEFT_THREAD_MULTIPLE : WEFT_THREAD_SERIALIZED,
                                   NULL, &ctx));
    weft_drain_hooks_t hooks = {hook_progress, hook_buffer, NULL};
    CHECK(weft_drain_set_hooks(ctx, &hooks));
    CHECK(weft_drain_set_callback(ctx, on_quiescent, NULL));
    /* MPI_COMM_WORLD's clock, and MPI_COMM_SELF's (one member: no collective
     * to order, but a message to itself there is drained like any other). */
    adopt(MPI_COMM_WORLD, -1);
    adopt(MPI_COMM_SELF, -2);
    layer_live = 1;
    if (!drains_ok) {
        fprintf(stderr, "weft-mpi rank %d: MPI gave thread level %d, below MPI_THREAD_SERIALIZED: drains are off\n",
                world_rank, got);
        return MPI_SUCCESS;
    }
    if (pipe(signal_pipe) != 0 || pthread_create(&signal_thread, NULL, signal_loop, NULL) != 0) {
        fprintf(stderr, "weft-mpi rank %d: no drain-on-signal thread: %s\n", world_rank, strerror(errno));
        return MPI_SUCCESS;
    }
    drain_signal = drain_signal_from_env();
    if (drain_signal) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = on_drain_signal;
        sa.sa_flags = SA_RESTART | SA_SIGINFO;
        sigemptyset(&sa.sa_mask);
        sigaction(drain_signal, &sa, &mpi_action);
    }
    return MPI_SUCCESS;
}

int MPI_Init(int* argc, char*** argv) {
    (void)argc;
    (void)argv;
    return layer_init(MPI_THREAD_SINGLE, NULL);
}

int MPI_Init_thread(int* argc, char*** argv, int required, int* provided) {
    (void)argc;
    (void)argv;
    return layer_init(required, provided);
}

/* A hook for tests/mpi/drain_signal_test.sh: with WEFT_MPI_TEST_PIDDIR set,
 * each rank creates DIR/finalizing.RANK as it enters MPI_Finalize. Open
 * MPI's mpirun dies of a signal it gets once its job is tearing down
 * (exit 138) instead of forwarding it, so the test stops signalling the
 * launcher when the first rank gets here. */
static void mark_finalizing(void) {
    const char* dir = getenv("WEFT_MPI_TEST_PIDDIR");
    if (!dir || !*dir) return;
    char path[4096];
    if (snprintf(path, sizeof path, "%s/finalizing.%d", dir, world_rank) >= (int)sizeof path) return;
    const int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd >= 0) close(fd);
}

int MPI_Finalize(void) {
    if (layer_live) {
        mark_finalizing();
        if (signal_pipe[1] >= 0) {
            /* The MPI's own handler back; with none, a late signal (a
             * launcher forwarding one after this rank finished) is ignored. */
            if (drain_signal) {
                if (mpi_action.sa_handler == SIG_DFL && !(mpi_action.sa_flags & SA_SIGINFO))
                    signal(drain_signal, SIG_IGN);
                else
                    sigaction(drain_signal, &mpi_action, NULL);
            }
            const char q = 'q';
            if (write(signal_pipe[1], &q, 1) == 1) pthread_join(signal_thread, NULL);
        }
        weft_mpi_set_quiescent_callback(NULL, NULL);
        while (ncomms > 0) forget(comms[ncomms - 1].comm);
        CHECK(weft_finalize(ctx));
        for (sync_out_t* o = sync_outgoing; o;) { /* small and eager: long since sent */
            sync_out_t* next = o->next;
            PMPI_Wait(&o->req, MPI_STATUS_IGNORE);
            free(o);
            o = next;
        }
        sync_outgoing = NULL;
        PMPI_Comm_free(&sync_comm);
        PMPI_Comm_free(&boot_comm);
        layer_live = 0;
        if (nbuffered)
            fprintf(stderr, "weft-mpi rank %d: %llu drained message(s) never received\n", world_rank,
                    (unsigned long long)nbuffered);
        if (nmatched) fprintf(stderr, "weft-mpi rank %d: %d matched message(s) never received\n", world_rank, nmatched);
    }
    return PMPI_Finalize();
}

/* ---------------------------------------------------- communicators */
/* A communicator constructor, collective over every member of `comm`,
 * inside its clock; the new communicator (MPI_COMM_NULL at a rank outside
 * it) gets its own clock. MPI has no non-blocking form of most of them: the
 * call blocks inside MPI, which is safe because the clock admits it only
 * where every member will make it before the next drain (commit_begin).
 * Like a blocking collective (COLLECTIVE, below), it runs under the lock
 * but outside weft's gate, which a drain closes while the call may still
 * be waiting for the other members. */
#define CONSTRUCTOR(name, comm, newcomm, call)                     \
    do {                                                           \
        weft_drain_clock_t clock_ = clock_of(comm, name);          \
        CHECK(weft_drain_commit_begin(clock_));                    \
        lock_mpi();                                                \
        if (sync_sends) sync_progress();                           \
        const int rc_ = (call);                                    \
        CHECK(weft_drain_commit_finish(clock_));                   \
        pthread_mutex_unlock(&mpi_lock);                           \
        if (rc_ == MPI_SUCCESS) adopt(*(newcomm), index_of(comm)); \
        return rc_;                                                \
    } while (0)

int MPI_Comm_dup(MPI_Comm comm, MPI_Comm* newcomm) {
    CONSTRUCTOR("MPI_Comm_dup", comm, newcomm, PMPI_Comm_dup(comm, newcomm));
}

int MPI_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm* newcomm) {
    CONSTRUCTOR("MPI_Comm_split", comm, newcomm, PMPI_Comm_split(comm, color, key, newcomm));
}

int MPI_Comm_dup_with_info(MPI_Comm comm, MPI_Info info, MPI_Comm* newcomm) {
    CONSTRUCTOR("MPI_Comm_dup_with_info", comm, newcomm, PMPI_Comm_dup_with_info(comm, info, newcomm));
}

int MPI_Comm_split_type(MPI_Comm comm, int split_type, int key, MPI_Info info, MPI_Comm* newcomm) {
    CONSTRUCTOR("MPI_Comm_split_type", comm, newcomm, PMPI_Comm_split_type(comm, split_type, key, info, newcomm));
}

int MPI_Comm_create(MPI_Comm comm, MPI_Group group, MPI_Comm* newcomm) {
    CONSTRUCTOR("MPI_Comm_create", comm, newcomm, PMPI_Comm_create(comm, group, newcomm));
}

int MPI_Cart_create(MPI_Comm comm, int ndims, const int dims[], const int periods[], int reorder, MPI_Comm* newcomm) {
    CONSTRUCTOR("MPI_Cart_create", comm, newcomm, PMPI_Cart_create(comm, ndims, dims, periods, reorder, newcomm));
}

int MPI_Cart_sub(MPI_Comm comm, const int remain_dims[], MPI_Comm* newcomm) {
    CONSTRUCTOR("MPI_Cart_sub", comm, newcomm, PMPI_Cart_sub(comm, remain_dims, newcomm));
}

int MPI_Graph_create(MPI_Comm comm, int nnodes, const int index[], const int edges[], int reorder, MPI_Comm* newcomm) {
    CONSTRUCTOR("MPI_Graph_create", comm, newcomm, PMPI_Graph_create(comm, nnodes, index, edges, reorder, newcomm));
}

int MPI_Dist_graph_create_adjacent(MPI_Comm comm, int indegree, const int sources[], const int sourceweights[],
                                   int outdegree, const int destinations[], const int destweights[], MPI_Info info,
                                   int reorder, MPI_Comm* newcomm) {
    CONSTRUCTOR("MPI_Dist_graph_create_adjacent", comm, newcomm,
                PMPI_Dist_graph_create_adjacent(comm, indegree, sources, sourceweights, outdegree, destinations,
                                                destweights, info, reorder, newcomm));
}

int MPI_Dist_graph_create(MPI_Comm comm, int n, const int sources[], const int degrees[], const int destinations[],
                          const int weights[], MPI_Info info, int reorder, MPI_Comm* newcomm) {
    CONSTRUCTOR("MPI_Dist_graph_create", comm, newcomm,
                PMPI_Dist_graph_create(comm, n, sources, degrees, destinations, weights, info, reorder, newcomm));
}

/* MPI_Comm_idup and MPI-4's MPI_Comm_idup_with_info: a non-blocking
 * collective on the parent (begun inside its clock now, finished when its
 * request completes, as NONBLOCKING_COLLECTIVE's) whose communicator MPI
 * writes to *newcomm only at completion. Its clock's tag is taken now, in
 * the parent's creation order like every constructor's; the clock itself
 * is made as the wait or test that saw the request complete returns, so
 * before the program can use the communicator (MPI lets it do so only
 * after that). */
enum { IDUPS_MAX = 256 };
typedef struct {
    MPI_Request req;
    MPI_Comm* newcomm; /* the program's: MPI writes it at completion */
    int32_t tag;
    int complete;
} idup_t;
static idup_t idups[IDUPS_MAX];
static int nidups;

static void idup_complete(MPI_Request req) {
    for (int i = 0; i < nidups; ++i)
        if (idups[i].req == req && !idups[i].complete) {
            idups[i].complete = 1;
            ++nidups_complete;
            return;
        }
}

static void adopt_idups(void) {
    for (int i = 0; i < nidups;) {
        if (!idups[i].complete) {
            ++i;
            continue;
        }
        const idup_t d = idups[i];
        idups[i] = idups[--nidups];
        --nidups_complete;
        adopt_tagged(*d.newcomm, d.tag);
    }
}

#define IDUP(name, comm, newcomm, req, istart)                                                             \
    do {                                                                                                   \
        if (!(req) || !(newcomm)) return istart; /* MPI reports it */                                      \
        weft_drain_clock_t clock_ = clock_of(comm, name);                                                  \
        if (nidups == IDUPS_MAX) {                                                                         \
            fprintf(stderr, "weft-mpi rank %d: more than %d MPI_Comm_idup open\n", world_rank, IDUPS_MAX); \
            abort_job();                                                                                   \
        }                                                                                                  \
        CHECK(weft_drain_commit_begin(clock_));                                                            \
        ENTER();                                                                                           \
        const int rc_ = (istart);                                                                          \
        if (rc_ == MPI_SUCCESS) {                                                                          \
            post_request(*(req), clock_);                                                                  \
            idups[nidups++] = (idup_t){*(req), (newcomm), next_tag(index_of(comm)), 0};                    \
        } else {                                                                                           \
            CHECK(weft_drain_commit_finish(clock_)); /* it never began: nothing to end */                  \
        }                                                                                                  \
        LEAVE();                                                                                           \
        return rc_;                                                                                        \
    } while (0)

int MPI_Comm_idup(MPI_Comm comm, MPI_Comm* newcomm, MPI_Request* req) {
    IDUP("MPI_Comm_idup", comm, newcomm, req, PMPI_Comm_idup(comm, newcomm, req));
}

#if MPI_VERSION >= 4
int MPI_Comm_idup_with_info(MPI_Comm comm, MPI_Info info, MPI_Comm* newcomm, MPI_Request* req) {
    IDUP("MPI_Comm_idup_with_info", comm, newcomm, req, PMPI_Comm_idup_with_info(comm, info, newcomm, req));
}
#endif

/* MPI may free a communicator with non-blocking collectives still open on
 * it; its clock cannot go before their commits end. So the free waits for
 * them to complete (their requests stay the program's). */
static void settle_collectives_on(MPI_Comm comm) {
    const int c = index_of(comm);
    if (c < 0) return;
    ENTER();
    for (int i = 0; i < nposted;) {
        int flag = 0;
        if (posted[i].clock != comms[c].clock || posted[i].counted) {
            ++i;
            continue;
        }
        PMPI_Request_get_status(posted[i].req, &flag, MPI_STATUS_IGNORE);
        if (flag)
            settle(i++);
        else
            YIELD();
    }
    LEAVE();
}

int MPI_Comm_free(MPI_Comm* comm) {
    if (comm && *comm != MPI_COMM_NULL) {
        settle_collectives_on(*comm); /* their clock goes */
        forget(*comm);                /* the clock's free is the collective's commit */
    }
    ENTER();
    const int rc = PMPI_Comm_free(comm);
    LEAVE();
    return rc;
}

/* ------------------------------------------------------- collectives */
/* The blocking call itself, inside the communicator's clock: the clock
 * admits it only where every member makes it before the next drain, so it
 * completes without the drain (MANA's critical section). It runs under
 * the layer's lock but outside weft's gate: a drain's collective phase
 * closes the gate on every rank to push its targets, and a thread blocked
 * in the collective could not step out for it (the program hung that way
 * when its collectives were entered through the gate). Nothing the gate
 * keeps out runs meanwhile: the buffer hook comes only after every
 * collective has finished, and the progress hook only tries the lock. The
 * commit finishes under the lock: the progress hook finishes non-blocking
 * collectives' commits under it, and a clock's count of finished
 * collectives must have one writer at a time. */
#define COLLECTIVE(name, comm, call)                      \
    do {                                                  \
        weft_drain_clock_t clock_ = clock_of(comm, name); \
        CHECK(weft_drain_commit_begin(clock_));           \
        lock_mpi();                                       \
        if (sync_sends) sync_progress();                  \
        const int rc_ = (call);                           \
        CHECK(weft_drain_commit_finish(clock_));          \
        pthread_mutex_unlock(&mpi_lock);                  \
        return rc_;                                       \
    } while (0)

int MPI_Barrier(MPI_Comm comm) { COLLECTIVE("MPI_Barrier", comm, PMPI_Barrier(comm)); }

int MPI_Bcast(void* buf, int count, MPI_Datatype type, int root, MPI_Comm comm) {
    COLLECTIVE("MPI_Bcast", comm, PMPI_Bcast(buf, count, type, root, comm));
}

int MPI_Reduce(const void* sbuf, void* rbuf, int count, MPI_Datatype type, MPI_Op op, int root, MPI_Comm comm) {
    COLLECTIVE("MPI_Reduce", comm, PMPI_Reduce(sbuf, rbuf, count, type, op, root, comm));
}

int MPI_Allreduce(const void* sbuf, void* rbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
    COLLECTIVE("MPI_Allreduce", comm, PMPI_Allreduce(sbuf, rbuf, count, type, op, comm));
}

int MPI_Allgather(const void* sbuf, int scount, MPI_Datatype stype, void* rbuf, int rcount, MPI_Datatype rtype,
                  MPI_Comm comm) {
    COLLECTIVE("MPI_Allgather", comm, PMPI_Allgather(sbuf, scount, stype, rbuf, rcount, rtype, comm));
}

int MPI_Alltoall(const void* sbuf, int scount, MPI_Datatype stype, void* rbuf, int rcount, MPI_Datatype rtype,
                 MPI_Comm comm) {
    COLLECTIVE("MPI_Alltoall", comm, PMPI_Alltoall(sbuf, scount, stype, rbuf, rcount, rtype, comm));
}

int MPI_Gather(const void* sbuf, int scount, MPI_Datatype stype, void* rbuf, int rcount, MPI_Datatype rtype, int root,
               MPI_Comm comm) {
    COLLECTIVE("MPI_Gather", comm, PMPI_Gather(sbuf, scount, stype, rbuf, rcount, rtype, root, comm));
}

int MPI_Scatter(const void* sbuf, int scount, MPI_Datatype stype, void* rbuf, int rcount, MPI_Datatype rtype, int root,
                MPI_Comm comm) {
    COLLECTIVE("MPI_Scatter", comm, PMPI_Scatter(sbuf, scount, stype, rbuf, rcount, rtype, root, comm));
}

int MPI_Allgatherv(const void* sbuf, int scount, MPI_Datatype stype, void* rbuf, const int rcounts[],
                   const int displs[], MPI_Datatype rtype, MPI_Comm comm) {
    COLLECTIVE("MPI_Allgatherv", comm, PMPI_Allgatherv(sbuf, scount, stype, rbuf, rcounts, displs, rtype, comm));
}

int MPI_Alltoallv(const void* sbuf, const int scounts[], const int sdispls[], MPI_Datatype stype, void* rbuf,
                  const int rcounts[], const int rdispls[], MPI_Datatype rtype, MPI_Comm comm) {
    COLLECTIVE("MPI_Alltoallv", comm,
               PMPI_Alltoallv(sbuf, scounts, sdispls, stype, rbuf, rcounts, rdispls, rtype, comm));
}

int MPI_Gatherv(const void* sbuf, int scount, MPI_Datatype stype, void* rbuf, const int rcounts[], const int displs[],
                MPI_Datatype rtype, int root, MPI_Comm comm) {
    COLLECTIVE("MPI_Gatherv", comm, PMPI_Gatherv(sbuf, scount, stype, rbuf, rcounts, displs, rtype, root, comm));
}

int MPI_Scatterv(const void* sbuf, const int scounts[], const int displs[], MPI_Datatype stype, void* rbuf, int rcount,
                 MPI_Datatype rtype, int root, MPI_Comm comm) {
    COLLECTIVE("MPI_Scatterv", comm, PMPI_Scatterv(sbuf, scounts, displs, stype, rbuf, rcount, rtype, root, comm));
}

int MPI_Reduce_scatter(const void* sbuf, void* rbuf, const int rcounts[], MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
    COLLECTIVE("MPI_Reduce_scatter", comm, PMPI_Reduce_scatter(sbuf, rbuf, rcounts, type, op, comm));
}

int MPI_Reduce_scatter_block(const void* sbuf, void* rbuf, int rcount, MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
    COLLECTIVE("MPI_Reduce_scatter_block", comm, PMPI_Reduce_scatter_block(sbuf, rbuf, rcount, type, op, comm));
}

int MPI_Scan(const void* sbuf, void* rbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
    COLLECTIVE("MPI_Scan", comm, PMPI_Scan(sbuf, rbuf, count, type, op, comm));
}

int MPI_Exscan(const void* sbuf, void* rbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
    COLLECTIVE("MPI_Exscan", comm, PMPI_Exscan(sbuf, rbuf, count, type, op, comm));
}

int MPI_Alltoallw(const void* sbuf, const int scounts[], const int sdispls[], const MPI_Datatype stypes[], void* rbuf,
                  const int rcounts[], const int rdispls[], const MPI_Datatype rtypes[], MPI_Comm comm) {
    COLLECTIVE("MPI_Alltoallw", comm,
               PMPI_Alltoallw(sbuf, scounts, sdispls, stypes, rbuf, rcounts, rdispls, rtypes, comm));
}

/* Neighbourhood collectives: every member of a process topology's
 * communicator calls them (each exchanges with its neighbours only), so
 * the communicator's clock orders them like any collective. */
int MPI_Neighbor_allgather(const void* sbuf, int scount, MPI_Datatype stype, void* rbuf, int rcount, MPI_Datatype rtype,
                           MPI_Comm comm) {
    COLLECTIVE("MPI_Neighbor_allgather", comm, PMPI_Neighbor_allgather(sbuf, scount, stype, rbuf, rcount, rtype, comm));
}

int MPI_Neighbor_allgatherv(const void* sbuf, int scount, MPI_Datatype stype, void* rbuf, const int rcounts[],
                            const int displs[], MPI_Datatype rtype, MPI_Comm comm) {
    COLLECTIVE("MPI_Neighbor_allgatherv", comm,
               PMPI_Neighbor_allgatherv(sbuf, scount, stype, rbuf, rcounts, displs, rtype, comm));
}

int MPI_Neighbor_alltoall(const void* sbuf, int scount, MPI_Datatype stype, void* rbuf, int rcount, MPI_Datatype rtype,
                          MPI_Comm comm) {
    COLLECTIVE("MPI_Neighbor_alltoall", comm, PMPI_Neighbor_alltoall(sbuf, scount, stype, rbuf, rcount, rtype, comm));
}

int MPI_Neighbor_alltoallv(const void* sbuf, const int scounts[], const int sdispls[], MPI_Datatype stype, void* rbuf,
                           const int rcounts[], const int rdispls[], MPI_Datatype rtype, MPI_Comm comm) {
    COLLECTIVE("MPI_Neighbor_alltoallv", comm,
               PMPI_Neighbor_alltoallv(sbuf, scounts, sdispls, stype, rbuf, rcounts, rdispls, rtype, comm));
}

int MPI_Neighbor_alltoallw(const void* sbuf, const int scounts[], const MPI_Aint sdispls[], const MPI_Datatype stypes[],
                           void* rbuf, const int rcounts[], const MPI_Aint rdispls[], const MPI_Datatype rtypes[],
                           MPI_Comm comm) {
    COLLECTIVE("MPI_Neighbor_alltoallw", comm,
               PMPI_Neighbor_alltoallw(sbuf, scounts, sdispls, stypes, rbuf, rcounts, rdispls, rtypes, comm));
}

/* A non-blocking collective: begun inside the clock when it starts, and
 * finished when it completes — at the program's wait or test, or, if a
 * drain comes first, when the drain's progress hook sees it complete (the
 * program may be computing, with no call into MPI until the drain ends). */
#define NONBLOCKING_COLLECTIVE(name, comm, req, istart)                                   \
    do {                                                                                  \
        if (!(req)) return istart; /* MPI reports it */                                   \
        weft_drain_clock_t clock_ = clock_of(comm, name);                                 \
        CHECK(weft_drain_commit_begin(clock_));                                           \
        ENTER();                                                                          \
        const int rc_ = (istart);                                                         \
        if (rc_ == MPI_SUCCESS)                                                           \
            post_request(*(req), clock_);                                                 \
        else                                                                              \
            CHECK(weft_drain_commit_finish(clock_)); /* it never began: nothing to end */ \
        LEAVE();                                                                          \
        return rc_;                                                                       \
    } while (0)

int MPI_Ibarrier(MPI_Comm comm, MPI_Request* req) {
    NONBLOCKING_COLLECTIVE("MPI_Ibarrier", comm, req, PMPI_Ibarrier(comm, req));
}

int MPI_Ibcast(void* buf, int count, MPI_Datatype type, int root, MPI_Comm comm, MPI_Request* req) {
    NONBLOCKING_COLLECTIVE("MPI_Ibcast", comm, req, PMPI_Ibcast(buf, count, type, root, comm, req));
}

int MPI_Ireduce(const void* sbuf, void* rbuf, int count, MPI_Datatype type, MPI_Op op, int root, MPI_Comm comm,
                MPI_Request* req) {
    NONBLOCKING_COLLECTIVE("MPI_Ireduce", comm, req, PMPI_Ireduce(sbuf, rbuf, count, type, op, root, comm, req));
}

int MPI_Iallreduce(const void* sbuf, void* rbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm,
                   MPI_Request* req) {
    NONBLOCKING_COLLECTIVE("MPI_Iallreduce", comm, req, PMPI_Iallreduce(sbuf, rbuf, count, type, op, comm, req));
}

int MPI_Iallgather(const void* sbuf, int scount, MPI_Datatype stype, void* rbuf, int rcount, MPI_Datatype rtype,
                   MPI_Comm comm, MPI_Request* req) {
    NONBLOCKING_COLLECTIVE("MPI_Iallgather", comm, req,
                           PMPI_Iallgather(sbuf, scount, stype, rbuf, rcount, rtype, comm, req));
}

int MPI_Iallgatherv(const void* sbuf, int scount, MPI_Datatype stype, void* rbuf, const int rcounts[],
                    const int displs[], MPI_Datatype rtype, MPI_Comm comm, MPI_Request* req) {
    NONBLOCKING_COLLECTIVE("MPI_Iallgatherv", comm, req,
                           PMPI_Iallgatherv(sbuf, scount, stype, rbuf, rcounts, displs, rtype, comm, req));
}

int MPI_Ialltoall(const void* sbuf, int scount, MPI_Datatype stype, void* rbuf, int rcount, MPI_Datatype rtype,
                  MPI_Comm comm, MPI_Request* req) {
    NONBLOCKING_COLLECTIVE("MPI_Ialltoall", comm, req,
                           PMPI_Ialltoall(sbuf, scount, stype, rbuf, rcount, rtype, comm, req));
}

int MPI_Ialltoallv(const void* sbuf, const int scounts[], const int sdispls[], MPI_Datatype stype, void* rbuf,
                   const int rcounts[], const int rdispls[], MPI_Datatype rtype, MPI_Comm comm, MPI_Request* req) {
    NONBLOCKING_COLLECTIVE("MPI_Ialltoallv", comm, req,
                           PMPI_Ialltoallv(sbuf, scounts, sdispls, stype, rbuf, rcounts, rdispls, rtype, comm, req));
}

int MPI_Ialltoallw(const void* sbuf, const int scounts[], const int sdispls[], const MPI_Datatype stypes[], void* rbuf,
                   const int rcounts[], const int rdispls[], const MPI_Datatype rtypes[], MPI_Comm comm,
                   MPI_Request* req) {
    NONBLOCKING_COLLECTIVE("MPI_Ialltoallw", comm, req,
                           PMPI_Ialltoallw(sbuf, scounts, sdispls, stypes, rbuf, rcounts, rdispls, rtypes, comm, req));
}

int MPI_Igather(const void* sbuf, int scount, MPI_Datatype stype, void* rbuf, int rcount, MPI_Datatype rtype, int root,
                MPI_Comm comm, MPI_Request* req) {
    NONBLOCKING_COLLECTIVE("MPI_Igather", comm, req,
                           PMPI_Igather(sbuf, scount, stype, rbuf, rcount, rtype, root, comm, req));
}

int MPI_Igatherv(const void* sbuf, int scount, MPI_Datatype stype, void* rbuf, const int rcounts[], const int displs[],
                 MPI_Datatype rtype, int root, MPI_Comm comm, MPI_Request* req) {
    NONBLOCKING_COLLECTIVE("MPI_Igatherv", comm, req,
                           PMPI_Igatherv(sbuf, scount, stype, rbuf, rcounts, displs, rtype, root, comm, req));
}

int MPI_Iscatter(const void* sbuf, int scount, MPI_Datatype stype, void* rbuf, int rcount, MPI_Datatype rtype, int root,
                 MPI_Comm comm, MPI_Request* req) {
    NONBLOCKING_COLLECTIVE("MPI_Iscatter", comm, req,
                           PMPI_Iscatter(sbuf, scount, stype, rbuf, rcount, rtype, root, comm, req));
}

int MPI_Iscatterv(const void* sbuf, const int scounts[], const int displs[], MPI_Datatype stype, void* rbuf, int rcount,
                  MPI_Datatype rtype, int root, MPI_Comm comm, MPI_Request* req) {
    NONBLOCKING_COLLECTIVE("MPI_Iscatterv", comm, req,
                           PMPI_Iscatterv(sbuf, scounts, displs, stype, rbuf, rcount, rtype, root, comm, req));
}

int MPI_Ireduce_scatter(const void* sbuf, void* rbuf, const int rcounts[], MPI_Datatype type, MPI_Op op, MPI_Comm comm,
                        MPI_Request* req) {
    NONBLOCKING_COLLECTIVE("MPI_Ireduce_scatter", comm, req,
                           PMPI_Ireduce_scatter(sbuf, rbuf, rcounts, type, op, comm, req));
}

int MPI_Ireduce_scatter_block(const void* sbuf, void* rbuf, int rcount, MPI_Datatype type, MPI_Op op, MPI_Comm comm,
                              MPI_Request* req) {
    NONBLOCKING_COLLECTIVE("MPI_Ireduce_scatter_block", comm, req,
                           PMPI_Ireduce_scatter_block(sbuf, rbuf, rcount, type, op, comm, req));
}

int MPI_Iscan(const void* sbuf, void* rbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm, MPI_Request* req) {
    NONBLOCKING_COLLECTIVE("MPI_Iscan", comm, req, PMPI_Iscan(sbuf, rbuf, count, type, op, comm, req));
}

int MPI_Iexscan(const void* sbuf, void* rbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm,
                MPI_Request* req) {
    NONBLOCKING_COLLECTIVE("MPI_Iexscan", comm, req, PMPI_Iexscan(sbuf, rbuf, count, type, op, comm, req));
}

int MPI_Ineighbor_allgather(const void* sbuf, int scount, MPI_Datatype stype, void* rbuf, int rcount,
                            MPI_Datatype rtype, MPI_Comm comm, MPI_Request* req) {
    NONBLOCKING_COLLECTIVE("MPI_Ineighbor_allgather", comm, req,
                           PMPI_Ineighbor_allgather(sbuf, scount, stype, rbuf, rcount, rtype, comm, req));
}

int MPI_Ineighbor_allgatherv(const void* sbuf, int scount, MPI_Datatype stype, void* rbuf, const int rcounts[],
                             const int displs[], MPI_Datatype rtype, MPI_Comm comm, MPI_Request* req) {
    NONBLOCKING_COLLECTIVE("MPI_Ineighbor_allgatherv", comm, req,
                           PMPI_Ineighbor_allgatherv(sbuf, scount, stype, rbuf, rcounts, displs, rtype, comm, req));
}

int MPI_Ineighbor_alltoall(const void* sbuf, int scount, MPI_Datatype stype, void* rbuf, int rcount, MPI_Datatype rtype,
                           MPI_Comm comm, MPI_Request* req) {
    NONBLOCKING_COLLECTIVE("MPI_Ineighbor_alltoall", comm, req,
                           PMPI_Ineighbor_alltoall(sbuf, scount, stype, rbuf, rcount, rtype, comm, req));
}

int MPI_Ineighbor_alltoallv(const void* sbuf, const int scounts[], const int sdispls[], MPI_Datatype stype, void* rbuf,
                            const int rcounts[], const int rdispls[], MPI_Datatype rtype, MPI_Comm comm,
                            MPI_Request* req) {
    NONBLOCKING_COLLECTIVE(
        "MPI_Ineighbor_alltoallv", comm, req,
        PMPI_Ineighbor_alltoallv(sbuf, scounts, sdispls, stype, rbuf, rcounts, rdispls, rtype, comm, req));
}

int MPI_Ineighbor_alltoallw(const void* sbuf, const int scounts[], const MPI_Aint sdispls[],
                            const MPI_Datatype stypes[], void* rbuf, const int rcounts[], const MPI_Aint rdispls[],
                            const MPI_Datatype rtypes[], MPI_Comm comm, MPI_Request* req) {
    NONBLOCKING_COLLECTIVE(
        "MPI_Ineighbor_alltoallw", comm, req,
        PMPI_Ineighbor_alltoallw(sbuf, scounts, sdispls, stypes, rbuf, rcounts, rdispls, rtypes, comm, req));
}

/* --------------------------------------------------- point-to-point */
/* Every send mode starts the same way: the message is counted once MPI
 * has it. A blocking send is then its non-blocking start, tested with a
 * yield. Ready mode stays correct (a drain leaves posted receives in
 * MPI); buffered mode completes locally, and the drain's progress hook
 * drives the message to its receiver. */
typedef int (*send_start_fn)(const void*, int, MPI_Datatype, int, int, MPI_Comm, MPI_Request*);

static int counted_send(send_start_fn start, const char* call, const void* buf, int count, MPI_Datatype type, int dest,
                        int tag, MPI_Comm comm, MPI_Request* req) {
    known(comm, call);
    ENTER();
    int rc = start(buf, count, type, dest, tag, comm, req);
    if (rc == MPI_SUCCESS && dest != MPI_PROC_NULL) {
        CHECK(weft_drain_count(ctx, 1, 0));
        sync_count_send(comm, dest, tag);
    }
    LEAVE();
    return rc;
}

static int counted_blocking_send(send_start_fn start, const char* call, const void* buf, int count, MPI_Datatype type,
                                 int dest, int tag, MPI_Comm comm) {
    known(comm, call);
    MPI_Request req;
    ENTER();
    int rc = start(buf, count, type, dest, tag, comm, &req);
    if (rc == MPI_SUCCESS) {
        if (dest != MPI_PROC_NULL) {
            CHECK(weft_drain_count(ctx, 1, 0));
            sync_count_send(comm, dest, tag);
        }
        rc = wait_request(&req, MPI_STATUS_IGNORE);
    }
    LEAVE();
    return rc;
}

int MPI_Isend(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm, MPI_Request* req) {
    return counted_send(PMPI_Isend, "MPI_Isend", buf, count, type, dest, tag, comm, req);
}
int MPI_Irsend(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm, MPI_Request* req) {
    return counted_send(PMPI_Irsend, "MPI_Irsend", buf, count, type, dest, tag, comm, req);
}
int MPI_Ibsend(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm, MPI_Request* req) {
    return counted_send(PMPI_Ibsend, "MPI_Ibsend", buf, count, type, dest, tag, comm, req);
}
/* Synchronous mode ("synchronous mode" above): MPI's MPI_Issend under a
 * generalized request the layer completes. */
static int sync_query(void* extra, MPI_Status* st) {
    (void)extra;
    st->MPI_SOURCE = MPI_UNDEFINED;
    st->MPI_TAG = MPI_UNDEFINED;
    st->MPI_ERROR = MPI_SUCCESS;
    PMPI_Status_set_elements(st, MPI_BYTE, 0);
    PMPI_Status_set_cancelled(st, 0);
    return MPI_SUCCESS;
}
static int sync_free(void* extra) {
    (void)extra;
    return MPI_SUCCESS;
}
static int sync_cancel(void* extra, int complete) {
    (void)extra;
    (void)complete;
    return MPI_SUCCESS;
}

/* MPI_Issend's work, under the lock: MPI's own under a generalized request
 * (*req) that sync_progress completes. */
static int sync_send_start(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,
                           MPI_Request* req) {
    const int to = dest == MPI_PROC_NULL ? -1 : world_rank_in(comm, dest);
    if (to < 0)
        return PMPI_Issend(buf, count, type, dest, tag, comm, req); /* no message, or MPI reports the bad rank */
    sync_send_t* x = calloc(1, sizeof *x);
    if (!x) {
        fprintf(stderr, "weft-mpi rank %d: no memory for a synchronous send\n", world_rank);
        abort_job();
    }
    const int32_t comm_tag = comms[index_of(comm)].tag;
    sync_key_t* k = sync_key_find(comm_tag, to, tag);
    if (!k) {
        k = calloc(1, sizeof *k);
        if (!k) abort_job();
        *k = (sync_key_t){comm_tag, tag, to, 0, NULL, 0, 0, sync_keys};
        sync_keys = k;
    }
    int rc = PMPI_Issend(buf, count, type, dest, tag, comm, &x->mpi);
    if (rc == MPI_SUCCESS) rc = PMPI_Grequest_start(sync_query, sync_free, sync_cancel, NULL, req);
    if (rc != MPI_SUCCESS) {
        free(x);
        return rc;
    }
    CHECK(weft_drain_count(ctx, 1, 0));
    x->key = k;
    x->seq = ++k->sent;
    x->after = __atomic_load_n(&last_drain, __ATOMIC_RELAXED);
    x->program = *req;
    x->next = sync_sends;
    sync_sends = x;
    return MPI_SUCCESS;
}

int MPI_Issend(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm, MPI_Request* req) {
    known(comm, "MPI_Issend");
    ENTER();
    const int rc = sync_send_start(buf, count, type, dest, tag, comm, req);
    LEAVE();
    return rc;
}

int MPI_Ssend(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm) {
    MPI_Request req;
    const int rc = MPI_Issend(buf, count, type, dest, tag, comm, &req);
    return rc == MPI_SUCCESS ? MPI_Wait(&req, MPI_STATUS_IGNORE) : rc;
}

int MPI_Send(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm) {
    return counted_blocking_send(PMPI_Isend, "MPI_Send", buf, count, type, dest, tag, comm);
}
int MPI_Rsend(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm) {
    return counted_blocking_send(PMPI_Irsend, "MPI_Rsend", buf, count, type, dest, tag, comm);
}
int MPI_Bsend(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm) {
    return counted_blocking_send(PMPI_Ibsend, "MPI_Bsend", buf, count, type, dest, tag, comm);
}

/* Generalized requests for receives the buffer satisfied: already complete. */
static int gq_query(void* extra, MPI_Status* st) {
    *st = *(MPI_Status*)extra;
    return MPI_SUCCESS;
}
static int gq_free(void* extra) {
    free(extra);
    return MPI_SUCCESS;
}
static int gq_cancel(void* extra, int complete) {
    (void)extra;
    (void)complete;
    return MPI_SUCCESS;
}

/* A receive the buffer satisfies: m delivered into (buf, count, type) now,
 * and *req a generalized request, already complete, that reports its status. */
static int buffered_request(buffered_t* m, void* buf, int count, MPI_Datatype type, MPI_Comm comm, MPI_Request* req) {
    MPI_Status* st = calloc(1, sizeof *st);
    if (!st) {
        fprintf(stderr, "weft-mpi rank %d: no memory for a request\n", world_rank);
        abort_job();
    }
    st->MPI_ERROR = deliver(m, buf, count, type, comm, st);
    int rc = PMPI_Grequest_start(gq_query, gq_free, gq_cancel, st, req);
    if (rc != MPI_SUCCESS) {
        free(st);
        return rc;
    }
    return PMPI_Grequest_complete(*req);
}

int MPI_Irecv(void* buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm, MPI_Request* req) {
    known(comm, "MPI_Irecv");
    ENTER();
    int rc;
    buffered_t* m = buffer_take(comm, source, tag);
    if (m) {
        rc = buffered_request(m, buf, count, type, comm, req);
    } else {
        rc = PMPI_Irecv(buf, count, type, source, tag, comm, req);
        if (rc == MPI_SUCCESS && source != MPI_PROC_NULL) post(*req);
    }
    LEAVE();
    return rc;
}

int MPI_Recv(void* buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm, MPI_Status* st) {
    known(comm, "MPI_Recv");
    ENTER();
    int rc;
    buffered_t* m = buffer_take(comm, source, tag);
    if (m) {
        rc = deliver(m, buf, count, type, comm, st);
    } else {
        MPI_Request req;
        rc = PMPI_Irecv(buf, count, type, source, tag, comm, &req);
        if (rc == MPI_SUCCESS) {
            const MPI_Request handle = req;
            if (source != MPI_PROC_NULL) post(handle);
            rc = wait_request(&req, st);
            if (source != MPI_PROC_NULL) completed(handle);
        }
    }
    LEAVE();
    return rc;
}

int MPI_Sendrecv(const void* sbuf, int scount, MPI_Datatype stype, int dest, int stag, void* rbuf, int rcount,
                 MPI_Datatype rtype, int source, int rtag, MPI_Comm comm, MPI_Status* st) {
    MPI_Request reqs[2];
    int rc = MPI_Irecv(rbuf, rcount, rtype, source, rtag, comm, &reqs[0]);
    if (rc != MPI_SUCCESS) return rc;
    rc = MPI_Isend(sbuf, scount, stype, dest, stag, comm, &reqs[1]);
    if (rc != MPI_SUCCESS) return rc;
    MPI_Status sts[2];
    rc = MPI_Waitall(2, reqs, sts);
    if (st != MPI_STATUS_IGNORE) *st = sts[0];
    return rc;
}

/* The outgoing data goes as a packed copy, so the receive can land in the
 * same buffer (a message sent as MPI_PACKED matches a receive of the
 * original type). */
int MPI_Sendrecv_replace(void* buf, int count, MPI_Datatype type, int dest, int stag, int source, int rtag,
                         MPI_Comm comm, MPI_Status* st) {
    int size = 0, position = 0;
    PMPI_Pack_size(count, type, comm, &size);
    void* copy = malloc(size > 0 ? (size_t)size : 1);
    if (!copy) {
        fprintf(stderr, "weft-mpi rank %d: no memory for MPI_Sendrecv_replace's %d bytes\n", world_rank, size);
        abort_job();
    }
    PMPI_Pack(buf, count, type, copy, size, &position, comm);
    MPI_Request reqs[2];
    int rc = MPI_Irecv(buf, count, type, source, rtag, comm, &reqs[0]);
    if (rc == MPI_SUCCESS) rc = MPI_Isend(copy, position, MPI_PACKED, dest, stag, comm, &reqs[1]);
    if (rc == MPI_SUCCESS) {
        MPI_Status sts[2];
        rc = MPI_Waitall(2, reqs, sts);
        if (st != MPI_STATUS_IGNORE) *st = sts[0];
    }
    free(copy);
    return rc;
}

/* ------------------------------------------------ persistent requests */
/* MPI_Send_init ... MPI_Recv_init: the program's handle is MPI's own
 * persistent request, and MPI_Start counts a send or posts a receive as
 * the non-persistent forms do. Two starts go through a request of the
 * layer's instead, which the wait and test calls use in the handle's place
 * (its stand-in):
 *   - a receive whose message a drain put in the buffer: a generalized
 *     request already complete, as MPI_Irecv gives;
 *   - a synchronous send: synchronous mode's request, as MPI_Issend gives.
 * MPI never starts the handle then: it stays inactive inside MPI, and
 * active for the program until a wait or test completes its stand-in.
 * MPI-4's persistent collectives (MPI_Allreduce_init ...) are MPI's own
 * requests too: each start begins a collective inside the communicator's
 * clock and its completion finishes it, as a non-blocking collective's. */
enum { PERSISTENT_SEND, PERSISTENT_SSEND, PERSISTENT_RECV, PERSISTENT_COLLECTIVE };
typedef struct {
    MPI_Request handle;
    int kind;
    void* buf;
    int count;
    MPI_Datatype type;
    int peer, tag;
    MPI_Comm comm;
    MPI_Request stand_in;     /* MPI_REQUEST_NULL: none */
    weft_drain_clock_t clock; /* a collective's: its communicator's (NULL once that is freed) */
} persistent_t;
static persistent_t** persistents; /* each its own allocation: a waiting thread keeps its pointer */
static int npersistents, persistents_cap;
static int nstand_ins;              /* stand-ins now: the wait and test calls look for them only then */
static int npersistent_collectives; /* MPI_Start looks for them before the gate only when there are some */

static persistent_t* persistent_find(MPI_Request handle) {
    if (handle == MPI_REQUEST_NULL) return NULL;
    for (int i = 0; i < npersistents; ++i)
        if (persistents[i]->handle == handle) return persistents[i];
    return NULL;
}

/* The persistent request whose stand-in a wait or test must use for handle. */
static persistent_t* stood_in(MPI_Request handle) {
    if (!nstand_ins) return NULL;
    persistent_t* p = persistent_find(handle);
    return p && p->stand_in != MPI_REQUEST_NULL ? p : NULL;
}

static void stand_in_done(persistent_t* p) {
    p->stand_in = MPI_REQUEST_NULL;
    --nstand_ins;
}

/* A persistent request MPI just made (rc): the layer's record of it. */
static int persistent_add(int rc, const MPI_Request* req, int kind, const void* buf, int count, MPI_Datatype type,
                          int peer, int tag, MPI_Comm comm) {
    if (rc != MPI_SUCCESS) return rc;
    persistent_t* p = malloc(sizeof *p);
    if (p && npersistents == persistents_cap) {
        const int cap = persistents_cap ? 2 * persistents_cap : 16;
        persistent_t** more = realloc(persistents, (size_t)cap * sizeof *more);
        if (more) {
            persistents = more;
            persistents_cap = cap;
        }
    }
    if (!p || npersistents == persistents_cap) {
        fprintf(stderr, "weft-mpi rank %d: no memory for a persistent request\n", world_rank);
        abort_job();
    }
    *p = (persistent_t){*req, kind, (void*)buf, count, type, peer, tag, comm, MPI_REQUEST_NULL, NULL};
    persistents[npersistents++] = p;
    return rc;
}

static void persistent_remove(persistent_t* p) {
    if (p->kind == PERSISTENT_COLLECTIVE) --npersistent_collectives;
    for (int i = 0; i < npersistents; ++i)
        if (persistents[i] == p) {
            persistents[i] = persistents[--npersistents];
            free(p);
            return;
        }
}

#define PERSISTENT_INIT(name, init, kind, buf, count, type, peer, tag, comm, req)                                 \
    do {                                                                                                          \
        known(comm, name);                                                                                        \
        ENTER();                                                                                                  \
        const int rc_ = persistent_add(init(buf, count, type, peer, tag, comm, req), req, kind, buf, count, type, \
                                       peer, tag, comm);                                                          \
        LEAVE();                                                                                                  \
        return rc_;                                                                                               \
    } while (0)

int MPI_Send_init(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm, MPI_Request* req) {
    PERSISTENT_INIT("MPI_Send_init", PMPI_Send_init, PERSISTENT_SEND, buf, count, type, dest, tag, comm, req);
}
int MPI_Bsend_init(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm, MPI_Request* req) {
    PERSISTENT_INIT("MPI_Bsend_init", PMPI_Bsend_init, PERSISTENT_SEND, buf, count, type, dest, tag, comm, req);
}
int MPI_Rsend_init(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm, MPI_Request* req) {
    PERSISTENT_INIT("MPI_Rsend_init", PMPI_Rsend_init, PERSISTENT_SEND, buf, count, type, dest, tag, comm, req);
}
/* MPI's handle is never started: each start is synchronous mode's own. */
int MPI_Ssend_init(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm, MPI_Request* req) {
    PERSISTENT_INIT("MPI_Ssend_init", PMPI_Ssend_init, PERSISTENT_SSEND, buf, count, type, dest, tag, comm, req);
}
int MPI_Recv_init(void* buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm, MPI_Request* req) {
    PERSISTENT_INIT("MPI_Recv_init", PMPI_Recv_init, PERSISTENT_RECV, buf, count, type, source, tag, comm, req);
}

#ifdef WEFT_MPI_PERSISTENT_COLLECTIVES
/* A persistent collective MPI just made (rc), on the communicator with `clock`. */
static int persistent_collective_add(int rc, const MPI_Request* req, weft_drain_clock_t clock) {
    if (rc != MPI_SUCCESS) return rc;
    persistent_add(rc, req, PERSISTENT_COLLECTIVE, NULL, 0, MPI_DATATYPE_NULL, MPI_PROC_NULL, 0, MPI_COMM_NULL);
    persistents[npersistents - 1]->clock = clock;
    ++npersistent_collectives;
    return rc;
}
#endif

/* The collective a freed communicator's persistent requests belonged to is
 * gone with its clock: a later start is refused (forget). */
static void persistent_collectives_lose(weft_drain_clock_t clock) {
    for (int i = 0; i < npersistents; ++i)
        if (persistents[i]->clock == clock) persistents[i]->clock = NULL;
}

#define PERSISTENT_COLLECTIVE_INIT(name, comm, req, init)                 \
    do {                                                                  \
        if (!(req)) return init; /* MPI reports it */                     \
        weft_drain_clock_t clock_ = clock_of(comm, name);                 \
        ENTER();                                                          \
        const int rc_ = persistent_collective_add((init), (req), clock_); \
        LEAVE();                                                          \
        return rc_;                                                       \
    } while (0)

/* Persistent collectives: MPI-4's (MPICH 4), and under Open MPI 4.1 its
 * MPIX_ forms of the same calls (the MPI_ names are mapped to them at the
 * top; the coverage table reads mpi.h only, so they are listed nowhere
 * else). */
#ifdef WEFT_MPI_PERSISTENT_COLLECTIVES
int MPI_Allgather_init(const void* sbuf, int scount, MPI_Datatype stype, void* rbuf, int rcount, MPI_Datatype rtype,
                       MPI_Comm comm, MPI_Info info, MPI_Request* req) {
    PERSISTENT_COLLECTIVE_INIT("MPI_Allgather_init", comm, req,
                               PMPI_Allgather_init(sbuf, scount, stype, rbuf, rcount, rtype, comm, info, req));
}

int MPI_Allgatherv_init(const void* sbuf, int scount, MPI_Datatype stype, void* rbuf, const int rcounts[],
                        const int displs[], MPI_Datatype rtype, MPI_Comm comm, MPI_Info info, MPI_Request* req) {
    PERSISTENT_COLLECTIVE_INIT(
        "MPI_Allgatherv_init", comm, req,
        PMPI_Allgatherv_init(sbuf, scount, stype, rbuf, rcounts, displs, rtype, comm, info, req));
}

int MPI_Allreduce_init(const void* sbuf, void* rbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm,
                       MPI_Info info, MPI_Request* req) {
    PERSISTENT_COLLECTIVE_INIT("MPI_Allreduce_init", comm, req,
                               PMPI_Allreduce_init(sbuf, rbuf, count, type, op, comm, info, req));
}

int MPI_Alltoall_init(const void* sbuf, int scount, MPI_Datatype stype, void* rbuf, int rcount, MPI_Datatype rtype,
                      MPI_Comm comm, MPI_Info info, MPI_Request* req) {
    PERSISTENT_COLLECTIVE_INIT("MPI_Alltoall_init", comm, req,
                               PMPI_Alltoall_init(sbuf, scount, stype, rbuf, rcount, rtype, comm, info, req));
}

int MPI_Alltoallv_init(const void* sbuf, const int scounts[], const int sdispls[], MPI_Datatype stype, void* rbuf,
                       const int rcounts[], const int rdispls[], MPI_Datatype rtype, MPI_Comm comm, MPI_Info info,
                       MPI_Request* req) {
    PERSISTENT_COLLECTIVE_INIT(
        "MPI_Alltoallv_init", comm, req,
        PMPI_Alltoallv_init(sbuf, scounts, sdispls, stype, rbuf, rcounts, rdispls, rtype, comm, info, req));
}

int MPI_Alltoallw_init(const void* sbuf, const int scounts[], const int sdispls[], const MPI_Datatype stypes[],
                       void* rbuf, const int rcounts[], const int rdispls[], const MPI_Datatype rtypes[], MPI_Comm comm,
                       MPI_Info info, MPI_Request* req) {
    PERSISTENT_COLLECTIVE_INIT(
        "MPI_Alltoallw_init", comm, req,
        PMPI_Alltoallw_init(sbuf, scounts, sdispls, stypes, rbuf, rcounts, rdispls, rtypes, comm, info, req));
}

int MPI_Barrier_init(MPI_Comm comm, MPI_Info info, MPI_Request* req) {
    PERSISTENT_COLLECTIVE_INIT("MPI_Barrier_init", comm, req, PMPI_Barrier_init(comm, info, req));
}

int MPI_Bcast_init(void* buf, int count, MPI_Datatype type, int root, MPI_Comm comm, MPI_Info info, MPI_Request* req) {
    PERSISTENT_COLLECTIVE_INIT("MPI_Bcast_init", comm, req, PMPI_Bcast_init(buf, count, type, root, comm, info, req));
}

int MPI_Exscan_init(const void* sbuf, void* rbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm, MPI_Info info,
                    MPI_Request* req) {
    PERSISTENT_COLLECTIVE_INIT("MPI_Exscan_init", comm, req,
                               PMPI_Exscan_init(sbuf, rbuf, count, type, op, comm, info, req));
}

int MPI_Gather_init(const void* sbuf, int scount, MPI_Datatype stype, void* rbuf, int rcount, MPI_Datatype rtype,
                    int root, MPI_Comm comm, MPI_Info info, MPI_Request* req) {
    PERSISTENT_COLLECTIVE_INIT("MPI_Gather_init", comm, req,
                               PMPI_Gather_init(sbuf, scount, stype, rbuf, rcount, rtype, root, comm, info, req));
}

int MPI_Gatherv_init(const void* sbuf, int scount, MPI_Datatype stype, void* rbuf, const int rcounts[],
                     const int displs[], MPI_Datatype rtype, int root, MPI_Comm comm, MPI_Info info, MPI_Request* req) {
    PERSISTENT_COLLECTIVE_INIT(
        "MPI_Gatherv_init", comm, req,
        PMPI_Gatherv_init(sbuf, scount, stype, rbuf, rcounts, displs, rtype, root, comm, info, req));
}

int MPI_Reduce_init(const void* sbuf, void* rbuf, int count, MPI_Datatype type, MPI_Op op, int root, MPI_Comm comm,
                    MPI_Info info, MPI_Request* req) {
    PERSISTENT_COLLECTIVE_INIT("MPI_Reduce_init", comm, req,
                               PMPI_Reduce_init(sbuf, rbuf, count, type, op, root, comm, info, req));
}

int MPI_Reduce_scatter_init(const void* sbuf, void* rbuf, const int rcounts[], MPI_Datatype type, MPI_Op op,
                            MPI_Comm comm, MPI_Info info, MPI_Request* req) {
    PERSISTENT_COLLECTIVE_INIT("MPI_Reduce_scatter_init", comm, req,
                               PMPI_Reduce_scatter_init(sbuf, rbuf, rcounts, type, op, comm, info, req));
}

int MPI_Reduce_scatter_block_init(const void* sbuf, void* rbuf, int rcount, MPI_Datatype type, MPI_Op op, MPI_Comm comm,
                                  MPI_Info info, MPI_Request* req) {
    PERSISTENT_COLLECTIVE_INIT("MPI_Reduce_scatter_block_init", comm, req,
                               PMPI_Reduce_scatter_block_init(sbuf, rbuf, rcount, type, op, comm, info, req));
}

int MPI_Scan_init(const void* sbuf, void* rbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm, MPI_Info info,
                  MPI_Request* req) {
    PERSISTENT_COLLECTIVE_INIT("MPI_Scan_init", comm, req,
                               PMPI_Scan_init(sbuf, rbuf, count, type, op, comm, info, req));
}

int MPI_Scatter_init(const void* sbuf, int scount, MPI_Datatype stype, void* rbuf, int rcount, MPI_Datatype rtype,
                     int root, MPI_Comm comm, MPI_Info info, MPI_Request* req) {
    PERSISTENT_COLLECTIVE_INIT("MPI_Scatter_init", comm, req,
                               PMPI_Scatter_init(sbuf, scount, stype, rbuf, rcount, rtype, root, comm, info, req));
}

int MPI_Scatterv_init(const void* sbuf, const int scounts[], const int displs[], MPI_Datatype stype, void* rbuf,
                      int rcount, MPI_Datatype rtype, int root, MPI_Comm comm, MPI_Info info, MPI_Request* req) {
    PERSISTENT_COLLECTIVE_INIT(
        "MPI_Scatterv_init", comm, req,
        PMPI_Scatterv_init(sbuf, scounts, displs, stype, rbuf, rcount, rtype, root, comm, info, req));
}

int MPI_Neighbor_allgather_init(const void* sbuf, int scount, MPI_Datatype stype, void* rbuf, int rcount,
                                MPI_Datatype rtype, MPI_Comm comm, MPI_Info info, MPI_Request* req) {
    PERSISTENT_COLLECTIVE_INIT("MPI_Neighbor_allgather_init", comm, req,
                               PMPI_Neighbor_allgather_init(sbuf, scount, stype, rbuf, rcount, rtype, comm, info, req));
}

int MPI_Neighbor_allgatherv_init(const void* sbuf, int scount, MPI_Datatype stype, void* rbuf, const int rcounts[],
                                 const int displs[], MPI_Datatype rtype, MPI_Comm comm, MPI_Info info,
                                 MPI_Request* req) {
    PERSISTENT_COLLECTIVE_INIT(
        "MPI_Neighbor_allgatherv_init", comm, req,
        PMPI_Neighbor_allgatherv_init(sbuf, scount, stype, rbuf, rcounts, displs, rtype, comm, info, req));
}

int MPI_Neighbor_alltoall_init(const void* sbuf, int scount, MPI_Datatype stype, void* rbuf, int rcount,
                               MPI_Datatype rtype, MPI_Comm comm, MPI_Info info, MPI_Request* req) {
    PERSISTENT_COLLECTIVE_INIT("MPI_Neighbor_alltoall_init", comm, req,
                               PMPI_Neighbor_alltoall_init(sbuf, scount, stype, rbuf, rcount, rtype, comm, info, req));
}

int MPI_Neighbor_alltoallv_init(const void* sbuf, const int scounts[], const int sdispls[], MPI_Datatype stype,
                                void* rbuf, const int rcounts[], const int rdispls[], MPI_Datatype rtype, MPI_Comm comm,
                                MPI_Info info, MPI_Request* req) {
    PERSISTENT_COLLECTIVE_INIT(
        "MPI_Neighbor_alltoallv_init", comm, req,
        PMPI_Neighbor_alltoallv_init(sbuf, scounts, sdispls, stype, rbuf, rcounts, rdispls, rtype, comm, info, req));
}

int MPI_Neighbor_alltoallw_init(const void* sbuf, const int scounts[], const MPI_Aint sdispls[],
                                const MPI_Datatype stypes[], void* rbuf, const int rcounts[], const MPI_Aint rdispls[],
                                const MPI_Datatype rtypes[], MPI_Comm comm, MPI_Info info, MPI_Request* req) {
    PERSISTENT_COLLECTIVE_INIT(
        "MPI_Neighbor_alltoallw_init", comm, req,
        PMPI_Neighbor_alltoallw_init(sbuf, scounts, sdispls, stypes, rbuf, rcounts, rdispls, rtypes, comm, info, req));
}
#endif

/* The persistent collective whose handle is `handle`, or NULL. */
static persistent_t* persistent_collective(MPI_Request handle) {
    lock_mpi();
    persistent_t* p = persistent_find(handle);
    pthread_mutex_unlock(&mpi_lock);
    return p && p->kind == PERSISTENT_COLLECTIVE ? p : NULL;
}

/* A persistent collective's start: begun inside its clock before the gate,
 * as a non-blocking collective's (NONBLOCKING_COLLECTIVE). */
static int start_collective(persistent_t* p, MPI_Request* req) {
    lock_mpi();
    const int active = posted_index(*req) >= 0;
    pthread_mutex_unlock(&mpi_lock);
    if (active) {
        fprintf(stderr, "weft-mpi rank %d: MPI_Start of a persistent collective that is still active\n", world_rank);
        return MPI_ERR_REQUEST;
    }
    if (!p->clock) {
        fprintf(stderr, "weft-mpi rank %d: MPI_Start of a persistent collective whose communicator was freed\n",
                world_rank);
        return MPI_ERR_COMM;
    }
    CHECK(weft_drain_commit_begin(p->clock));
    ENTER();
    const int rc = PMPI_Start(req);
    if (rc == MPI_SUCCESS)
        post_request(*req, p->clock);
    else
        CHECK(weft_drain_commit_finish(p->clock)); /* it never began: nothing to end */
    LEAVE();
    return rc;
}

/* One start, under the lock. */
static int start_one(MPI_Request* req) {
    persistent_t* p = persistent_find(*req);
    if (!p) return PMPI_Start(req); /* not a persistent request the layer made: MPI reports what it is */
    if (p->stand_in != MPI_REQUEST_NULL) {
        fprintf(stderr, "weft-mpi rank %d: MPI_Start of a persistent request that is still active\n", world_rank);
        return MPI_ERR_REQUEST;
    }
    int rc;
    if (p->kind == PERSISTENT_SSEND) {
        rc = sync_send_start(p->buf, p->count, p->type, p->peer, p->tag, p->comm, &p->stand_in);
        if (rc == MPI_SUCCESS) ++nstand_ins;
        return rc;
    }
    if (p->kind == PERSISTENT_RECV) {
        buffered_t* m = buffer_take(p->comm, p->peer, p->tag);
        if (m) {
            rc = buffered_request(m, p->buf, p->count, p->type, p->comm, &p->stand_in);
            if (rc == MPI_SUCCESS) ++nstand_ins;
            return rc;
        }
        rc = PMPI_Start(req);
        if (rc == MPI_SUCCESS && p->peer != MPI_PROC_NULL) post(*req);
        return rc;
    }
    rc = PMPI_Start(req);
    if (rc == MPI_SUCCESS && p->peer != MPI_PROC_NULL) {
        CHECK(weft_drain_count(ctx, 1, 0));
        sync_count_send(p->comm, p->peer, p->tag);
    }
    return rc;
}

int MPI_Start(MPI_Request* req) {
    if (!req) return PMPI_Start(req);
    if (npersistent_collectives) {
        persistent_t* p = persistent_collective(*req);
        if (p) return start_collective(p, req);
    }
    ENTER();
    const int rc = start_one(req);
    LEAVE();
    return rc;
}

int MPI_Startall(int count, MPI_Request reqs[]) {
    if (count < 0 || (count > 0 && !reqs)) return PMPI_Startall(count, reqs); /* MPI reports it */
    if (npersistent_collectives) { /* a collective's start may wait for a drain before the gate: one by one */
        int rc = MPI_SUCCESS;
        for (int i = 0; i < count && rc == MPI_SUCCESS; ++i) rc = MPI_Start(&reqs[i]);
        return rc;
    }
    ENTER();
    int rc = MPI_SUCCESS;
    for (int i = 0; i < count && rc == MPI_SUCCESS; ++i) rc = start_one(&reqs[i]);
    LEAVE();
    return rc;
}

int MPI_Wait(MPI_Request* req, MPI_Status* st) {
    if (!req) return PMPI_Wait(req, st);
    ENTER();
    const MPI_Request handle = *req;
    persistent_t* p = stood_in(handle);
    int rc;
    if (p) {
        rc = wait_request(&p->stand_in, st);
        if (p->stand_in == MPI_REQUEST_NULL) stand_in_done(p);
    } else {
        rc = wait_request(req, st);
        if (handle != MPI_REQUEST_NULL) completed(handle);
    }
    LEAVE();
    return rc;
}

int MPI_Test(MPI_Request* req, int* flag, MPI_Status* st) {
    if (!req || !flag) return PMPI_Test(req, flag, st);
    ENTER();
    const MPI_Request handle = *req;
    persistent_t* p = stood_in(handle);
    int rc;
    if (p) {
        rc = PMPI_Test(&p->stand_in, flag, st);
        if (rc == MPI_SUCCESS && *flag) stand_in_done(p);
    } else {
        rc = PMPI_Test(req, flag, st);
        if (rc == MPI_SUCCESS && *flag && handle != MPI_REQUEST_NULL) completed(handle);
    }
    LEAVE();
    return rc;
}

/* Whether a request is complete, freeing nothing: a stand-in answers for
 * its persistent request. */
int MPI_Request_get_status(MPI_Request req, int* flag, MPI_Status* st) {
    ENTER();
    const persistent_t* p = stood_in(req);
    const int rc = PMPI_Request_get_status(p ? p->stand_in : req, flag, st);
    /* An MPI_Comm_idup's communicator may be used once this says complete. */
    if (rc == MPI_SUCCESS && flag && *flag && nidups) idup_complete(req);
    LEAVE();
    return rc;
}

/* The handles of a request array before a call that may free some: the
 * completed ones are counted by their handle afterwards. */
typedef struct {
    MPI_Request small[16];
    MPI_Request* all;
    int stand_ins; /* some were replaced by their stand-ins */
} handles_t;
/* The array's handles are saved, and each persistent request with a
 * stand-in is replaced by it for MPI's call (handles_done puts the
 * program's handles back). */
static void handles_save(handles_t* h, int count, MPI_Request reqs[]) {
    h->all = count <= 16 ? h->small : malloc((size_t)count * sizeof *h->all);
    if (!h->all) {
        fprintf(stderr, "weft-mpi rank %d: no memory for %d request handles\n", world_rank, count);
        abort_job();
    }
    memcpy(h->all, reqs, (size_t)count * sizeof *h->all);
    h->stand_ins = 0;
    for (int i = 0; nstand_ins && i < count; ++i) {
        const persistent_t* p = stood_in(reqs[i]);
        if (p) {
            reqs[i] = p->stand_in;
            h->stand_ins = 1;
        }
    }
}
/* A stand-in MPI completed (and so freed) leaves its persistent request
 * inactive; the program's array holds its own handles again either way. */
static void handles_done(handles_t* h, int count, MPI_Request reqs[]) {
    for (int i = 0; h->stand_ins && i < count; ++i) {
        persistent_t* p = stood_in(h->all[i]);
        if (!p) continue;
        if (reqs[i] == MPI_REQUEST_NULL) stand_in_done(p);
        reqs[i] = p->handle;
    }
    if (h->all != h->small) free(h->all);
}
static void completed_at(const handles_t* h, int index) {
    if (index != MPI_UNDEFINED && h->all[index] != MPI_REQUEST_NULL) completed(h->all[index]);
}

int MPI_Testall(int count, MPI_Request reqs[], int* flag, MPI_Status sts[]) {
    if (count < 0 || (count > 0 && !reqs)) return PMPI_Testall(count, reqs, flag, sts); /* MPI reports it */
    ENTER();
    handles_t h;
    handles_save(&h, count, reqs);
    const int rc = PMPI_Testall(count, reqs, flag, sts);
    if (rc == MPI_SUCCESS && *flag)
        for (int i = 0; i < count; ++i) completed_at(&h, i);
    handles_done(&h, count, reqs);
    LEAVE();
    return rc;
}

int MPI_Testany(int count, MPI_Request reqs[], int* index, int* flag, MPI_Status* st) {
    if (count < 0 || (count > 0 && !reqs)) return PMPI_Testany(count, reqs, index, flag, st); /* MPI reports it */
    ENTER();
    handles_t h;
    handles_save(&h, count, reqs);
    const int rc = PMPI_Testany(count, reqs, index, flag, st);
    if (rc == MPI_SUCCESS && *flag) completed_at(&h, *index);
    handles_done(&h, count, reqs);
    LEAVE();
    return rc;
}

int MPI_Waitany(int count, MPI_Request reqs[], int* index, MPI_Status* st) {
    if (count < 0 || (count > 0 && !reqs)) return PMPI_Waitany(count, reqs, index, st); /* MPI reports it */
    ENTER();
    handles_t h;
    handles_save(&h, count, reqs);
    int rc, flag = 0;
    for (;;) {
        rc = PMPI_Testany(count, reqs, index, &flag, st);
        if (rc != MPI_SUCCESS || flag) break;
        YIELD();
    }
    if (rc == MPI_SUCCESS) completed_at(&h, *index);
    handles_done(&h, count, reqs);
    LEAVE();
    return rc;
}

int MPI_Testsome(int count, MPI_Request reqs[], int* outcount, int indices[], MPI_Status sts[]) {
    if (count < 0 || (count > 0 && !reqs))
        return PMPI_Testsome(count, reqs, outcount, indices, sts); /* MPI reports it */
    ENTER();
    handles_t h;
    handles_save(&h, count, reqs);
    const int rc = PMPI_Testsome(count, reqs, outcount, indices, sts);
    if (rc == MPI_SUCCESS && *outcount != MPI_UNDEFINED)
        for (int i = 0; i < *outcount; ++i) completed_at(&h, indices[i]);
    handles_done(&h, count, reqs);
    LEAVE();
    return rc;
}

int MPI_Waitsome(int count, MPI_Request reqs[], int* outcount, int indices[], MPI_Status sts[]) {
    if (count < 0 || (count > 0 && !reqs))
        return PMPI_Waitsome(count, reqs, outcount, indices, sts); /* MPI reports it */
    ENTER();
    handles_t h;
    handles_save(&h, count, reqs);
    int rc;
    for (;;) {
        rc = PMPI_Testsome(count, reqs, outcount, indices, sts);
        if (rc != MPI_SUCCESS || *outcount != 0) break; /* some completed, or MPI_UNDEFINED: none active */
        YIELD();
    }
    if (rc == MPI_SUCCESS && *outcount != MPI_UNDEFINED)
        for (int i = 0; i < *outcount; ++i) completed_at(&h, indices[i]);
    handles_done(&h, count, reqs);
    LEAVE();
    return rc;
}

/* MPICH 4.0 mistreats a persistent collective's request once it is
 * complete: MPI_Testall answers MPI_ERR_IN_STATUS whenever one is among
 * its requests (every status MPI_SUCCESS), and MPI_Testsome reports it
 * complete again at every call instead of as inactive (its MPI_Waitall and
 * MPI_Test do neither). A wait on such requests therefore gathers the
 * completions with MPI_Testsome on a copy of the array, each request
 * taken out of the copy once it has completed. */
static int has_persistent_collective(int count, const MPI_Request reqs[]) {
    for (int i = 0; npersistent_collectives && i < count; ++i) {
        const persistent_t* p = persistent_find(reqs[i]);
        if (p && p->kind == PERSISTENT_COLLECTIVE) return 1;
    }
    return 0;
}

static int wait_all_by_some(int count, MPI_Request reqs[], MPI_Status sts[], const handles_t* h) {
    int* indices = malloc((size_t)count * sizeof *indices);
    MPI_Status* got = malloc((size_t)count * sizeof *got);
    MPI_Request* open = malloc((size_t)count * sizeof *open);
    if (!indices || !got || !open) {
        fprintf(stderr, "weft-mpi rank %d: no memory to wait for %d requests\n", world_rank, count);
        abort_job();
    }
    memcpy(open, reqs, (size_t)count * sizeof *open);
    int rc;
    for (;;) {
        int outcount = 0;
        rc = PMPI_Testsome(count, open, &outcount, indices, got);
        if (rc != MPI_SUCCESS || outcount == MPI_UNDEFINED) break; /* MPI_UNDEFINED: none active any more */
        for (int k = 0; k < outcount; ++k) {
            const int i = indices[k];
            reqs[i] = open[i]; /* MPI_REQUEST_NULL, or a persistent request's handle */
            open[i] = MPI_REQUEST_NULL;
            if (sts != MPI_STATUSES_IGNORE) sts[i] = got[k];
            completed_at(h, i);
        }
        if (outcount == 0) YIELD();
    }
    free(indices);
    free(got);
    free(open);
    return rc;
}

int MPI_Waitall(int count, MPI_Request reqs[], MPI_Status sts[]) {
    if (count < 0 || (count > 0 && !reqs)) return PMPI_Waitall(count, reqs, sts); /* MPI reports it */
    ENTER();
    handles_t h;
    handles_save(&h, count, reqs);
    int rc;
    if (has_persistent_collective(count, h.all)) {
        rc = wait_all_by_some(count, reqs, sts, &h);
        handles_done(&h, count, reqs);
        LEAVE();
        return rc;
    }
    for (;;) {
        int done = 0;
        /* Testall frees nothing until every request is complete. */
        rc = PMPI_Testall(count, reqs, &done, sts);
        if (rc != MPI_SUCCESS || done) break;
        YIELD();
    }
    if (rc == MPI_SUCCESS)
        for (int i = 0; i < count; ++i) completed_at(&h, i);
    handles_done(&h, count, reqs);
    LEAVE();
    return rc;
}

/* Freeing a send's request is safe (it was counted when sent); a posted
 * receive's is not: its arrival could no longer be counted. */
int MPI_Request_free(MPI_Request* req) {
    if (!req) return PMPI_Request_free(req);
    ENTER();
    const int i = posted_index(*req);
    if (i >= 0 && posted[i].clock) {
        LEAVE();
        fprintf(stderr,
                "weft-mpi rank %d: MPI_Request_free of a non-blocking collective's request (erroneous in MPI)\n",
                world_rank);
        return MPI_ERR_REQUEST;
    }
    if (i >= 0) {
        LEAVE();
        return refuse("MPI_Request_free of a receive's request", "its arrival could no longer be counted");
    }
    persistent_t* p = persistent_find(*req);
    if (p) { /* a stand-in goes with it: a receive's is complete, a synchronous send's completes by itself */
        if (p->stand_in != MPI_REQUEST_NULL) {
            PMPI_Request_free(&p->stand_in);
            stand_in_done(p);
        }
        persistent_remove(p);
    }
    const int rc = PMPI_Request_free(req);
    LEAVE();
    return rc;
}

/* A cancel is settled at once, as the drain's counts need it: a posted
 * receive that is cancelled will never arrive (it leaves the posted
 * table), one that had matched already has arrived (counted now); a send
 * that is cancelled will never arrive either, so it is counted as arrived
 * and the job's sent and received still balance. The request stays the
 * program's to complete with MPI_Wait or MPI_Test, as MPI says. */
int MPI_Cancel(MPI_Request* req) {
    if (!req || *req == MPI_REQUEST_NULL) return PMPI_Cancel(req);
    ENTER();
    const persistent_t* p = stood_in(*req);
    if (p && p->kind == PERSISTENT_RECV) { /* the buffer completed it: nothing left to cancel */
        LEAVE();
        return MPI_SUCCESS;
    }
    const int c = posted_index(*req);
    if (c >= 0 && posted[c].clock) {
        LEAVE();
        fprintf(stderr, "weft-mpi rank %d: MPI_Cancel of a non-blocking collective's request (erroneous in MPI)\n",
                world_rank);
        return MPI_ERR_REQUEST;
    }
    const MPI_Request program = p ? p->stand_in : *req;
    for (const sync_send_t* x = sync_sends; x; x = x->next)
        if (x->program == program) {
            LEAVE();
            return refuse("MPI_Cancel of a synchronous send", "its acknowledgment protocol has no cancel yet");
        }
    int rc = PMPI_Cancel(req);
    MPI_Status st;
    int done = 0;
    while (rc == MPI_SUCCESS && !done) { /* a cancel completes locally */
        rc = PMPI_Request_get_status(*req, &done, &st);
        if (rc == MPI_SUCCESS && !done) YIELD();
    }
    if (rc == MPI_SUCCESS) {
        int cancelled = 0;
        PMPI_Test_cancelled(&st, &cancelled);
        const int i = posted_index(*req);
        if (!cancelled)
            completed(*req); /* a receive that matched has arrived; a send was counted when sent */
        else if (i >= 0)
            unpost(i); /* it will never arrive */
        else
            CHECK(weft_drain_count(ctx, 0, 1)); /* a send that will never arrive: balance it */
    }
    LEAVE();
    return rc;
}

int MPI_Iprobe(int source, int tag, MPI_Comm comm, int* flag, MPI_Status* st) {
    known(comm, "MPI_Iprobe");
    ENTER(); /* the drain's hook appends to the buffer */
    int rc = MPI_SUCCESS;
    buffered_t* m = source == MPI_PROC_NULL ? NULL : buffer_find(comm, source, tag, NULL);
    if (m) {
        *flag = 1;
        fill_status(st, m);
    } else {
        rc = PMPI_Iprobe(source, tag, comm, flag, st);
    }
    LEAVE();
    return rc;
}

int MPI_Probe(int source, int tag, MPI_Comm comm, MPI_Status* st) {
    for (;;) {
        int flag = 0;
        const int rc = MPI_Iprobe(source, tag, comm, &flag, st);
        if (rc != MPI_SUCCESS || flag) return rc;
        CHECK(weft_drain_yield(ctx));
    }
}

/* ---------------------------------------------------- matched probes */
/* MPI_Improbe/MPI_Mprobe take a message out of matching and give the
 * program a handle that MPI_Mrecv/MPI_Imrecv receive it by. The handles are
 * the layer's own: slots of this table, so that one a drain has emptied
 * can never be confused with a handle MPI reuses.
 *   - A buffered message that matches is taken out of the buffer at the
 *     probe (it is older than any MPI holds, as for a receive).
 *   - A message MPI matched stays MPI's until the program receives it,
 *     unless a drain comes first: the drain's hook receives it (MPI_Mrecv)
 *     into the slot and counts its arrival, so nothing is in transit at
 *     the quiescent point. For synchronous mode, a matched probe is the
 *     start of the receive, as MPI's own matching is: its sender's
 *     MPI_Ssend may complete then. */
/* A handle is MESSAGE_MARK plus its slot: never MPI_MESSAGE_NULL nor
 * MPI_MESSAGE_NO_PROC, and it fits MPICH's int handles and Open MPI's
 * pointer ones alike. */
enum { MESSAGE_MARK = 0x0d000000, MESSAGE_SLOTS = 0x01000000 };
typedef char message_handle_is_an_int_or_a_pointer
    [sizeof(MPI_Message) == sizeof(uint32_t) || sizeof(MPI_Message) == sizeof(uintptr_t) ? 1 : -1];

static MPI_Message message_handle(int slot) {
    MPI_Message h;
    const uintptr_t mark = (uintptr_t)MESSAGE_MARK + (uintptr_t)slot;
    if (sizeof h == sizeof(uint32_t)) {
        const uint32_t v = (uint32_t)mark;
        memcpy(&h, &v, sizeof h);
    } else {
        memcpy(&h, &mark, sizeof h);
    }
    return h;
}

/* The slot of a handle the layer gave; -1 for any other. */
static int message_slot(MPI_Message h) {
    uintptr_t v = 0;
    if (sizeof h == sizeof(uint32_t)) {
        uint32_t small;
        memcpy(&small, &h, sizeof small);
        v = small;
    } else {
        memcpy(&v, &h, sizeof v);
    }
    if (v < MESSAGE_MARK || v - MESSAGE_MARK >= (uintptr_t)matched_cap) return -1;
    const int slot = (int)(v - MESSAGE_MARK);
    return matched[slot].used ? slot : -1;
}

static int matched_new(void) {
    if (nmatched == matched_cap) {
        const int cap = matched_cap ? 2 * matched_cap : 16;
        matched_t* more = cap <= MESSAGE_SLOTS ? realloc(matched, (size_t)cap * sizeof *more) : NULL;
        if (!more) {
            fprintf(stderr, "weft-mpi rank %d: no room for another matched message (%d held)\n", world_rank, nmatched);
            abort_job();
        }
        memset(more + matched_cap, 0, (size_t)(cap - matched_cap) * sizeof *more);
        matched = more;
        matched_cap = cap;
    }
    for (int i = 0; i < matched_cap; ++i)
        if (!matched[i].used) {
            matched[i].used = 1;
            ++nmatched;
            return i;
        }
    abort_job(); /* unreachable: nmatched < matched_cap */
    return -1;
}

static void matched_free(int slot) {
    if (!matched[slot].data) --nmatched_in_mpi;
    memset(&matched[slot], 0, sizeof matched[slot]);
    --nmatched;
}

/* The drain hook's part (under the lock): every matched message MPI still
 * holds is received into its slot. How many. */
static uint64_t matched_receive_all(void) {
    uint64_t got = 0;
    for (int i = 0; nmatched_in_mpi && i < matched_cap; ++i) {
        matched_t* x = &matched[i];
        if (!x->used || x->data) continue;
        buffered_t* m = buffer_new(x->comm, x->source, x->tag, x->bytes);
        if (!m) {
            fprintf(stderr, "weft-mpi rank %d: no memory to buffer a %d-byte message\n", world_rank, x->bytes);
            abort_job();
        }
        PMPI_Mrecv(m->data, x->bytes, MPI_BYTE, &x->mpi, MPI_STATUS_IGNORE);
        x->data = m;
        --nmatched_in_mpi;
        ++got;
    }
    return got;
}

int MPI_Improbe(int source, int tag, MPI_Comm comm, int* flag, MPI_Message* message, MPI_Status* st) {
    if (source == MPI_PROC_NULL || !flag || !message) return PMPI_Improbe(source, tag, comm, flag, message, st);
    known(comm, "MPI_Improbe");
    ENTER();
    int rc = MPI_SUCCESS;
    buffered_t* m = buffer_take(comm, source, tag);
    if (m) {
        const int slot = matched_new();
        matched[slot] = (matched_t){1, MPI_MESSAGE_NULL, m, comm, m->source, m->tag, m->bytes};
        fill_status(st, m);
        *flag = 1;
        *message = message_handle(slot);
    } else {
        MPI_Status mine;
        MPI_Message mpi = MPI_MESSAGE_NULL;
        rc = PMPI_Improbe(source, tag, comm, flag, &mpi, &mine);
        if (rc == MPI_SUCCESS && *flag) {
            int bytes = 0;
            PMPI_Get_count(&mine, MPI_BYTE, &bytes);
            const int slot = matched_new();
            matched[slot] = (matched_t){1, mpi, NULL, comm, mine.MPI_SOURCE, mine.MPI_TAG, bytes};
            ++nmatched_in_mpi;
            *message = message_handle(slot);
            if (st != MPI_STATUS_IGNORE) *st = mine;
        }
    }
    LEAVE();
    return rc;
}

int MPI_Mprobe(int source, int tag, MPI_Comm comm, MPI_Message* message, MPI_Status* st) {
    if (source == MPI_PROC_NULL || !message) return PMPI_Mprobe(source, tag, comm, message, st);
    for (;;) {
        int flag = 0;
        const int rc = MPI_Improbe(source, tag, comm, &flag, message, st);
        if (rc != MPI_SUCCESS || flag) return rc;
        CHECK(weft_drain_yield(ctx));
    }
}

/* The slot of *message for a receive; -1 (logged) for a handle the layer
 * did not give. MPI_MESSAGE_NULL and MPI_MESSAGE_NO_PROC are MPI's. */
static int message_for(const MPI_Message* message, const char* call) {
    const int slot = message_slot(*message);
    if (slot < 0)
        fprintf(stderr, "weft-mpi rank %d: %s of a message handle no MPI_Mprobe or MPI_Improbe gave\n", world_rank,
                call);
    return slot;
}

int MPI_Mrecv(void* buf, int count, MPI_Datatype type, MPI_Message* message, MPI_Status* st) {
    if (!message || *message == MPI_MESSAGE_NULL || *message == MPI_MESSAGE_NO_PROC)
        return PMPI_Mrecv(buf, count, type, message, st);
    ENTER();
    int rc;
    const int slot = message_for(message, "MPI_Mrecv");
    if (slot < 0) {
        rc = MPI_ERR_ARG;
    } else if (matched[slot].data) {
        const matched_t x = matched[slot];
        matched_free(slot);
        rc = deliver(x.data, buf, count, type, x.comm, st);
        *message = MPI_MESSAGE_NULL;
    } else {
        MPI_Message mpi = matched[slot].mpi;
        matched_free(slot);
        *message = MPI_MESSAGE_NULL;
        MPI_Request req;
        rc = PMPI_Imrecv(buf, count, type, &mpi, &req);
        if (rc == MPI_SUCCESS) {
            const MPI_Request handle = req;
            post(handle);
            rc = wait_request(&req, st);
            completed(handle);
        }
    }
    LEAVE();
    return rc;
}

int MPI_Imrecv(void* buf, int count, MPI_Datatype type, MPI_Message* message, MPI_Request* req) {
    if (!message || !req || *message == MPI_MESSAGE_NULL || *message == MPI_MESSAGE_NO_PROC)
        return PMPI_Imrecv(buf, count, type, message, req);
    ENTER();
    int rc;
    const int slot = message_for(message, "MPI_Imrecv");
    if (slot < 0) {
        rc = MPI_ERR_ARG;
    } else if (matched[slot].data) {
        const matched_t x = matched[slot];
        matched_free(slot);
        rc = buffered_request(x.data, buf, count, type, x.comm, req);
        *message = MPI_MESSAGE_NULL;
    } else {
        MPI_Message mpi = matched[slot].mpi;
        matched_free(slot);
        *message = MPI_MESSAGE_NULL;
        rc = PMPI_Imrecv(buf, count, type, &mpi, req);
        if (rc == MPI_SUCCESS) post(*req);
    }
    LEAVE();
    return rc;
}

/* ------------------------------------------------------------ refused */
/* Calls that would break the drain's accounting and are not wrapped yet:
 * refused at call time, loudly, instead of run unaccounted. */
static int refuse(const char* call, const char* why) {
    fprintf(stderr,
            "weft-mpi rank %d: %s is not supported by weft-mpi yet (%s; docs/mpi-coverage.md): a drain could not "
            "account for it; aborting\n",
            world_rank, call, why);
    abort_job();
    return MPI_ERR_OTHER;
}

/* Every other function this MPI's mpi.h declares that is neither wrapped
 * above nor safe to pass through, as a refusal: generated per MPI by
 * mpi/coverage.py (docs/mpi-coverage.md lists them all, with the reason). */
#include "weft_mpi_refused.c"
