// log_outcomes.cpp — expected outcomes are not logged as errors (README
// "Logging"). Run by log_outcomes_test.sh under weft-run with 2 ranks and
// rank 1 killed at log_outcomes.victim (--keep-survivors):
//   1. rank 0 revokes a communicator; both ranks call on it: REVOKED;
//   2. rank 0's any-source receive, posted before rank 1 dies, is polled
//      for a second (argv[1] seconds) with every request call: PEER_FAILED_PENDING (hundreds
//      of returns), then recognised and cancelled.
// Rank 0 brackets these with the lines "log_outcomes: expected outcomes
// begin/end" on stderr; the script fails on an ERROR line between them.
// Exit status 0 when every call returned what it should.
#include <weft/comm.h>
#include <weft/ft.h>
#include <weft/weft.h>

#include <cstdio>
#include <cstdlib>
#include <ctime>

namespace {

weft_context_t ctx;
uint32_t rank_, size_;
int bad = 0;

uint64_t now_ns() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

void expect(weft_status_t got, weft_status_t want, const char* what) {
    if (got == want) return;
    std::fprintf(stderr, "log_outcomes rank %u: %s: %s, want %s\n", rank_, what, weft_strerror(got),
                 weft_strerror(want));
    bad = 1;
}

#define MUST(expr)                                                                                   \
    do {                                                                                             \
        weft_status_t s_ = (expr);                                                                   \
        if (s_ != WEFT_OK) {                                                                         \
            std::fprintf(stderr, "log_outcomes rank %u: %s: %s\n", rank_, #expr, weft_strerror(s_)); \
            std::exit(10);                                                                           \
        }                                                                                            \
    } while (0)

void marker(const char* what) {
    std::fprintf(stderr, "log_outcomes: expected outcomes %s\n", what);
    std::fflush(stderr);
}

}  // namespace

int main(int argc, char** argv) {
    const double poll_s = argc > 1 ? std::atof(argv[1]) : 1.0;  // how long to poll the pending receive
    MUST(weft_init(&ctx));
    MUST(weft_rank(ctx, &rank_));
    MUST(weft_size(ctx, &size_));
    if (size_ != 2) {
        std::fprintf(stderr, "log_outcomes: run with 2 ranks\n");
        return 2;
    }
    weft_comm_t world, dup;
    MUST(weft_comm_world(ctx, &world));
    MUST(weft_comm_dup(world, &dup));
    MUST(weft_barrier(dup));
    MUST(weft_bootstrap_barrier(ctx));
    if (rank_ == 0) marker("begin");

    // 1. A revoked communicator: every call on it says so, on both ranks.
    if (rank_ == 0) MUST(weft_comm_revoke(dup));
    int revoked = 0;
    for (const uint64_t end = now_ns() + 20000000000ull; !revoked && now_ns() < end;) {
        MUST(weft_comm_is_revoked(dup, &revoked));
        weft_wait(ctx, 1000000);
    }
    if (!revoked) {
        std::fprintf(stderr, "log_outcomes rank %u: the revoke never arrived\n", rank_);
        return 1;
    }
    const uint64_t x = 1;
    uint64_t y = 0;
    weft_request_t req = nullptr;
    for (int i = 0; i < 10; ++i) {
        expect(weft_send(dup, &x, 1, WEFT_UINT64, 1 - rank_, 3), WEFT_ERR_REVOKED, "send on a revoked communicator");
        expect(weft_irecv(dup, &y, 1, WEFT_UINT64, WEFT_ANY_SOURCE, 3, &req), WEFT_ERR_REVOKED,
               "irecv on a revoked communicator");
        expect(weft_barrier(dup), WEFT_ERR_REVOKED, "barrier on a revoked communicator");
    }
    MUST(weft_bootstrap_barrier(ctx));

    // 2. An any-source receive pending on an unrecognised failure.
    weft_request_t r = nullptr;
    if (rank_ == 0) MUST(weft_irecv(world, &y, 1, WEFT_UINT64, WEFT_ANY_SOURCE, 5, &r));
    MUST(weft_bootstrap_barrier(ctx));
    if (rank_ == 1) {
        weft_fault_point("log_outcomes.victim");
        std::fprintf(stderr,
                     "log_outcomes: rank 1 survived: run under weft-run --keep-survivors "
                     "--fault kill:rank=1:at=log_outcomes.victim\n");
        return 3;
    }
    uint32_t failed = 0, fresh = 0;
    for (const uint64_t end = now_ns() + 20000000000ull; failed == 0 && now_ns() < end;) {
        MUST(weft_comm_validate_local(world, &failed, &fresh));
        weft_wait(ctx, 1000000);
    }
    if (failed == 0) {
        std::fprintf(stderr, "log_outcomes: rank 1's death was never noticed\n");
        return 1;
    }
    unsigned polls = 0;
    int flag = 1;
    for (const uint64_t end = now_ns() + uint64_t(poll_s * 1e9); now_ns() < end; ++polls)
        expect(weft_request_test(&r, &flag, nullptr), WEFT_ERR_PEER_FAILED_PENDING, "test");
    expect(weft_request_wait(&r, nullptr), WEFT_ERR_PEER_FAILED_PENDING, "wait");
    size_t index = 0;
    weft_msg_status_t statuses[1]{};
    expect(weft_request_waitany(1, &r, &index, nullptr), WEFT_ERR_PEER_FAILED_PENDING, "waitany");
    expect(weft_request_testany(1, &r, &index, &flag, nullptr), WEFT_ERR_PEER_FAILED_PENDING, "testany");
    expect(weft_request_waitall(1, &r, statuses), WEFT_ERR_PEER_FAILED_PENDING, "waitall");
    expect(weft_iprobe(world, WEFT_ANY_SOURCE, 5, &flag, nullptr), WEFT_ERR_PEER_FAILED_PENDING, "iprobe");
    expect(weft_probe(world, WEFT_ANY_SOURCE, 5, nullptr), WEFT_ERR_PEER_FAILED_PENDING, "probe");
    expect(weft_recv(world, &y, 1, WEFT_UINT64, WEFT_ANY_SOURCE, 6, nullptr), WEFT_ERR_PEER_FAILED_PENDING, "recv");
    std::printf("log_outcomes: %u PENDING returns from weft_request_test in %.2f s\n", polls, poll_s);
    marker("end");

    // Recognised, the receive can be cancelled and completed.
    MUST(weft_comm_validate_global(world, &failed, &fresh));
    MUST(weft_request_cancel(r));
    MUST(weft_request_wait(&r, nullptr));
    weft_finalize(ctx);
    return bad;
}
