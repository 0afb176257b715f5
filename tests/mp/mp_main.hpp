// mp_main.hpp — shared by the multi-process GoogleTest binaries.
//
// Each binary runs under weft-run: every rank runs the same tests in the same
// order, so a test may be collective. weft_init happens once in main (a
// GoogleTest environment) and weft_finalize after the last test. Every wait
// is bounded; weft-run's --timeout bounds the whole run.
#pragma once

#include <weft/weft.h>

#include <gtest/gtest.h>

#include <cstdint>
#include <ctime>

namespace mp {

extern weft_context_t ctx;
extern uint32_t rank, size;

inline uint64_t now_ns() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

// Progresses weft until pred() holds; false after timeout_s.
template <typename Pred>
bool progress_until(Pred pred, double timeout_s = 20.0) {
    const uint64_t end = now_ns() + uint64_t(timeout_s * 1e9);
    while (!pred()) {
        if (now_ns() > end) return false;
        weft_wait(ctx, 1000000);  // up to 1 ms, returns early on an event
    }
    return true;
}

inline void barrier() { ASSERT_EQ(weft_bootstrap_barrier(ctx), WEFT_OK); }

int run_all(int argc, char** argv);

}  // namespace mp

#define WEFT_OK_OR_FAIL(expr) ASSERT_EQ((expr), WEFT_OK) << #expr
