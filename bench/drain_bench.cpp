// drain_bench.cpp — weft's drain against a model of MANA's (mana_model.hpp),
// same job, same run, alternating. Run under weft-run at N ranks:
//   weft-run -n 8 build/bench/drain_bench [--reps 30]
// Rank 0 prints three lines: medians of the full drain and of one round, for
// both, and their ratios; where weft's drain spent its time, phase by phase
// (weft_drain_get_profile: each phase boundary is the last rank's, on the
// CLOCK_MONOTONIC all ranks of one host share, from the request made by
// rank 0's application thread); and what its rounds cost in one-sided
// operations and critical-path depth (counts: they do not depend on timing).
// The workload: every rank has made the same collectives and sent/received
// the same messages, then idles in a wait (the drain finds nothing to do but
// check). --no-model leaves the model out (the counts at 32 and 64 ranks).
#include "bench/bench_util.hpp"
#include "bench/check.hpp"
#include "bench/cli.hpp"
#include "bench/mana_model.hpp"

#include <weft/comm.h>
#include <weft/drain.h>
#include <weft/weft.h>

#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

namespace {

using bench::check;
using bench::median;
using bench::now_ns;

// Job-wide phase boundaries, each the maximum over the ranks: the order of
// the phases, and what each one is, for the report.
enum Point : size_t {
    requested,  // rank 0's application thread asks (others: 0)
    started,
    clock_pushed,
    collectives_done,
    gate_closed,
    p2p_done,
    quiescent,
    all_quiescent,
    resumed,
    returned,  // the application thread is back from its wait
    points
};
constexpr const char* phase_names[points] = {
    "", "delivery", "targets", "clock-rounds", "gate", "p2p", "callback", "q-barrier", "resume", "app-wake",
};

// Per-rank counts, maxima over the ranks (ops per round in thousandths).
enum Count : size_t {
    clock_rounds,
    clock_ops_per_round_milli,
    clock_depth,
    clock_polls,
    target_ops,
    p2p_rounds,
    p2p_ops_per_round_milli,
    barrier_rounds,
    barrier_ops_per_round_milli,
    settle_ops,
    counts
};

uint64_t per_round_milli(uint64_t ops, uint64_t rounds) { return rounds ? ops * 1000 / rounds : 0; }

}  // namespace

int main(int argc, char** argv) {
    bench::parse_cli(argc, argv,
                     "drain_bench: weft's drain against a model of MANA's coordinator-based drain, same job\n"
                     "usage: weft-run -n N drain_bench [--reps R] [--smoke] [--no-model]\n"
                     "  --reps R             drains of each kind (default 30)\n"
                     "  --smoke              3 repetitions, for CI\n"
                     "  --no-model           weft's drain only (its phases and counts)\n",
                     {{"--reps", true}, {"--smoke", false}, {"--no-model", false}});
    int reps = 30;
    bool with_model = true;
    for (int i = 1; i < argc; ++i)
        if (!std::strcmp(argv[i], "--reps") && i + 1 < argc)
            reps = std::atoi(argv[++i]);
        else if (!std::strcmp(argv[i], "--smoke"))
            reps = 3;
        else if (!std::strcmp(argv[i], "--no-model"))
            with_model = false;

    // Rank 0 starts the model's coordinator before weft (a forked process,
    // single-threaded, as DMTCP's is).
    const char* rank_env = std::getenv("WEFT_RANK");
    const char* size_env = std::getenv("WEFT_SIZE");
    const uint32_t nranks = size_env ? static_cast<uint32_t>(std::atoi(size_env)) : 1;
    uint16_t port = 0;
    pid_t coordinator = -1;
    if (with_model && (!rank_env || std::atoi(rank_env) == 0)) {
        int lfd = socket(AF_INET, SOCK_STREAM, 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        socklen_t len = sizeof a;
        if (lfd < 0 || bind(lfd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || listen(lfd, 256) != 0 ||
            getsockname(lfd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
            std::perror("drain_bench: coordinator socket");
            return 1;
        }
        port = ntohs(a.sin_port);
        coordinator = fork();
        if (coordinator == 0) {
            mana_model::serve(lfd, nranks);
            _exit(0);
        }
        close(lfd);
    }

    weft_context_t ctx;
    check(weft_init(&ctx), "weft_init");
    uint32_t rank = 0, size = 1;
    check(weft_rank(ctx, &rank), "rank");
    check(weft_size(ctx, &size), "size");
    weft_comm_t world;
    check(weft_comm_world(ctx, &world), "world");
    uint64_t port64 = port;
    check(weft_bcast(world, &port64, 1, WEFT_UINT64, 0), "bcast");

    std::vector<double> weft_full, weft_round, weft_rounds, weft_wall, model_full, model_round, model_rounds;
    std::vector<double> to_quiescent, to_returned, phase_ns[points];
    std::vector<uint64_t> count_max[counts];
    {
        std::optional<mana_model::Client> client;
        if (with_model) client.emplace(static_cast<uint16_t>(port64));
        uint64_t drain_no = 0;
        for (int rep = 0; rep < reps; ++rep) {
            // The same state for both: some collectives and a ring of
            // messages, all complete.
            for (int i = 0; i < 4; ++i) check(weft_barrier(world), "barrier");
            uint64_t out = rep, in = 0;
            weft_request_t rr, rs;
            check(weft_irecv(world, &in, 1, WEFT_UINT64, static_cast<int32_t>((rank + size - 1) % size), 1, &rr),
                  "irecv");
            check(weft_isend(world, &out, 1, WEFT_UINT64, (rank + 1) % size, 1, &rs), "isend");
            check(weft_request_wait(&rs, nullptr), "wait");
            check(weft_request_wait(&rr, nullptr), "wait");
            check(weft_barrier(world), "barrier");

            uint64_t t0 = now_ns();
            double mt = 0;
            if (client) {
                const mana_model::Result m =
                    mana_model::drain(*client, static_cast<uint32_t>(rep + 1), 5 * (rep + 1), false, rep + 1, rep + 1);
                mt = double(now_ns() - t0);
                model_full.push_back(mt);
                model_rounds.push_back(m.rounds);
                model_round.push_back(mt / m.rounds);
            }

            check(weft_barrier(world), "barrier");
            weft_drain_result_t res{};
            t0 = now_ns();
            if (rank == 0)
                check(weft_drain(ctx, &res), "drain");
            else
                check(weft_drain_wait(ctx, drain_no + 1, 60000, &res), "drain wait");
            const uint64_t back = now_ns();
            ++drain_no;
            weft_wall.push_back(double(back - t0));

            // Where it went: every rank's phase boundaries and counts, the
            // maximum of each over the ranks (after the drain: not timed).
            weft_drain_profile_t p{};
            check(weft_drain_get_profile(ctx, drain_no, &p), "drain profile");
            uint64_t at[points] = {rank == 0 ? t0 : 0, p.started_ns,   p.clock_ns,   p.collective_ns, p.gate_closed_ns,
                                   p.p2p_ns,           p.quiescent_ns, p.barrier_ns, p.resumed_ns,    back};
            uint64_t c[counts] = {p.clock_rounds,
                                  per_round_milli(p.clock_ops, p.clock_rounds),
                                  p.clock_depth,
                                  p.clock_polls,
                                  p.target_ops,
                                  p.p2p_rounds,
                                  per_round_milli(p.p2p_ops, p.p2p_rounds),
                                  p.barrier_rounds,
                                  per_round_milli(p.barrier_ops, p.barrier_rounds),
                                  p.settle_ops};
            check(weft_allreduce(world, WEFT_IN_PLACE, at, points, WEFT_UINT64, WEFT_OP_MAX), "allreduce");
            check(weft_allreduce(world, WEFT_IN_PLACE, c, counts, WEFT_UINT64, WEFT_OP_MAX), "allreduce");
            for (size_t i = 1; i < points; ++i) {
                if (at[i] < at[i - 1]) {
                    std::fprintf(stderr, "drain_bench: drain %llu: the %s phase ends before it starts\n",
                                 static_cast<unsigned long long>(drain_no), phase_names[i]);
                    return 1;
                }
                phase_ns[i].push_back(double(at[i] - at[i - 1]));
            }
            to_quiescent.push_back(double(at[quiescent] - at[requested]));
            to_returned.push_back(double(at[returned] - at[requested]));
            for (size_t i = 0; i < counts; ++i) count_max[i].push_back(c[i]);
            weft_full.push_back(double(res.total_ns));
            weft_rounds.push_back(double(res.rounds));
            weft_round.push_back(res.rounds ? double(res.round_work_ns) / double(res.rounds) : 0);
            if (rank == 0 && std::getenv("DRAIN_BENCH_VERBOSE"))
                std::printf("rep %d: weft %.1f us (collective %.1f us, %llu rounds, %u attempts)  model %.1f us\n", rep,
                            res.total_ns / 1e3, res.collective_ns / 1e3, static_cast<unsigned long long>(res.rounds),
                            res.attempts, mt / 1e3);
        }
    }
    check(weft_barrier(world), "barrier");
    if (rank == 0) {
        const double wf = median(weft_full), wr = median(weft_round);
        const double rq = median(to_quiescent), rr = median(to_returned);
        if (with_model) {
            const double mf = median(model_full), mr = median(model_round);
            std::printf(
                "ranks %u  weft: full %.1f us (%.0f rounds, %.2f us/round, request-to-resume %.1f us)  "
                "mana-model: full %.1f us (%.0f rounds, %.1f us/round)  ratio: round %.0fx, full %.1fx  "
                "request-to-quiescent %.1f us, %.1fx; request-to-return %.1f us, %.1fx\n",
                size, wf / 1e3, median(weft_rounds), wr / 1e3, median(weft_wall) / 1e3, mf / 1e3, median(model_rounds),
                mr / 1e3, mr / std::max(wr, 1.0), mf / std::max(wf, 1.0), rq / 1e3, mf / std::max(rq, 1.0), rr / 1e3,
                mf / std::max(rr, 1.0));
        } else {
            std::printf(
                "ranks %u  weft: full %.1f us (%.0f rounds, %.2f us/round)  request-to-quiescent %.1f us, "
                "request-to-return %.1f us\n",
                size, wf / 1e3, median(weft_rounds), wr / 1e3, rq / 1e3, rr / 1e3);
        }
        // Medians of each phase separately: they need not add up to the
        // median of the whole.
        std::printf("ranks %u  phases (us, medians):", size);
        for (size_t i = 1; i < points; ++i) std::printf(" %s %.1f", phase_names[i], median(phase_ns[i]) / 1e3);
        std::printf("\n");
        auto med = [](std::vector<uint64_t> v) {
            std::sort(v.begin(), v.end());
            return v.empty() ? 0 : v[v.size() / 2];
        };
        auto range = [](const std::vector<uint64_t>& v) {
            return std::pair{*std::min_element(v.begin(), v.end()), *std::max_element(v.begin(), v.end())};
        };
        const auto [depth_lo, depth_hi] = range(count_max[clock_depth]);
        const auto [ops_lo, ops_hi] = range(count_max[clock_ops_per_round_milli]);
        std::printf(
            "ranks %u  counts (max over ranks, median over drains): observer %s  clock rounds %llu, "
            "ops/round %.2f (%.2f-%.2f), depth %llu (%llu-%llu), polls %llu, target ops %llu; p2p rounds %llu, "
            "ops/round %.2f; barrier rounds %llu, ops/round %.2f; settling ops %llu\n",
            size, std::getenv("WEFT_DRAIN_OBSERVE") ? std::getenv("WEFT_DRAIN_OBSERVE") : "auto",
            static_cast<unsigned long long>(med(count_max[clock_rounds])),
            med(count_max[clock_ops_per_round_milli]) / 1e3, ops_lo / 1e3, ops_hi / 1e3,
            static_cast<unsigned long long>(med(count_max[clock_depth])), static_cast<unsigned long long>(depth_lo),
            static_cast<unsigned long long>(depth_hi), static_cast<unsigned long long>(med(count_max[clock_polls])),
            static_cast<unsigned long long>(med(count_max[target_ops])),
            static_cast<unsigned long long>(med(count_max[p2p_rounds])), med(count_max[p2p_ops_per_round_milli]) / 1e3,
            static_cast<unsigned long long>(med(count_max[barrier_rounds])),
            med(count_max[barrier_ops_per_round_milli]) / 1e3,
            static_cast<unsigned long long>(med(count_max[settle_ops])));
    }
    check(weft_finalize(ctx), "finalize");
    if (coordinator > 0) waitpid(coordinator, nullptr, 0);
    return 0;
}
