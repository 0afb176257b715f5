// test_errhandler.cpp — per-communicator error handlers (weft/comm.h) in a
// job of one rank: routing, inheritance, the handle rules of docs/fault-tolerance.md, and
// WEFT_ERRORS_ARE_FATAL.
#include <weft/comm.h>
#include <weft/ft.h>
#include <weft/weft.h>

#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <thread>
#include <vector>

namespace {

void clear_launcher_env() {
    for (const char* v :
         {"WEFT_BOOTSTRAP", "WEFT_SECRET", "WEFT_JOB_SIZES", "WEFT_JOB", "WEFT_RANK", "PMIX_RANK", "PMIX_NAMESPACE",
          "PMIX_SERVER_URI2", "PMIX_SERVER_URI3", "PMIX_SERVER_URI4", "WEFT_TRANSPORT", "WEFT_FAULT_POINTS"})
        unsetenv(v);
}

// What a user handler saw.
struct Seen {
    std::vector<weft_comm_t> comms;
    std::vector<weft_status_t> statuses;
    weft_status_t replace_with = WEFT_OK;  // WEFT_OK: leave the status as it is
};
void record(weft_comm_t comm, weft_status_t* status, void* arg) {
    auto* s = static_cast<Seen*>(arg);
    s->comms.push_back(comm);
    s->statuses.push_back(*status);
    if (s->replace_with != WEFT_OK) *status = s->replace_with;
}

class ErrHandler : public ::testing::Test {
protected:
    void SetUp() override {
        clear_launcher_env();
        ASSERT_EQ(weft_init(&ctx), WEFT_OK);
        ASSERT_EQ(weft_comm_world(ctx, &world), WEFT_OK);
    }
    void TearDown() override {
        if (ctx) {
            EXPECT_EQ(weft_finalize(ctx), WEFT_OK);
        }
    }
    // A call that fails on comm: a send to a rank outside it.
    static weft_status_t failing_call(weft_comm_t comm) {
        uint64_t v = 0;
        return weft_send(comm, &v, 1, WEFT_UINT64, 5, 0);
    }
    weft_context_t ctx = nullptr;
    weft_comm_t world = nullptr;
};

TEST_F(ErrHandler, DefaultReturnsTheStatus) {
    weft_errhandler_t eh = nullptr;
    ASSERT_EQ(weft_comm_get_errhandler(world, &eh), WEFT_OK);
    int same = 0;
    ASSERT_EQ(weft_errhandler_compare(eh, WEFT_ERRORS_RETURN, &same), WEFT_OK);
    EXPECT_EQ(same, 1) << "the world starts with WEFT_ERRORS_RETURN";
    EXPECT_EQ(weft_errhandler_free(&eh), WEFT_OK) << "a predefined handler obtained from get may be freed";
    EXPECT_EQ(eh, nullptr);
    EXPECT_EQ(failing_call(world), WEFT_ERR_INVALID_RANK);
}

TEST_F(ErrHandler, UserHandlerSeesTheFailureAndMayChangeTheStatus) {
    Seen seen;
    weft_errhandler_t eh = nullptr;
    ASSERT_EQ(weft_comm_create_errhandler(record, &seen, &eh), WEFT_OK);
    ASSERT_EQ(weft_comm_set_errhandler(world, eh), WEFT_OK);
    EXPECT_EQ(failing_call(world), WEFT_ERR_INVALID_RANK);
    ASSERT_EQ(seen.statuses.size(), 1u);
    EXPECT_EQ(seen.comms[0], world);
    EXPECT_EQ(seen.statuses[0], WEFT_ERR_INVALID_RANK);
    // A call that succeeds does not call it.
    uint32_t rank = 99;
    ASSERT_EQ(weft_comm_rank(world, &rank), WEFT_OK);
    EXPECT_EQ(seen.statuses.size(), 1u);
    // Other kinds of call are routed too: a collective, an FT call, a wait.
    EXPECT_EQ(weft_bcast(world, nullptr, 1, WEFT_UINT64, 0), WEFT_ERR_INVALID_ARG);
    EXPECT_EQ(weft_comm_agree(world, nullptr), WEFT_ERR_INVALID_ARG);
    EXPECT_EQ(weft_comm_free(&world), WEFT_ERR_INVALID_ARG) << "the world cannot be freed";
    EXPECT_EQ(seen.statuses.size(), 4u);
    seen.replace_with = WEFT_ERR_TIMEOUT;
    EXPECT_EQ(failing_call(world), WEFT_ERR_TIMEOUT) << "the handler's status is the call's";
    ASSERT_EQ(weft_comm_set_errhandler(world, WEFT_ERRORS_RETURN), WEFT_OK);
    ASSERT_EQ(weft_errhandler_free(&eh), WEFT_OK);
    EXPECT_EQ(failing_call(world), WEFT_ERR_INVALID_RANK);
    EXPECT_EQ(seen.statuses.size(), 5u) << "not called once WEFT_ERRORS_RETURN is set again";
}

TEST_F(ErrHandler, RequestCompletionGoesToItsCommunicatorsHandler) {
    Seen seen;
    weft_errhandler_t eh = nullptr;
    ASSERT_EQ(weft_comm_create_errhandler(record, &seen, &eh), WEFT_OK);
    ASSERT_EQ(weft_comm_set_errhandler(world, eh), WEFT_OK);
    // A self-send longer than the receive: the receive completes truncated.
    uint64_t out[2] = {1, 2}, in = 0;
    weft_request_t r = nullptr;
    ASSERT_EQ(weft_irecv(world, &in, 1, WEFT_UINT64, 0, 7, &r), WEFT_OK);
    ASSERT_EQ(weft_send(world, out, 2, WEFT_UINT64, 0, 7), WEFT_OK);
    EXPECT_EQ(weft_request_wait(&r, nullptr), WEFT_ERR_TRUNCATE);
    ASSERT_EQ(seen.statuses.size(), 1u);
    EXPECT_EQ(seen.statuses[0], WEFT_ERR_TRUNCATE);
    ASSERT_EQ(weft_comm_set_errhandler(world, WEFT_ERRORS_RETURN), WEFT_OK);
    ASSERT_EQ(weft_errhandler_free(&eh), WEFT_OK);
}

TEST_F(ErrHandler, NewCommunicatorsInheritTheParentsHandler) {
    Seen seen;
    weft_errhandler_t eh = nullptr;
    ASSERT_EQ(weft_comm_create_errhandler(record, &seen, &eh), WEFT_OK);
    ASSERT_EQ(weft_comm_set_errhandler(world, eh), WEFT_OK);
    weft_comm_t dup = nullptr, split = nullptr, shrunk = nullptr, ishrunk = nullptr;
    ASSERT_EQ(weft_comm_dup(world, &dup), WEFT_OK);
    ASSERT_EQ(weft_comm_split(world, 0, 0, &split), WEFT_OK);
    ASSERT_EQ(weft_comm_shrink(world, &shrunk), WEFT_OK);
    weft_request_t req = nullptr;
    ASSERT_EQ(weft_comm_ishrink(world, &ishrunk, &req), WEFT_OK);
    ASSERT_EQ(weft_request_wait(&req, nullptr), WEFT_OK);
    ASSERT_NE(ishrunk, nullptr);
    // The user's handle goes; the communicators keep the handler alive.
    ASSERT_EQ(weft_errhandler_free(&eh), WEFT_OK);
    for (weft_comm_t c : {dup, split, shrunk, ishrunk}) {
        weft_errhandler_t got = nullptr;
        ASSERT_EQ(weft_comm_get_errhandler(c, &got), WEFT_OK);
        EXPECT_EQ(failing_call(c), WEFT_ERR_INVALID_RANK);
        EXPECT_EQ(seen.comms.back(), c);
        ASSERT_EQ(weft_errhandler_free(&got), WEFT_OK);
    }
    EXPECT_EQ(seen.statuses.size(), 4u);
    for (weft_comm_t* c : {&dup, &split, &shrunk, &ishrunk}) ASSERT_EQ(weft_comm_free(c), WEFT_OK);
    ASSERT_EQ(weft_comm_set_errhandler(world, WEFT_ERRORS_RETURN), WEFT_OK);
}

// Failed calls on three threads while the main thread keeps replacing the
// world's handler: a new user handler, then WEFT_ERRORS_RETURN (which drops
// the handler's last reference, unless a call is running it). A failed
// call reads the handler pointer without the registry mutex; every call
// must return either its own status or the one the handler set, and a
// handler must never run after it is gone. CI runs this under TSan.
TEST(ErrHandlerThreads, FailuresOnManyThreadsWhileTheHandlerChanges) {
    clear_launcher_env();
    weft_context_t ctx = nullptr;
    weft_thread_level_t provided{};
    ASSERT_EQ(weft_init_thread(WEFT_THREAD_MULTIPLE, &provided, &ctx), WEFT_OK);
    ASSERT_EQ(provided, WEFT_THREAD_MULTIPLE);
    weft_comm_t world = nullptr;
    ASSERT_EQ(weft_comm_world(ctx, &world), WEFT_OK);
    std::atomic<uint64_t> handled{0}, calls{0}, replaced{0}, unexpected{0};
    std::atomic<bool> stop{false};
    auto replace = [](weft_comm_t, weft_status_t* st, void* arg) {
        static_cast<std::atomic<uint64_t>*>(arg)->fetch_add(1);
        *st = WEFT_ERR_TIMEOUT;
    };
    std::vector<std::thread> threads;
    for (int t = 0; t < 3; ++t)
        threads.emplace_back([&] {
            while (!stop.load()) {
                uint64_t v = 0;
                const weft_status_t st = weft_send(world, &v, 1, WEFT_UINT64, 5, 0);  // rank 5: no such rank
                calls.fetch_add(1);
                if (st == WEFT_ERR_TIMEOUT)
                    replaced.fetch_add(1);
                else if (st != WEFT_ERR_INVALID_RANK)
                    unexpected.fetch_add(1);
            }
        });
    bool ok = true;
    // At least 2000 swaps, and until handlers have run a few times (the
    // threads may start late on a loaded machine).
    for (int i = 0; ok && i < 1000000 && (i < 2000 || handled.load() < 50); ++i) {
        weft_errhandler_t eh = nullptr;
        ok = weft_comm_create_errhandler(replace, &handled, &eh) == WEFT_OK &&
             weft_comm_set_errhandler(world, eh) == WEFT_OK && weft_errhandler_free(&eh) == WEFT_OK;
        if (i % 3 == 0) std::this_thread::yield();
        ok = ok && weft_comm_set_errhandler(world, WEFT_ERRORS_RETURN) == WEFT_OK;
    }
    stop.store(true);
    for (auto& t : threads) t.join();
    EXPECT_TRUE(ok) << "creating, setting or freeing a handler failed";
    EXPECT_EQ(unexpected.load(), 0u);
    EXPECT_EQ(replaced.load(), handled.load()) << "every handler call's status is its call's";
    EXPECT_GE(handled.load(), 50u) << "the user handlers were hardly ever called";
    EXPECT_EQ(weft_finalize(ctx), WEFT_OK);
}

TEST_F(ErrHandler, HandleRules) {
    weft_errhandler_t ret = WEFT_ERRORS_RETURN, fatal = WEFT_ERRORS_ARE_FATAL;
    EXPECT_EQ(weft_errhandler_free(&ret), WEFT_ERR_INVALID_ARG) << "the predefined handler itself";
    EXPECT_EQ(weft_errhandler_free(&fatal), WEFT_ERR_INVALID_ARG);
    EXPECT_EQ(ret, WEFT_ERRORS_RETURN) << "a refused free leaves the handle";
    weft_errhandler_t eh = nullptr, copy = nullptr;
    EXPECT_EQ(weft_comm_create_errhandler(nullptr, nullptr, &eh), WEFT_ERR_INVALID_ARG);
    EXPECT_EQ(weft_comm_create_errhandler(record, nullptr, nullptr), WEFT_ERR_INVALID_ARG);
    ASSERT_EQ(weft_comm_create_errhandler(record, nullptr, &eh), WEFT_OK);
    copy = eh;
    ASSERT_EQ(weft_errhandler_free(&eh), WEFT_OK);
    EXPECT_EQ(weft_errhandler_free(&copy), WEFT_ERR_INVALID_ARG) << "freed twice";
    EXPECT_EQ(weft_comm_set_errhandler(world, copy), WEFT_ERR_INVALID_ARG) << "a freed handler";
    EXPECT_EQ(weft_comm_set_errhandler(nullptr, WEFT_ERRORS_RETURN), WEFT_ERR_NOT_INITIALIZED);
    EXPECT_EQ(weft_comm_get_errhandler(world, nullptr), WEFT_ERR_INVALID_ARG);
    int same = 0;
    EXPECT_EQ(weft_errhandler_compare(WEFT_ERRORS_RETURN, WEFT_ERRORS_ARE_FATAL, &same), WEFT_OK);
    EXPECT_EQ(same, 0);
    EXPECT_EQ(weft_errhandler_compare(WEFT_ERRORS_RETURN, copy, &same), WEFT_ERR_INVALID_ARG);
    EXPECT_EQ(weft_errhandler_compare(WEFT_ERRORS_RETURN, WEFT_ERRORS_RETURN, nullptr), WEFT_ERR_INVALID_ARG);
}

TEST_F(ErrHandler, FatalAbortsTheProcess) {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    EXPECT_DEATH(
        {
            weft_comm_set_errhandler(world, WEFT_ERRORS_ARE_FATAL);
            failing_call(world);
        },
        "WEFT_ERRORS_ARE_FATAL");
}

}  // namespace
