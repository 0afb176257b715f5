// hol_bench.cpp — head-of-line blocking: the latency of a small active
// message from one peer while a large rendezvous message from another peer
// to the same receiver is being pulled.
//
//   weft-run -n 3 [--transport ucx|verbs|shm] build/bench/hol_bench [--smoke] [--iters N] [benchmark flags]
//
// Rank 0 (A) sends, rank 1 (B) runs the Google Benchmark suite, rank 2 (C)
// receives. One iteration of hol/am_behind_rndv:
//   B -> A  GO; A -> B ANNOUNCE, then A -> C a 64 MiB message (rendezvous),
//   and A -> B SENT once its send returned (C has pulled it);
//   B, on ANNOUNCE: PING (8 bytes) -> C, whose handler answers PONG -> B.
// The time is B's PING-PONG round trip; B then waits for SENT so that every
// iteration has exactly one rendezvous in flight. hol/am_idle is the same
// ping-pong with no rendezvous, the floor to compare with. A receiver that
// queues every later message behind the rendezvous still being pulled
// answers only once the 64 MiB have arrived; one that orders per source
// answers at once. The counter pong_first says in how many iterations
// C's PONG reached B before A's SENT.
//
// Round trips: time = full round trip; mean_ns / p50_ns / p99_ns = HALF a
// round trip (perftest-style one-way latency), every iteration sampled.
// Iteration counts are fixed (--iters; all ranks serve until B says STOP),
// so the ranks never disagree. Every wait is bounded (WEFT_BENCH_WAIT_S).
#include "bench_util.hpp"
#include "check.hpp"
#include "cli.hpp"

#include <weft/weft.h>

#include <benchmark/benchmark.h>

#include <cstring>
#include <string>
#include <vector>

namespace {

constexpr uint32_t rank_a = 0, rank_b = 1, rank_c = 2;
constexpr size_t big_len = 64u << 20;

// Active message ids.
constexpr uint32_t am_go = 1;        // B -> A: send one large message to C
constexpr uint32_t am_announce = 2;  // A -> B: the large message is about to go
constexpr uint32_t am_big = 3;       // A -> C: 64 MiB
constexpr uint32_t am_sent = 4;      // A -> B: am_send of the large message returned
constexpr uint32_t am_ping = 5;      // B -> C: 8 bytes
constexpr uint32_t am_pong = 6;      // C -> B: 8 bytes
constexpr uint32_t am_stop = 7;      // B -> A, C: leave the serve loop

struct State {
    weft_context_t ctx = nullptr;
    uint32_t rank = 0;
    std::string label;
    // Handlers run inside weft_progress on our only thread: plain counters.
    uint64_t gos = 0, announces = 0, bigs = 0, sents = 0, pings = 0, pongs = 0;
    bool stop = false;
    bool big_ok = true;
    bool pong_before_sent = false;  // B: this iteration's PONG came before SENT
};

State g;

[[noreturn, gnu::cold]] void die(const char* what) {
    std::fprintf(stderr, "hol_bench rank %u: %s\n", g.rank, what);
    std::exit(1);
}

using bench::check;

void send(uint32_t to, uint32_t id) {
    const uint64_t payload = 0;
    check(weft_am_send(g.ctx, to, id, &payload, sizeof payload), "am_send");
}

template <typename Done>
void wait_for(Done&& done, const char* what, uint64_t limit_ns = bench::wait_limit_ns()) {
    auto poll = [] { check(weft_progress(g.ctx, nullptr), "weft_progress"); };
    if (!bench::spin_until(done, poll, limit_ns)) {
        char buf[160];
        std::snprintf(buf, sizeof buf, "timed out after %llu s waiting for %s",
                      static_cast<unsigned long long>(limit_ns / 1000000000ull), what);
        die(buf);
    }
}

void on_go(void*, uint32_t, const void*, size_t) { ++g.gos; }
void on_announce(void*, uint32_t, const void*, size_t) { ++g.announces; }
void on_big(void*, uint32_t src, const void* p, size_t len) {
    const auto* b = static_cast<const uint8_t*>(p);
    g.big_ok &= src == rank_a && len == big_len && b[0] == 0x5a && b[len - 1] == 0x5a;
    ++g.bigs;
}
void on_sent(void*, uint32_t, const void*, size_t) { ++g.sents; }
void on_ping(void*, uint32_t src, const void*, size_t) {
    ++g.pings;
    send(src, am_pong);  // from the handler: the answer leaves as soon as the ping is delivered
}
void on_pong(void*, uint32_t, const void*, size_t) {
    ++g.pongs;
    if (g.sents < g.gos) g.pong_before_sent = true;  // B counts its GOs in gos
}
void on_stop(void*, uint32_t, const void*, size_t) { g.stop = true; }
void on_peer_failure(void*, uint32_t peer) {
    std::fprintf(stderr, "hol_bench rank %u: peer %u failed\n", g.rank, peer);
    std::exit(1);
}

// ------------------------------------------------------------------ B
void run(benchmark::State& state, bool behind_rndv) {
    bench::Samples s(state.max_iterations);
    uint64_t first = 0, total_ns = 0;
    for (auto _ : state) {
        if (behind_rndv) {
            const uint64_t want = g.announces + 1;
            ++g.gos;
            g.pong_before_sent = false;
            send(rank_a, am_go);
            wait_for([&] { return g.announces >= want; }, "A's ANNOUNCE");
        }
        const uint64_t want = g.pongs + 1;
        const uint64_t t0 = bench::now_ns();
        send(rank_c, am_ping);
        wait_for([&] { return g.pongs >= want; }, "C's PONG");
        const uint64_t ns = bench::now_ns() - t0;
        state.SetIterationTime(static_cast<double>(ns) * 1e-9);
        s.add(ns);
        total_ns += ns;
        if (behind_rndv) {
            first += g.pong_before_sent ? 1 : 0;
            wait_for([&] { return g.sents >= g.gos; }, "A's SENT", 10 * bench::wait_limit_ns());
        }
    }
    const double n = state.iterations() ? static_cast<double>(state.iterations()) : 1.0;
    state.counters["mean_ns"] = static_cast<double>(total_ns) / n * 0.5;
    state.counters["p50_ns"] = s.percentile(0.50) * 0.5;
    state.counters["p99_ns"] = s.percentile(0.99) * 0.5;
    if (behind_rndv) state.counters["pong_first"] = static_cast<double>(first);
    state.SetLabel(g.label + "; time = full round trip; counters = HALF round trip (8-byte AM B->C->B / 2)" +
                   (behind_rndv ? ", A->C 64 MiB rendezvous in flight" : ", nothing else in flight"));
}

void BM_am_idle(benchmark::State& state) { run(state, false); }
void BM_am_behind_rndv(benchmark::State& state) { run(state, true); }

// ---------------------------------------------------------------- A, C
// C only progresses (its handlers answer); A sends one large message per GO.
void serve() {
    std::vector<uint8_t> big;
    if (g.rank == rank_a) big.assign(big_len, 0x5a);
    uint64_t served = 0;
    for (;;) {
        // Between iterations B only does bookkeeping; the long limit covers
        // its start-up and reporting.
        wait_for([&] { return g.stop || g.gos > served; }, "a command from B", 30 * bench::wait_limit_ns());
        if (g.stop) return;
        ++served;
        send(rank_b, am_announce);
        check(weft_am_send(g.ctx, rank_c, am_big, big.data(), big.size()), "am_send of the large message");
        send(rank_b, am_sent);
    }
}

}  // namespace

int main(int argc, char** argv) {
    bench::parse_cli(argc, argv,
                     "hol_bench: an 8-byte active message's latency behind another peer's 64 MiB rendezvous\n"
                     "usage: weft-run -n 3 [--transport shm|ucx|verbs] hol_bench [--smoke] [--iters N] "
                     "[--benchmark_* ...]\n"
                     "  --smoke              3 iterations each, for CI\n"
                     "  --iters N            iterations of each benchmark (default 30)\n",
                     {{"--smoke", false}, {"--iters", true}}, true);
    bool smoke = false;
    int64_t iters = 30;
    std::vector<char*> args;
    for (int i = 0; i < argc; ++i) {
        if (std::strcmp(argv[i], "--smoke") == 0)
            smoke = true;
        else if (std::strcmp(argv[i], "--iters") == 0 && i + 1 < argc)
            iters = std::strtoll(argv[++i], nullptr, 10);
        else
            args.push_back(argv[i]);
    }
    if (smoke) iters = 3;
    if (iters < 1) die("--iters wants a positive count");

    bench::init_or_skip(&g.ctx);
    uint32_t size = 0;
    check(weft_rank(g.ctx, &g.rank), "weft_rank");
    check(weft_size(g.ctx, &size), "weft_size");
    if (size != 3) die("run with exactly 3 ranks: weft-run -n 3 hol_bench");
    weft_caps_t caps;
    check(weft_query_caps(g.ctx, &caps), "weft_query_caps");
    if (caps.am_max_size < big_len) die("the transport's largest active message is below 64 MiB");
    g.label = caps.transport;
    if (std::strcmp(caps.transport, "ucx") == 0) {
        const char* tls = std::getenv("UCX_TLS");
        g.label += std::string(" UCX_TLS=") + (tls ? tls : "(default)");
    }
    const std::pair<uint32_t, weft_am_handler_t> handlers[] = {
        {am_go, on_go},     {am_announce, on_announce}, {am_big, on_big},   {am_sent, on_sent},
        {am_ping, on_ping}, {am_pong, on_pong},         {am_stop, on_stop},
    };
    for (const auto& [id, h] : handlers) check(weft_am_register(g.ctx, id, h, nullptr), "register");
    check(weft_set_peer_failure_handler(g.ctx, on_peer_failure, nullptr), "failure handler");
    check(weft_bootstrap_barrier(g.ctx), "barrier");

    if (g.rank == rank_b) {
        int bargc = static_cast<int>(args.size());
        args.push_back(nullptr);
        benchmark::Initialize(&bargc, args.data());
        if (benchmark::ReportUnrecognizedArguments(bargc, args.data())) die("unrecognized arguments");
        const std::string t = caps.transport;
        benchmark::RegisterBenchmark((t + "/hol/am_idle").c_str(), BM_am_idle)->Iterations(iters)->UseManualTime();
        benchmark::RegisterBenchmark((t + "/hol/am_behind_rndv").c_str(), BM_am_behind_rndv)
            ->Iterations(iters)
            ->UseManualTime();
        benchmark::RunSpecifiedBenchmarks();
        benchmark::Shutdown();
        send(rank_a, am_stop);
        send(rank_c, am_stop);
    } else {
        serve();
        if (!g.big_ok) std::fprintf(stderr, "hol_bench rank %u: a large message arrived corrupted\n", g.rank);
    }
    // Nobody leaves while a peer may still need its progress (A's last SENT).
    check(weft_bootstrap_barrier(g.ctx), "barrier");
    check(weft_finalize(g.ctx), "weft_finalize");
    return g.big_ok ? 0 : 1;
}
