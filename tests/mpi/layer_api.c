/*
 * layer_api.c — a program that knows about libweft-mpi and links it
 * (weft/mpi_layer.h), 3 or more ranks:
 *
 *   mpiexec -n 4 mpi_layer_api          quiescent callback and weft_mpi_drain
 *   mpiexec -n 4 mpi_layer_api fail     failure notices beside MPI
 *   mpiexec -n 4 mpi_layer_api bcast5 MARK   the seed's 5th-bcast example
 *                                       (MARK: a file path rank 0 creates)
 *   mpiexec -n 4 mpi_layer_api waiting  a drain while rank 0 waits in
 *                                       MPI_Recv with an untested collective
 *
 * Without arguments: every rank registers a quiescent-point callback and
 * calls weft_mpi_drain (collective): one drain, the same on every rank, and
 * the callback has run once, for it. Then rank 1 alone calls
 * weft_mpi_drain_request; the others go on with allreduces until every
 * callback has run for that drain too ("drain by API: ok").
 *
 * With "fail": every rank registers for weft's WEFT_EVENT_PROC_FAILED; the
 * last rank kills itself (SIGKILL) after a barrier; the others, calling no
 * MPI, progress weft until the event names it (bounded: 20 s) and check
 * that weft's failed set on its world communicator holds it. Their MPI has
 * no ULFM and cannot finalize with a dead peer: they print their result
 * and leave with _exit (the launcher must be told not to tear the job down
 * at the first death: tests/mpi/layer_api_test.sh).
 */
#define _POSIX_C_SOURCE 200809L
#include <weft/comm.h>
#include <weft/mpi_layer.h>

#include <mpi.h>

#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int calls;           /* callback runs, on the drain thread */
static uint64_t called_for; /* the last drain it ran for */

static void on_quiescent(void* arg, const weft_drain_result_t* r) {
    (void)arg;
    __atomic_store_n(&called_for, r->drain, __ATOMIC_RELAXED);
    __atomic_add_fetch(&calls, 1, __ATOMIC_RELEASE);
}

static uint32_t failed_peer = UINT32_MAX;
static void on_failed(void* arg, weft_event_t event, uint32_t peer) {
    (void)arg;
    if (event == WEFT_EVENT_PROC_FAILED) __atomic_store_n(&failed_peer, peer, __ATOMIC_RELEASE);
}

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static int drain_by_api(int rank) {
    int bad = 0;
    if (weft_mpi_set_quiescent_callback(on_quiescent, NULL) != WEFT_OK) bad = 1;
    /* 1. Every rank at the same point: one drain, waited for. */
    weft_drain_result_t r;
    memset(&r, 0, sizeof r);
    weft_status_t st = weft_mpi_drain(&r);
    uint64_t lo = r.drain, hi = r.drain;
    MPI_Allreduce(MPI_IN_PLACE, &lo, 1, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, &hi, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
    int n = __atomic_load_n(&calls, __ATOMIC_ACQUIRE);
    if (st != WEFT_OK || r.status != WEFT_OK || lo != hi || n != 1 || called_for != r.drain) {
        fprintf(stderr,
                "layer_api: rank %d: weft_mpi_drain: %s, drain %llu (ranks' range %llu..%llu); callback ran %d "
                "time(s), last for drain %llu\n",
                rank, weft_strerror(st), (unsigned long long)r.drain, (unsigned long long)lo, (unsigned long long)hi, n,
                (unsigned long long)called_for);
        bad = 1;
    }
    /* 2. Rank 1 alone asks; the others learn of the drain from their
     * callback, at their next MPI calls (bounded: 20 s). */
    uint64_t asked = 0;
    if (rank == 1 && weft_mpi_drain_request(&asked) != WEFT_OK) bad = 1;
    MPI_Bcast(&asked, 1, MPI_UINT64_T, 1, MPI_COMM_WORLD);
    const double start = now_ms();
    int fewest = 0;
    while (now_ms() - start < 20000) {
        fewest = __atomic_load_n(&calls, __ATOMIC_ACQUIRE);
        MPI_Allreduce(MPI_IN_PLACE, &fewest, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
        if (fewest >= 2) break;
    }
    n = __atomic_load_n(&calls, __ATOMIC_ACQUIRE);
    if (fewest < 2 || n != 2 || called_for != asked) {
        fprintf(stderr,
                "layer_api: rank %d: after weft_mpi_drain_request (drain %llu): callback ran %d time(s), last for "
                "drain %llu\n",
                rank, (unsigned long long)asked, n, (unsigned long long)called_for);
        bad = 1;
    }
    weft_mpi_set_quiescent_callback(NULL, NULL);
    return bad;
}

/* The seed's example on real MPI: rank 0 is in (or past) its 5th MPI_Bcast
 * when the drain is asked for, the others are at 4 and compute for a
 * second before theirs. MANA's Collective Clock must let them finish the
 * 5th first: at the quiescent point every rank has completed 5. */
static int bcasts_done; /* this rank's, updated around each bcast */
static int bcasts_at_quiescent = -1;
static void count_at_quiescent(void* arg, const weft_drain_result_t* r) {
    (void)arg;
    (void)r;
    __atomic_store_n(&bcasts_at_quiescent, __atomic_load_n(&bcasts_done, __ATOMIC_ACQUIRE), __ATOMIC_RELEASE);
}

static int fifth_bcast(int rank, const char* mark) {
    weft_mpi_set_quiescent_callback(count_at_quiescent, NULL);
    int value = 0;
    for (int i = 1; i <= 4; ++i) {
        if (rank == 0) value = i;
        MPI_Bcast(&value, 1, MPI_INT, 0, MPI_COMM_WORLD);
        __atomic_store_n(&bcasts_done, i, __ATOMIC_RELEASE);
    }
    /* Rank 0 leaves a mark (a file) and goes straight into its 5th; once
     * the mark is there and 0.1 s more have passed, while the others still
     * compute before theirs, rank 1 asks for the drain. */
    if (rank == 0) {
        FILE* f = fopen(mark, "w");
        if (f) fclose(f);
        value = 5;
    } else {
        const double start = now_ms();
        double marked = -1;
        int asked = rank != 1;
        while (now_ms() - start < 1000 || !asked) { /* computing, outside MPI */
            if (!asked && marked < 0 && access(mark, F_OK) == 0) marked = now_ms();
            if (!asked && marked >= 0 && now_ms() - marked > 100) {
                uint64_t number = 0;
                weft_mpi_drain_request(&number);
                asked = 1;
            }
            if (!asked && now_ms() - start > 20000) {
                fprintf(stderr, "layer_api: rank 1: rank 0's mark %s never came\n", mark);
                return 1;
            }
        }
    }
    MPI_Bcast(&value, 1, MPI_INT, 0, MPI_COMM_WORLD);
    __atomic_store_n(&bcasts_done, 5, __ATOMIC_RELEASE);
    /* The drain ends after every rank's 5th: wait for its callback here. */
    const double start = now_ms();
    while (__atomic_load_n(&bcasts_at_quiescent, __ATOMIC_ACQUIRE) < 0 && now_ms() - start < 20000) {
        MPI_Barrier(MPI_COMM_WORLD);
    }
    weft_mpi_set_quiescent_callback(NULL, NULL);
    const int seen = __atomic_load_n(&bcasts_at_quiescent, __ATOMIC_ACQUIRE);
    if (seen != 5 || value != 5) {
        fprintf(stderr, "layer_api: rank %d: at the quiescent point %d bcast(s) done (want 5), value %d\n", rank, seen,
                value);
        return 1;
    }
    return 0;
}

static int failure_notice(int rank, int size) {
    weft_context_t ctx = weft_mpi_context();
    uint64_t id = 0;
    if (weft_event_register(ctx, WEFT_EVENT_PROC_FAILED, on_failed, NULL, &id) != WEFT_OK) return 1;
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == size - 1) raise(SIGKILL);
    const double start = now_ms();
    while (__atomic_load_n(&failed_peer, __ATOMIC_ACQUIRE) == UINT32_MAX && now_ms() - start < 20000) {
        weft_progress(ctx, NULL);
        const struct timespec nap = {0, 1000000};
        nanosleep(&nap, NULL);
    }
    const double took = now_ms() - start;
    const uint32_t peer = __atomic_load_n(&failed_peer, __ATOMIC_ACQUIRE);
    weft_comm_t world = NULL;
    uint32_t failed[8];
    size_t count = 0;
    weft_comm_world(ctx, &world);
    weft_comm_validate_local(world, NULL, NULL);
    weft_comm_get_failed(world, WEFT_FAILED_LOCAL, WEFT_FAILED_ALL, failed, 8, &count);
    const int ok = peer == (uint32_t)(size - 1) && count == 1 && failed[0] == (uint32_t)(size - 1);
    printf(
        "layer_api: rank %d: failure notice for rank %d after %.1f ms; weft's failed set on its world: %zu rank(s), "
        "first %d: %s\n",
        rank, peer == UINT32_MAX ? -1 : (int)peer, took, count, count ? (int)failed[0] : -1, ok ? "ok" : "FAILED");
    /* The survivors go on together through weft, which MPI without ULFM
     * cannot: shrink weft's world to them and all-reduce their verdicts,
     * so none leaves (and makes the launcher end the job) before every
     * survivor has printed its own. */
    weft_comm_t survivors = NULL;
    int all_ok = ok;
    weft_status_t st = weft_comm_shrink(world, &survivors);
    if (st == WEFT_OK) st = weft_allreduce(survivors, &ok, &all_ok, 1, WEFT_INT32, WEFT_OP_MIN);
    if (st != WEFT_OK) {
        fprintf(stderr, "layer_api: rank %d: shrink and allreduce among the survivors: %s\n", rank, weft_strerror(st));
        return 1;
    }
    if (rank == 0) printf("layer_api: %d survivors agree through weft: %s\n", size - 1, all_ok ? "ok" : "FAILED");
    fflush(stdout);
    weft_barrier(survivors);
    return !all_ok;
}

/* A drain while rank 0 waits in MPI_Recv with an MPI_Ibarrier it has not
 * tested (it completes inside MPI: the others wait for it). Rank 0's thread
 * keeps the layer's lock from test to test while nothing needs it; the
 * drain must still take it out (weft_drain_closing), run its hooks, and
 * reach a quiescent point before the message rank 0 waits for is sent.
 * Without the step out the drain would wait for rank 0's program, which
 * waits for the drain. */
static int quiescent_calls; /* callback runs here */
static void count_calls(void* arg, const weft_drain_result_t* r) {
    (void)arg;
    (void)r;
    __atomic_add_fetch(&quiescent_calls, 1, __ATOMIC_RELEASE);
}

static int drain_while_waiting(int rank) {
    weft_mpi_set_quiescent_callback(count_calls, NULL);
    MPI_Request barrier;
    MPI_Ibarrier(MPI_COMM_WORLD, &barrier);
    int word = 0, bad = 0;
    if (rank == 0) {
        MPI_Recv(&word, 1, MPI_INT, 1, 77, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        if (__atomic_load_n(&quiescent_calls, __ATOMIC_ACQUIRE) < 1 || word != 77) {
            fprintf(stderr, "layer_api: rank 0: received %d with %d quiescent callback(s) before it\n", word,
                    quiescent_calls);
            bad = 1;
        }
        MPI_Wait(&barrier, MPI_STATUS_IGNORE);
    } else {
        MPI_Wait(&barrier, MPI_STATUS_IGNORE);
        uint64_t number = 0;
        if (rank == 1 && weft_mpi_drain_request(&number) != WEFT_OK) bad = 1;
        const double start = now_ms();
        while (__atomic_load_n(&quiescent_calls, __ATOMIC_ACQUIRE) < 1) { /* outside MPI */
            if (now_ms() - start > 20000) {
                fprintf(stderr,
                        "layer_api: rank %d: no quiescent point in 20 s while rank 0 waits in MPI_Recv with a "
                        "finished, untested MPI_Ibarrier\n",
                        rank);
                bad = 1;
                break;
            }
        }
        word = 77;
        if (rank == 1) MPI_Send(&word, 1, MPI_INT, 0, 77, MPI_COMM_WORLD);
    }
    weft_mpi_set_quiescent_callback(NULL, NULL);
    return bad;
}

int main(int argc, char** argv) {
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (!weft_mpi_context()) {
        fprintf(stderr, "layer_api: rank %d: no weft context (is libweft-mpi linked?)\n", rank);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    if (argc > 1 && strcmp(argv[1], "fail") == 0) {
        const int bad = failure_notice(rank, size);
        fflush(stdout);
        _exit(bad); /* no MPI_Finalize with a dead peer and no ULFM */
    }
    if (argc > 1 && strcmp(argv[1], "bcast5") == 0) {
        const int bad = argc > 2 ? fifth_bcast(rank, argv[2]) : 1;
        int any = 0;
        MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
        if (rank == 0) printf("layer_api: a drain asked for inside the 5th bcast: %s\n", any ? "FAILED" : "ok");
        MPI_Finalize();
        return any;
    }
    if (argc > 1 && strcmp(argv[1], "waiting") == 0) {
        const int bad = drain_while_waiting(rank);
        int any = 0;
        MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
        if (rank == 0)
            printf("layer_api: a drain while a rank waits with an untested collective: %s\n", any ? "FAILED" : "ok");
        MPI_Finalize();
        return any;
    }
    const int bad = drain_by_api(rank);
    int any = 0;
    MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0) printf("layer_api: drain by API: %s\n", any ? "FAILED" : "ok");
    MPI_Finalize();
    return any;
}
