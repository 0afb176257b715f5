// oversubscribed.cpp — many ranks, few cores, one hot word.
//
//   weft-run -n 16 --timeout 60 build/bench/oversubscribed [K]
//
// Every rank does K blocking fetch-adds of 1 on one word of rank 0's window.
// Rank 0 then waits (progressing: emulated atomics move only while it does)
// until the word holds exactly size*K (and every rank reported), and prints the time per operation:
//   aggregate  = wall time from the common start to the last add / (size*K)
//   per rank   = each rank's own loop time / K (what one caller sees)
// A wrong sum, a non-increasing previous value, or a wait past its deadline
// exits non-zero. The point is that with 8 ranks per core nobody livelocks:
// weft's waits and ours spin briefly, then yield.
#include "bench_util.hpp"
#include "cli.hpp"

#include <weft/weft.h>

#include <algorithm>
#include <cstring>
#include <vector>

namespace {

uint32_t g_rank = 0;

[[noreturn]] void die(const char* what, weft_status_t st = WEFT_OK) {
    std::fprintf(stderr, "oversubscribed rank %u: %s%s%s\n", g_rank, what, st != WEFT_OK ? ": " : "",
                 st != WEFT_OK ? weft_strerror(st) : "");
    std::exit(1);
}

void check(weft_status_t st, const char* what) {
    if (st != WEFT_OK) die(what, st);
}

// Rank 0's window holds only the counter.
constexpr uint64_t counter_off = 0;

// Each rank reports its per-op time to rank 0 with an active message, not a
// put + flush: over an emulating transport (ucx over tcp) a flush completes
// only while rank 0 progresses, and rank 0 stops progressing once it enters
// the bootstrap barrier (which does not progress the transport). An eager AM
// completes locally, so nobody waits on rank 0 once it is in the barrier.
constexpr uint32_t am_time = 1;
struct Times {
    std::vector<uint64_t> ns;
    uint32_t received = 0;
};
void on_time(void* arg, uint32_t source, const void* p, size_t len) {
    auto* t = static_cast<Times*>(arg);
    if (len != 8 || source >= t->ns.size()) return;
    std::memcpy(&t->ns[source], p, 8);
    ++t->received;
}

}  // namespace

int main(int argc, char** argv) {
    bench::parse_cli(argc, argv,
                     "oversubscribed: many ranks on few cores hammering one word (correctness, no livelock)\n"
                     "usage: weft-run -n 16 oversubscribed [K]\n"
                     "  K                    blocking fetch-adds per rank on rank 0's word (default 20000)\n",
                     {}, false, 1);
    const uint64_t k = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 20000;
    if (k == 0) die("K must be > 0");
    weft_context_t ctx;
    weft_status_t st = weft_init(&ctx);
    if (st == WEFT_ERR_UNSUPPORTED) {
        const char* t = std::getenv("WEFT_TRANSPORT");
        std::printf("SKIP: oversubscribed: transport %s is not supported here\n", t ? t : "auto");
        return 0;
    }
    check(st, "weft_init");
    uint32_t size = 0;
    check(weft_rank(ctx, &g_rank), "weft_rank");
    check(weft_size(ctx, &size), "weft_size");
    weft_caps_t caps;
    check(weft_query_caps(ctx, &caps), "weft_query_caps");
    void* base = nullptr;
    weft_window_t win;
    check(weft_window_allocate(ctx, 64, &base, &win), "weft_window_allocate");
    Times times;
    times.ns.assign(size, 0);
    check(weft_am_register(ctx, am_time, on_time, &times), "weft_am_register");
    auto word = [&](uint64_t off) {
        return std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(static_cast<uint8_t*>(base) + off));
    };

    check(weft_bootstrap_barrier(ctx), "barrier");
    const uint64_t t0 = bench::now_ns();
    uint64_t old = 0, prev = 0;
    bool monotone = true;
    for (uint64_t i = 0; i < k; ++i) {
        check(weft_atomic_fetch_add(win, 0, counter_off, 1, &old), "fetch-add");
        // Only adds of 1: the word only grows, so each old value must exceed
        // our previous one.
        monotone &= i == 0 || old > prev;
        prev = old;
    }
    const uint64_t t1 = bench::now_ns();
    if (!monotone) die("fetch-add returned a non-increasing previous value");
    const uint64_t my_ns_per_op = (t1 - t0) / k;
    if (g_rank != 0) check(weft_am_send(ctx, 0, am_time, &my_ns_per_op, sizeof my_ns_per_op), "am_send");

    uint64_t t_done = t1;
    if (g_rank == 0) {
        const uint64_t want = static_cast<uint64_t>(size) * k;
        // The read must be the transport's when its atomics are not
        // coherent with the CPU (scope DEVICE).
        auto current = [&] {
            if (caps.atomic_scope == WEFT_ATOMIC_SCOPE_GLOBAL) return word(counter_off).load(std::memory_order_acquire);
            uint64_t v = 0;
            check(weft_atomic_fetch_add(win, 0, counter_off, 0, &v), "loopback read");
            return v;
        };
        times.ns[0] = my_ns_per_op;
        const bool ok =
            bench::spin_until([&] { return current() >= want && times.received == size - 1; },
                              [&] { check(weft_progress(ctx, nullptr), "weft_progress"); }, 50ull * 1000000000ull);
        t_done = bench::now_ns();
        const uint64_t got = current();
        if (!ok || got != want) {
            std::fprintf(stderr, "oversubscribed: FAIL: counter is %llu, expected %u*%llu = %llu; %u of %u reports%s\n",
                         static_cast<unsigned long long>(got), size, static_cast<unsigned long long>(k),
                         static_cast<unsigned long long>(want), times.received, size - 1, ok ? "" : " (timed out)");
            return 1;
        }
    }
    check(weft_bootstrap_barrier(ctx), "barrier");
    if (g_rank == 0) {
        std::vector<uint64_t> per = times.ns;
        std::sort(per.begin(), per.end());
        const double agg = static_cast<double>(t_done - t0) / static_cast<double>(uint64_t(size) * k);
        std::printf(
            "OVERSUB transport=%s ranks=%u K=%llu total_ops=%llu sum=OK wall_ms=%.1f "
            "aggregate_ns_per_op=%.1f rank_ns_per_op_median=%llu rank_ns_per_op_max=%llu "
            "rank0_ns_per_op=%llu\n",
            caps.transport, size, static_cast<unsigned long long>(k),
            static_cast<unsigned long long>(uint64_t(size) * k), static_cast<double>(t_done - t0) / 1e6, agg,
            static_cast<unsigned long long>(per[size / 2]), static_cast<unsigned long long>(per[size - 1]),
            static_cast<unsigned long long>(my_ns_per_op));
    }
    check(weft_window_free(win), "weft_window_free");
    check(weft_finalize(ctx), "weft_finalize");
    return 0;
}
