// comm_bench.cpp — the communicator hot paths: point-to-point ping-pong,
// unexpected messages, barrier, allreduce, bcast, allgather, on any number
// of ranks.
//
//   weft-run -n N [--transport shm|ucx] build/bench/comm_bench [--smoke] [benchmark flags]
//
// Rank 0 runs Google Benchmark. Collectives need every rank to run the same
// number of iterations, so before each run rank 0 broadcasts {op, iterations,
// bytes} on the world communicator and every rank runs exactly that loop;
// the run ends with an allreduce of each rank's error count, so a failed
// operation fails the benchmark instead of skewing it. Times are real time
// per iteration; the ping-pong reports HALF a round trip (as osu_latency and
// ucx_perftest do), the collectives one whole collective.
#include "cli.hpp"

#include <weft/comm.h>

#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

enum class Op : uint64_t { pingpong = 1, barrier, allreduce, bcast, ibarrier, unexpected, allgather, exchange, stop };

// Unexpected: messages per burst (see run).
constexpr int burst = 16;

weft_context_t ctx;
weft_comm_t world;
uint32_t me, nranks;

struct Command {
    uint64_t op, iterations, bytes;
};

// Runs `iterations` of op on this rank; returns the number of failed calls.
uint64_t run(Op op, uint64_t iterations, size_t bytes) {
    static std::vector<uint64_t> a, b;
    const size_t count = bytes / 8 ? bytes / 8 : 1;
    // allgather: `bytes` in all, split over the ranks (at least one element each)
    const size_t part = std::max<size_t>(1, count / std::max<uint32_t>(nranks, 1));
    a.assign(count, me + 1);
    b.assign(std::max(count, part * nranks), 0);
    uint64_t errors = 0;
    for (uint64_t i = 0; i < iterations; ++i) {
        weft_status_t st = WEFT_OK;
        switch (op) {
            case Op::pingpong:
                if (me == 0) {
                    st = weft_send(world, a.data(), count, WEFT_UINT64, 1, 0);
                    if (st == WEFT_OK) st = weft_recv(world, b.data(), count, WEFT_UINT64, 1, 0, nullptr);
                } else if (me == 1) {
                    st = weft_recv(world, b.data(), count, WEFT_UINT64, 0, 0, nullptr);
                    if (st == WEFT_OK) st = weft_send(world, a.data(), count, WEFT_UINT64, 0, 0);
                }
                break;
            case Op::unexpected:
                // Rank 0 sends a burst and then a marker; rank 1 waits for
                // the marker (per sender in order: the burst has arrived and
                // waits unexpected, in weft's buffer pool), receives the
                // burst newest first (a search of the queue) and answers.
                if (me == 0) {
                    for (int k = 0; k < burst && st == WEFT_OK; ++k)
                        st = weft_send(world, a.data(), count, WEFT_UINT64, 1, 1 + k);
                    if (st == WEFT_OK) st = weft_send(world, nullptr, 0, WEFT_UINT64, 1, 0);
                    if (st == WEFT_OK) st = weft_recv(world, nullptr, 0, WEFT_UINT64, 1, 0, nullptr);
                } else if (me == 1) {
                    st = weft_recv(world, nullptr, 0, WEFT_UINT64, 0, 0, nullptr);
                    for (int k = burst - 1; k >= 0 && st == WEFT_OK; --k)
                        st = weft_recv(world, b.data(), count, WEFT_UINT64, 0, 1 + k, nullptr);
                    if (st == WEFT_OK) st = weft_send(world, nullptr, 0, WEFT_UINT64, 0, 0);
                }
                break;
            case Op::barrier:
                st = weft_barrier(world);
                break;
            case Op::allreduce:
                st = weft_allreduce(world, a.data(), b.data(), count, WEFT_UINT64, WEFT_OP_SUM);
                break;
            case Op::bcast:
                st = weft_bcast(world, a.data(), count, WEFT_UINT64, 0);
                break;
            case Op::allgather:
                st = weft_allgather(world, a.data(), part, WEFT_UINT64, b.data());
                break;
            case Op::ibarrier: {
                weft_request_t r;
                st = weft_ibarrier(world, &r);
                if (st == WEFT_OK) st = weft_request_wait(&r, nullptr);
                break;
            }
            case Op::exchange:
                // What a halo exchange does: irecv, isend, waitall on both
                // ranks at once. Every handle is resolved by index at each
                // call (group/engine.cpp, Engine::request_of).
                if (me < 2) {
                    const uint32_t peer = 1 - me;
                    weft_request_t r[2];
                    st = weft_irecv(world, b.data(), count, WEFT_UINT64, peer, 0, &r[0]);
                    if (st == WEFT_OK) st = weft_isend(world, a.data(), count, WEFT_UINT64, peer, 0, &r[1]);
                    if (st == WEFT_OK) st = weft_request_waitall(2, r, nullptr);
                }
                break;
            case Op::stop:
                break;
        }
        errors += st != WEFT_OK;
    }
    if (op == Op::allreduce && nranks > 0) {
        const uint64_t want = uint64_t(nranks) * (nranks + 1) / 2;
        for (size_t k = 0; k < count; ++k) errors += iterations && b[k] != want;
    }
    if (op == Op::allgather)
        for (size_t k = 0; k < part * nranks; ++k) errors += iterations && b[k] != k / part + 1;
    return errors;
}

// Rank 0: tells everyone what to run, runs it, gathers the verdict.
uint64_t lead(Op op, uint64_t iterations, size_t bytes) {
    Command c{uint64_t(op), iterations, bytes};
    if (weft_bcast(world, &c, 3, WEFT_UINT64, 0) != WEFT_OK) std::exit(1);
    uint64_t errors = run(op, iterations, bytes), total = 0;
    if (weft_allreduce(world, &errors, &total, 1, WEFT_UINT64, WEFT_OP_SUM) != WEFT_OK) std::exit(1);
    return total;
}

void serve() {
    for (;;) {
        Command c{};
        if (weft_bcast(world, &c, 3, WEFT_UINT64, 0) != WEFT_OK) std::exit(1);
        if (Op(c.op) == Op::stop) return;
        uint64_t errors = run(Op(c.op), c.iterations, c.bytes), total = 0;
        if (weft_allreduce(world, &errors, &total, 1, WEFT_UINT64, WEFT_OP_SUM) != WEFT_OK) std::exit(1);
    }
}

// One benchmark iteration = n operations on every rank (one agreement per
// n, so its cost is amortised). The reported time is per iteration; the
// counter ns_per_op is per operation (half a round trip for ping-pong).
template <Op op, bool half>
void timed(benchmark::State& state) {
    const size_t bytes = static_cast<size_t>(state.range(0));
    if ((op == Op::pingpong || op == Op::unexpected || op == Op::exchange) && nranks < 2) {
        state.SkipWithError("point-to-point needs 2 ranks");
        return;
    }
    uint64_t errors = 0;
    const uint64_t n = std::max<uint64_t>(4, std::min<uint64_t>(1000, (64u << 20) / (bytes + 1)));
    double total_s = 0;
    for (auto _ : state) {
        const auto t0 = std::chrono::steady_clock::now();
        errors += lead(op, n, bytes);
        const std::chrono::duration<double> dt = std::chrono::steady_clock::now() - t0;
        state.SetIterationTime(dt.count());
        total_s += dt.count();
    }
    if (errors) state.SkipWithError("some operations failed or returned wrong data");
    const double per = op == Op::unexpected ? double(burst) : half ? 2.0 : 1.0;
    const double ops = double(state.iterations()) * double(n) * per;
    state.counters["ns_per_op"] = total_s * 1e9 / ops;
    state.counters["ops_per_iteration"] = double(n);
    const char* what = op == Op::unexpected ? "ns_per_op = one unexpected message (burst of 16 + answer)"
                       : op == Op::exchange ? "ns_per_op = one exchange (irecv + isend + waitall on both ranks)"
                       : half               ? "ns_per_op = half round trip"
                                            : "ns_per_op = one collective";
    state.SetLabel(std::string(what) + ", " + std::to_string(nranks) + " ranks");
}

}  // namespace

BENCHMARK(timed<Op::pingpong, true>)->Name("pingpong")->Arg(8)->Arg(4096)->Arg(1 << 20)->UseManualTime();
BENCHMARK(timed<Op::exchange, false>)->Name("exchange")->Arg(8)->Arg(4096)->UseManualTime();
BENCHMARK(timed<Op::unexpected, false>)->Name("unexpected")->Arg(8)->Arg(1024)->UseManualTime();
BENCHMARK(timed<Op::barrier, false>)->Name("barrier")->Arg(0)->UseManualTime();
BENCHMARK(timed<Op::ibarrier, false>)->Name("ibarrier+wait")->Arg(0)->UseManualTime();
BENCHMARK(timed<Op::allreduce, false>)->Name("allreduce")->Arg(8)->Arg(256)->Arg(4096)->Arg(1 << 20)->UseManualTime();
BENCHMARK(timed<Op::bcast, false>)->Name("bcast")->Arg(8)->Arg(1 << 16)->Arg(1 << 20)->UseManualTime();
BENCHMARK(timed<Op::allgather, false>)->Name("allgather")->Arg(8)->Arg(1 << 16)->Arg(1 << 20)->UseManualTime();

int main(int argc, char** argv) {
    bench::parse_cli(
        argc, argv,
        "comm_bench: weft's communicator hot paths (ping-pong, barrier, allreduce, bcast, allgather) on N ranks\n"
        "usage: weft-run -n N [--transport shm|ucx] comm_bench [--smoke] [--benchmark_* ...]\n"
        "  --smoke              a short run (--benchmark_min_time=0.001) for CI\n",
        {{"--smoke", false}}, true);
    if (weft_init(&ctx) != WEFT_OK || weft_comm_world(ctx, &world) != WEFT_OK) return 1;
    weft_comm_rank(world, &me);
    weft_comm_size(world, &nranks);
    int status = 0;
    if (me == 0) {
        std::vector<char*> args(argv, argv + argc);
        std::string smoke = "--benchmark_min_time=0.001";
        for (auto& a : args)
            if (std::strcmp(a, "--smoke") == 0) a = smoke.data();
        int n = static_cast<int>(args.size());
        benchmark::Initialize(&n, args.data());
        benchmark::RunSpecifiedBenchmarks();
        benchmark::Shutdown();
        Command stop{uint64_t(Op::stop), 0, 0};
        if (weft_bcast(world, &stop, 3, WEFT_UINT64, 0) != WEFT_OK) status = 1;
    } else {
        serve();
    }
    weft_finalize(ctx);
    return status;
}
