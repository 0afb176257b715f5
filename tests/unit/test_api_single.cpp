// test_api_single.cpp — the C API (weft.h) in a job of one rank.
//
// Every test clears the launcher environment first, so weft_init gives the
// singleton bootstrap. ctest runs each test in its own process; running the
// binary directly runs them all in one process, which also exercises
// repeated init/finalize (and ApiLifecycle tests that explicitly).
#include <weft/state_window.h>
#include <weft/weft.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <unistd.h>
#include <vector>

namespace {

void clear_launcher_env() {
    for (const char* v :
         {"WEFT_BOOTSTRAP", "WEFT_SECRET", "WEFT_JOB_SIZES", "WEFT_JOB", "WEFT_RANK", "PMIX_RANK", "PMIX_NAMESPACE",
          "PMIX_SERVER_URI2", "PMIX_SERVER_URI3", "PMIX_SERVER_URI4", "WEFT_TRANSPORT", "WEFT_FAULT_POINTS"})
        unsetenv(v);
}

constexpr uint64_t sec = 1000000000ull;

class Api : public ::testing::Test {
protected:
    void SetUp() override {
        clear_launcher_env();
        ASSERT_EQ(weft_init(&ctx), WEFT_OK);
        ASSERT_NE(ctx, nullptr);
    }
    void TearDown() override {
        if (ctx) {
            EXPECT_EQ(weft_finalize(ctx), WEFT_OK);
        }
        ctx = nullptr;
    }
    weft_context_t ctx = nullptr;
};

// Collects active messages.
struct Inbox {
    struct Msg {
        uint32_t source;
        std::vector<uint8_t> bytes;
    };
    std::vector<Msg> msgs;
    static void handler(void* arg, uint32_t source, const void* payload, size_t len) {
        auto* in = static_cast<Inbox*>(arg);
        const auto* p = static_cast<const uint8_t*>(payload);
        in->msgs.push_back({source, std::vector<uint8_t>(p, p + len)});
    }
};

std::vector<uint8_t> pattern(size_t n, uint8_t seed) {
    std::vector<uint8_t> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(seed + i * 13 + (i >> 8));
    return v;
}

// Drives progress until `count` messages arrived or a wait times out.
void wait_for(weft_context_t ctx, const Inbox& in, size_t count) {
    for (int i = 0; i < 1000 && in.msgs.size() < count; ++i) {
        weft_status_t st = weft_wait(ctx, 5 * sec);
        if (st == WEFT_ERR_TIMEOUT) break;
        ASSERT_EQ(st, WEFT_OK);
    }
}

}  // namespace

// ------------------------------------------------------------- singleton

TEST_F(Api, SingletonJob) {
    uint32_t rank = 99, size = 99, job = 99, uni = 99;
    ASSERT_EQ(weft_rank(ctx, &rank), WEFT_OK);
    ASSERT_EQ(weft_size(ctx, &size), WEFT_OK);
    ASSERT_EQ(weft_job_id(ctx, &job), WEFT_OK);
    ASSERT_EQ(weft_universe_size(ctx, &uni), WEFT_OK);
    EXPECT_EQ(rank, 0u);
    EXPECT_EQ(size, 1u);
    EXPECT_EQ(job, 0u);
    EXPECT_EQ(uni, 1u);
    uint32_t peer = 99, pj = 99, pr = 99;
    ASSERT_EQ(weft_peer_lookup(ctx, 0, 0, &peer), WEFT_OK);
    EXPECT_EQ(peer, 0u);
    ASSERT_EQ(weft_peer_identity(ctx, 0, &pj, &pr), WEFT_OK);
    EXPECT_EQ(pj, 0u);
    EXPECT_EQ(pr, 0u);
    int failed = -1;
    ASSERT_EQ(weft_peer_failed(ctx, 0, &failed), WEFT_OK);
    EXPECT_EQ(failed, 0);
    EXPECT_EQ(weft_bootstrap_barrier(ctx), WEFT_OK);
}

TEST_F(Api, DefaultTransportIsShm) {
    weft_caps_t caps;
    std::memset(&caps, 0, sizeof caps);
    ASSERT_EQ(weft_query_caps(ctx, &caps), WEFT_OK);
    ASSERT_NE(caps.transport, nullptr);
    EXPECT_STREQ(caps.transport, "shm");
    EXPECT_EQ(caps.atomics, WEFT_ATOMICS_CPU);
    EXPECT_EQ(caps.atomics_registered, WEFT_ATOMICS_NONE);
    EXPECT_EQ(caps.am_max_size, WEFT_AM_MAX_SIZE);
    EXPECT_GT(caps.am_eager_limit, 0u);
    EXPECT_LE(caps.am_eager_limit, caps.am_max_size);
}

TEST_F(Api, PeersOutsideTheJob) {
    uint32_t out = 7, j = 7, r = 7;
    int failed = 7;
    EXPECT_EQ(weft_peer_lookup(ctx, 0, 1, &out), WEFT_ERR_INVALID_RANK);
    EXPECT_EQ(weft_peer_lookup(ctx, 1, 0, &out), WEFT_ERR_INVALID_RANK);
    EXPECT_EQ(weft_peer_lookup(ctx, UINT32_MAX, UINT32_MAX, &out), WEFT_ERR_INVALID_RANK);
    EXPECT_EQ(out, 7u) << "outputs are set only on success";
    EXPECT_EQ(weft_peer_identity(ctx, 1, &j, &r), WEFT_ERR_INVALID_RANK);
    EXPECT_EQ(weft_peer_failed(ctx, 1, &failed), WEFT_ERR_INVALID_RANK);
    EXPECT_EQ(weft_peer_failed(ctx, UINT32_MAX, &failed), WEFT_ERR_INVALID_RANK);
    char b = 1;
    EXPECT_EQ(weft_am_send(ctx, 1, 0, &b, 1), WEFT_ERR_INVALID_RANK);
    EXPECT_EQ(weft_am_send(ctx, UINT32_MAX, 0, &b, 1), WEFT_ERR_INVALID_RANK);
}

// ------------------------------------------------------------ lifecycle

TEST(ApiLifecycle, InitNullOutput) {
    clear_launcher_env();
    EXPECT_EQ(weft_init(nullptr), WEFT_ERR_INVALID_ARG);
}

TEST(ApiLifecycle, RepeatedInitFinalizeInOneProcess) {
    clear_launcher_env();
    for (int i = 0; i < 5; ++i) {
        weft_context_t ctx = nullptr;
        ASSERT_EQ(weft_init(&ctx), WEFT_OK) << "iteration " << i;
        uint32_t size = 0;
        ASSERT_EQ(weft_size(ctx, &size), WEFT_OK);
        EXPECT_EQ(size, 1u);
        void* base = nullptr;
        weft_window_t w = nullptr;
        ASSERT_EQ(weft_window_allocate(ctx, 4096, &base, &w), WEFT_OK);
        uint64_t old = 1;
        ASSERT_EQ(weft_atomic_fetch_add(w, 0, 0, 5, &old), WEFT_OK);
        EXPECT_EQ(old, 0u) << "a fresh window is zero-filled";
        Inbox in;
        ASSERT_EQ(weft_am_register(ctx, 1, Inbox::handler, &in), WEFT_OK);
        uint32_t v = static_cast<uint32_t>(i);
        ASSERT_EQ(weft_am_send(ctx, 0, 1, &v, sizeof v), WEFT_OK);
        wait_for(ctx, in, 1);
        ASSERT_EQ(in.msgs.size(), 1u);
        ASSERT_EQ(weft_window_free(w), WEFT_OK);
        ASSERT_EQ(weft_finalize(ctx), WEFT_OK) << "iteration " << i;
    }
}

TEST(ApiLifecycle, TwoContextsAtOnce) {
    // Not forbidden by weft.h; each context is its own singleton job.
    clear_launcher_env();
    weft_context_t a = nullptr, b = nullptr;
    ASSERT_EQ(weft_init(&a), WEFT_OK);
    ASSERT_EQ(weft_init(&b), WEFT_OK);
    EXPECT_NE(a, b);
    EXPECT_EQ(weft_finalize(a), WEFT_OK);
    uint32_t r = 9;
    EXPECT_EQ(weft_rank(b, &r), WEFT_OK);
    EXPECT_EQ(weft_finalize(b), WEFT_OK);
}

// Every context-taking call must answer WEFT_ERR_NOT_INITIALIZED for ctx
// (NULL or finalized). Returns the window output, which must stay untouched.
static weft_window_t expect_every_call_not_initialized(weft_context_t ctx) {
    uint32_t u = 0;
    int failed = 0;
    weft_caps_t caps;
    void* base = nullptr;
    weft_window_t w = nullptr;
    char byte = 0;
    EXPECT_EQ(weft_finalize(ctx), WEFT_ERR_NOT_INITIALIZED);
    EXPECT_EQ(weft_rank(ctx, &u), WEFT_ERR_NOT_INITIALIZED);
    EXPECT_EQ(weft_size(ctx, &u), WEFT_ERR_NOT_INITIALIZED);
    EXPECT_EQ(weft_job_id(ctx, &u), WEFT_ERR_NOT_INITIALIZED);
    EXPECT_EQ(weft_universe_size(ctx, &u), WEFT_ERR_NOT_INITIALIZED);
    EXPECT_EQ(weft_peer_lookup(ctx, 0, 0, &u), WEFT_ERR_NOT_INITIALIZED);
    EXPECT_EQ(weft_peer_identity(ctx, 0, &u, &u), WEFT_ERR_NOT_INITIALIZED);
    EXPECT_EQ(weft_query_caps(ctx, &caps), WEFT_ERR_NOT_INITIALIZED);
    EXPECT_EQ(weft_window_allocate(ctx, 64, &base, &w), WEFT_ERR_NOT_INITIALIZED);
    EXPECT_EQ(weft_window_register(ctx, &byte, 1, &w), WEFT_ERR_NOT_INITIALIZED);
    EXPECT_EQ(weft_state_window(ctx, &w), WEFT_ERR_NOT_INITIALIZED);
    EXPECT_EQ(weft_am_register(ctx, 0, Inbox::handler, nullptr), WEFT_ERR_NOT_INITIALIZED);
    EXPECT_EQ(weft_am_send(ctx, 0, 0, &byte, 1), WEFT_ERR_NOT_INITIALIZED);
    EXPECT_EQ(weft_progress(ctx, &u), WEFT_ERR_NOT_INITIALIZED);
    EXPECT_EQ(weft_wait(ctx, 1000), WEFT_ERR_NOT_INITIALIZED);
    EXPECT_EQ(weft_set_peer_failure_handler(ctx, nullptr, nullptr), WEFT_ERR_NOT_INITIALIZED);
    EXPECT_EQ(weft_peer_failed(ctx, 0, &failed), WEFT_ERR_NOT_INITIALIZED);
    EXPECT_EQ(weft_bootstrap_barrier(ctx), WEFT_ERR_NOT_INITIALIZED);
    return w;
}

TEST(ApiLifecycle, FinalizedContextIsTombstoned) {
    clear_launcher_env();
    weft_context_t ctx = nullptr;
    ASSERT_EQ(weft_init(&ctx), WEFT_OK);
    ASSERT_EQ(weft_finalize(ctx), WEFT_OK);
    EXPECT_EQ(expect_every_call_not_initialized(ctx), nullptr);
}

TEST(ApiLifecycle, WindowOfFinalizedContextIsTombstoned) {
    // weft.h: "Calling a function on a finalized context or freed window
    // returns WEFT_ERR_NOT_INITIALIZED (never undefined behaviour)".
    // Finalize releases every window of the context, so their handles must
    // read as dead — not as freed memory (ASan reports a use after free when
    // the window shells are deleted with the Runtime).
    clear_launcher_env();
    weft_context_t ctx = nullptr;
    ASSERT_EQ(weft_init(&ctx), WEFT_OK);
    void* base = nullptr;
    weft_window_t w = nullptr, state = nullptr;
    ASSERT_EQ(weft_window_allocate(ctx, 64, &base, &w), WEFT_OK);
    ASSERT_EQ(weft_state_window(ctx, &state), WEFT_OK);
    ASSERT_EQ(weft_finalize(ctx), WEFT_OK);
    uint64_t v = 0;
    EXPECT_EQ(weft_put(w, 0, 0, &v, 8), WEFT_ERR_NOT_INITIALIZED);
    EXPECT_EQ(weft_get(state, 0, 0, &v, 8), WEFT_ERR_NOT_INITIALIZED);
    EXPECT_EQ(weft_window_free(w), WEFT_ERR_NOT_INITIALIZED);
}

TEST(ApiLifecycle, BogusTransportIsRejected) {
    clear_launcher_env();
    setenv("WEFT_TRANSPORT", "bogus", 1);
    weft_context_t ctx = reinterpret_cast<weft_context_t>(uintptr_t(0x1));
    const weft_status_t st = weft_init(&ctx);
    unsetenv("WEFT_TRANSPORT");
    EXPECT_EQ(st, WEFT_ERR_UNKNOWN_TRANSPORT);
    EXPECT_EQ(ctx, reinterpret_cast<weft_context_t>(uintptr_t(0x1))) << "outputs are set only on success";
    // A failed init leaves nothing behind: the next one works.
    weft_context_t ok = nullptr;
    ASSERT_EQ(weft_init(&ok), WEFT_OK);
    EXPECT_EQ(weft_finalize(ok), WEFT_OK);
}

TEST(ApiLifecycle, ExplicitShmTransport) {
    clear_launcher_env();
    setenv("WEFT_TRANSPORT", "shm", 1);
    weft_context_t ctx = nullptr;
    const weft_status_t st = weft_init(&ctx);
    unsetenv("WEFT_TRANSPORT");
    ASSERT_EQ(st, WEFT_OK);
    weft_caps_t caps;
    ASSERT_EQ(weft_query_caps(ctx, &caps), WEFT_OK);
    EXPECT_STREQ(caps.transport, "shm");
    EXPECT_EQ(weft_finalize(ctx), WEFT_OK);
}

// ------------------------------------------------ NULL handles and outputs

TEST(ApiNull, NullContextIsNotInitialized) {
    weft_context_t ctx = nullptr;
    expect_every_call_not_initialized(ctx);
}

TEST(ApiNull, NullWindowIsNotInitialized) {
    weft_window_t w = nullptr;
    void* base = nullptr;
    size_t size = 0;
    uint64_t v = 0, old = 0;
    EXPECT_EQ(weft_window_free(w), WEFT_ERR_NOT_INITIALIZED);
    EXPECT_EQ(weft_window_local(w, &base, &size), WEFT_ERR_NOT_INITIALIZED);
    EXPECT_EQ(weft_put(w, 0, 0, &v, 8), WEFT_ERR_NOT_INITIALIZED);
    EXPECT_EQ(weft_get(w, 0, 0, &v, 8), WEFT_ERR_NOT_INITIALIZED);
    EXPECT_EQ(weft_atomic_fetch_add(w, 0, 0, 1, &old), WEFT_ERR_NOT_INITIALIZED);
    EXPECT_EQ(weft_atomic_compare_swap(w, 0, 0, 0, 1, &old), WEFT_ERR_NOT_INITIALIZED);
    EXPECT_EQ(weft_atomic_swap(w, 0, 0, 1, &old), WEFT_ERR_NOT_INITIALIZED);
    EXPECT_EQ(weft_flush(w, 0), WEFT_ERR_NOT_INITIALIZED);
    EXPECT_EQ(weft_flush(w, WEFT_RANK_ALL), WEFT_ERR_NOT_INITIALIZED);
}

TEST_F(Api, NullOutputPointersAreInvalidArg) {
    uint32_t u = 0;
    EXPECT_EQ(weft_rank(ctx, nullptr), WEFT_ERR_INVALID_ARG);
    EXPECT_EQ(weft_size(ctx, nullptr), WEFT_ERR_INVALID_ARG);
    EXPECT_EQ(weft_job_id(ctx, nullptr), WEFT_ERR_INVALID_ARG);
    EXPECT_EQ(weft_universe_size(ctx, nullptr), WEFT_ERR_INVALID_ARG);
    EXPECT_EQ(weft_peer_lookup(ctx, 0, 0, nullptr), WEFT_ERR_INVALID_ARG);
    EXPECT_EQ(weft_peer_identity(ctx, 0, nullptr, &u), WEFT_ERR_INVALID_ARG);
    EXPECT_EQ(weft_peer_identity(ctx, 0, &u, nullptr), WEFT_ERR_INVALID_ARG);
    EXPECT_EQ(weft_query_caps(ctx, nullptr), WEFT_ERR_INVALID_ARG);
    EXPECT_EQ(weft_peer_failed(ctx, 0, nullptr), WEFT_ERR_INVALID_ARG);
    EXPECT_EQ(weft_state_window(ctx, nullptr), WEFT_ERR_INVALID_ARG);

    void* base = nullptr;
    weft_window_t w = nullptr;
    EXPECT_EQ(weft_window_allocate(ctx, 64, nullptr, &w), WEFT_ERR_INVALID_ARG);
    EXPECT_EQ(weft_window_allocate(ctx, 64, &base, nullptr), WEFT_ERR_INVALID_ARG);
    char mem[64];
    EXPECT_EQ(weft_window_register(ctx, mem, sizeof mem, nullptr), WEFT_ERR_INVALID_ARG);
    EXPECT_EQ(weft_window_register(ctx, nullptr, 64, &w), WEFT_ERR_INVALID_ARG);
    EXPECT_EQ(w, nullptr);

    ASSERT_EQ(weft_window_allocate(ctx, 64, &base, &w), WEFT_OK);
    size_t size = 0;
    EXPECT_EQ(weft_window_local(w, nullptr, &size), WEFT_ERR_INVALID_ARG);
    EXPECT_EQ(weft_window_local(w, &base, nullptr), WEFT_ERR_INVALID_ARG);
    EXPECT_EQ(weft_put(w, 0, 0, nullptr, 8), WEFT_ERR_INVALID_ARG);
    EXPECT_EQ(weft_get(w, 0, 0, nullptr, 8), WEFT_ERR_INVALID_ARG);
    EXPECT_EQ(weft_atomic_fetch_add(w, 0, 0, 1, nullptr), WEFT_ERR_INVALID_ARG);
    EXPECT_EQ(weft_atomic_compare_swap(w, 0, 0, 0, 1, nullptr), WEFT_ERR_INVALID_ARG);
    EXPECT_EQ(weft_atomic_swap(w, 0, 0, 1, nullptr), WEFT_ERR_INVALID_ARG);
    EXPECT_EQ(weft_am_send(ctx, 0, 0, nullptr, 8), WEFT_ERR_INVALID_ARG);
    // NULL with zero length is a valid no-op; NULL events is allowed.
    EXPECT_EQ(weft_put(w, 0, 0, nullptr, 0), WEFT_OK);
    EXPECT_EQ(weft_get(w, 0, 0, nullptr, 0), WEFT_OK);
    EXPECT_EQ(weft_progress(ctx, nullptr), WEFT_OK);
    EXPECT_EQ(weft_window_free(w), WEFT_OK);
}

// ----------------------------------------------------------------- RMA

TEST_F(Api, WindowAllocateIsZeroedAlignedAndLocal) {
    void* base = nullptr;
    weft_window_t w = nullptr;
    const size_t n = 1 << 16;
    ASSERT_EQ(weft_window_allocate(ctx, n, &base, &w), WEFT_OK);
    ASSERT_NE(base, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(base) % 64, 0u);
    const auto* b = static_cast<const uint8_t*>(base);
    size_t nonzero = 0;
    for (size_t i = 0; i < n; ++i) nonzero += b[i] != 0;
    EXPECT_EQ(nonzero, 0u);
    void* lb = nullptr;
    size_t ls = 0;
    ASSERT_EQ(weft_window_local(w, &lb, &ls), WEFT_OK);
    EXPECT_EQ(lb, base);
    EXPECT_EQ(ls, n);
    // Reused heap memory is zero-filled again.
    std::memset(base, 0xCC, n);
    ASSERT_EQ(weft_window_free(w), WEFT_OK);
    ASSERT_EQ(weft_window_allocate(ctx, n, &base, &w), WEFT_OK);
    b = static_cast<const uint8_t*>(base);
    nonzero = 0;
    for (size_t i = 0; i < n; ++i) nonzero += b[i] != 0;
    EXPECT_EQ(nonzero, 0u);
    EXPECT_EQ(weft_window_free(w), WEFT_OK);
}

TEST_F(Api, PutGetToSelf) {
    void* base = nullptr;
    weft_window_t w = nullptr;
    ASSERT_EQ(weft_window_allocate(ctx, 4096, &base, &w), WEFT_OK);
    const auto src = pattern(1000, 3);
    ASSERT_EQ(weft_put(w, 0, 100, src.data(), src.size()), WEFT_OK);
    ASSERT_EQ(weft_flush(w, 0), WEFT_OK);
    ASSERT_EQ(weft_flush(w, WEFT_RANK_ALL), WEFT_OK);
    EXPECT_EQ(std::memcmp(static_cast<uint8_t*>(base) + 100, src.data(), src.size()), 0);
    std::vector<uint8_t> dst(1000, 0);
    ASSERT_EQ(weft_get(w, 0, 100, dst.data(), dst.size()), WEFT_OK);
    EXPECT_EQ(dst, src);
    // The whole window, edge to edge.
    const auto full = pattern(4096, 9);
    ASSERT_EQ(weft_put(w, 0, 0, full.data(), full.size()), WEFT_OK);
    std::vector<uint8_t> back(4096);
    ASSERT_EQ(weft_get(w, 0, 0, back.data(), back.size()), WEFT_OK);
    EXPECT_EQ(back, full);
    // Last byte.
    uint8_t one = 0x42, got = 0;
    ASSERT_EQ(weft_put(w, 0, 4095, &one, 1), WEFT_OK);
    ASSERT_EQ(weft_get(w, 0, 4095, &got, 1), WEFT_OK);
    EXPECT_EQ(got, 0x42);
    EXPECT_EQ(weft_window_free(w), WEFT_OK);
}

TEST_F(Api, AtomicsToSelf) {
    void* base = nullptr;
    weft_window_t w = nullptr;
    ASSERT_EQ(weft_window_allocate(ctx, 256, &base, &w), WEFT_OK);
    auto* words = static_cast<uint64_t*>(base);
    uint64_t old = 99;
    ASSERT_EQ(weft_atomic_fetch_add(w, 0, 8, 5, &old), WEFT_OK);
    EXPECT_EQ(old, 0u);
    ASSERT_EQ(weft_atomic_fetch_add(w, 0, 8, UINT64_MAX, &old), WEFT_OK);  // wraps: 5 - 1
    EXPECT_EQ(old, 5u);
    EXPECT_EQ(words[1], 4u);

    ASSERT_EQ(weft_atomic_compare_swap(w, 0, 8, 4, 40, &old), WEFT_OK);  // matches
    EXPECT_EQ(old, 4u);
    EXPECT_EQ(words[1], 40u);
    ASSERT_EQ(weft_atomic_compare_swap(w, 0, 8, 4, 400, &old), WEFT_OK);  // does not match
    EXPECT_EQ(old, 40u);
    EXPECT_EQ(words[1], 40u);

    ASSERT_EQ(weft_atomic_swap(w, 0, 8, 0xDEADBEEFCAFEF00Dull, &old), WEFT_OK);
    EXPECT_EQ(old, 40u);
    EXPECT_EQ(words[1], 0xDEADBEEFCAFEF00Dull);

    // Last word of the window; neighbours untouched.
    ASSERT_EQ(weft_atomic_swap(w, 0, 248, 7, &old), WEFT_OK);
    EXPECT_EQ(old, 0u);
    EXPECT_EQ(words[31], 7u);
    EXPECT_EQ(words[0], 0u);
    EXPECT_EQ(words[2], 0u);
    // Atomics and put/get agree on the same word.
    uint64_t v = 0;
    ASSERT_EQ(weft_get(w, 0, 8, &v, 8), WEFT_OK);
    EXPECT_EQ(v, 0xDEADBEEFCAFEF00Dull);
    EXPECT_EQ(weft_window_free(w), WEFT_OK);
}

TEST_F(Api, RankOutOfRange) {
    void* base = nullptr;
    weft_window_t w = nullptr;
    ASSERT_EQ(weft_window_allocate(ctx, 64, &base, &w), WEFT_OK);
    uint64_t v = 0, old = 0;
    for (uint32_t r : {1u, 2u, UINT32_MAX - 1, UINT32_MAX}) {
        EXPECT_EQ(weft_put(w, r, 0, &v, 8), WEFT_ERR_INVALID_RANK) << r;
        EXPECT_EQ(weft_get(w, r, 0, &v, 8), WEFT_ERR_INVALID_RANK) << r;
        EXPECT_EQ(weft_atomic_fetch_add(w, r, 0, 1, &old), WEFT_ERR_INVALID_RANK) << r;
        EXPECT_EQ(weft_atomic_compare_swap(w, r, 0, 0, 1, &old), WEFT_ERR_INVALID_RANK) << r;
        EXPECT_EQ(weft_atomic_swap(w, r, 0, 1, &old), WEFT_ERR_INVALID_RANK) << r;
    }
    EXPECT_EQ(weft_flush(w, 1), WEFT_ERR_INVALID_RANK);
    EXPECT_EQ(weft_flush(w, UINT32_MAX - 1), WEFT_ERR_INVALID_RANK);
    EXPECT_EQ(weft_flush(w, WEFT_RANK_ALL), WEFT_OK);
    EXPECT_EQ(weft_window_free(w), WEFT_OK);
}

TEST_F(Api, OffsetPastTheEnd) {
    void* base = nullptr;
    weft_window_t w = nullptr;
    ASSERT_EQ(weft_window_allocate(ctx, 128, &base, &w), WEFT_OK);
    std::vector<uint8_t> buf(256, 1);
    uint64_t old = 0;
    EXPECT_EQ(weft_put(w, 0, 121, buf.data(), 8), WEFT_ERR_OUT_OF_RANGE);
    EXPECT_EQ(weft_get(w, 0, 121, buf.data(), 8), WEFT_ERR_OUT_OF_RANGE);
    EXPECT_EQ(weft_put(w, 0, 0, buf.data(), 129), WEFT_ERR_OUT_OF_RANGE);
    EXPECT_EQ(weft_get(w, 0, 128, buf.data(), 1), WEFT_ERR_OUT_OF_RANGE);
    EXPECT_EQ(weft_atomic_fetch_add(w, 0, 128, 1, &old), WEFT_ERR_OUT_OF_RANGE);
    EXPECT_EQ(weft_atomic_compare_swap(w, 0, 128, 0, 1, &old), WEFT_ERR_OUT_OF_RANGE);
    EXPECT_EQ(weft_atomic_swap(w, 0, 1 << 20, 1, &old), WEFT_ERR_OUT_OF_RANGE);
    // offset + len would wrap around 2^64: must not pass as "in range".
    for (uint64_t off : {UINT64_MAX, UINT64_MAX - 7, UINT64_MAX - 127, uint64_t(1) << 63}) {
        EXPECT_EQ(weft_put(w, 0, off, buf.data(), 8), WEFT_ERR_OUT_OF_RANGE) << off;
        EXPECT_EQ(weft_get(w, 0, off, buf.data(), 130), WEFT_ERR_OUT_OF_RANGE) << off;
        EXPECT_EQ(weft_get(w, 0, off, buf.data(), 1), WEFT_ERR_OUT_OF_RANGE) << off;
    }
    EXPECT_EQ(weft_atomic_fetch_add(w, 0, UINT64_MAX - 7, 1, &old), WEFT_ERR_OUT_OF_RANGE);
    EXPECT_EQ(weft_atomic_swap(w, 0, (UINT64_MAX - 7) & ~uint64_t(7), 1, &old), WEFT_ERR_OUT_OF_RANGE);
    EXPECT_EQ(weft_get(w, 0, 8, buf.data(), SIZE_MAX), WEFT_ERR_OUT_OF_RANGE);
    EXPECT_EQ(weft_get(w, 0, 0, buf.data(), SIZE_MAX), WEFT_ERR_OUT_OF_RANGE);
    // Nothing was written by any rejected call.
    const auto* b = static_cast<const uint8_t*>(base);
    for (size_t i = 0; i < 128; ++i) ASSERT_EQ(b[i], 0) << i;
    EXPECT_EQ(weft_window_free(w), WEFT_OK);
}

TEST_F(Api, ZeroSizeWindow) {
    void* base = nullptr;
    weft_window_t w = nullptr;
    ASSERT_EQ(weft_window_allocate(ctx, 0, &base, &w), WEFT_OK);
    uint8_t b = 0;
    uint64_t old = 0;
    EXPECT_EQ(weft_put(w, 0, 0, &b, 1), WEFT_ERR_OUT_OF_RANGE);
    EXPECT_EQ(weft_put(w, 0, 0, &b, 0), WEFT_OK);
    EXPECT_EQ(weft_atomic_fetch_add(w, 0, 0, 1, &old), WEFT_ERR_OUT_OF_RANGE);
    void* lb = &b;
    size_t ls = 99;
    ASSERT_EQ(weft_window_local(w, &lb, &ls), WEFT_OK);
    EXPECT_EQ(ls, 0u);
    EXPECT_EQ(weft_window_free(w), WEFT_OK);
}

TEST_F(Api, UnalignedAtomics) {
    void* base = nullptr;
    weft_window_t w = nullptr;
    ASSERT_EQ(weft_window_allocate(ctx, 128, &base, &w), WEFT_OK);
    uint64_t old = 0;
    for (uint64_t off : {1ull, 2ull, 4ull, 7ull, 9ull, 12ull, 63ull}) {
        EXPECT_EQ(weft_atomic_fetch_add(w, 0, off, 1, &old), WEFT_ERR_UNALIGNED) << off;
        EXPECT_EQ(weft_atomic_compare_swap(w, 0, off, 0, 1, &old), WEFT_ERR_UNALIGNED) << off;
        EXPECT_EQ(weft_atomic_swap(w, 0, off, 1, &old), WEFT_ERR_UNALIGNED) << off;
    }
    const auto* b = static_cast<const uint8_t*>(base);
    for (size_t i = 0; i < 128; ++i) ASSERT_EQ(b[i], 0) << i;
    EXPECT_EQ(weft_window_free(w), WEFT_OK);
}

TEST_F(Api, FreedWindowHandle) {
    void* base = nullptr;
    weft_window_t w = nullptr;
    ASSERT_EQ(weft_window_allocate(ctx, 64, &base, &w), WEFT_OK);
    ASSERT_EQ(weft_window_free(w), WEFT_OK);
    uint64_t v = 0, old = 0;
    void* lb = nullptr;
    size_t ls = 0;
    EXPECT_EQ(weft_window_free(w), WEFT_ERR_NOT_INITIALIZED);
    EXPECT_EQ(weft_window_local(w, &lb, &ls), WEFT_ERR_NOT_INITIALIZED);
    EXPECT_EQ(weft_put(w, 0, 0, &v, 8), WEFT_ERR_NOT_INITIALIZED);
    EXPECT_EQ(weft_get(w, 0, 0, &v, 8), WEFT_ERR_NOT_INITIALIZED);
    EXPECT_EQ(weft_atomic_fetch_add(w, 0, 0, 1, &old), WEFT_ERR_NOT_INITIALIZED);
    EXPECT_EQ(weft_atomic_compare_swap(w, 0, 0, 0, 1, &old), WEFT_ERR_NOT_INITIALIZED);
    EXPECT_EQ(weft_atomic_swap(w, 0, 0, 1, &old), WEFT_ERR_NOT_INITIALIZED);
    EXPECT_EQ(weft_flush(w, 0), WEFT_ERR_NOT_INITIALIZED);
}

TEST_F(Api, ManyWindowsAllocateAndFree) {
    // The heap must give memory back: allocate and free far more than it holds
    // at once would allow if frees leaked.
    for (int i = 0; i < 200; ++i) {
        void* base = nullptr;
        weft_window_t w = nullptr;
        ASSERT_EQ(weft_window_allocate(ctx, 8u << 20, &base, &w), WEFT_OK) << i;
        static_cast<uint8_t*>(base)[(8u << 20) - 1] = 1;
        ASSERT_EQ(weft_window_free(w), WEFT_OK) << i;
    }
}

TEST_F(Api, RegisteredWindowPutGetAndNoAtomics) {
    std::vector<uint8_t> mem(1000, 0);
    weft_window_t w = nullptr;
    ASSERT_EQ(weft_window_register(ctx, mem.data(), mem.size(), &w), WEFT_OK);
    void* lb = nullptr;
    size_t ls = 0;
    ASSERT_EQ(weft_window_local(w, &lb, &ls), WEFT_OK);
    EXPECT_EQ(lb, mem.data());
    EXPECT_EQ(ls, mem.size());
    const auto src = pattern(500, 77);
    ASSERT_EQ(weft_put(w, 0, 250, src.data(), src.size()), WEFT_OK);
    ASSERT_EQ(weft_flush(w, 0), WEFT_OK);
    EXPECT_EQ(std::memcmp(mem.data() + 250, src.data(), src.size()), 0);
    std::vector<uint8_t> dst(500);
    ASSERT_EQ(weft_get(w, 0, 250, dst.data(), dst.size()), WEFT_OK);
    EXPECT_EQ(dst, src);
    EXPECT_EQ(weft_put(w, 0, 999, src.data(), 2), WEFT_ERR_OUT_OF_RANGE);
    uint64_t old = 0;
    EXPECT_EQ(weft_atomic_fetch_add(w, 0, 0, 1, &old), WEFT_ERR_UNSUPPORTED);
    EXPECT_EQ(weft_atomic_compare_swap(w, 0, 0, 0, 1, &old), WEFT_ERR_UNSUPPORTED);
    EXPECT_EQ(weft_atomic_swap(w, 0, 0, 1, &old), WEFT_ERR_UNSUPPORTED);
    // Argument checks still come first.
    EXPECT_EQ(weft_atomic_swap(w, 0, 3, 1, &old), WEFT_ERR_UNALIGNED);
    EXPECT_EQ(weft_atomic_swap(w, 1, 0, 1, &old), WEFT_ERR_INVALID_RANK);
    EXPECT_EQ(weft_window_free(w), WEFT_OK);
}

TEST_F(Api, RegisteredZeroSizeWindowWithNullBase) {
    weft_window_t w = nullptr;
    ASSERT_EQ(weft_window_register(ctx, nullptr, 0, &w), WEFT_OK);
    uint8_t b = 0;
    EXPECT_EQ(weft_put(w, 0, 0, &b, 1), WEFT_ERR_OUT_OF_RANGE);
    EXPECT_EQ(weft_window_free(w), WEFT_OK);
}

// --------------------------------------------------------- state window

TEST_F(Api, StateWindowLayout) {
    weft_window_t sw = nullptr;
    ASSERT_EQ(weft_state_window(ctx, &sw), WEFT_OK);
    ASSERT_NE(sw, nullptr);
    void* base = nullptr;
    size_t size = 0;
    ASSERT_EQ(weft_window_local(sw, &base, &size), WEFT_OK);
    EXPECT_GE(size, static_cast<size_t>(WEFT_STATE_SIZE));
    EXPECT_EQ(reinterpret_cast<uintptr_t>(base) % WEFT_STATE_LINE, 0u);
    uint64_t v = 0;
    ASSERT_EQ(weft_get(sw, 0, WEFT_STATE_MAGIC_OFF, &v, 8), WEFT_OK);
    EXPECT_EQ(v, WEFT_STATE_MAGIC);
    ASSERT_EQ(weft_get(sw, 0, WEFT_STATE_VERSION_OFF, &v, 8), WEFT_OK);
    EXPECT_EQ(v, WEFT_STATE_LAYOUT_VERSION);
    ASSERT_EQ(weft_get(sw, 0, WEFT_STATE_OWNER_RANK_OFF, &v, 8), WEFT_OK);
    EXPECT_EQ(v, 0u);
    ASSERT_EQ(weft_get(sw, 0, WEFT_STATE_OWNER_PID_OFF, &v, 8), WEFT_OK);
    EXPECT_EQ(v, static_cast<uint64_t>(getpid()));
    // The same words through the local mapping.
    const auto* words = static_cast<const uint64_t*>(base);
    EXPECT_EQ(words[WEFT_STATE_MAGIC_OFF / 8], WEFT_STATE_MAGIC);
    // Remote-atomic words take atomics; the last clock record is in range.
    uint64_t old = 1;
    ASSERT_EQ(weft_atomic_compare_swap(sw, 0, WEFT_STATE_EPOCH_OFF, 0, 5, &old), WEFT_OK);
    EXPECT_EQ(old, 0u);
    ASSERT_EQ(
        weft_atomic_fetch_add(sw, 0, WEFT_STATE_CLOCK_OFF(WEFT_STATE_COMM_SLOTS - 1, WEFT_STATE_CLOCK_TARGET), 3, &old),
        WEFT_OK);
    EXPECT_EQ(old, 0u);
    // The caller never frees it; the same handle every time.
    EXPECT_EQ(weft_window_free(sw), WEFT_ERR_INVALID_ARG);
    weft_window_t again = nullptr;
    ASSERT_EQ(weft_state_window(ctx, &again), WEFT_OK);
    EXPECT_EQ(again, sw);
    ASSERT_EQ(weft_get(sw, 0, WEFT_STATE_MAGIC_OFF, &v, 8), WEFT_OK);
    EXPECT_EQ(v, WEFT_STATE_MAGIC);
}

TEST(StateWindowHeader, OffsetsMatchTheDocumentedLayout) {
    // Compile-time facts of weft/state_window.h, checked here so a layout
    // change shows up as a test change.
    static_assert(WEFT_STATE_MAGIC_OFF == 0 && WEFT_STATE_VERSION_OFF == 8);
    static_assert(WEFT_STATE_OWNER_RANK_OFF == 16 && WEFT_STATE_OWNER_PID_OFF == 24);
    static_assert(WEFT_STATE_HEARTBEAT_OFF % WEFT_STATE_LINE == 0);
    static_assert(WEFT_STATE_CLOCKS_OFF % WEFT_STATE_LINE == 0);
    static_assert(WEFT_STATE_CLOCK_OFF(WEFT_STATE_COMM_SLOTS - 1, WEFT_STATE_CLOCK_TARGET) + 8 <= WEFT_STATE_SIZE);
    EXPECT_EQ(WEFT_STATE_SIZE % WEFT_STATE_LINE, 0);
}

// ---------------------------------------------------- active messages

TEST_F(Api, AmSizeChecks) {
    Inbox in;
    ASSERT_EQ(weft_am_register(ctx, 0, Inbox::handler, &in), WEFT_OK);
    char b = 0;
    EXPECT_EQ(weft_am_send(ctx, 0, 0, &b, 0), WEFT_ERR_MSG_SIZE);
    EXPECT_EQ(weft_am_send(ctx, 0, 0, nullptr, 0), WEFT_ERR_MSG_SIZE);
    EXPECT_EQ(weft_am_send(ctx, 0, 0, &b, WEFT_AM_MAX_SIZE + 1), WEFT_ERR_MSG_SIZE);
    EXPECT_EQ(weft_am_send(ctx, 0, 0, &b, SIZE_MAX), WEFT_ERR_MSG_SIZE);
    EXPECT_EQ(weft_progress(ctx, nullptr), WEFT_OK);
    EXPECT_TRUE(in.msgs.empty());
}

TEST_F(Api, AmIdChecks) {
    Inbox in;
    char b = 0;
    for (uint32_t id : {uint32_t(WEFT_AM_MAX_HANDLERS), uint32_t(WEFT_AM_MAX_HANDLERS + 1), UINT32_MAX}) {
        EXPECT_EQ(weft_am_register(ctx, id, Inbox::handler, &in), WEFT_ERR_INVALID_ARG) << id;
        EXPECT_EQ(weft_am_send(ctx, 0, id, &b, 1), WEFT_ERR_INVALID_ARG) << id;
    }
    ASSERT_EQ(weft_am_register(ctx, WEFT_AM_MAX_HANDLERS - 1, Inbox::handler, &in), WEFT_OK);
    ASSERT_EQ(weft_am_send(ctx, 0, WEFT_AM_MAX_HANDLERS - 1, &b, 1), WEFT_OK);
    wait_for(ctx, in, 1);
    EXPECT_EQ(in.msgs.size(), 1u);
}

TEST_F(Api, AmRegisterTwiceIsBusy) {
    Inbox a, b;
    ASSERT_EQ(weft_am_register(ctx, 5, Inbox::handler, &a), WEFT_OK);
    EXPECT_EQ(weft_am_register(ctx, 5, Inbox::handler, &b), WEFT_ERR_BUSY);
    // The first registration still owns the id.
    char c = 'x';
    ASSERT_EQ(weft_am_send(ctx, 0, 5, &c, 1), WEFT_OK);
    wait_for(ctx, a, 1);
    EXPECT_EQ(a.msgs.size(), 1u);
    EXPECT_TRUE(b.msgs.empty());
    // Other ids are independent.
    EXPECT_EQ(weft_am_register(ctx, 6, Inbox::handler, &b), WEFT_OK);
}

TEST_F(Api, AmSmallToSelf) {
    Inbox in;
    ASSERT_EQ(weft_am_register(ctx, 2, Inbox::handler, &in), WEFT_OK);
    const auto msg = pattern(100, 5);
    ASSERT_EQ(weft_am_send(ctx, 0, 2, msg.data(), msg.size()), WEFT_OK);
    ASSERT_EQ(weft_wait(ctx, 5 * sec), WEFT_OK);
    ASSERT_EQ(in.msgs.size(), 1u);
    EXPECT_EQ(in.msgs[0].source, 0u);
    EXPECT_EQ(in.msgs[0].bytes, msg);
    // One byte, and exactly the eager limit, through weft_progress.
    weft_caps_t caps;
    ASSERT_EQ(weft_query_caps(ctx, &caps), WEFT_OK);
    const auto one = pattern(1, 1);
    const auto eager = pattern(caps.am_eager_limit, 2);
    ASSERT_EQ(weft_am_send(ctx, 0, 2, one.data(), 1), WEFT_OK);
    ASSERT_EQ(weft_am_send(ctx, 0, 2, eager.data(), eager.size()), WEFT_OK);
    uint32_t events = 0;
    for (int i = 0; i < 1000000 && in.msgs.size() < 3; ++i) ASSERT_EQ(weft_progress(ctx, &events), WEFT_OK);
    ASSERT_EQ(in.msgs.size(), 3u);
    EXPECT_EQ(in.msgs[1].bytes, one);
    EXPECT_EQ(in.msgs[2].bytes, eager);
    // Nothing pending: a short wait times out.
    EXPECT_EQ(weft_wait(ctx, 1000000), WEFT_ERR_TIMEOUT);
    EXPECT_EQ(weft_progress(ctx, &events), WEFT_OK);
    EXPECT_EQ(events, 0u);
}

TEST_F(Api, AmRendezvousOneMiBToSelf) {
    Inbox in;
    ASSERT_EQ(weft_am_register(ctx, 3, Inbox::handler, &in), WEFT_OK);
    weft_caps_t caps;
    ASSERT_EQ(weft_query_caps(ctx, &caps), WEFT_OK);
    const size_t n = 1u << 20;
    ASSERT_GT(n, caps.am_eager_limit) << "1 MiB should go by rendezvous";
    auto msg = pattern(n, 11);
    ASSERT_EQ(weft_am_send(ctx, 0, 3, msg.data(), msg.size()), WEFT_OK);
    // The payload may be reused now: changing it must not change what arrives.
    std::vector<uint8_t> sent = msg;
    std::fill(msg.begin(), msg.end(), 0);
    // To self, the send itself progresses until the FIN, so the handler may
    // already have run; otherwise weft_wait delivers it.
    wait_for(ctx, in, 1);
    ASSERT_EQ(in.msgs.size(), 1u);
    EXPECT_EQ(in.msgs[0].source, 0u);
    ASSERT_EQ(in.msgs[0].bytes.size(), n);
    EXPECT_TRUE(in.msgs[0].bytes == sent);
}

TEST_F(Api, AmOrderManyMessagesThroughAFullRing) {
    // More than the self ring holds: the sender has to drain its own ring
    // (reentrant progress) and order must survive.
    struct Seq {
        std::vector<uint32_t> got;
        static void handler(void* arg, uint32_t, const void* p, size_t len) {
            uint32_t v;
            if (len != 64) return;
            std::memcpy(&v, p, 4);
            static_cast<Seq*>(arg)->got.push_back(v);
        }
    } s;
    ASSERT_EQ(weft_am_register(ctx, 9, Seq::handler, &s), WEFT_OK);
    const uint32_t n = 20000;
    uint8_t buf[64] = {};
    for (uint32_t i = 0; i < n; ++i) {
        std::memcpy(buf, &i, 4);
        ASSERT_EQ(weft_am_send(ctx, 0, 9, buf, sizeof buf), WEFT_OK) << i;
    }
    for (int i = 0; i < 1000 && s.got.size() < n; ++i)
        if (weft_wait(ctx, 5 * sec) != WEFT_OK) break;
    ASSERT_EQ(s.got.size(), n);
    for (uint32_t i = 0; i < n; ++i) ASSERT_EQ(s.got[i], i);
}

TEST_F(Api, AmHandlerMaySendAm) {
    struct Relay {
        weft_context_t ctx;
        int hops = 0;
        static void handler(void* arg, uint32_t src, const void* p, size_t len) {
            auto* r = static_cast<Relay*>(arg);
            ++r->hops;
            if (r->hops < 3) weft_am_send(r->ctx, src, 4, p, len);
        }
    } relay{ctx};
    ASSERT_EQ(weft_am_register(ctx, 4, Relay::handler, &relay), WEFT_OK);
    char c = 'r';
    ASSERT_EQ(weft_am_send(ctx, 0, 4, &c, 1), WEFT_OK);
    for (int i = 0; i < 100 && relay.hops < 3; ++i)
        if (weft_wait(ctx, 5 * sec) != WEFT_OK) break;
    EXPECT_EQ(relay.hops, 3);
}

TEST_F(Api, AmUnregisterWithNullHandler) {
    Inbox a, b;
    ASSERT_EQ(weft_am_register(ctx, 7, Inbox::handler, &a), WEFT_OK);
    ASSERT_EQ(weft_am_register(ctx, 7, nullptr, nullptr), WEFT_OK);
    EXPECT_EQ(weft_am_register(ctx, 7, Inbox::handler, &b), WEFT_OK);
}

TEST_F(Api, WaitTimesOutWithNothingPending) {
    EXPECT_EQ(weft_wait(ctx, 0), WEFT_ERR_TIMEOUT);
    EXPECT_EQ(weft_wait(ctx, 2000000), WEFT_ERR_TIMEOUT);  // 2 ms: into the blocking stage
}

TEST_F(Api, PeerFailureHandlerCanBeSet) {
    EXPECT_EQ(weft_set_peer_failure_handler(
                  ctx, [](void*, uint32_t) {}, nullptr),
              WEFT_OK);
    EXPECT_EQ(weft_set_peer_failure_handler(ctx, nullptr, nullptr), WEFT_OK);
}

TEST_F(Api, EventRegistrationRejectsBadInput) {
    const weft_event_handler_t h = [](void*, weft_event_t, uint32_t) {};
    uint64_t id = 0, other = 0;
    EXPECT_EQ(weft_event_register(nullptr, WEFT_EVENT_PROC_FAILED, h, nullptr, &id), WEFT_ERR_NOT_INITIALIZED);
    EXPECT_EQ(weft_event_register(ctx, WEFT_EVENT_PROC_FAILED, nullptr, nullptr, &id), WEFT_ERR_INVALID_ARG);
    EXPECT_EQ(weft_event_register(ctx, WEFT_EVENT_PROC_FAILED, h, nullptr, nullptr), WEFT_ERR_INVALID_ARG);
    EXPECT_EQ(weft_event_register(ctx, static_cast<weft_event_t>(99), h, nullptr, &id), WEFT_ERR_INVALID_ARG);
    ASSERT_EQ(weft_event_register(ctx, WEFT_EVENT_PROC_FAILED, h, nullptr, &id), WEFT_OK);
    ASSERT_EQ(weft_event_register(ctx, WEFT_EVENT_PROC_FAILED, h, nullptr, &other), WEFT_OK);
    EXPECT_NE(id, other) << "each registration has its own id";
    EXPECT_EQ(weft_event_deregister(ctx, id), WEFT_OK);
    EXPECT_EQ(weft_event_deregister(ctx, id), WEFT_ERR_NOT_FOUND) << "deregistered twice";
    EXPECT_EQ(weft_event_deregister(ctx, 123456), WEFT_ERR_NOT_FOUND);
    EXPECT_EQ(weft_event_deregister(nullptr, other), WEFT_ERR_NOT_INITIALIZED);
    EXPECT_EQ(weft_event_deregister(ctx, other), WEFT_OK);
}
