// ft_bench.cpp — fault-tolerance latencies (bench/RESULTS.md), run under weft-run:
//   weft-run -n 8 build/bench/ft_bench [--reps 200]
//   weft-run -n 8 --keep-survivors --fault kill:rank=7:at=ft_bench.victim build/bench/ft_bench --kill
// Rank 0 prints RESULT lines: medians over the repetitions of agree,
// validate_global and shrink (with the free of the new communicator), each
// with the ratio to an 8-byte allreduce timed in the same run (the
// baseline). Every repetition starts after a barrier.
// With --kill the last rank stamps the time into every survivor's window and
// dies at a fault point; the survivors report SIGKILL -> known
// (validate_local) — the maximum over survivors — and the same operations
// again with one failure acknowledged in G.
// bench/mpi/ft_mpi.c is the same workload on MPICH's MPIX_Comm_agree/shrink.
#include "bench/bench_util.hpp"
#include "bench/check.hpp"
#include "bench/cli.hpp"

#include <weft/comm.h>
#include <weft/ft.h>
#include <weft/weft.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <vector>

namespace {

using bench::check;
using bench::median;
using bench::now_ns;

struct Bench {
    weft_comm_t world = nullptr;
    uint32_t rank = 0, size = 0;
    int reps = 200;

    double time(const std::function<void()>& op) { return bench::median_after_barrier(world, reps, op); }

    void run_all(const char* label) {
        uint64_t one = 1, sum = 0;
        const double allreduce =
            time([&] { check(weft_allreduce(world, &one, &sum, 1, WEFT_UINT64, WEFT_OP_SUM), "allreduce"); });
        const double agree = time([&] {
            int flag = 1;
            check(weft_comm_agree(world, &flag), "agree");
        });
        const double validate = time([&] {
            uint32_t failed = 0, added = 0;
            check(weft_comm_validate_global(world, &failed, &added), "validate_global");
        });
        const double shrink = time([&] {
            weft_comm_t s = nullptr;
            check(weft_comm_shrink(world, &s), "shrink");
            check(weft_comm_free(&s), "free");
        });
        if (rank != 0) return;
        const struct {
            const char* op;
            double us;
        } rows[] = {{"allreduce8", allreduce}, {"agree", agree}, {"validate_global", validate}, {"shrink", shrink}};
        for (const auto& r : rows)
            std::printf("RESULT lib=weft ranks=%u %s op=%s median_us=%.2f vs_allreduce=%.1f\n", size, label, r.op, r.us,
                        r.us / allreduce);
    }
};

}  // namespace

int main(int argc, char** argv) {
    bench::parse_cli(argc, argv,
                     "ft_bench: fault-tolerance latencies (agree, validate_global, shrink) against an allreduce\n"
                     "usage: weft-run -n N ft_bench [--reps R] [--smoke]\n"
                     "       weft-run -n N --keep-survivors --fault kill:rank=N-1:at=ft_bench.victim ft_bench --kill\n"
                     "  --reps R             repetitions (default 200)\n"
                     "  --kill               then kill the last rank and time its failure becoming known\n"
                     "  --smoke              3 repetitions, for CI\n",
                     {{"--reps", true}, {"--kill", false}, {"--smoke", false}});
    Bench b;
    bool kill = false;
    for (int i = 1; i < argc; ++i)
        if (!std::strcmp(argv[i], "--reps") && i + 1 < argc)
            b.reps = std::max(1, std::atoi(argv[++i]));
        else if (!std::strcmp(argv[i], "--kill"))
            kill = true;
        else if (!std::strcmp(argv[i], "--smoke"))
            b.reps = 3;

    weft_context_t ctx;
    check(weft_init(&ctx), "weft_init");
    check(weft_rank(ctx, &b.rank), "rank");
    check(weft_size(ctx, &b.size), "size");
    check(weft_comm_world(ctx, &b.world), "world");
    void* base = nullptr;
    weft_window_t win = nullptr;
    check(weft_window_allocate(ctx, 64, &base, &win), "window");
    check(weft_barrier(b.world), "barrier");

    b.run_all("failures=0");
    if (kill && b.size >= 2) {
        const uint32_t victim = b.size - 1;
        check(weft_barrier(b.world), "barrier");
        if (b.rank == victim) {
            // CLOCK_MONOTONIC: one clock for every process on this host.
            const uint64_t t = now_ns();
            for (uint32_t r = 0; r < victim; ++r) check(weft_put(win, r, 0, &t, sizeof t), "stamp");
            check(weft_flush(win, WEFT_RANK_ALL), "flush");
            weft_fault_point("ft_bench.victim");
            std::fprintf(stderr,
                         "ft_bench: the victim survived: run under weft-run --keep-survivors "
                         "--fault kill:rank=%u:at=ft_bench.victim\n",
                         victim);
            return 3;
        }
        uint32_t failed = 0, added = 0;
        const uint64_t end = now_ns() + 20000000000ull;
        // Waiting as an application does, inside weft (weft_wait backs off
        // to the kernel), not spinning: 15 spinning survivors on 2 cores
        // would starve the monitor threads that learn of the death.
        for (;;) {
            check(weft_comm_validate_local(b.world, &failed, &added), "validate_local");
            if (failed != 0 || now_ns() >= end) break;
            weft_wait(ctx, 1000000);
        }
        const uint64_t known = now_ns();
        if (failed == 0) {
            std::fprintf(stderr, "ft_bench: rank %u: the victim's death not known within 20 s\n", b.rank);
            return 1;
        }
        uint64_t stamp = 0;
        std::memcpy(&stamp, base, sizeof stamp);
        const uint64_t t0 = now_ns();
        check(weft_comm_validate_global(b.world, &failed, &added), "validate_global (the new failure)");
        const double first_validate_us = double(now_ns() - t0) / 1e3;
        // Collectives go on over the survivors once the failure is in G.
        const uint64_t mine = known - stamp;
        uint64_t worst = 0;
        check(weft_allreduce(b.world, &mine, &worst, 1, WEFT_UINT64, WEFT_OP_MAX), "allreduce");
        if (b.rank == 0) {
            std::printf("RESULT lib=weft ranks=%u failures=1 op=kill_to_known_all median_us=%.2f\n", b.size,
                        worst / 1e3);
            std::printf("RESULT lib=weft ranks=%u failures=1 op=validate_global_first median_us=%.2f\n", b.size,
                        first_validate_us);
        }
        b.run_all("failures=1");
    }
    check(weft_finalize(ctx), "finalize");
    return 0;
}
