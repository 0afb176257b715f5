// coll_weft.cpp — bench/coll_bench.h's measurements on weft's communicator
// API (weft/comm.h), for the comparison with Open MPI and MPICH
// (bench/mpi/coll_mpi.c, bench/run_mpi_compare.sh). Run under weft-run:
//
//   weft-run --transport shm -n 4 build/bench/coll_weft [--iters N ...]
//
// With --span-jobs, launched as several jobs (weft-run -n 2 coll_weft
// --span-jobs : -n 2 coll_weft --span-jobs), it measures a process group
// over every job as a communicator instead of the world (docs/groups.md,
// "Communicators across jobs": message schedules only, no one-sided
// paths): run beside the same ranks as one job, that is what crossing jobs
// costs. Everything here only maps coll_ops onto the communicator; the
// methodology, the checks and the output are coll_bench.h's.
#include "coll_bench.h"
#include "cli.hpp"

#include <weft/comm.h>
#include <weft/group.h>
#include <weft/weft.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

weft_comm_t g_world = nullptr;
coll_bench g_bench;  // a histogram inside: not on the stack

int send_world(const void* buf, size_t bytes, int dest) {
    return weft_send(g_world, buf, bytes, WEFT_BYTE, static_cast<uint32_t>(dest), 0);
}

int recv_world(void* buf, size_t bytes, int source) {
    return weft_recv(g_world, buf, bytes, WEFT_BYTE, source, 0, nullptr);
}

int barrier_world() { return weft_barrier(g_world); }

int allreduce_world(const void* in, void* out, size_t count, coll_type type, coll_op op) {
    return weft_allreduce(g_world, in, out, count, type == COLL_U64 ? WEFT_UINT64 : WEFT_DOUBLE,
                          op == COLL_SUM ? WEFT_OP_SUM : WEFT_OP_MAX);
}

int bcast_world(void* buf, size_t bytes, int root) {
    return weft_bcast(g_world, buf, bytes, WEFT_BYTE, static_cast<uint32_t>(root));
}

int allgather_world(const void* in, size_t bytes, void* out) {
    return weft_allgather(g_world, in, bytes, WEFT_BYTE, out);
}

// weft-run kills the other ranks when one exits non-zero.
[[noreturn]] void abort_job(int code) { std::exit(code); }

[[noreturn]] void die(const char* what, weft_status_t st) {
    std::fprintf(stderr, "coll_weft: %s: %s\n", what, weft_strerror(st));
    std::exit(1);
}

// Every process of the launch in one group with a context ID, as a
// communicator (collective over all of them).
weft_comm_t group_over_jobs(weft_context_t ctx) {
    uint32_t universe = 0;
    if (weft_status_t st = weft_universe_size(ctx, &universe)) die("weft_universe_size", st);
    std::vector<weft_proc_t> everyone(universe);
    for (uint32_t p = 0; p < universe; ++p)
        if (weft_status_t st = weft_peer_identity(ctx, p, &everyone[p].job, &everyone[p].rank))
            die("weft_peer_identity", st);
    weft_group_options_t o{};
    o.flags = WEFT_GROUP_ASSIGN_CONTEXT_ID;
    if (weft_status_t st = weft_group_construct(ctx, "coll_weft", everyone.data(), everyone.size(), &o))
        die("weft_group_construct", st);
    weft_comm_t c = nullptr;
    if (weft_status_t st = weft_group_comm(ctx, "coll_weft", &c)) die("weft_group_comm", st);
    return c;
}

}  // namespace

int main(int argc, char** argv) {
    bench::parse_cli(argc, argv,
                     "coll_weft: point-to-point and collective latency on weft's communicators (coll_bench.h)\n"
                     "usage: weft-run -n N coll_weft [--iters N] [--warmup N] [--bw-iters N] [--bw-warmup N]\n"
                     "                               [--budget-ms N] [--label NAME] [--only TEST] [--span-jobs]\n"
                     "  --span-jobs   under several jobs (weft-run -n A ... : -n B ...): a group over every\n"
                     "                job as the communicator, instead of the world\n"
                     "  (see bench/coll_bench.h for the tests and the defaults)\n",
                     {{"--iters", true},
                      {"--warmup", true},
                      {"--bw-iters", true},
                      {"--bw-warmup", true},
                      {"--budget-ms", true},
                      {"--label", true},
                      {"--only", true},
                      {"--span-jobs", false}});
    // coll_bench.h parses the rest and knows nothing of --span-jobs.
    bool span_jobs = false;
    std::vector<char*> args;
    for (int i = 0; i < argc; ++i) {
        if (std::strcmp(argv[i], "--span-jobs") == 0)
            span_jobs = true;
        else
            args.push_back(argv[i]);
    }
    weft_context_t ctx = nullptr;
    const weft_status_t st = weft_init(&ctx);
    const char* transport = std::getenv("WEFT_TRANSPORT");
    if (st == WEFT_ERR_UNSUPPORTED) {
        std::printf("SKIP: coll_weft: transport %s is not supported here (weft_init: %s)\n",
                    transport ? transport : "auto", weft_strerror(st));
        return 0;
    }
    if (st != WEFT_OK) die("weft_init", st);
    uint32_t rank = 0, size = 0;
    weft_status_t rc = WEFT_OK;
    if (span_jobs)
        g_world = group_over_jobs(ctx);
    else
        rc = weft_comm_world(ctx, &g_world);
    if (rc == WEFT_OK) rc = weft_comm_rank(g_world, &rank);
    if (rc == WEFT_OK) rc = weft_comm_size(g_world, &size);
    if (rc != WEFT_OK) die("the world communicator", rc);

    const std::string label =
        std::string("weft-") + (transport && *transport ? transport : "auto") + (span_jobs ? "-across-jobs" : "");
    coll_ops ops{};
    ops.impl = label.c_str();
    ops.rank = static_cast<int>(rank);
    ops.size = static_cast<int>(size);
    ops.send = send_world;
    ops.recv = recv_world;
    ops.barrier = barrier_world;
    ops.allreduce = allreduce_world;
    ops.bcast = bcast_world;
    ops.allgather = allgather_world;
    ops.abort_job = abort_job;
    const int result = coll_bench_run(&g_bench, &ops, static_cast<int>(args.size()), args.data());
    if (span_jobs) {
        rc = weft_comm_free(&g_world);
        if (rc == WEFT_OK) rc = weft_group_destruct(ctx, "coll_weft", 0);
        if (rc != WEFT_OK) die("freeing the group", rc);
    }
    rc = weft_finalize(ctx);
    if (rc != WEFT_OK) die("weft_finalize", rc);
    return result;
}
