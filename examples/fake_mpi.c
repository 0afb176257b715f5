/*
 * fake_mpi.c — a tiny "MPI" with its own messages, matching and
 * collectives, drained by weft through drain.h's hooks: what an MPI stack
 * linking weft does to be checkpointable the MANA way.
 *
 * FMPI moves its messages as weft active messages (weft does not count or
 * buffer them: FMPI does), matches them in its own queue, and builds its
 * broadcast and barrier from its messages. To be drained it:
 *   - brackets its calls with weft_drain_enter/leave and steps out of
 *     blocking waits with weft_drain_yield when weft_drain_closing says so;
 *   - wraps every collective in weft_drain_commit_begin/finish on a clock
 *     per communicator (weft_drain_clock_create);
 *   - counts its point-to-point messages (weft_drain_count);
 *   - lets the drain thread progress it and take arrived messages into its
 *     queue (weft_drain_set_hooks).
 *
 * The scenario (run under weft-run, any number of ranks >= 2): rank 0 sends
 * messages rank 1 will receive only after the drain, starts one broadcast
 * more than the others, and asks for a drain; the others compute, then
 * reach the broadcast. At the quiescent point every FMPI clock agrees and no
 * FMPI message is in flight; afterwards rank 1 receives its messages in
 * order. Exit status 0 means all of that held.
 */
#define _POSIX_C_SOURCE 199309L /* nanosleep */
#include <weft/drain.h>
#include <weft/state_window.h>
#include <weft/weft.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { FMPI_AM = 1, QUEUE_MAX = 4096, PAYLOAD_MAX = 64, TAG_BCAST = -2 };

typedef struct {
    int32_t src, tag;
    uint32_t len;
    unsigned char data[PAYLOAD_MAX];
} fmsg_t;

static weft_context_t ctx;
static uint32_t me, nranks;
static fmsg_t queue[QUEUE_MAX]; /* arrived, not yet received: FMPI's buffer */
static int queued;

static void die(const char* what, weft_status_t st) {
    fprintf(stderr, "fake_mpi rank %u: %s: %s\n", me, what, weft_strerror(st));
    exit(1);
}
#define CHECK(call)                          \
    do {                                     \
        weft_status_t st_ = (call);          \
        if (st_ != WEFT_OK) die(#call, st_); \
    } while (0)

/* Arrival: into FMPI's queue, counted once (user tags only: a collective's
 * messages are covered by its clock). */
static void on_fmpi(void* arg, uint32_t src, const void* payload, size_t len) {
    (void)arg;
    if (len < 8 || len > 8 + PAYLOAD_MAX || queued == QUEUE_MAX) {
        fprintf(stderr, "fake_mpi: dropped a malformed or overflowing message\n");
        return;
    }
    fmsg_t* m = &queue[queued++];
    memcpy(&m->tag, payload, 4);
    m->src = (int32_t)src;
    m->len = (uint32_t)(len - 8);
    memcpy(m->data, (const char*)payload + 8, m->len);
    if (m->tag >= 0) CHECK(weft_drain_count(ctx, 0, 1));
}

static void fmpi_send(uint32_t dest, int32_t tag, const void* buf, uint32_t len) {
    unsigned char msg[8 + PAYLOAD_MAX] = {0};
    CHECK(weft_drain_enter(ctx));
    memcpy(msg, &tag, 4);
    memcpy(msg + 8, buf, len);
    if (tag >= 0) CHECK(weft_drain_count(ctx, 1, 0));
    CHECK(weft_am_send(ctx, dest, FMPI_AM, msg, 8 + len));
    CHECK(weft_drain_leave(ctx));
}

/* Blocking receive: matches FMPI's queue in arrival order (MPI's rule). */
static void fmpi_recv(int32_t src, int32_t tag, void* buf, uint32_t cap) {
    CHECK(weft_drain_enter(ctx));
    for (;;) {
        for (int i = 0; i < queued; ++i) {
            if (queue[i].src != src || queue[i].tag != tag) continue;
            memcpy(buf, queue[i].data, queue[i].len < cap ? queue[i].len : cap);
            memmove(&queue[i], &queue[i + 1], (size_t)(queued - i - 1) * sizeof queue[0]);
            --queued;
            CHECK(weft_drain_leave(ctx));
            return;
        }
        CHECK(weft_progress(ctx, NULL));
        /* A drain may run weft (and us) meanwhile. The test costs a load: a
         * stack whose waits hold a lock would let go of it only here. */
        if (weft_drain_closing(ctx)) CHECK(weft_drain_yield(ctx));
    }
}

/* A linear broadcast on the world, inside its clock. */
static void fmpi_bcast(weft_drain_clock_t clock, uint32_t root, void* buf, uint32_t len) {
    CHECK(weft_drain_commit_begin(clock));
    if (me == root) {
        for (uint32_t r = 0; r < nranks; ++r)
            if (r != root) fmpi_send(r, TAG_BCAST, buf, len);
    } else {
        fmpi_recv((int32_t)root, TAG_BCAST, buf, len);
    }
    CHECK(weft_drain_commit_finish(clock));
}

/* The drain thread's hooks: progress FMPI (arrivals land in the queue). */
static void hook_progress(void* arg) {
    (void)arg;
    CHECK(weft_progress(ctx, NULL));
}
static uint64_t hook_buffer(void* arg) {
    (void)arg;
    CHECK(weft_progress(ctx, NULL));
    return 0; /* FMPI has no transfer of its own in flight: all are eager */
}

/* At the quiescent point: this rank's FMPI clock and counters. */
static uint32_t clock_slot = UINT32_MAX;
static uint64_t quiescent_seq, quiescent_finished, quiescent_queued;
static void on_quiescent(void* arg, const weft_drain_result_t* r) {
    (void)arg;
    (void)r;
    weft_window_t sw;
    void* base;
    size_t size;
    if (weft_state_window(ctx, &sw) != WEFT_OK || weft_window_local(sw, &base, &size) != WEFT_OK) return;
    const uint64_t* w = (const uint64_t*)base;
    quiescent_seq = w[WEFT_STATE_CLOCK_OFF(clock_slot, WEFT_STATE_CLOCK_SEQ) / 8];
    quiescent_finished = w[WEFT_STATE_CLOCK_OFF(clock_slot, WEFT_STATE_CLOCK_FINISHED) / 8];
    quiescent_queued = (uint64_t)queued;
}

static void compute(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

int main(void) {
    CHECK(weft_init(&ctx));
    CHECK(weft_rank(ctx, &me));
    CHECK(weft_size(ctx, &nranks));
    if (nranks < 2) {
        fprintf(stderr, "fake_mpi: run it with at least 2 ranks\n");
        return 1;
    }
    CHECK(weft_am_register(ctx, FMPI_AM, on_fmpi, NULL));
    weft_drain_hooks_t hooks = {hook_progress, hook_buffer, NULL};
    CHECK(weft_drain_set_hooks(ctx, &hooks));
    CHECK(weft_drain_set_callback(ctx, on_quiescent, NULL));

    /* FMPI_COMM_WORLD's clock. */
    uint32_t* ranks = malloc(nranks * sizeof *ranks);
    for (uint32_t r = 0; r < nranks; ++r) ranks[r] = r;
    weft_drain_clock_t world_clock;
    CHECK(weft_drain_clock_create(ctx, ranks, nranks, 77, &world_clock));
    free(ranks);
    CHECK(weft_drain_clock_slot(world_clock, &clock_slot));

    uint64_t v = 0;
    for (int i = 0; i < 3; ++i) fmpi_bcast(world_clock, 0, &v, sizeof v);
    CHECK(weft_bootstrap_barrier(ctx));

    enum { N = 20 };
    if (me == 0) {
        for (uint64_t i = 0; i < N; ++i) fmpi_send(1, 5, &i, sizeof i); /* rank 1 receives after the drain */
    }
    uint64_t drain = 0;
    v = 42;
    if (me == 0) {
        /* One broadcast more (the root's ends at once), then the drain: the
         * others must reach it. */
        fmpi_bcast(world_clock, 0, &v, sizeof v);
        CHECK(weft_drain_request(ctx, &drain));
    } else {
        compute(200);
        fmpi_bcast(world_clock, 0, &v, sizeof v);
    }
    weft_drain_result_t res;
    CHECK(weft_drain_wait(ctx, 1, 60000, &res));

    int ok = 1;
    /* 5 collectives: the clock's creation (its slot exchange) and 4 broadcasts. */
    if (quiescent_seq != 5 || quiescent_finished != 5) {
        fprintf(stderr, "rank %u: FMPI clock at the quiescent point: seq %llu finished %llu, want 5 and 5\n", me,
                (unsigned long long)quiescent_seq, (unsigned long long)quiescent_finished);
        ok = 0;
    }
    if (me == 1 && quiescent_queued < N) {
        fprintf(stderr, "rank 1: %llu FMPI messages buffered at the quiescent point, want %d\n",
                (unsigned long long)quiescent_queued, N);
        ok = 0;
    }
    if (v != 42) ok = 0;
    if (me == 1)
        for (uint64_t i = 0; i < N; ++i) {
            uint64_t got = ~0ull;
            fmpi_recv(0, 5, &got, sizeof got);
            if (got != i) {
                fprintf(stderr, "rank 1: message %llu arrived as %llu\n", (unsigned long long)i,
                        (unsigned long long)got);
                ok = 0;
            }
        }
    CHECK(weft_drain_clock_free(&world_clock));
    CHECK(weft_bootstrap_barrier(ctx));
    if (me == 0)
        printf("fake_mpi: drained in %.3f ms (%u attempt(s), %llu rounds): %s\n", res.total_ns / 1e6, res.attempts,
               (unsigned long long)res.rounds, ok ? "ok" : "FAILED");
    CHECK(weft_finalize(ctx));
    return ok ? 0 : 1;
}
