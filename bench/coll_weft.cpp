// coll_weft.cpp — bench/coll_bench.h's measurements on weft's communicator
// API (weft/comm.h), for the comparison with Open MPI and MPICH
// (bench/mpi/coll_mpi.c, bench/run_mpi_compare.sh). Run under weft-run:
//
//   weft-run --transport shm -n 4 build/bench/coll_weft [--iters N ...]
//
// Everything here only maps coll_ops onto the world communicator; the
// methodology, the checks and the output are coll_bench.h's.
#include "coll_bench.h"
#include "cli.hpp"

#include <weft/comm.h>
#include <weft/weft.h>

#include <cstdio>
#include <cstdlib>
#include <string>

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

}  // namespace

int main(int argc, char** argv) {
    bench::parse_cli(argc, argv,
                     "coll_weft: point-to-point and collective latency on weft's communicators (coll_bench.h)\n"
                     "usage: weft-run -n N coll_weft [--iters N] [--warmup N] [--bw-iters N] [--bw-warmup N]\n"
                     "                               [--budget-ms N] [--label NAME] [--only TEST]\n"
                     "  (see bench/coll_bench.h for the tests and the defaults)\n",
                     {{"--iters", true},
                      {"--warmup", true},
                      {"--bw-iters", true},
                      {"--bw-warmup", true},
                      {"--budget-ms", true},
                      {"--label", true},
                      {"--only", true}});
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
    weft_status_t rc = weft_comm_world(ctx, &g_world);
    if (rc == WEFT_OK) rc = weft_comm_rank(g_world, &rank);
    if (rc == WEFT_OK) rc = weft_comm_size(g_world, &size);
    if (rc != WEFT_OK) die("the world communicator", rc);

    const std::string label = std::string("weft-") + (transport && *transport ? transport : "auto");
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
    const int result = coll_bench_run(&g_bench, &ops, argc, argv);
    rc = weft_finalize(ctx);
    if (rc != WEFT_OK) die("weft_finalize", rc);
    return result;
}
