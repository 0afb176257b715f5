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
#include <weft/weft.h>

#include "transport/bootstrap/wire.hpp"

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

namespace {

weft_context_t ctx;
uint32_t rank_, size_;

#define CHECK(expr)                                                                      \
    do {                                                                                 \
        weft_status_t s_ = (expr);                                                       \
        if (s_ != WEFT_OK) {                                                             \
            std::fprintf(stderr, "launch_helper: %s: %s\n", #expr, weft_strerror(s_));   \
            std::exit(10);                                                               \
        }                                                                                \
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
        // The other job registers its handler after its own weft_init, so
        // an early message may find no handler (weft drops it and logs).
        // Resend until acknowledged; acknowledge every arrival.
        static int got = 0, acked = 0;
        static uint32_t from_job = 99;
        CHECK(weft_am_register(ctx, 1, [](void* c, uint32_t src, const void* p, size_t) {
            uint32_t j, r;
            weft_peer_identity(static_cast<weft_context_t>(c), src, &j, &r);
            std::memcpy(&from_job, p, 4);
            if (from_job == j && r == rank_) ++got;
            uint8_t ack = 1;
            weft_am_send(static_cast<weft_context_t>(c), src, 2, &ack, 1);
        }, ctx));
        CHECK(weft_am_register(ctx, 2, [](void*, uint32_t, const void*, size_t) { ++acked; }, nullptr));
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
