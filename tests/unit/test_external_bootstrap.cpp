// test_external_bootstrap.cpp — weft_init_with_bootstrap (weft/bootstrap.h)
// in one process: bad ops are refused, a job of one runs on the caller's
// all-gather (every exchange goes through it), and an all-gather that fails
// or never completes ends init with a status, not a hang or a crash. The
// multi-process case, on MPI's MPI_Iallgather under MPICH's and Open MPI's
// launchers, is examples/mpi_bootstrap.c (ctest mp.mpi_bootstrap.*).
#include <weft/bootstrap.h>
#include <weft/weft.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

namespace {

void clear_launcher_env() {
    for (const char* v : {"WEFT_BOOTSTRAP", "WEFT_SECRET", "WEFT_JOB_SIZES", "WEFT_JOB", "WEFT_RANK", "PMIX_RANK",
                          "PMIX_NAMESPACE", "WEFT_TRANSPORT", "WEFT_FAULT_POINTS"})
        unsetenv(v);
}

// A job of one: the all-gather copies this process's contribution.
struct Solo {
    int started = 0, tests = 0;
    bool fail_start = false, fail_test = false, never_done = false;
};

int solo_iallgather(void* arg, const void* mine, size_t len, void* all, void** request) {
    auto* s = static_cast<Solo*>(arg);
    if (s->fail_start) return 1;
    ++s->started;
    std::memcpy(all, mine, len);
    *request = s;
    return 0;
}

int solo_test(void* arg, void* request, int* done) {
    auto* s = static_cast<Solo*>(arg);
    if (request != s) return 1;
    ++s->tests;
    if (s->fail_test) return 1;
    *done = s->never_done ? 0 : 1;
    return 0;
}

weft_bootstrap_ops_t ops_for(Solo& s, uint32_t rank = 0, uint32_t size = 1) {
    weft_bootstrap_ops_t ops{};
    ops.rank = rank;
    ops.size = size;
    ops.iallgather = solo_iallgather;
    ops.test = solo_test;
    ops.arg = &s;
    return ops;
}

TEST(ExternalBootstrap, BadOpsAreRefused) {
    clear_launcher_env();
    Solo s;
    weft_context_t ctx = nullptr;
    EXPECT_EQ(weft_init_with_bootstrap(nullptr, WEFT_THREAD_SERIALIZED, nullptr, &ctx), WEFT_ERR_INVALID_ARG);
    weft_bootstrap_ops_t ops = ops_for(s);
    EXPECT_EQ(weft_init_with_bootstrap(&ops, WEFT_THREAD_SERIALIZED, nullptr, nullptr), WEFT_ERR_INVALID_ARG);
    ops.test = nullptr;
    EXPECT_EQ(weft_init_with_bootstrap(&ops, WEFT_THREAD_SERIALIZED, nullptr, &ctx), WEFT_ERR_INVALID_ARG);
    ops = ops_for(s);
    ops.iallgather = nullptr;
    EXPECT_EQ(weft_init_with_bootstrap(&ops, WEFT_THREAD_SERIALIZED, nullptr, &ctx), WEFT_ERR_INVALID_ARG);
    ops = ops_for(s, 0, 0);
    EXPECT_EQ(weft_init_with_bootstrap(&ops, WEFT_THREAD_SERIALIZED, nullptr, &ctx), WEFT_ERR_INVALID_ARG);
    ops = ops_for(s, 3, 3);
    EXPECT_EQ(weft_init_with_bootstrap(&ops, WEFT_THREAD_SERIALIZED, nullptr, &ctx), WEFT_ERR_INVALID_ARG);
    EXPECT_EQ(ctx, nullptr);
    EXPECT_EQ(s.started, 0);
}

TEST(ExternalBootstrap, AJobOfOneRunsOnTheCallersAllGather) {
    clear_launcher_env();
    Solo s;
    const weft_bootstrap_ops_t ops = ops_for(s);
    weft_context_t ctx = nullptr;
    weft_thread_level_t provided = WEFT_THREAD_MULTIPLE;
    ASSERT_EQ(weft_init_with_bootstrap(&ops, WEFT_THREAD_SERIALIZED, &provided, &ctx), WEFT_OK);
    EXPECT_EQ(provided, WEFT_THREAD_SERIALIZED);
    const int after_init = s.started;
    EXPECT_GT(after_init, 0);  // init's exchanges went through it
    uint32_t rank = 9, size = 0;
    EXPECT_EQ(weft_rank(ctx, &rank), WEFT_OK);
    EXPECT_EQ(weft_size(ctx, &size), WEFT_OK);
    EXPECT_EQ(rank, 0u);
    EXPECT_EQ(size, 1u);
    // A window is created through an exchange too; then a put to ourselves.
    void* base = nullptr;
    weft_window_t win = nullptr;
    ASSERT_EQ(weft_window_allocate(ctx, 4096, &base, &win), WEFT_OK);
    EXPECT_GT(s.started, after_init);
    const uint64_t v = 0x5eedf00du;
    ASSERT_EQ(weft_put(win, 0, 64, &v, sizeof v), WEFT_OK);
    ASSERT_EQ(weft_flush(win, 0), WEFT_OK);
    uint64_t got = 0;
    std::memcpy(&got, static_cast<uint8_t*>(base) + 64, sizeof got);
    EXPECT_EQ(got, v);
    EXPECT_EQ(weft_window_free(win), WEFT_OK);
    EXPECT_EQ(weft_finalize(ctx), WEFT_OK);
}

TEST(ExternalBootstrap, AFailedAllGatherEndsInitWithBootstrap) {
    clear_launcher_env();
    for (int which = 0; which < 2; ++which) {
        Solo s;
        (which == 0 ? s.fail_start : s.fail_test) = true;
        const weft_bootstrap_ops_t ops = ops_for(s);
        weft_context_t ctx = nullptr;
        EXPECT_EQ(weft_init_with_bootstrap(&ops, WEFT_THREAD_SERIALIZED, nullptr, &ctx), WEFT_ERR_BOOTSTRAP)
            << (which == 0 ? "iallgather failing" : "test failing");
        EXPECT_EQ(ctx, nullptr);
    }
}

TEST(ExternalBootstrap, AnAllGatherThatNeverCompletesTimesOut) {
    clear_launcher_env();
    setenv("WEFT_TIMEOUT_MS", "300", 1);
    Solo s;
    s.never_done = true;
    const weft_bootstrap_ops_t ops = ops_for(s, 0, 2);  // the other process never comes
    weft_context_t ctx = nullptr;
    EXPECT_EQ(weft_init_with_bootstrap(&ops, WEFT_THREAD_SERIALIZED, nullptr, &ctx), WEFT_ERR_TIMEOUT);
    EXPECT_EQ(ctx, nullptr);
    EXPECT_EQ(s.started, 1);
    EXPECT_GT(s.tests, 1);
    unsetenv("WEFT_TIMEOUT_MS");
}

}  // namespace
