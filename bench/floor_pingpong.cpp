// floor_pingpong.cpp — this machine's floor, without weft.
//
// Two processes (fork) share an anonymous MAP_SHARED page and ping-pong on
// it: A changes a word, B waits for the change and answers, A waits for the
// answer. The round trip is the cheapest cross-core handshake this machine
// can do; weft's shm fetch-add round trip (weft_bench) is compared to it.
//
//   floor/fadd_one_line   A and B fetch-add the same word (parity says whose
//                         turn): one cache line bounces.
//   floor/fadd_two_lines  A fetch-adds B's word, B fetch-adds A's word —
//                         exactly the pattern of weft's remote fetch-add
//                         ping-pong (one word in each rank's window).
//   floor/store_one_line  plain stores instead of fetch-adds.
//
// Times are full round trips: the mean (real time, and counter mean_ns)
// over the whole loop, p50_ns/p99_ns from 1 iteration in 16 timed alone. The two processes are pinned to different
// cores when there are at least two (like weft-run binds ranks).
#include "bench_util.hpp"
#include "cli.hpp"

#include <benchmark/benchmark.h>

#include <csignal>
#include <cstring>
#include <new>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

namespace {

enum class Mode : uint64_t { fadd_one_line = 1, fadd_two_lines = 2, store_one_line = 3 };

// One word per cache line so that only the line being ping-ponged moves.
struct alignas(64) Line {
    std::atomic<uint64_t> v;
};
struct Shared {
    Line ping;  // one-line modes: both sides; two-line mode: B's word (A writes it)
    Line pong;  // two-line mode: A's word (B writes it)
    Line stop;  // A sets it to end B's loop; read-only until then
};
static_assert(sizeof(Shared) == 3 * 64);

// The first two CPUs this process may run on; -1 when there is only one.
void pick_cpus(int& a, int& b) {
    cpu_set_t set;
    a = b = -1;
    if (sched_getaffinity(0, sizeof set, &set) != 0) return;
    for (int c = 0; c < CPU_SETSIZE; ++c) {
        if (!CPU_ISSET(c, &set)) continue;
        if (a < 0)
            a = c;
        else {
            b = c;
            return;
        }
    }
}

void pin(int cpu) {
    if (cpu < 0) return;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    sched_setaffinity(0, sizeof set, &set);
}

// B: answers every ping until told to stop. It needs no iteration count: it
// answers what arrives, and A decides how many rounds there are.
[[noreturn]] void serve(Shared* s, Mode mode, pid_t parent) {
    // Never outlive the benchmark (a killed parent must not leave a spinner).
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(3);
    uint64_t seen = 0;
    for (;;) {
        const bool ok = bench::spin_until(
            [&] {
                if (s->stop.v.load(std::memory_order_relaxed)) return true;
                const uint64_t v = s->ping.v.load(std::memory_order_acquire);
                return mode == Mode::fadd_two_lines ? v != seen : (v & 1) == 1;
            },
            [] {});
        // Only a timeout asks whether the parent is gone: getppid is a
        // syscall, which per round trip would cost more than the round trip.
        if (!ok) {
            std::fprintf(stderr, "floor_pingpong: server saw no ping for %llu s: giving up\n",
                         static_cast<unsigned long long>(bench::wait_limit_ns() / 1000000000ull));
            _exit(3);
        }
        if (s->stop.v.load(std::memory_order_relaxed)) _exit(0);
        switch (mode) {
            case Mode::fadd_one_line:
                s->ping.v.fetch_add(1, std::memory_order_acq_rel);
                break;
            case Mode::fadd_two_lines:
                seen = s->ping.v.load(std::memory_order_relaxed);
                s->pong.v.fetch_add(1, std::memory_order_acq_rel);
                break;
            case Mode::store_one_line:
                s->ping.v.store(s->ping.v.load(std::memory_order_relaxed) + 1, std::memory_order_release);
                break;
        }
    }
}

void BM_floor(benchmark::State& state, Mode mode) {
    auto* s = static_cast<Shared*>(mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
    if (s == MAP_FAILED) {
        state.SkipWithError("mmap failed");
        return;
    }
    new (s) Shared{};
    cpu_set_t saved;
    sched_getaffinity(0, sizeof saved, &saved);
    int cpu_a, cpu_b;
    pick_cpus(cpu_a, cpu_b);
    const pid_t parent = getpid();
    const pid_t child = fork();
    if (child < 0) {
        state.SkipWithError("fork failed");
        munmap(s, 4096);
        return;
    }
    if (child == 0) {
        pin(cpu_b);
        serve(s, mode, parent);
    }
    pin(cpu_a);

    bench::Samples samples(state.max_iterations);
    bool ok = true;
    uint64_t expect = 0;  // the value that means "B answered"
    const double mean = bench::timed_loop(state, samples, bench::sample_latency, [&] {
        switch (mode) {
            case Mode::fadd_one_line:
                s->ping.v.fetch_add(1, std::memory_order_acq_rel);
                expect += 2;
                ok = bench::spin_until([&] { return s->ping.v.load(std::memory_order_acquire) == expect; }, [] {});
                break;
            case Mode::fadd_two_lines:
                s->ping.v.fetch_add(1, std::memory_order_acq_rel);
                ++expect;
                ok = bench::spin_until([&] { return s->pong.v.load(std::memory_order_acquire) == expect; }, [] {});
                break;
            case Mode::store_one_line:
                s->ping.v.store(expect + 1, std::memory_order_release);
                expect += 2;
                ok = bench::spin_until([&] { return s->ping.v.load(std::memory_order_acquire) == expect; }, [] {});
                break;
        }
        if (__builtin_expect(!ok, 0)) {
            kill(child, SIGKILL);
            std::fprintf(stderr, "floor_pingpong: no answer from the server within %llu s\n",
                         static_cast<unsigned long long>(bench::wait_limit_ns() / 1000000000ull));
            std::exit(1);
        }
    });
    s->stop.v.store(1, std::memory_order_release);
    int status = 0;
    waitpid(child, &status, 0);
    sched_setaffinity(0, sizeof saved, &saved);
    munmap(s, 4096);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        std::fprintf(stderr, "floor_pingpong: server exited abnormally (status %d)\n", status);
        std::exit(1);
    }
    state.counters["mean_ns"] = mean;
    state.counters["p50_ns"] = samples.percentile(0.50);
    state.counters["p99_ns"] = samples.percentile(0.99);
    state.SetLabel(cpu_b >= 0 ? "full round trip, 2 cores" : "full round trip, 1 core (not pinned apart)");
}

// What the clock reads around one sampled iteration cost (in p50/p99 of
// every benchmark here, floor and weft alike; not in the means).
void BM_clock_overhead(benchmark::State& state) {
    bench::Samples samples(state.max_iterations);
    const double mean = bench::timed_loop(state, samples, bench::sample_all, [] {});
    state.counters["mean_ns"] = mean;
    state.counters["p50_ns"] = samples.percentile(0.50);
    state.counters["p99_ns"] = samples.percentile(0.99);
    state.SetLabel("an empty timed iteration: what a sampled percentile includes");
}

}  // namespace

BENCHMARK(BM_clock_overhead)->UseRealTime();
BENCHMARK_CAPTURE(BM_floor, fadd_one_line, Mode::fadd_one_line)->UseRealTime();
BENCHMARK_CAPTURE(BM_floor, fadd_two_lines, Mode::fadd_two_lines)->UseRealTime();
BENCHMARK_CAPTURE(BM_floor, store_one_line, Mode::store_one_line)->UseRealTime();

int main(int argc, char** argv) {
    bench::parse_cli(
        argc, argv,
        "floor_pingpong: this machine's floor without weft (two processes ping-pong on shared cache lines)\n"
        "usage: floor_pingpong [--benchmark_* ...]\n",
        {}, true);
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    return 0;
}
