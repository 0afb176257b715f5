// launch_helper.cpp — a tiny program for weft-run's own tests
// (tests/mp/launcher_test.sh). Modes:
//   exit CODE          init, barrier, exit with CODE on rank 0 (0 elsewhere)
//   sleep SEC          init, sleep, finalize
//   hang               init, then sleep forever (for --timeout and SIGKILL tests)
//   foreign            rank 0 connects to the launcher with a wrong secret and
//                      then with a corrupted frame; both must be refused;
//                      then a normal job
//   jobs               two jobs: check job ids, universe size, and exchange
//                      an active message with the same rank of the other job
//   signal             init, wait for SIGUSR1 (forwarded by weft-run), exit 0
//   depart             rank 0 makes one bootstrap barrier more than the others
//                      (its finalize's), which fails because they finalized
//                      and exited 0: a departure, not a death (exit 0)
//   early              two jobs: each rank sends the same rank of the other
//                      job active messages (eager and one rendezvous) for an
//                      id it has not registered yet, then a marker; once the
//                      marker came it registers the id: every message must
//                      arrive, in order (held by weft meanwhile). With
//                      MP_EARLY_EXPECT_DROPS=1 (and a small WEFT_AM_HOLD_BYTES)
//                      the hold overflows: a strict prefix must arrive.
//   coll               init, three barriers and an allreduce on the world
//                      communicator, finalize (a clean job: it logs nothing)
//   free_after_failure the last rank is killed (fault point
//                      launch_helper.victim); the survivors shrink, free the
//                      survivors' communicator and finalize, rank 1 half a
//                      second after the others: finalize must complete the
//                      free's release barrier before this rank leaves, or
//                      rank 1's barrier later fails on a rank that departed
//                      (the launcher no longer holds ranks at the finalize
//                      barrier once a rank died). Logs nothing. With
//                      "multiple", the contexts are WEFT_THREAD_MULTIPLE
//                      (finalize's wait must hold the API lock it steps
//                      out of between polls, or it leaves it locked).
#include <weft/comm.h>
#include <weft/ft.h>
#include <weft/weft.h>

#include "transport/bootstrap/wire.hpp"

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

namespace {

weft_context_t ctx;
uint32_t rank_, size_;

#define CHECK(expr)                                                                    \
    do {                                                                               \
        weft_status_t s_ = (expr);                                                     \
        if (s_ != WEFT_OK) {                                                           \
            std::fprintf(stderr, "launch_helper: %s: %s\n", #expr, weft_strerror(s_)); \
            std::exit(10);                                                             \
        }                                                                              \
    } while (0)

void init() {
    CHECK(weft_init(&ctx));
    CHECK(weft_rank(ctx, &rank_));
    CHECK(weft_size(ctx, &size_));
}

// Connects to weft-run's socket and sends `frame`; true if the launcher
// answered with an error frame or closed the connection (i.e. refused).
bool refused(const std::vector<uint8_t>& frame) {
    const char* addr = std::getenv("WEFT_BOOTSTRAP");
    if (!addr || std::strncmp(addr, "unix:@", 6) != 0) return false;
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un sa{};
    sa.sun_family = AF_UNIX;
    std::string name(addr + 6);
    std::memcpy(sa.sun_path + 1, name.data(), name.size());
    socklen_t len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
    if (connect(fd, reinterpret_cast<sockaddr*>(&sa), len) != 0) return false;
    weft::Deadline d = weft::Deadline::after_ns(5000000000ull);
    weft::wire::send_all(fd, frame, d);
    weft::wire::Header h;
    std::vector<uint8_t> payload;
    weft_status_t st = weft::wire::recv_frame(fd, h, payload, d);
    close(fd);
    if (st == WEFT_ERR_BOOTSTRAP) return true;  // closed on us
    return st == WEFT_OK && h.type == weft::wire::Type::error;
}

volatile sig_atomic_t got_usr1 = 0;

// Progresses until done() or 60 s (weft-run's --timeout bounds the job too).
template <typename F>
bool wait_for(F done) {
    for (int i = 0; i < 60000 && !done(); ++i) weft_wait(ctx, 1000000);
    return done();
}

// Mode "early": see the file comment.
int early() {
    init();
    uint32_t job = 0, other = 0;
    CHECK(weft_job_id(ctx, &job));
    CHECK(weft_peer_lookup(ctx, 1 - job, rank_, &other));
    const char* drops = std::getenv("MP_EARLY_EXPECT_DROPS");
    const bool expect_drops = drops && std::string(drops) == "1";
    constexpr uint32_t count = 64, big = count / 2;
    constexpr size_t big_len = 256 << 10;  // past every backend's eager limit: rendezvous
    static uint32_t marker = 0, acks = 0, next = 0, bad = 0;
    CHECK(weft_am_register(
        ctx, 8, [](void*, uint32_t, const void*, size_t) { ++marker; }, nullptr));
    CHECK(weft_am_register(
        ctx, 9, [](void*, uint32_t, const void*, size_t) { ++acks; }, nullptr));
    std::vector<uint8_t> buf(big_len);
    for (uint32_t i = 0; i < count; ++i) {
        const size_t len = i == big ? big_len : 200;
        for (size_t b = 0; b < len; ++b) buf[b] = static_cast<uint8_t>(i + b);
        std::memcpy(buf.data(), &i, 4);
        CHECK(weft_am_send(ctx, other, 7, buf.data(), len));
    }
    CHECK(weft_am_send(ctx, other, 8, &job, 4));
    // The marker follows the other side's id-7 messages from the same
    // sender: once it is here, they all arrived, before any handler for 7.
    if (!wait_for([] { return marker != 0; })) {
        std::fprintf(stderr, "launch_helper early: no marker from the other job within 60 s\n");
        return 50;
    }
    CHECK(weft_am_register(
        ctx, 7,
        [](void*, uint32_t, const void* p, size_t len) {
            uint32_t seq = 0;
            std::memcpy(&seq, p, 4);
            bool ok = seq == next && len == (seq == big ? big_len : 200);
            for (size_t b = 4; ok && b < len; ++b)
                ok = static_cast<const uint8_t*>(p)[b] == static_cast<uint8_t>(seq + b);
            if (!ok) ++bad;
            ++next;
        },
        nullptr));
    // Held messages are delivered by the next progress, all of them.
    CHECK(weft_progress(ctx, nullptr));
    if (bad != 0) {
        std::fprintf(stderr, "launch_helper early: %u of %u held messages out of order or corrupted\n", bad, next);
        return 51;
    }
    if (expect_drops ? (next == 0 || next >= count) : next != count) {
        std::fprintf(stderr, "launch_helper early: %u of %u early messages delivered (%s)\n", next, count,
                     expect_drops ? "want a strict prefix: the hold should have overflowed" : "some were lost");
        return 52;
    }
    // Neither side finalizes before the other has what it sent.
    CHECK(weft_am_send(ctx, other, 9, &job, 4));
    if (!wait_for([] { return acks != 0; })) {
        std::fprintf(stderr, "launch_helper early: no acknowledgement from the other job within 60 s\n");
        return 53;
    }
    std::printf("job %u rank %u: %u early messages delivered in order\n", job, rank_, next);
    CHECK(weft_finalize(ctx));
    return 0;
}

int coll() {
    init();
    weft_comm_t world = nullptr;
    CHECK(weft_comm_world(ctx, &world));
    for (int i = 0; i < 3; ++i) CHECK(weft_barrier(world));
    const uint64_t mine = rank_ + 1;
    uint64_t sum = 0;
    CHECK(weft_allreduce(world, &mine, &sum, 1, WEFT_UINT64, WEFT_OP_SUM));
    if (sum != uint64_t(size_) * (size_ + 1) / 2) {
        std::fprintf(stderr, "launch_helper coll: allreduce gave %llu\n", static_cast<unsigned long long>(sum));
        return 60;
    }
    CHECK(weft_finalize(ctx));
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2) return 2;
    std::string mode = argv[1];
    if (mode == "exit") {
        init();
        CHECK(weft_bootstrap_barrier(ctx));
        int code = rank_ == 0 ? std::atoi(argv[2]) : 0;
        if (code) std::_Exit(code);
        // Others wait to be killed by weft-run (which must not wait for us).
        sleep(30);
        return 0;
    }
    if (mode == "depart") {
        init();
        // Rank 0's extra barrier meets the others' finalize barrier; its own
        // finalize barrier then waits for ranks that finalized and left.
        if (rank_ == 0) CHECK(weft_bootstrap_barrier(ctx));
        CHECK(weft_finalize(ctx));
        return 0;
    }
    if (mode == "sleep") {
        init();
        sleep(static_cast<unsigned>(std::atoi(argv[2])));
        CHECK(weft_finalize(ctx));
        return 0;
    }
    if (mode == "hang") {
        init();
        std::printf("ready %u\n", rank_);
        std::fflush(stdout);
        for (;;) pause();
    }
    if (mode == "foreign") {
        if (std::getenv("WEFT_RANK") && std::string(std::getenv("WEFT_RANK")) == "0") {
            weft::wire::Hello h{};
            std::memset(h.secret, 0x5a, sizeof h.secret);  // wrong secret
            h.job = 0;
            h.rank = 0;
            h.pid = getpid();
            std::vector<uint8_t> frame;
            weft::wire::encode_hello(frame, h);
            if (!refused(frame)) {
                std::fprintf(stderr, "launch_helper: a wrong secret was accepted\n");
                return 20;
            }
            std::vector<uint8_t> junk(64, 0xee);  // not even a header
            if (!refused(junk)) {
                std::fprintf(stderr, "launch_helper: a corrupted frame was accepted\n");
                return 21;
            }
        }
        init();
        CHECK(weft_bootstrap_barrier(ctx));
        CHECK(weft_finalize(ctx));
        return 0;
    }
    if (mode == "jobs") {
        init();
        uint32_t job = 0, universe = 0;
        CHECK(weft_job_id(ctx, &job));
        CHECK(weft_universe_size(ctx, &universe));
        if (universe != 2 * size_) {
            std::fprintf(stderr, "launch_helper: universe %u, want %u\n", universe, 2 * size_);
            return 30;
        }
        // The other job registers its handler after its own weft_init; an
        // early message is held until then (mode "early" tests that). Resend
        // until acknowledged anyway; acknowledge every arrival.
        static int got = 0, acked = 0;
        static uint32_t from_job = 99;
        CHECK(weft_am_register(
            ctx, 1,
            [](void* c, uint32_t src, const void* p, size_t) {
                uint32_t j, r;
                weft_peer_identity(static_cast<weft_context_t>(c), src, &j, &r);
                std::memcpy(&from_job, p, 4);
                if (from_job == j && r == rank_) ++got;
                uint8_t ack = 1;
                weft_am_send(static_cast<weft_context_t>(c), src, 2, &ack, 1);
            },
            ctx));
        CHECK(weft_am_register(
            ctx, 2, [](void*, uint32_t, const void*, size_t) { ++acked; }, nullptr));
        uint32_t other = 0;
        CHECK(weft_peer_lookup(ctx, 1 - job, rank_, &other));
        if (other < size_) {
            std::fprintf(stderr, "launch_helper: peer index %u of the other job collides with ranks\n", other);
            return 31;
        }
        for (int i = 0; i < 10000 && (!got || !acked); ++i) {
            if (!acked && i % 20 == 0) weft_am_send(ctx, other, 1, &job, 4);
            weft_wait(ctx, 1000000);
        }
        if (!got || !acked || from_job != 1 - job) {
            std::fprintf(stderr, "launch_helper: no message from the other job\n");
            return 32;
        }
        std::printf("job %u rank %u: ok\n", job, rank_);
        CHECK(weft_bootstrap_barrier(ctx));
        CHECK(weft_finalize(ctx));
        return 0;
    }
    if (mode == "free_after_failure") {
        if (argc > 2 && std::string(argv[2]) == "multiple") {
            weft_thread_level_t got{};
            CHECK(weft_init_thread(WEFT_THREAD_MULTIPLE, &got, &ctx));
            CHECK(weft_rank(ctx, &rank_));
            CHECK(weft_size(ctx, &size_));
        } else {
            init();
        }
        weft_comm_t world = nullptr, survivors = nullptr;
        CHECK(weft_comm_world(ctx, &world));
        CHECK(weft_barrier(world));
        const uint32_t victim = size_ - 1;
        if (rank_ == victim) {
            weft_fault_point("launch_helper.victim");
            return 41;  // not killed: run under --fault kill:rank=LAST:at=launch_helper.victim
        }
        int failed = 0;
        for (int i = 0; i < 30000 && !failed; ++i) {
            weft_wait(ctx, 1000000);
            CHECK(weft_peer_failed(ctx, victim, &failed));
        }
        if (!failed) return 42;
        CHECK(weft_comm_shrink(world, &survivors));
        if (rank_ == 1) usleep(500000);  // the others are in finalize by now
        CHECK(weft_comm_free(&survivors));
        CHECK(weft_finalize(ctx));
        return 0;
    }
    if (mode == "early") return early();
    if (mode == "coll") return coll();
    if (mode == "signal") {
        signal(SIGUSR1, [](int) { got_usr1 = 1; });
        init();
        std::printf("ready %u\n", rank_);
        std::fflush(stdout);
        for (int i = 0; i < 3000 && !got_usr1; ++i) usleep(10000);
        return got_usr1 ? 0 : 40;
    }
    return 2;
}
