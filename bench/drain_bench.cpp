// drain_bench.cpp — weft's drain against a model of MANA's (mana_model.hpp),
// same job, same run, alternating. Run under weft-run at N ranks:
//   weft-run -n 8 build/bench/drain_bench [--reps 30]
// Rank 0 prints one line: medians of the full drain (start to quiescent on
// every rank) and of one round, for both, and their ratios. The workload:
// every rank has made the same collectives and sent/received the same
// messages, then idles in a wait (the drain finds nothing to do but check).
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
#include <string>
#include <vector>

namespace {

using bench::check;
using bench::median;
using bench::now_ns;

}  // namespace

int main(int argc, char** argv) {
    bench::parse_cli(argc, argv,
                     "drain_bench: weft's drain against a model of MANA's coordinator-based drain, same job\n"
                     "usage: weft-run -n N drain_bench [--reps R] [--smoke]\n"
                     "  --reps R             drains of each kind (default 30)\n"
                     "  --smoke              3 repetitions, for CI\n",
                     {{"--reps", true}, {"--smoke", false}});
    int reps = 30;
    for (int i = 1; i < argc; ++i)
        if (!std::strcmp(argv[i], "--reps") && i + 1 < argc)
            reps = std::atoi(argv[++i]);
        else if (!std::strcmp(argv[i], "--smoke"))
            reps = 3;

    // Rank 0 starts the model's coordinator before weft (a forked process,
    // single-threaded, as DMTCP's is).
    const char* rank_env = std::getenv("WEFT_RANK");
    const char* size_env = std::getenv("WEFT_SIZE");
    const uint32_t nranks = size_env ? static_cast<uint32_t>(std::atoi(size_env)) : 1;
    uint16_t port = 0;
    pid_t coordinator = -1;
    if (!rank_env || std::atoi(rank_env) == 0) {
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
    {
        mana_model::Client client(static_cast<uint16_t>(port64));
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
            const mana_model::Result m =
                mana_model::drain(client, static_cast<uint32_t>(rep + 1), 5 * (rep + 1), false, rep + 1, rep + 1);
            const double mt = double(now_ns() - t0);
            model_full.push_back(mt);
            model_rounds.push_back(m.rounds);
            model_round.push_back(mt / m.rounds);

            check(weft_barrier(world), "barrier");
            weft_drain_result_t res{};
            t0 = now_ns();
            if (rank == 0)
                check(weft_drain(ctx, &res), "drain");
            else
                check(weft_drain_wait(ctx, drain_no + 1, 60000, &res), "drain wait");
            ++drain_no;
            weft_wall.push_back(double(now_ns() - t0));
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
        const double wf = median(weft_full), wr = median(weft_round), mf = median(model_full), mr = median(model_round);
        std::printf(
            "ranks %u  weft: full %.1f us (%.0f rounds, %.2f us/round, request-to-resume %.1f us)  "
            "mana-model: full %.1f us (%.0f rounds, %.1f us/round)  ratio: round %.0fx, full %.1fx\n",
            size, wf / 1e3, median(weft_rounds), wr / 1e3, median(weft_wall) / 1e3, mf / 1e3, median(model_rounds),
            mr / 1e3, mr / std::max(wr, 1.0), mf / std::max(wf, 1.0));
    }
    check(weft_finalize(ctx), "finalize");
    if (coordinator > 0) waitpid(coordinator, nullptr, 0);
    return 0;
}
