// test_release.cpp — weft_ckpt_release / weft_ckpt_rebuild (weft/ckpt.h):
// the hooks a transparent checkpointer (DMTCP, CRIU) calls around a
// process image. Traffic is checked before and after; while released the
// process must hold no fabric resource (no shared mapping, no segment of
// weft's open, no socket: the launcher's and UCX's closed) and keep every
// window's memory, contents and address. Where the release cannot be done
// (verbs over rdma_cm, PMIx, a launch of several jobs) the call must say so
// (UNSUPPORTED) and the job go on.
#include "tests/mp/comm_util.hpp"

#include <weft/ckpt.h>
#include <weft/comm.h>
#include <weft/drain.h>

#include <dirent.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

using namespace mp;

namespace {

// MP_RELEASE_EXPECT=unsupported: a run where the release must be refused
// (a launch of several jobs).
bool can_release() {
    const char* expect = std::getenv("MP_RELEASE_EXPECT");
    if (expect && std::strcmp(expect, "unsupported") == 0) return false;
    weft_caps_t caps{};
    EXPECT_EQ(weft_query_caps(ctx, &caps), WEFT_OK);
    if (std::strcmp(caps.transport, "verbs") == 0) {
        const char* connect = std::getenv("WEFT_VERBS_CONNECT");
        return !(connect && std::strcmp(connect, "rdma_cm") == 0);
    }
    return std::strcmp(caps.transport, "shm") == 0 || std::strcmp(caps.transport, "ucx") == 0;
}

// What this process holds: shared mappings (weft's shm segments, UCX's
// shared-memory transports, a NIC's doorbells: "s" in the permissions), the
// descriptors of weft's segments (memfd "weft-j<job>-r<rank>"), and sockets
// (the launcher's, UCX's tcp).
struct Held {
    int shared_mappings = 0, weft_mappings = 0, weft_fds = 0, sockets = 0;
};

Held held_now() {
    Held h;
    std::ifstream maps("/proc/self/maps");
    for (std::string line; std::getline(maps, line);) {
        const size_t perms = line.find(' ') + 1;
        if (perms < line.size() && line.size() > perms + 3 && line[perms + 3] == 's') ++h.shared_mappings;
        if (line.find("memfd:weft-j") != std::string::npos) ++h.weft_mappings;
    }
    DIR* d = opendir("/proc/self/fd");
    while (dirent* e = d ? readdir(d) : nullptr) {
        char path[300], target[256] = {};
        std::snprintf(path, sizeof path, "/proc/self/fd/%s", e->d_name);
        const ssize_t n = readlink(path, target, sizeof target - 1);
        if (n <= 0) continue;
        if (std::strncmp(target, "/memfd:weft-j", 13) == 0) ++h.weft_fds;
        if (std::strncmp(target, "socket:", 7) == 0) ++h.sockets;
    }
    if (d) closedir(d);
    return h;
}

constexpr size_t win_words = 64;

}  // namespace

TEST(Release, RefusesWhatItCannotDo) {
    EXPECT_EQ(weft_ckpt_release(nullptr), WEFT_ERR_NOT_INITIALIZED);
    EXPECT_EQ(weft_ckpt_rebuild(nullptr), WEFT_ERR_NOT_INITIALIZED);
    EXPECT_EQ(weft_ckpt_rebuild(ctx), WEFT_ERR_INVALID_ARG);  // not released
    if (!can_release()) {
        // Every rank says why, nobody waits, and the job goes on.
        EXPECT_EQ(weft_ckpt_release(ctx), WEFT_ERR_UNSUPPORTED);
        EXPECT_EQ(weft_barrier(world()), WEFT_OK);
    }
}

// Release and rebuild twice in one run, with a receive posted across each,
// a message in transit at each, windows written locally while released,
// then every kind of traffic after.
TEST(Release, ReleaseRebuildContinue) {
    if (!can_release()) {  // here the refusal is what must hold
        EXPECT_EQ(weft_ckpt_release(ctx), WEFT_ERR_UNSUPPORTED);
        return;
    }
    const uint32_t right = (rank + 1) % size, left = (rank + size - 1) % size;
    weft_comm_t w = world();
    weft_comm_t dup = nullptr;
    ASSERT_EQ(weft_comm_dup(w, &dup), WEFT_OK);

    void* base = nullptr;
    weft_window_t win = nullptr;
    ASSERT_EQ(weft_window_allocate(ctx, win_words * 8, &base, &win), WEFT_OK);
    auto* words = static_cast<uint64_t*>(base);
    std::vector<uint64_t> user(win_words, 0);
    weft_window_t uwin = nullptr;
    ASSERT_EQ(weft_window_register(ctx, user.data(), user.size() * 8, &uwin), WEFT_OK);
    const Held before = held_now();
    EXPECT_GT(before.sockets, 0);  // the launcher's at least

    for (uint64_t cycle = 1; cycle <= 2; ++cycle) {
        // Traffic before: a put into the right neighbour's windows, a
        // fetch-add on rank 0, an allreduce on the dup.
        const uint64_t tag_before = 100 * cycle;
        uint64_t v = (cycle << 32) | rank;
        ASSERT_EQ(weft_put(win, right, 8 * cycle, &v, 8), WEFT_OK);
        ASSERT_EQ(weft_put(uwin, right, 8 * cycle, &v, 8), WEFT_OK);
        uint64_t old = 0;
        ASSERT_EQ(weft_atomic_fetch_add(win, 0, 0, 1, &old), WEFT_OK);
        ASSERT_EQ(weft_flush(win, WEFT_RANK_ALL), WEFT_OK);
        ASSERT_EQ(weft_flush(uwin, WEFT_RANK_ALL), WEFT_OK);
        uint64_t sum = 0, one = 1;
        ASSERT_EQ(weft_allreduce(dup, &one, &sum, 1, WEFT_UINT64, WEFT_OP_SUM), WEFT_OK);
        EXPECT_EQ(sum, size);

        // Across the release: a message sent now, received after; a
        // receive posted now, whose message is sent after.
        const uint64_t in_transit = (cycle << 40) | (uint64_t(rank) << 8) | 1;
        ASSERT_EQ(weft_send(w, &in_transit, 1, WEFT_UINT64, right, static_cast<int32_t>(tag_before)), WEFT_OK);
        uint64_t posted_into = 0;
        weft_request_t posted = nullptr;
        ASSERT_EQ(weft_irecv(dup, &posted_into, 1, WEFT_UINT64, static_cast<int32_t>(left),
                             static_cast<int32_t>(tag_before + 1), &posted),
                  WEFT_OK);

        ASSERT_EQ(weft_ckpt_release(ctx), WEFT_OK) << "cycle " << cycle;
        const Held released = held_now();
        EXPECT_EQ(released.shared_mappings, 0) << "shared memory is still mapped while released";
        EXPECT_EQ(released.weft_fds, 0) << "a segment of weft's is still open while released";
        EXPECT_EQ(released.sockets, 0) << "a socket (the launcher's, UCX's) is still open while released";
        EXPECT_EQ(weft_ckpt_release(ctx), WEFT_ERR_BUSY);
        // The windows' memory is this process's, where it was, with what
        // the peers put there.
        EXPECT_EQ(words[cycle], (cycle << 32) | left);
        EXPECT_EQ(user[cycle], (cycle << 32) | left);
        // Written while released: the peers must read it after the rebuild.
        words[8 + cycle] = 0xabc000 + cycle * 16 + rank;
        user[8 + cycle] = 0xdef000 + cycle * 16 + rank;

        ASSERT_EQ(weft_ckpt_rebuild(ctx), WEFT_OK) << "cycle " << cycle;
        EXPECT_EQ(weft_ckpt_rebuild(ctx), WEFT_ERR_INVALID_ARG);
        const Held after = held_now();
        EXPECT_EQ(after.weft_mappings, before.weft_mappings);
        EXPECT_GT(after.sockets, 0);
        void* base_after = nullptr;
        size_t size_after = 0;
        ASSERT_EQ(weft_window_local(win, &base_after, &size_after), WEFT_OK);
        EXPECT_EQ(base_after, base);

        // Traffic after.
        const uint64_t late = (cycle << 40) | (uint64_t(rank) << 8) | 2;
        ASSERT_EQ(weft_send(dup, &late, 1, WEFT_UINT64, right, static_cast<int32_t>(tag_before + 1)), WEFT_OK);
        ASSERT_EQ(weft_request_wait(&posted, nullptr), WEFT_OK);
        EXPECT_EQ(posted_into, (cycle << 40) | (uint64_t(left) << 8) | 2);
        uint64_t got = 0;
        ASSERT_EQ(
            weft_recv(w, &got, 1, WEFT_UINT64, static_cast<int32_t>(left), static_cast<int32_t>(tag_before), nullptr),
            WEFT_OK);
        EXPECT_EQ(got, (cycle << 40) | (uint64_t(left) << 8) | 1) << "the message in transit at the release";
        ASSERT_EQ(weft_barrier(w), WEFT_OK);
        uint64_t peer_word = 0, peer_user = 0;
        ASSERT_EQ(weft_get(win, right, 8 * (8 + cycle), &peer_word, 8), WEFT_OK);
        ASSERT_EQ(weft_get(uwin, right, 8 * (8 + cycle), &peer_user, 8), WEFT_OK);
        ASSERT_EQ(weft_flush(win, right), WEFT_OK);
        ASSERT_EQ(weft_flush(uwin, right), WEFT_OK);
        EXPECT_EQ(peer_word, 0xabc000 + cycle * 16 + right);
        EXPECT_EQ(peer_user, 0xdef000 + cycle * 16 + right);
        ASSERT_EQ(weft_atomic_fetch_add(win, 0, 0, 1, &old), WEFT_OK);
        ASSERT_EQ(weft_barrier(w), WEFT_OK);
        if (rank == 0) {
            EXPECT_EQ(words[0], 2 * cycle * size) << "fetch-adds before and after each release";
        }
        ASSERT_EQ(weft_allreduce(dup, &one, &sum, 1, WEFT_UINT64, WEFT_OP_SUM), WEFT_OK);
        EXPECT_EQ(sum, size);
        // The drain and its Collective Clock work on the rebuilt fabric
        // (one drain for all: rank 0 asks, everyone waits for its number).
        uint64_t number = 0;
        if (rank == 0) {
            ASSERT_EQ(weft_drain_request(ctx, &number), WEFT_OK);
        }
        ASSERT_EQ(weft_bcast(w, &number, 1, WEFT_UINT64, 0), WEFT_OK);
        weft_drain_result_t res{};
        ASSERT_EQ(weft_drain_wait(ctx, number, 0, &res), WEFT_OK);
        ASSERT_EQ(weft_barrier(w), WEFT_OK);
    }
    ASSERT_EQ(weft_window_free(uwin), WEFT_OK);
    ASSERT_EQ(weft_window_free(win), WEFT_OK);
    ASSERT_EQ(weft_comm_free(&dup), WEFT_OK);
}

// The transparent checkpointer's way: its own thread releases and
// rebuilds while the application thread goes on communicating (a ring of
// sends and receives on its own communicator, each checked). The
// application thread waits at weft's door while released and goes on after.
TEST(ReleaseThreads, WhileTheApplicationCommunicates) {
    if (!can_release()) {  // here the refusal is what must hold
        EXPECT_EQ(weft_ckpt_release(ctx), WEFT_ERR_UNSUPPORTED);
        return;
    }
    const uint32_t right = (rank + 1) % size, left = (rank + size - 1) % size;
    weft_comm_t ring = nullptr;
    ASSERT_EQ(weft_comm_dup(world(), &ring), WEFT_OK);
    // A fixed number of steps (a ring cannot stop anywhere else without
    // a collective the checkpointer's release would cut in two), long
    // enough that the release comes in the middle (checked below).
    constexpr uint64_t total = 20000;
    std::atomic<uint64_t> steps{0}, wrong{0}, failed{0};
    std::thread app([&] {
        for (uint64_t s = 0; s < total; ++s) {
            uint64_t out = (s << 16) | rank, in = 0;
            weft_request_t r[2] = {nullptr, nullptr};
            if (weft_irecv(ring, &in, 1, WEFT_UINT64, static_cast<int32_t>(left), 7, &r[0]) != WEFT_OK ||
                weft_isend(ring, &out, 1, WEFT_UINT64, right, 7, &r[1]) != WEFT_OK ||
                weft_request_waitall(2, r, nullptr) != WEFT_OK) {
                ++failed;
                return;
            }
            if (in != ((s << 16) | left)) ++wrong;
            steps.store(s + 1);
        }
    });
    // The checkpointer: once the ring runs, release, hold a while (an image
    // would be taken here), rebuild.
    while (steps.load() < 20 && failed.load() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    EXPECT_EQ(weft_ckpt_release(ctx), WEFT_OK);
    const uint64_t at_release = steps.load();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_EQ(steps.load(), at_release) << "the application thread got into weft while released";
    EXPECT_EQ(held_now().shared_mappings, 0);
    EXPECT_EQ(weft_ckpt_rebuild(ctx), WEFT_OK);
    app.join();
    EXPECT_EQ(failed.load(), 0u);
    EXPECT_EQ(wrong.load(), 0u);
    EXPECT_EQ(steps.load(), total);
    EXPECT_LT(at_release, total) << "the ring ended before the release: nothing was tested concurrently";
    ASSERT_EQ(weft_comm_free(&ring), WEFT_OK);
}

// A rank killed while released: the others' rebuild fails with a status
// (never hangs), and every call after it fails instead of waiting; the
// context finalizes locally. Run alone with weft-run --keep-survivors
// --fault kill:rank=LAST:at=ckpt.released.
TEST(ReleaseFault, ARankLostWhileReleased) {
    if (!can_release()) {  // here the refusal is what must hold
        EXPECT_EQ(weft_ckpt_release(ctx), WEFT_ERR_UNSUPPORTED);
        return;
    }
    ASSERT_EQ(weft_ckpt_release(ctx), WEFT_OK);  // the victim dies right after letting go
    const weft_status_t st = weft_ckpt_rebuild(ctx);
    EXPECT_NE(st, WEFT_OK);
    EXPECT_EQ(weft_ckpt_rebuild(ctx), WEFT_ERR_BUSY) << "a failed rebuild is final";
    EXPECT_NE(weft_barrier(world()), WEFT_OK);
    uint64_t number = 0;
    EXPECT_EQ(weft_drain_request(ctx, &number), WEFT_ERR_TRANSPORT);
}

int main(int argc, char** argv) { return run_all(argc, argv); }
