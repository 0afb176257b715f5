// check.hpp — a benchmark cannot go on after a failed weft call: say which
// call and why, and exit (bench_util.hpp stays free of weft for the floor).
#pragma once

#include <weft/comm.h>
#include <weft/weft.h>

#include "bench_util.hpp"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

namespace bench {

inline void check(weft_status_t st, const char* what) {
    if (st == WEFT_OK) return;
    std::fprintf(stderr, "%s: %s: %s\n", program_invocation_short_name, what, weft_strerror(st));
    std::exit(1);
}

// weft_init for a benchmark: a backend that cannot run here (UNSUPPORTED)
// is skipped with a reason and exit 0, never faked as passing and never a
// failure; any other failure exits as check() does.
inline void init_or_skip(weft_context_t* ctx) {
    const weft_status_t st = weft_init(ctx);
    if (st == WEFT_ERR_UNSUPPORTED) {
        const char* want = std::getenv("WEFT_TRANSPORT");
        std::printf("SKIP: %s: transport %s is not supported here (weft_init: %s)\n", program_invocation_short_name,
                    want ? want : "auto", weft_strerror(st));
        std::exit(0);
    }
    check(st, "weft_init");
}

// Median µs of op over reps repetitions, each started after a barrier on
// comm (so every rank enters it together).
inline double median_after_barrier(weft_comm_t comm, int reps, const std::function<void()>& op) {
    std::vector<double> us;
    for (int i = 0; i < reps; ++i) {
        check(weft_barrier(comm), "barrier");
        const uint64_t t0 = now_ns();
        op();
        us.push_back(double(now_ns() - t0) / 1e3);
    }
    return median(us);
}

}  // namespace bench
