// group_bench.cpp — process groups (weft/group.h) construct and destruct
// latency, run under weft-run (bench/RESULTS.md "Process groups"):
//   weft-run -n 8 build/bench/group_bench [--reps 200]
//   weft-run -n 8 --keep-survivors --fault kill:rank=7:at=group_bench.victim build/bench/group_bench --kill
// Every rank is a leader (the collective method); each construct assigns a
// context ID and carries 64 bytes of info per member, as the PMIx loop
// bench/mpi/pmix_group.c does. Rank 0 prints RESULT lines: medians over
// the repetitions of construct, destruct and construct+destruct back to
// back, and an 8-byte allreduce and a barrier timed in the same run (the
// baselines), with the message counts per construct. Every repetition of
// the separate timings starts after a barrier.
// With --kill the last rank dies at a fault point after a barrier and the
// survivors time the construct to their answer: CONSTRUCT_ABORT by
// default, then an FT_COLLECTIVE construct on the survivors.
#include "bench/bench_util.hpp"
#include "bench/check.hpp"
#include "bench/cli.hpp"

#include <weft/comm.h>
#include <weft/group.h>
#include <weft/weft.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

namespace {

using bench::check;
using bench::median;
using bench::now_ns;

struct Bench {
    weft_context_t ctx = nullptr;
    weft_comm_t world = nullptr;
    uint32_t rank = 0, size = 0, job = 0;
    int reps = 200;
    std::vector<weft_proc_t> procs;
    std::vector<uint8_t> info = std::vector<uint8_t>(64);
    weft_group_options_t opts{};

    Bench() {
        opts.flags = WEFT_GROUP_ASSIGN_CONTEXT_ID;
        opts.info = info.data();
        opts.info_len = info.size();
    }

    double time(const std::function<void()>& op) { return bench::median_after_barrier(world, reps, op); }

    void construct(const char* name) {
        check(weft_group_construct(ctx, name, procs.data(), procs.size(), &opts), "weft_group_construct");
    }
    void destruct(const char* name) { check(weft_group_destruct(ctx, name, 0), "weft_group_destruct"); }

    void run() {
        uint64_t one = 1, sum = 0;
        const double allreduce =
            time([&] { check(weft_allreduce(world, &one, &sum, 1, WEFT_UINT64, WEFT_OP_SUM), "allreduce"); });
        const double barrier = time([&] { check(weft_barrier(world), "barrier"); });
        std::vector<double> c_us, d_us;
        for (int i = 0; i < reps; ++i) {
            check(weft_barrier(world), "barrier");
            uint64_t t0 = now_ns();
            construct("bench");
            c_us.push_back(double(now_ns() - t0) / 1e3);
            check(weft_barrier(world), "barrier");
            t0 = now_ns();
            destruct("bench");
            d_us.push_back(double(now_ns() - t0) / 1e3);
        }
        // Back to back, as the PMIx loop runs: no barrier in between.
        std::vector<double> cd_us;
        check(weft_barrier(world), "barrier");
        for (int i = 0; i < reps; ++i) {
            const uint64_t t0 = now_ns();
            construct("loop");
            destruct("loop");
            cd_us.push_back(double(now_ns() - t0) / 1e3);
        }
        if (rank == 0) {
            const double cd = median(cd_us);
            std::printf("RESULT group.construct ranks=%u median_us=%.1f allreduce8_us=%.1f ratio=%.2f\n", size,
                        median(c_us), allreduce, median(c_us) / allreduce);
            std::printf("RESULT group.destruct ranks=%u median_us=%.1f barrier_us=%.1f ratio=%.2f\n", size,
                        median(d_us), barrier, median(d_us) / barrier);
            std::printf("RESULT group.construct_destruct ranks=%u median_us=%.1f\n", size, cd);
            // The protocol's cost, counted: each construct is N-1 CONTRIBs
            // to the tracker and N-1 RESULTs back (two message latencies);
            // each destruct the same.
            std::printf("RESULT group.messages ranks=%u per_construct=%u rounds=2\n", size, 2 * (size - 1));
        }
    }

    void run_kill() {
        check(weft_barrier(world), "barrier");
        if (rank == size - 1) {
            weft_fault_point("group_bench.victim");
            std::fprintf(stderr, "group_bench: survived the fault point (run with --fault kill:...)\n");
            std::exit(3);
        }
        uint64_t t0 = now_ns();
        weft_status_t st = weft_group_construct(ctx, "doomed", procs.data(), procs.size(), &opts);
        const double abort_ms = double(now_ns() - t0) / 1e6;
        if (st != WEFT_ERR_CONSTRUCT_ABORT) {
            std::fprintf(stderr, "rank %u: expected CONSTRUCT_ABORT, got %s\n", rank, weft_strerror(st));
            std::exit(1);
        }
        weft_group_options_t ft = opts;
        ft.flags |= WEFT_GROUP_FT_COLLECTIVE;
        t0 = now_ns();
        check(weft_group_construct(ctx, "survivors", procs.data(), procs.size(), &ft), "FT construct");
        const double ft_ms = double(now_ns() - t0) / 1e6;
        uint32_t n = 0;
        check(weft_group_size(ctx, "survivors", &n), "weft_group_size");
        if (n != size - 1) {
            std::fprintf(stderr, "rank %u: FT group has %u members\n", rank, n);
            std::exit(1);
        }
        std::printf("RESULT group.death rank=%u ranks=%u abort_ms=%.2f ft_ms=%.3f\n", rank, size, abort_ms, ft_ms);
        check(weft_group_destruct(ctx, "survivors", 0), "destruct");
    }
};

}  // namespace

int main(int argc, char** argv) {
    bench::parse_cli(argc, argv,
                     "group_bench: process-group construct/destruct latency (bench/RESULTS.md)\n"
                     "usage: weft-run -n N group_bench [--reps R] [--smoke] [--kill]\n",
                     {{"--reps", true}, {"--smoke", false}, {"--kill", false}});
    Bench b;
    bool kill = false;
    for (int i = 1; i < argc; ++i) {
        if (!std::strcmp(argv[i], "--reps")) b.reps = std::atoi(argv[++i]);
        if (!std::strcmp(argv[i], "--smoke")) b.reps = 10;
        if (!std::strcmp(argv[i], "--kill")) kill = true;
    }
    check(weft_init(&b.ctx), "weft_init");
    check(weft_comm_world(b.ctx, &b.world), "weft_comm_world");
    check(weft_rank(b.ctx, &b.rank), "weft_rank");
    check(weft_size(b.ctx, &b.size), "weft_size");
    check(weft_job_id(b.ctx, &b.job), "weft_job_id");
    for (uint32_t r = 0; r < b.size; ++r) b.procs.push_back({b.job, r});
    for (size_t i = 0; i < b.info.size(); ++i) b.info[i] = uint8_t(b.rank + i);
    if (kill)
        b.run_kill();
    else
        b.run();
    check(weft_finalize(b.ctx), "weft_finalize");
    return 0;
}
