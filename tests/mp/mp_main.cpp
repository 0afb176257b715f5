// mp_main.cpp — init/finalize around the GoogleTest run; only rank 0 prints
// the full GoogleTest output (others print failures only).
#include "tests/mp/mp_main.hpp"

#include <weft/comm.h>

#include <cstdio>
#include <cstdlib>

namespace mp {

weft_context_t ctx = nullptr;
uint32_t rank = 0, size = 1;

namespace {
class QuietListener : public testing::EmptyTestEventListener {
    void OnTestPartResult(const testing::TestPartResult& r) override {
        if (r.failed())
            std::fprintf(stderr, "[rank %u] %s:%d: %s\n", rank, r.file_name() ? r.file_name() : "?", r.line_number(),
                         r.summary());
    }
};
}  // namespace

int run_all(int argc, char** argv) {
    testing::InitGoogleTest(&argc, argv);
    // MP_THREAD_MULTIPLE=1: the binary's tests use several threads.
    const char* multi = std::getenv("MP_THREAD_MULTIPLE");
    weft_thread_level_t provided;
    weft_status_t st =
        multi && *multi == '1' ? weft_init_thread(WEFT_THREAD_MULTIPLE, &provided, &ctx) : weft_init(&ctx);
    if (st != WEFT_OK) {
        std::fprintf(stderr, "weft_init: %s\n", weft_strerror(st));
        return 1;
    }
    weft_rank(ctx, &rank);
    weft_size(ctx, &size);
    if (rank != 0) {
        auto& listeners = testing::UnitTest::GetInstance()->listeners();
        delete listeners.Release(listeners.default_result_printer());
        listeners.Append(new QuietListener);
    }
    int rc = RUN_ALL_TESTS();
    st = weft_finalize(ctx);
    if (st != WEFT_OK) {
        std::fprintf(stderr, "[rank %u] weft_finalize: %s\n", rank, weft_strerror(st));
        rc = 1;
    }
    return rc;
}

}  // namespace mp
