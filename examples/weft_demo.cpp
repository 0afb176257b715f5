// weft_demo — weft's main job on one machine:
//   build/tools/weft-run -n 4 build/examples/weft_demo
// Between every ordered pair of ranks it checks put, get, fetch-add,
// compare-swap and active messages, measures each operation's latency, and
// rank 0 prints a table next to the shared-memory floor (a raw cross-core
// cache-line ping-pong between two plain processes) that it measured itself
// just before starting weft. Exit status 0 only if every check passed.
#include <weft/comm.h>
#include <weft/drain.h>
#include <weft/weft.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <sched.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

namespace {

uint64_t now_ns() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

#define CHECK(expr)                                                                       \
    do {                                                                                  \
        weft_status_t s_ = (expr);                                                        \
        if (s_ != WEFT_OK) {                                                              \
            std::fprintf(stderr, "weft_demo: %s failed: %s\n", #expr, weft_strerror(s_)); \
            std::exit(1);                                                                 \
        }                                                                                 \
    } while (0)

// The floor: two processes bounce one cache line; returns ns per round trip.
double measure_floor(int rounds) {
    auto* line = static_cast<std::atomic<uint64_t>*>(
        mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
    if (line == MAP_FAILED) return -1;
    new (line) std::atomic<uint64_t>(0);
    // weft-run bound this rank to one core; the floor is a cross-core round
    // trip, so put the two processes on different cores for the measurement.
    cpu_set_t saved, mine, other;
    sched_getaffinity(0, sizeof saved, &saved);
    const long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    CPU_ZERO(&mine);
    CPU_ZERO(&other);
    CPU_SET(0, &mine);
    CPU_SET(ncpu > 1 ? 1 : 0, &other);
    sched_setaffinity(0, sizeof mine, &mine);
    pid_t child = fork();
    if (child == 0) {
        sched_setaffinity(0, sizeof other, &other);
        for (uint64_t i = 1; i <= uint64_t(rounds); ++i) {
            uint64_t spins = 0;
            while (line->load(std::memory_order_acquire) != 2 * i - 1)
                if (++spins % 4096 == 0) sched_yield();  // never burn a shared core
            line->store(2 * i, std::memory_order_release);
        }
        _exit(0);
    }
    const uint64_t t0 = now_ns();
    for (uint64_t i = 1; i <= uint64_t(rounds); ++i) {
        line->store(2 * i - 1, std::memory_order_release);
        uint64_t spins = 0;
        while (line->load(std::memory_order_acquire) != 2 * i)
            if (++spins % 4096 == 0) sched_yield();
    }
    const double ns = double(now_ns() - t0) / rounds;
    waitpid(child, nullptr, 0);
    sched_setaffinity(0, sizeof saved, &saved);
    munmap(line, 4096);
    return ns;
}

constexpr uint32_t am_ping = 1, am_pong = 2, am_done = 3, am_result = 4;

struct PairResult {
    uint32_t origin, target;
    double put_ns, get_ns, fadd_ns, cswap_ns, am_half_rtt_ns;
    uint32_t checks_failed;
};

struct State {
    weft_context_t ctx;
    uint32_t rank, size;
    uint64_t pongs = 0;
    uint32_t done_from = UINT32_MAX;
    std::vector<PairResult> results;
};

void on_ping(void* arg, uint32_t src, const void* p, size_t len) {
    auto* s = static_cast<State*>(arg);
    CHECK(weft_am_send(s->ctx, src, am_pong, p, len));
}
void on_pong(void* arg, uint32_t, const void*, size_t) { ++static_cast<State*>(arg)->pongs; }
void on_done(void* arg, uint32_t src, const void*, size_t) { static_cast<State*>(arg)->done_from = src; }
void on_result(void* arg, uint32_t, const void* p, size_t len) {
    PairResult r;
    if (len != sizeof r) return;
    std::memcpy(&r, p, sizeof r);
    static_cast<State*>(arg)->results.push_back(r);
}

template <typename F>
double time_ns(int iters, F&& f) {
    const uint64_t t0 = now_ns();
    for (int i = 0; i < iters; ++i) f(i);
    return double(now_ns() - t0) / iters;
}

// Rank `origin` exercises every operation against `target`.
PairResult exercise(State& s, weft_window_t w, uint8_t* base, uint32_t target, int iters) {
    PairResult r{s.rank, target, 0, 0, 0, 0, 0, 0};
    const size_t slot = 256;
    uint8_t out[slot], in[slot];
    // put then get back: the bytes must round-trip.
    for (size_t i = 0; i < slot; ++i) out[i] = uint8_t(s.rank * 31 + target * 7 + i);
    CHECK(weft_put(w, target, 1024 + s.rank * slot, out, slot));
    CHECK(weft_flush(w, target));
    CHECK(weft_get(w, target, 1024 + s.rank * slot, in, slot));
    if (std::memcmp(in, out, slot) != 0) ++r.checks_failed;
    // fetch-add: each call returns the previous count.
    uint64_t old = 0, first = 0;
    CHECK(weft_atomic_fetch_add(w, target, 8 * s.rank, 0, &first));
    r.fadd_ns = time_ns(iters, [&](int) { CHECK(weft_atomic_fetch_add(w, target, 8 * s.rank, 1, &old)); });
    if (old != first + iters - 1) ++r.checks_failed;
    // compare-swap: alternate between two values; every swap must succeed.
    uint64_t cur = first + iters;
    r.cswap_ns = time_ns(iters, [&](int i) {
        CHECK(weft_atomic_compare_swap(w, target, 8 * s.rank, cur, cur + 1, &old));
        if (old != cur) ++r.checks_failed;
        cur = cur + 1;
        (void)i;
    });
    r.put_ns = time_ns(iters, [&](int i) {
        out[0] = uint8_t(i);
        CHECK(weft_put(w, target, 1024 + s.rank * slot, out, 8));
        CHECK(weft_flush(w, target));
    });
    r.get_ns = time_ns(iters, [&](int) { CHECK(weft_get(w, target, 1024 + s.rank * slot, in, 8)); });
    // AM ping-pong: half the round trip, perftest's convention.
    s.pongs = 0;
    uint64_t payload = 42;
    const uint64_t t0 = now_ns();
    for (int i = 0; i < iters; ++i) {
        CHECK(weft_am_send(s.ctx, target, am_ping, &payload, 8));
        const uint64_t want = uint64_t(i) + 1;
        const uint64_t deadline = now_ns() + 10000000000ull;
        while (s.pongs < want) {
            // Spin-then-block: with more ranks than cores the target may
            // share our core, and a pure spin would cost it a quantum.
            weft_wait(s.ctx, 1000000);
            if (now_ns() > deadline) {
                std::fprintf(stderr, "weft_demo: no pong from rank %u\n", target);
                std::exit(1);
            }
        }
    }
    r.am_half_rtt_ns = double(now_ns() - t0) / iters / 2;
    (void)base;
    return r;
}

}  // namespace

// Communicators: collectives and a ring on the world and on a split, every
// result checked; returns the number of failed checks. Rank 0 prints.
uint32_t exercise_communicators(weft_context_t ctx, uint32_t rank, uint32_t size, int iters) {
    weft_comm_t world = nullptr, half = nullptr;
    CHECK(weft_comm_world(ctx, &world));
    CHECK(weft_comm_split(world, int32_t(rank % 2), int32_t(rank), &half));
    uint32_t bad = 0;
    const double barrier_ns = time_ns(iters, [&](int) { CHECK(weft_barrier(world)); });
    uint64_t one = 1, sum = 0;
    const double allreduce_ns = time_ns(iters, [&](int) {
        CHECK(weft_allreduce(world, &one, &sum, 1, WEFT_UINT64, WEFT_OP_SUM));
        bad += sum != size;
    });
    // A ring: every rank sends its rank to the right, receives from the left.
    const uint32_t right = (rank + 1) % size, left = (rank + size - 1) % size;
    const double ring_ns = time_ns(iters, [&](int) {
        uint64_t out = rank, in = ~0ull;
        weft_request_t r[2];
        CHECK(weft_irecv(world, &in, 1, WEFT_UINT64, int32_t(left), 1, &r[0]));
        CHECK(weft_isend(world, &out, 1, WEFT_UINT64, right, 1, &r[1]));
        CHECK(weft_request_waitall(2, r, nullptr));
        bad += in != left;
    });
    // 1 MiB allreduce (ring) and the split halves, checked element by element.
    std::vector<double> big(1 << 17, double(rank)), total(big.size());
    const double big_ns = time_ns(std::max(1, iters / 100), [&](int) {
        CHECK(weft_allreduce(world, big.data(), total.data(), big.size(), WEFT_DOUBLE, WEFT_OP_SUM));
    });
    for (double v : total) bad += v != double(size) * (size - 1) / 2;
    uint32_t half_size = 0;
    CHECK(weft_comm_size(half, &half_size));
    uint64_t half_sum = 0;
    CHECK(weft_allreduce(half, &one, &half_sum, 1, WEFT_UINT64, WEFT_OP_SUM));
    bad += half_sum != half_size || half_size != (size + 1 - rank % 2) / 2;
    uint64_t all_bad = 0, mine = bad;
    CHECK(weft_allreduce(world, &mine, &all_bad, 1, WEFT_UINT64, WEFT_OP_SUM));
    if (rank == 0) {
        std::printf(
            "\ncommunicators (%u ranks): barrier %.0f ns, 8-byte allreduce %.0f ns, ring exchange %.0f ns,\n"
            "1 MiB allreduce %.0f us (%.2f GB/s), split halves of %u/%u: %s\n",
            size, barrier_ns, allreduce_ns, ring_ns, big_ns / 1000, double(big.size() * 8) / big_ns, (size + 1) / 2,
            size / 2, all_bad ? "SOME CHECKS FAILED" : "all checks passed");
    }
    CHECK(weft_comm_free(&half));
    return uint32_t(all_bad);
}

// The drain: messages in flight and a collective open on one rank when
// rank 0 asks; the job reaches its quiescent point, resumes, and the
// buffered messages are received in order. Returns the failed checks.
uint32_t exercise_drain(weft_context_t ctx, uint32_t rank, uint32_t size) {
    weft_comm_t world = nullptr;
    CHECK(weft_comm_world(ctx, &world));
    constexpr uint64_t n = 16;
    std::vector<weft_request_t> sends;
    if (rank == 0)
        for (uint64_t i = 0; i < n; ++i) {
            weft_request_t r;
            CHECK(weft_isend(world, &i, 1, WEFT_UINT64, 1, 42, &r));  // rank 1 receives them after the drain
            CHECK(weft_request_wait(&r, nullptr));
        }
    weft_request_t open_barrier = nullptr;
    if (rank == size - 1) CHECK(weft_ibarrier(world, &open_barrier));  // the others must reach it
    uint64_t number = 1;
    if (rank == 0) CHECK(weft_drain_request(ctx, &number));
    // The ranks below the barrier's target run on to it (the drain waits
    // for them); then everyone waits for the quiescent point.
    if (rank != size - 1) CHECK(weft_ibarrier(world, &open_barrier));
    CHECK(weft_request_wait(&open_barrier, nullptr));
    weft_drain_result_t res{};
    CHECK(weft_drain_wait(ctx, 1, 60000, &res));
    uint32_t bad = res.status != WEFT_OK;
    if (rank == 1)
        for (uint64_t i = 0; i < n; ++i) {
            uint64_t v = ~0ull;
            CHECK(weft_recv(world, &v, 1, WEFT_UINT64, 0, 42, nullptr));
            bad += v != i;
        }
    uint64_t all_bad = 0, mine = bad;
    CHECK(weft_allreduce(world, &mine, &all_bad, 1, WEFT_UINT64, WEFT_OP_SUM));
    if (rank == 0)
        std::printf(
            "\ndrain (%u ranks, no coordinator): quiescent in %.0f us, %u attempt(s), %llu rounds, "
            "%llu message(s) buffered job-wide, received in order after resume: %s\n",
            size, res.total_ns / 1e3, res.attempts, static_cast<unsigned long long>(res.rounds),
            static_cast<unsigned long long>(res.job_buffered_messages),
            all_bad ? "SOME CHECKS FAILED" : "all checks passed");
    return uint32_t(all_bad);
}

int main(int argc, char** argv) {
    const int iters = argc > 1 ? std::atoi(argv[1]) : 2000;
    // The floor is measured before weft starts, by rank 0 only, on a quiet
    // machine (the other ranks wait inside weft_init for rank 0).
    const char* r_env = std::getenv("WEFT_RANK");
    const bool is_rank0 = !r_env || std::strcmp(r_env, "0") == 0;
    double floor_ns = is_rank0 ? measure_floor(20000) : 0;

    State s;
    CHECK(weft_init(&s.ctx));
    CHECK(weft_rank(s.ctx, &s.rank));
    CHECK(weft_size(s.ctx, &s.size));
    CHECK(weft_am_register(s.ctx, am_ping, on_ping, &s));
    CHECK(weft_am_register(s.ctx, am_pong, on_pong, &s));
    CHECK(weft_am_register(s.ctx, am_done, on_done, &s));
    CHECK(weft_am_register(s.ctx, am_result, on_result, &s));
    void* base = nullptr;
    weft_window_t w = nullptr;
    CHECK(weft_window_allocate(s.ctx, 1024 + 256 * s.size, &base, &w));
    weft_caps_t caps;
    CHECK(weft_query_caps(s.ctx, &caps));

    for (uint32_t origin = 0; origin < s.size; ++origin) {
        CHECK(weft_bootstrap_barrier(s.ctx));
        if (s.rank == origin) {
            for (uint32_t t = 0; t < s.size; ++t) {
                if (t == origin) continue;
                PairResult r = exercise(s, w, static_cast<uint8_t*>(base), t, iters);
                CHECK(weft_am_send(s.ctx, 0, am_result, &r, sizeof r));
            }
            for (uint32_t t = 0; t < s.size; ++t)
                if (t != origin) CHECK(weft_am_send(s.ctx, t, am_done, &origin, 4));
        } else {
            // Serve: answer pings, progress emulated atomics, until done.
            const uint64_t deadline = now_ns() + 120000000000ull;
            while (s.done_from != origin) {
                weft_wait(s.ctx, 1000000);
                if (now_ns() > deadline) {
                    std::fprintf(stderr, "weft_demo: rank %u never finished\n", origin);
                    return 1;
                }
            }
        }
    }
    CHECK(weft_bootstrap_barrier(s.ctx));
    // Results sent to rank 0 before the barrier may still be in flight.
    const size_t want = size_t(s.size) * (s.size - 1);
    if (s.rank == 0) {
        const uint64_t deadline = now_ns() + 10000000000ull;
        while (s.results.size() < want && now_ns() < deadline) weft_wait(s.ctx, 1000000);
    }
    int rc = 0;
    if (s.rank == 0) {
        std::sort(s.results.begin(), s.results.end(), [](const PairResult& a, const PairResult& b) {
            return a.origin != b.origin ? a.origin < b.origin : a.target < b.target;
        });
        std::printf("weft demo: %u ranks, transport %s (atomics %s), %d iterations per operation\n", s.size,
                    caps.transport,
                    caps.atomics == WEFT_ATOMICS_CPU        ? "cpu"
                    : caps.atomics == WEFT_ATOMICS_HARDWARE ? "nic"
                                                            : "emulated",
                    iters);
        std::printf(
            "shared-memory floor (cache-line ping-pong between two processes, full round trip): "
            "%.0f ns\n",
            floor_ns);
        std::printf(
            "(%u ranks on %ld cores: pairs bound to one core share it, so their AM round trip\n"
            " includes a context switch)\n\n",
            s.size, sysconf(_SC_NPROCESSORS_ONLN));
        std::printf("%-7s %10s %10s %10s %10s %12s %8s\n", "pair", "put+flush", "get", "fetch-add", "cswap",
                    "am (half rt)", "checks");
        uint32_t failed = 0;
        for (const auto& r : s.results) {
            std::printf("%u -> %u  %8.0f ns %7.0f ns %7.0f ns %7.0f ns %9.0f ns %8s\n", r.origin, r.target, r.put_ns,
                        r.get_ns, r.fadd_ns, r.cswap_ns, r.am_half_rtt_ns, r.checks_failed ? "FAILED" : "ok");
            failed += r.checks_failed;
        }
        if (s.results.size() != want) {
            std::printf("missing results: %zu of %zu pairs reported\n", s.results.size(), want);
            rc = 1;
        }
        std::printf("\n%s\n", failed || rc ? "SOME CHECKS FAILED" : "all checks passed");
        if (failed) rc = 1;
    }
    if (exercise_communicators(s.ctx, s.rank, s.size, iters)) rc = 1;
    if (s.size > 1 && exercise_drain(s.ctx, s.rank, s.size)) rc = 1;
    CHECK(weft_window_free(w));
    CHECK(weft_finalize(s.ctx));
    return rc;
}
