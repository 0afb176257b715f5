// clock_bench.cpp — what the Collective Clock costs when no drain is pending.
//
// One rank (no launcher): Google Benchmark of commit_begin + commit_finish,
// the pair every collective pays.
// Several ranks (weft-run -n 2 build/bench/clock_bench): the pair against an
// 8-byte allreduce, measured alternately in the same run (this machine is
// shared and noisy); rank 0 prints the medians and their ratio.
#include "bench/bench_util.hpp"
#include "bench/check.hpp"
#include "bench/cli.hpp"
#include "group/engine.hpp"
#include "group/layer.hpp"

#include <weft/comm.h>

#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstring>
#include <vector>

namespace {

using bench::check;
using bench::median;
using bench::now_ns;

weft_context_t ctx = nullptr;

weft::group::Comm& world_comm() { return weft::group::engine_of(*ctx->rt)->world(); }

void BM_CommitPair(benchmark::State& state) {
    weft::group::Engine& e = *weft::group::engine_of(*ctx->rt);
    weft::group::Comm& c = world_comm();
    for (auto _ : state) {
        e.drain_port().commit_begin(c);
        e.drain_port().commit_finish(c);
        benchmark::ClobberMemory();
    }
}
BENCHMARK(BM_CommitPair);

}  // namespace

int main(int argc, char** argv) {
    bench::parse_cli(argc, argv,
                     "clock_bench: what the Collective Clock costs when no drain is pending\n"
                     "usage: clock_bench [--benchmark_* ...]          (one rank: Google Benchmark of the commit pair)\n"
                     "       weft-run -n N clock_bench [--smoke]      (the pair against an 8-byte allreduce)\n"
                     "  --smoke              a short run for CI\n",
                     {{"--smoke", false}}, true);
    check(weft_init(&ctx), "init");
    uint32_t rank = 0, size = 1;
    weft_rank(ctx, &rank);
    weft_size(ctx, &size);
    bool smoke = false;
    for (int i = 1; i < argc; ++i) smoke = smoke || !std::strcmp(argv[i], "--smoke");
    if (size == 1) {
        benchmark::Initialize(&argc, argv);
        benchmark::RunSpecifiedBenchmarks();
        benchmark::Shutdown();
        return weft_finalize(ctx) == WEFT_OK ? 0 : 1;
    }
    weft_comm_t world;
    check(weft_comm_world(ctx, &world), "world");
    const int rounds = smoke ? 3 : 15;
    const uint64_t allreduces = smoke ? 1000 : 100000, pairs = smoke ? 10000 : 2000000;
    std::vector<double> per_allreduce, per_pair;
    weft::group::Engine& e = *weft::group::engine_of(*ctx->rt);
    for (int r = 0; r < rounds; ++r) {
        uint64_t x = rank, y = 0;
        check(weft_barrier(world), "barrier");
        uint64_t t0 = now_ns();
        for (uint64_t i = 0; i < allreduces; ++i)
            check(weft_allreduce(world, &x, &y, 1, WEFT_UINT64, WEFT_OP_SUM), "allreduce");
        per_allreduce.push_back(double(now_ns() - t0) / double(allreduces));
        // The pair alone, on the world's clock (every rank makes the same
        // number, so the clocks stay equal).
        t0 = now_ns();
        for (uint64_t i = 0; i < pairs; ++i) {
            e.drain_port().commit_begin(world_comm());
            e.drain_port().commit_finish(world_comm());
            asm volatile("" ::: "memory");
        }
        per_pair.push_back(double(now_ns() - t0) / double(pairs));
    }
    check(weft_barrier(world), "barrier");
    if (rank == 0) {
        const double a = median(per_allreduce), p = median(per_pair);
        std::printf(
            "ranks %u  allreduce 8 B: %.1f ns  commit_begin+commit_finish: %.2f ns  = %.2f%% of the allreduce\n", size,
            a, p, 100.0 * p / a);
    }
    return weft_finalize(ctx) == WEFT_OK ? 0 : 1;
}
