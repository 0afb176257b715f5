// ckpt_bench.cpp — checkpoint and restart (weft/ckpt.h) against this disk's
// own rate, measured in the same run (bench/RESULTS.md "Checkpoint"):
//   weft-run -n N build/bench/ckpt_bench [--mib M] [--reps R] [--dir DIR] [--inflight K]
// Every rank protects M MiB. With --inflight K every rank also holds, at
// each checkpoint, K posted receives (buffers and handles in regions) and
// K messages buffered from its left neighbour: the runtime state a restart
// replays (its replay phase). Each repetition, after a barrier:
//   raw      every rank at once writes M MiB to a file of its own with
//            write() (256 KiB per call, the fastest size here) and fsync()s
//            it: the disk's fsync'd sequential rate at the same concurrency,
//            the floor of the write phase;
//   crc      CRC-32C over the M MiB (the checksum's share of the write);
//   ckpt     weft_checkpoint, its phases (drain, write, fsync, commit);
//   restart  weft_restart of that generation, its phases.
// With --release, the hooks for transparent checkpointers instead: every
// rank's M MiB live in a window weft allocated, and each repetition times
//   raw      as above (the image's own floor: writing those bytes);
//   release  weft_ckpt_release (drain, quiesce, let go of the transport);
//   rebuild  weft_ckpt_rebuild (launcher, identities, transport, windows);
// then checks the window's contents and a put through the rebuilt fabric.
// Nothing is deleted until the end (see main). A phase's time for the job
// is its slowest rank's (allreduce max); rank 0
// prints the medians over the repetitions as RESULT lines, and the ratio of
// the checkpoint's write + fsync to the raw write + fsync.
#include "bench/bench_util.hpp"
#include "bench/check.hpp"
#include "bench/cli.hpp"
#include "ckpt/crc32c.hpp"

#include <weft/ckpt.h>
#include <weft/comm.h>
#include <weft/weft.h>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

using bench::check;
using bench::median;
using bench::now_ns;

struct Bench {
    weft_context_t ctx = nullptr;
    weft_comm_t world = nullptr;
    uint32_t rank = 0, size = 0;
    size_t bytes = size_t(64) << 20;
    int reps = 3;
    std::string dir;
    std::vector<uint64_t> state;
    int inflight = 0;
    std::vector<uint64_t> inbox;
    std::vector<weft_request_t> reqs;

    // K receives from the left posted, K messages to the right sent (they
    // wait, buffered, at the right: no receive matches their tags).
    void make_inflight() {
        const uint32_t left = (rank + size - 1) % size, right = (rank + 1) % size;
        for (int i = 0; i < inflight; ++i)
            check(weft_irecv(world, &inbox[i], 1, WEFT_UINT64, int32_t(left), 100000 + i, &reqs[i]), "irecv");
        for (int i = 0; i < inflight; ++i) {
            const uint64_t v = i;
            check(weft_send(world, &v, 1, WEFT_UINT64, right, 200000 + i), "send");
        }
    }
    // Takes the buffered messages and cancels the receives: what a job that
    // died after the checkpoint lost (and, after a restart, the replayed
    // state, so the next repetition starts empty).
    void drop_inflight() {
        const uint32_t left = (rank + size - 1) % size;
        uint64_t sink = 0;
        for (int i = 0; i < inflight; ++i)
            check(weft_recv(world, &sink, 1, WEFT_UINT64, int32_t(left), 200000 + i, nullptr), "recv");
        for (int i = 0; i < inflight; ++i) {
            check(weft_request_cancel(reqs[i]), "cancel");
            check(weft_request_wait(&reqs[i], nullptr), "wait");
        }
        check(weft_barrier(world), "barrier");
    }

    // The slowest rank's value, in ms.
    double slowest_ms(uint64_t ns) {
        uint64_t all = 0;
        check(weft_allreduce(world, &ns, &all, 1, WEFT_UINT64, WEFT_OP_MAX), "allreduce");
        return double(all) / 1e6;
    }

    uint64_t raw_write(int rep) {
        const std::string path = dir + "/raw-" + std::to_string(rank) + "-" + std::to_string(rep);
        const uint64_t t0 = now_ns();
        const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd < 0) check(WEFT_ERR_IO, "open raw");
        const auto* p = reinterpret_cast<const uint8_t*>(state.data());
        size_t left = bytes;
        while (left) {
            // The chunk weft writes with (ckpt/store.cpp): the fastest here.
            const ssize_t n = ::write(fd, p, std::min<size_t>(left, 256 * 1024));
            if (n <= 0) check(WEFT_ERR_IO, "write raw");
            p += n;
            left -= size_t(n);
        }
        if (::fsync(fd) != 0) check(WEFT_ERR_IO, "fsync raw");
        ::close(fd);
        return now_ns() - t0;  // the file stays until the end (see main)
    }

    // --release: the hooks' cost against writing the same bytes.
    void run_release() {
        state.resize(bytes / 8);
        void* base = nullptr;
        weft_window_t win = nullptr;
        check(weft_window_allocate(ctx, bytes, &base, &win), "weft_window_allocate");
        auto* words = static_cast<uint64_t*>(base);
        const size_t nwords = bytes / 8;
        for (size_t i = 0; i < nwords; ++i) words[i] = state[i] = i * 0x9e3779b97f4a7c15ull + rank;
        const uint32_t right = (rank + 1) % size, left = (rank + size - 1) % size;
        std::vector<double> raw, rel, reb, ratio;
        for (int r = 0; r < reps; ++r) {
            check(weft_barrier(world), "barrier");
            const uint64_t raw_ns = raw_write(r);
            raw.push_back(slowest_ms(raw_ns));
            check(weft_barrier(world), "barrier");
            uint64_t t0 = now_ns();
            check(weft_ckpt_release(ctx), "weft_ckpt_release");
            const uint64_t rel_ns = now_ns() - t0;
            t0 = now_ns();
            check(weft_ckpt_rebuild(ctx), "weft_ckpt_rebuild");
            const uint64_t reb_ns = now_ns() - t0;
            rel.push_back(slowest_ms(rel_ns));
            reb.push_back(slowest_ms(reb_ns));
            uint64_t mine = uint64_t(1000.0 * double(rel_ns + reb_ns) / double(raw_ns)), worst = 0;
            check(weft_allreduce(world, &mine, &worst, 1, WEFT_UINT64, WEFT_OP_MAX), "allreduce");
            ratio.push_back(double(worst) / 1000.0);
            // The memory came through, and the fabric carries a put again.
            if (words[0] != state[0] || words[nwords - 1] != state[nwords - 1])
                check(WEFT_ERR_PROTOCOL, "the window's contents changed across the release");
            const uint64_t v = (uint64_t(r) << 32) | rank;
            check(weft_put(win, right, 8, &v, 8), "put");
            check(weft_flush(win, right), "flush");
            check(weft_barrier(world), "barrier");
            if (words[1] != ((uint64_t(r) << 32) | left)) check(WEFT_ERR_PROTOCOL, "a put after the rebuild was lost");
            words[1] = state[1];
        }
        check(weft_window_free(win), "weft_window_free");
        if (rank == 0)
            std::printf(
                "RESULT release ranks=%u mib_per_rank=%.0f raw_ms=%.2f release_ms=%.2f rebuild_ms=%.2f "
                "hooks_over_raw=%.2f\n",
                size, double(bytes) / double(1 << 20), median(raw), median(rel), median(reb), median(ratio));
    }

    void run() {
        state.resize(bytes / 8);
        for (size_t i = 0; i < state.size(); ++i) state[i] = i * 0x9e3779b97f4a7c15ull + rank;
        check(weft_ckpt_region_register(ctx, 1, state.data(), bytes), "register");
        inbox.assign(size_t(inflight), 0);
        reqs.assign(size_t(inflight), nullptr);
        check(weft_ckpt_region_register(ctx, 2, inbox.data(), inbox.size() * 8), "register");
        check(weft_ckpt_region_register(ctx, 3, reqs.data(), reqs.size() * sizeof(weft_request_t)), "register");
        std::vector<double> raw, crc, drain, write, fsync, commit, total, verify, load, replay, rtotal, ratio;
        for (int r = 0; r < reps; ++r) {
            check(weft_barrier(world), "barrier");
            const uint64_t raw_ns = raw_write(r);
            raw.push_back(slowest_ms(raw_ns));
            uint64_t t0 = now_ns();
            volatile uint32_t sink = weft::ckpt::crc32c(0, state.data(), bytes);
            (void)sink;
            crc.push_back(slowest_ms(now_ns() - t0));

            check(weft_barrier(world), "barrier");
            make_inflight();
            weft_ckpt_profile_t p{};
            check(weft_checkpoint(ctx, dir.c_str(), &p), "weft_checkpoint");
            if (p.receives != uint32_t(inflight) || p.messages != uint32_t(inflight))
                check(WEFT_ERR_PROTOCOL, "the checkpoint did not save the state in flight");
            drop_inflight();
            drain.push_back(slowest_ms(p.drain_ns));
            write.push_back(slowest_ms(p.write_ns));
            fsync.push_back(slowest_ms(p.fsync_ns));
            commit.push_back(slowest_ms(p.commit_ns));
            total.push_back(slowest_ms(p.total_ns));
            // This rank's own write + fsync against its own raw write.
            uint64_t mine = uint64_t(1000.0 * double(p.write_ns + p.fsync_ns) / double(raw_ns)), worst = 0;
            check(weft_allreduce(world, &mine, &worst, 1, WEFT_UINT64, WEFT_OP_MAX), "allreduce");
            ratio.push_back(double(worst) / 1000.0);

            check(weft_barrier(world), "barrier");
            weft_restart_info_t info{};
            check(weft_restart(ctx, dir.c_str(), &info), "weft_restart");
            verify.push_back(slowest_ms(info.verify_ns));
            load.push_back(slowest_ms(info.load_ns));
            replay.push_back(slowest_ms(info.replay_ns));
            rtotal.push_back(slowest_ms(info.total_ns));
            if (info.receives != uint32_t(inflight) || info.messages != uint32_t(inflight))
                check(WEFT_ERR_PROTOCOL, "the restart did not replay the state in flight");
            drop_inflight();
        }
        for (uint32_t id : {1u, 2u, 3u}) check(weft_ckpt_region_remove(ctx, id), "remove");
        if (rank == 0) {
            const double mib = double(bytes) / double(1 << 20);
            std::printf(
                "RESULT ckpt ranks=%u mib_per_rank=%.0f raw_ms=%.2f ckpt_write_ms=%.2f ckpt_fsync_ms=%.2f "
                "write_fsync_over_raw=%.2f crc_ms=%.2f crc_gbs=%.1f\n",
                size, mib, median(raw), median(write), median(fsync), median(ratio), median(crc),
                double(bytes) / (median(crc) * 1e6));
            std::printf(
                "RESULT ckpt.phases ranks=%u mib_per_rank=%.0f drain_ms=%.2f write_ms=%.2f fsync_ms=%.2f "
                "commit_ms=%.2f total_ms=%.2f\n",
                size, mib, median(drain), median(write), median(fsync), median(commit), median(total));
            std::printf(
                "RESULT restart.phases ranks=%u mib_per_rank=%.0f inflight=%d verify_ms=%.2f load_ms=%.2f "
                "replay_ms=%.3f total_ms=%.2f\n",
                size, mib, inflight, median(verify), median(load), median(replay), median(rtotal));
        }
    }
};

}  // namespace

int main(int argc, char** argv) {
    bench::parse_cli(argc, argv,
                     "ckpt_bench: checkpoint and restart phases against the disk's fsync'd write rate "
                     "(bench/RESULTS.md)\n"
                     "usage: weft-run -n N ckpt_bench [--mib M] [--reps R] [--dir DIR] [--inflight K] [--release] "
                     "[--smoke]\n",
                     {{"--mib", true},
                      {"--reps", true},
                      {"--dir", true},
                      {"--inflight", true},
                      {"--release", false},
                      {"--smoke", false}});
    // Nothing is deleted while anything is timed: on this machine's disk
    // (ext4 mounted with discard) a deletion's TRIM lands on the next
    // fsync, whoever makes it. Every generation is kept (and the raw files
    // too) until the run's end, when the folder goes.
    setenv("WEFT_CKPT_KEEP", "1000000", 1);
    Bench b;
    bool release = false;
    for (int i = 1; i < argc; ++i) {
        if (!std::strcmp(argv[i], "--release")) release = true;
        if (!std::strcmp(argv[i], "--mib")) b.bytes = size_t(std::strtoull(argv[++i], nullptr, 10)) << 20;
        if (!std::strcmp(argv[i], "--reps")) b.reps = std::atoi(argv[++i]);
        if (!std::strcmp(argv[i], "--dir")) b.dir = argv[++i];
        if (!std::strcmp(argv[i], "--inflight")) b.inflight = std::atoi(argv[++i]);
        if (!std::strcmp(argv[i], "--smoke")) {
            b.bytes = size_t(1) << 20;
            b.reps = 2;
            b.inflight = 16;
        }
    }
    bench::init_or_skip(&b.ctx);
    check(weft_rank(b.ctx, &b.rank), "weft_rank");
    check(weft_size(b.ctx, &b.size), "weft_size");
    check(weft_comm_world(b.ctx, &b.world), "weft_comm_world");
    // One folder for the run, named by rank 0.
    char name[128] = {};
    if (b.rank == 0) {
        std::snprintf(name, sizeof name, "%s", b.dir.empty() ? "/tmp/weft-ckpt-bench-XXXXXX" : b.dir.c_str());
        if (b.dir.empty() && !mkdtemp(name)) check(WEFT_ERR_IO, "mkdtemp");
    }
    check(weft_bcast(b.world, name, sizeof name, WEFT_BYTE, 0), "bcast");
    b.dir = name;
    if (release)
        b.run_release();
    else
        b.run();
    check(weft_barrier(b.world), "barrier");
    if (b.rank == 0) {
        const std::string cmd = "rm -rf '" + b.dir + "'";
        if (std::system(cmd.c_str()) != 0) std::fprintf(stderr, "ckpt_bench: could not remove %s\n", b.dir.c_str());
    }
    check(weft_finalize(b.ctx), "weft_finalize");
    return 0;
}
