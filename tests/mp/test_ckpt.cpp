// test_ckpt.cpp — weft/ckpt.h across ranks: protected regions through a
// checkpoint and a restart, generations kept and pruned, damaged or
// uncommitted generations skipped by every rank together, refusals.
// CkptJob.* run one at a time from tests/mp/ckpt_test.sh, each in its own
// job: a checkpoint written by one job and restarted by the next (also
// after a rank was killed inside the write, and into another job size).
#include "tests/mp/comm_util.hpp"

#include <weft/ckpt.h>
#include <weft/drain.h>
#include <weft/comm.h>
#include <weft/ft.h>
#include <weft/group.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

using namespace mp;

namespace {

// A folder every rank names the same: rank 0 makes it.
std::string shared_temp_dir() {
    char name[64] = "/tmp/weft-ckpt-mp-XXXXXX";
    if (rank == 0) {
        EXPECT_NE(mkdtemp(name), nullptr);
    }
    EXPECT_EQ(weft_bcast(world(), name, sizeof name, WEFT_BYTE, 0), WEFT_OK);
    return name;
}

std::string gen_dir(const std::string& dir, uint64_t g) {
    char name[32];
    std::snprintf(name, sizeof name, "/gen-%020llu", static_cast<unsigned long long>(g));
    return dir + name;
}

std::string image(const std::string& dir, uint64_t g, uint32_t r) {
    char name[32];
    std::snprintf(name, sizeof name, "/rank-%06u.img", r);
    return gen_dir(dir, g) + name;
}

bool exists(const std::string& path) { return access(path.c_str(), F_OK) == 0; }

// The state of rank r at step s: what a region holds.
std::vector<uint64_t> state_of(uint32_t r, uint64_t step, size_t words) {
    std::vector<uint64_t> v(words);
    for (size_t i = 0; i < words; ++i) v[i] = (uint64_t(r) << 48) ^ (step << 32) ^ (i * 0x9e3779b97f4a7c15ull);
    return v;
}

void all_meet() { ASSERT_EQ(weft_barrier(world()), WEFT_OK); }

// Regions 1 (1 MiB) and 2 (24 bytes) registered for a test, removed after.
struct Regions {
    std::vector<uint64_t> big = std::vector<uint64_t>(131072), small = std::vector<uint64_t>(3);
    Regions() {
        EXPECT_EQ(weft_ckpt_region_register(ctx, 1, big.data(), big.size() * 8), WEFT_OK);
        EXPECT_EQ(weft_ckpt_region_register(ctx, 2, small.data(), small.size() * 8), WEFT_OK);
    }
    ~Regions() {
        EXPECT_EQ(weft_ckpt_region_remove(ctx, 1), WEFT_OK);
        EXPECT_EQ(weft_ckpt_region_remove(ctx, 2), WEFT_OK);
    }
    void set(uint64_t step) {  // in place: the registered addresses stay
        const auto b = state_of(rank, step, big.size()), s = state_of(rank, step + 1000, small.size());
        std::copy(b.begin(), b.end(), big.begin());
        std::copy(s.begin(), s.end(), small.begin());
    }
    bool holds(uint64_t step) const {
        return big == state_of(rank, step, big.size()) && small == state_of(rank, step + 1000, small.size());
    }
};

void remove_tree(const std::string& dir) {
    if (rank == 0) {
        const std::string cmd = "rm -rf '" + dir + "'";
        EXPECT_EQ(std::system(cmd.c_str()), 0);
    }
}

// ------------------------------------------------- the runtime's state
// Every rank's point-to-point state at a checkpoint, in a protected region
// (the handles too: a restart brings them back). Each rank has 3 posted
// receives (two with one envelope, then an any-source one), and sends its
// right neighbour two eager messages (tag 20), a synchronous one (tag 21,
// its request awaiting the acknowledgment), a rendezvous-sized synchronous
// one (tag 22: the drain pulls it into the receiver's buffer) and an
// eager isend (tag 23: complete, not yet waited for). Two more
// communicators, made by the first round and kept (their handles in the
// region too): a duplicate of the world and the world's ranks in reverse
// order (a split). On the duplicate each rank posts a receive from its left
// neighbour (tag 30) and sends its right one a message (tag 40); on the
// reversed one it posts an any-source receive (tag 31) and sends its right
// neighbour there a synchronous message (tag 41). So every rank holds 9
// requests (5 posted receives), and 7 buffered messages. `round` makes
// each checkpoint's values its own.
constexpr size_t big_words = 32768;  // 256 KiB: above every transport's eager limit here
struct InFlight {
    weft_request_t reqs[6];  // 0, 1: from the left, tag 10; 2: any source, tag 12; 3-5: our sends 21, 22, 23
    uint64_t inbox[3];
    weft_comm_t dup, rev;         // made by the first round; a restart brings them back
    weft_request_t comm_reqs[3];  // dup: from the left, tag 30; rev: any source, tag 31; rev: our ssend, tag 41
    uint64_t comm_inbox[2];
};

// The next round's requests, on the same communicators.
void next_round(InFlight& s) {
    const weft_comm_t dup = s.dup, rev = s.rev;
    s = InFlight{};
    s.dup = dup;
    s.rev = rev;
}

// Rank r's neighbours in the reversed communicator, as job ranks.
uint32_t rev_right_of(uint32_t r) { return (r + size - 1) % size; }
uint32_t rev_left_of(uint32_t r) { return (r + 1) % size; }
uint32_t rev_rank(uint32_t r) { return size - 1 - r; }

void free_comms(InFlight& s) {
    EXPECT_EQ(weft_comm_free(&s.dup), WEFT_OK);
    EXPECT_EQ(weft_comm_free(&s.rev), WEFT_OK);
}

uint32_t left_of(uint32_t r) { return (r + size - 1) % size; }
uint64_t value(uint64_t round, uint32_t r, uint64_t k) { return round * 10000 + r * 100 + k; }
std::vector<uint64_t> big_of(uint64_t round, uint32_t r) { return state_of(r, round, big_words); }

void make_in_flight(InFlight& s, uint64_t round, std::vector<uint64_t>& big) {
    const uint32_t right = (rank + 1) % size;
    ASSERT_EQ(weft_irecv(world(), &s.inbox[0], 1, WEFT_UINT64, left_of(rank), 10, &s.reqs[0]), WEFT_OK);
    ASSERT_EQ(weft_irecv(world(), &s.inbox[1], 1, WEFT_UINT64, left_of(rank), 10, &s.reqs[1]), WEFT_OK);
    ASSERT_EQ(weft_irecv(world(), &s.inbox[2], 1, WEFT_UINT64, WEFT_ANY_SOURCE, 12, &s.reqs[2]), WEFT_OK);
    for (uint64_t v : {value(round, rank, 1), value(round, rank, 2)}) {
        ASSERT_EQ(weft_send(world(), &v, 1, WEFT_UINT64, right, 20), WEFT_OK);
    }
    const uint64_t sync = value(round, rank, 3), eager = value(round, rank, 4);
    ASSERT_EQ(weft_issend(world(), &sync, 1, WEFT_UINT64, right, 21, &s.reqs[3]), WEFT_OK);
    big = big_of(round, rank);  // lives until the send completes (after the restart: never read again)
    ASSERT_EQ(weft_issend(world(), big.data(), big.size(), WEFT_UINT64, right, 22, &s.reqs[4]), WEFT_OK);
    ASSERT_EQ(weft_isend(world(), &eager, 1, WEFT_UINT64, right, 23, &s.reqs[5]), WEFT_OK);

    if (!s.dup) {
        ASSERT_EQ(weft_comm_dup(world(), &s.dup), WEFT_OK);
        ASSERT_EQ(weft_comm_split(world(), 0, int32_t(size - rank), &s.rev), WEFT_OK);
    }
    ASSERT_EQ(weft_irecv(s.dup, &s.comm_inbox[0], 1, WEFT_UINT64, left_of(rank), 30, &s.comm_reqs[0]), WEFT_OK);
    ASSERT_EQ(weft_irecv(s.rev, &s.comm_inbox[1], 1, WEFT_UINT64, WEFT_ANY_SOURCE, 31, &s.comm_reqs[1]), WEFT_OK);
    const uint64_t on_dup = value(round, rank, 5), on_rev = value(round, rank, 6);
    ASSERT_EQ(weft_send(s.dup, &on_dup, 1, WEFT_UINT64, right, 40), WEFT_OK);
    ASSERT_EQ(weft_issend(s.rev, &on_rev, 1, WEFT_UINT64, rev_rank(rev_right_of(rank)), 41, &s.comm_reqs[2]), WEFT_OK);
}

void expect_in_flight_saved(uint32_t requests, uint32_t receives, uint32_t messages, uint32_t comms) {
    EXPECT_EQ(requests, 9u);
    EXPECT_EQ(receives, 5u);
    EXPECT_EQ(messages, 7u);
    EXPECT_EQ(comms, 2u);
}

// What follows in a run that was never interrupted: each rank sends its
// right neighbour what its receives wait for (tag 12 first: it must not
// take a tag-10 receive), receives what is buffered, and waits for all.
void finish_in_flight(InFlight& s, uint64_t round) {
    const uint32_t right = (rank + 1) % size, left = left_of(rank);
    for (auto [tag, k] : {std::pair<int, uint64_t>{12, 12}, {10, 10}, {10, 11}}) {
        const uint64_t v = value(round, rank, k);
        ASSERT_EQ(weft_send(world(), &v, 1, WEFT_UINT64, right, tag), WEFT_OK);
    }
    uint64_t got = 0;
    for (uint64_t k : {1, 2}) {
        ASSERT_EQ(weft_recv(world(), &got, 1, WEFT_UINT64, left, 20, nullptr), WEFT_OK);
        EXPECT_EQ(got, value(round, left, k)) << "buffered messages come back in arrival order";
    }
    ASSERT_EQ(weft_recv(world(), &got, 1, WEFT_UINT64, left, 21, nullptr), WEFT_OK);
    EXPECT_EQ(got, value(round, left, 3));
    std::vector<uint64_t> big(big_words);
    weft_msg_status_t st{};
    ASSERT_EQ(weft_recv(world(), big.data(), big.size(), WEFT_UINT64, left, 22, &st), WEFT_OK);
    EXPECT_EQ(st.bytes, big_words * 8);
    EXPECT_TRUE(big == big_of(round, left)) << "the drained rendezvous message";
    ASSERT_EQ(weft_recv(world(), &got, 1, WEFT_UINT64, left, 23, nullptr), WEFT_OK);
    EXPECT_EQ(got, value(round, left, 4));
    weft_msg_status_t sent[3];
    EXPECT_EQ(weft_request_waitall(3, &s.reqs[3], sent), WEFT_OK)
        << "the receiver owed our synchronous sends their acknowledgments";
    weft_msg_status_t recvd[3];
    ASSERT_EQ(weft_request_waitall(3, s.reqs, recvd), WEFT_OK);
    EXPECT_EQ(s.inbox[0], value(round, left, 10)) << "receives with one envelope match in posting order";
    EXPECT_EQ(s.inbox[1], value(round, left, 11));
    EXPECT_EQ(s.inbox[2], value(round, left, 12));
    EXPECT_EQ(recvd[2].source, int32_t(left));
    EXPECT_EQ(recvd[2].tag, 12);

    // The two communicators: ranks and sizes as made, then the same dance.
    uint32_t r = 0;
    ASSERT_EQ(weft_comm_rank(s.rev, &r), WEFT_OK);
    EXPECT_EQ(r, rev_rank(rank)) << "the reversed communicator keeps its rank order";
    ASSERT_EQ(weft_comm_rank(s.dup, &r), WEFT_OK);
    EXPECT_EQ(r, rank);
    const uint64_t to_dup = value(round, rank, 30), to_rev = value(round, rank, 31);
    ASSERT_EQ(weft_send(s.dup, &to_dup, 1, WEFT_UINT64, right, 30), WEFT_OK);
    ASSERT_EQ(weft_send(s.rev, &to_rev, 1, WEFT_UINT64, rev_rank(rev_right_of(rank)), 31), WEFT_OK);
    ASSERT_EQ(weft_recv(s.dup, &got, 1, WEFT_UINT64, left, 40, nullptr), WEFT_OK);
    EXPECT_EQ(got, value(round, left, 5)) << "the duplicate's buffered message";
    ASSERT_EQ(weft_recv(s.rev, &got, 1, WEFT_UINT64, rev_rank(rev_left_of(rank)), 41, nullptr), WEFT_OK);
    EXPECT_EQ(got, value(round, rev_left_of(rank), 6)) << "the reversed communicator's buffered message";
    weft_msg_status_t on_comms[3];
    ASSERT_EQ(weft_request_waitall(3, s.comm_reqs, on_comms), WEFT_OK);
    EXPECT_EQ(s.comm_inbox[0], value(round, left, 30));
    EXPECT_EQ(s.comm_inbox[1], value(round, rev_left_of(rank), 31));
    EXPECT_EQ(on_comms[1].source, int32_t(rev_rank(rev_left_of(rank)))) << "sources are ranks of their communicator";
    // Their collectives work too (clock slots, collective counters).
    uint64_t one = 1, sum = 0;
    ASSERT_EQ(weft_allreduce(s.rev, &one, &sum, 1, WEFT_UINT64, WEFT_OP_SUM), WEFT_OK);
    EXPECT_EQ(sum, size);
    ASSERT_EQ(weft_barrier(s.dup), WEFT_OK);
}

}  // namespace

// A restart re-creates the requests at the handles the program saved,
// re-posts the receives in posting order and re-buffers the messages; the
// run then goes on as if never interrupted. In one job: after the
// checkpoint every rank takes its messages and cancels its receives, as a
// job that died would have lost them, and the restart brings them back.
TEST(Ckpt, PostedReceivesAndBufferedMessagesComeBack) {
    const std::string dir = shared_temp_dir();
    InFlight s{};
    std::vector<uint64_t> big;
    ASSERT_EQ(weft_ckpt_region_register(ctx, 8, &s, sizeof s), WEFT_OK);
    make_in_flight(s, 1, big);
    weft_ckpt_profile_t prof{};
    ASSERT_EQ(weft_checkpoint(ctx, dir.c_str(), &prof), WEFT_OK);
    expect_in_flight_saved(prof.requests, prof.receives, prof.messages, prof.communicators);

    // Lose it all: take the messages, cancel the receives, forget the handles.
    std::vector<uint64_t> sink(big_words);
    for (int tag : {20, 20, 21, 22, 23}) {
        ASSERT_EQ(weft_recv(world(), sink.data(), sink.size(), WEFT_UINT64, left_of(rank), tag, nullptr), WEFT_OK);
    }
    ASSERT_EQ(weft_recv(s.dup, sink.data(), 1, WEFT_UINT64, left_of(rank), 40, nullptr), WEFT_OK);
    ASSERT_EQ(weft_recv(s.rev, sink.data(), 1, WEFT_UINT64, WEFT_ANY_SOURCE, 41, nullptr), WEFT_OK);
    ASSERT_EQ(weft_request_waitall(3, &s.reqs[3], nullptr), WEFT_OK);
    ASSERT_EQ(weft_request_wait(&s.comm_reqs[2], nullptr), WEFT_OK);
    for (weft_request_t* r : {&s.reqs[0], &s.reqs[1], &s.reqs[2], &s.comm_reqs[0], &s.comm_reqs[1]}) {
        ASSERT_EQ(weft_request_cancel(*r), WEFT_OK);
        weft_msg_status_t st{};
        ASSERT_EQ(weft_request_wait(r, &st), WEFT_OK);
        EXPECT_EQ(st.cancelled, 1);
    }
    const weft_comm_t saved_dup = s.dup;
    free_comms(s);
    s = InFlight{};
    all_meet();
    uint32_t r = 0;
    EXPECT_EQ(weft_comm_rank(saved_dup, &r), WEFT_ERR_NOT_INITIALIZED) << "a freed handle names nothing";

    // A restart into a rank that holds a request of its own is refused.
    weft_request_t mine = nullptr;
    uint64_t x = 0;
    if (rank == 0) {
        ASSERT_EQ(weft_irecv(world(), &x, 1, WEFT_UINT64, 0, 99, &mine), WEFT_OK);
    }
    EXPECT_EQ(weft_restart(ctx, dir.c_str(), nullptr), WEFT_ERR_BUSY);
    if (rank == 0) {
        ASSERT_EQ(weft_request_cancel(mine), WEFT_OK);
        ASSERT_EQ(weft_request_wait(&mine, nullptr), WEFT_OK);
    }

    // The freed communicators go once their release barrier is done
    // everywhere; until then a restart is refused (BUSY, on every rank).
    weft_restart_info_t info{};
    weft_status_t st = WEFT_ERR_BUSY;
    for (int tries = 0; st == WEFT_ERR_BUSY && tries < 500; ++tries) {
        if (tries) weft_wait(ctx, 10000000);
        st = weft_restart(ctx, dir.c_str(), &info);
    }
    ASSERT_EQ(st, WEFT_OK);
    expect_in_flight_saved(info.requests, info.receives, info.messages, info.communicators);
    for (auto* q : s.reqs) EXPECT_NE(q, nullptr) << "the handles came back with the region";
    EXPECT_EQ(s.dup, saved_dup) << "the communicator handles too";
    finish_in_flight(s, 1);
    // A communicator made after the restart gets an ID of its own: its
    // traffic and the restored duplicate's do not meet.
    weft_comm_t fresh = nullptr;
    ASSERT_EQ(weft_comm_dup(world(), &fresh), WEFT_OK);
    const uint64_t a = value(7, rank, 1), b = value(7, rank, 2);
    ASSERT_EQ(weft_send(fresh, &a, 1, WEFT_UINT64, (rank + 1) % size, 50), WEFT_OK);
    ASSERT_EQ(weft_send(s.dup, &b, 1, WEFT_UINT64, (rank + 1) % size, 50), WEFT_OK);
    uint64_t got = 0;
    ASSERT_EQ(weft_recv(s.dup, &got, 1, WEFT_UINT64, left_of(rank), 50, nullptr), WEFT_OK);
    EXPECT_EQ(got, value(7, left_of(rank), 2));
    ASSERT_EQ(weft_recv(fresh, &got, 1, WEFT_UINT64, left_of(rank), 50, nullptr), WEFT_OK);
    EXPECT_EQ(got, value(7, left_of(rank), 1));
    EXPECT_EQ(weft_comm_free(&fresh), WEFT_OK);
    free_comms(s);
    EXPECT_EQ(weft_ckpt_region_remove(ctx, 8), WEFT_OK);
    all_meet();
    remove_tree(dir);
}

// Checkpoints back to back, each with every rank's messages in flight
// (rendezvous sends among them): every one drains to a point where each
// send has heard back from its receiver, so every save succeeds. (The race
// this guards against, a drain ending on a stale pending count, is forced
// deterministically by ckpt_test.sh's delay faults.)
TEST(Ckpt, ManyCheckpointsWithMessagesInFlight) {
    const std::string dir = shared_temp_dir();
    InFlight s{};
    std::vector<uint64_t> big;
    ASSERT_EQ(weft_ckpt_region_register(ctx, 8, &s, sizeof s), WEFT_OK);
    for (uint64_t round = 1; round <= 60; ++round) {
        next_round(s);
        make_in_flight(s, round, big);
        weft_ckpt_profile_t prof{};
        ASSERT_EQ(weft_checkpoint(ctx, dir.c_str(), &prof), WEFT_OK) << "round " << round;
        expect_in_flight_saved(prof.requests, prof.receives, prof.messages, prof.communicators);
        finish_in_flight(s, round);
    }
    free_comms(s);
    EXPECT_EQ(weft_ckpt_region_remove(ctx, 8), WEFT_OK);
    all_meet();
    remove_tree(dir);
}

// A process group of the whole job (with a context ID and every member's
// info) and its communicator, a message in flight on it: both come back
// from a restart in a rank that destructed the group since, under the
// group's name and the handle the program kept; the group's operations
// go on after it (a destruct).
TEST(Ckpt, ProcessGroupsAndTheirCommunicatorComeBack) {
    const std::string dir = shared_temp_dir();
    uint32_t job = 0;
    ASSERT_EQ(weft_job_id(ctx, &job), WEFT_OK);
    std::vector<weft_proc_t> procs;
    for (uint32_t r = 0; r < size; ++r) procs.push_back(weft_proc_t{job, r});
    std::vector<uint8_t> info(40 + rank);
    for (size_t i = 0; i < info.size(); ++i) info[i] = uint8_t(rank * 7 + i);
    weft_group_options_t o{};
    o.flags = WEFT_GROUP_ASSIGN_CONTEXT_ID;
    o.info = info.data();
    o.info_len = info.size();
    ASSERT_EQ(weft_group_construct(ctx, "ckpt-all", procs.data(), procs.size(), &o), WEFT_OK);
    uint64_t cid = 0;
    ASSERT_EQ(weft_group_context_id(ctx, "ckpt-all", &cid), WEFT_OK);
    struct Kept {
        weft_comm_t comm;
        weft_request_t req;
        uint64_t inbox;
    } k{};
    ASSERT_EQ(weft_ckpt_region_register(ctx, 9, &k, sizeof k), WEFT_OK);
    ASSERT_EQ(weft_group_comm(ctx, "ckpt-all", &k.comm), WEFT_OK);
    const uint32_t right = (rank + 1) % size;
    ASSERT_EQ(weft_irecv(k.comm, &k.inbox, 1, WEFT_UINT64, left_of(rank), 3, &k.req), WEFT_OK);
    const uint64_t out = value(9, rank, 1);
    ASSERT_EQ(weft_send(k.comm, &out, 1, WEFT_UINT64, right, 4), WEFT_OK);
    weft_ckpt_profile_t prof{};
    ASSERT_EQ(weft_checkpoint(ctx, dir.c_str(), &prof), WEFT_OK);
    EXPECT_EQ(prof.groups, 1u);
    EXPECT_EQ(prof.communicators, 1u);
    EXPECT_EQ(prof.messages, 1u);

    // Lose it: the message, the receive, the communicator, the group.
    const Kept saved = k;
    uint64_t got = 0;
    ASSERT_EQ(weft_recv(k.comm, &got, 1, WEFT_UINT64, left_of(rank), 4, nullptr), WEFT_OK);
    ASSERT_EQ(weft_request_cancel(k.req), WEFT_OK);
    ASSERT_EQ(weft_request_wait(&k.req, nullptr), WEFT_OK);
    ASSERT_EQ(weft_comm_free(&k.comm), WEFT_OK);
    ASSERT_EQ(weft_group_destruct(ctx, "ckpt-all", 0), WEFT_OK);
    k = Kept{};
    all_meet();

    weft_restart_info_t rinfo{};
    weft_status_t st = WEFT_ERR_BUSY;
    for (int tries = 0; st == WEFT_ERR_BUSY && tries < 500; ++tries) {  // the freed communicator's release
        if (tries) weft_wait(ctx, 10000000);
        st = weft_restart(ctx, dir.c_str(), &rinfo);
    }
    ASSERT_EQ(st, WEFT_OK);
    EXPECT_EQ(rinfo.groups, 1u);
    EXPECT_EQ(k.comm, saved.comm);
    EXPECT_EQ(k.req, saved.req);
    uint32_t n = 0;
    ASSERT_EQ(weft_group_size(ctx, "ckpt-all", &n), WEFT_OK);
    EXPECT_EQ(n, size);
    uint64_t cid_after = 0;
    ASSERT_EQ(weft_group_context_id(ctx, "ckpt-all", &cid_after), WEFT_OK);
    EXPECT_EQ(cid_after, cid);
    for (uint32_t r = 0; r < size; ++r) {
        const void* b = nullptr;
        size_t len = 0;
        ASSERT_EQ(weft_group_info(ctx, "ckpt-all", r, &b, &len), WEFT_OK);
        EXPECT_EQ(len, 40u + r) << "member " << r << "'s info";
        if (len > 1) {
            EXPECT_EQ(static_cast<const uint8_t*>(b)[1], uint8_t(r * 7 + 1));
        }
    }
    const uint64_t in = value(9, rank, 2);
    ASSERT_EQ(weft_send(k.comm, &in, 1, WEFT_UINT64, right, 3), WEFT_OK);
    ASSERT_EQ(weft_recv(k.comm, &got, 1, WEFT_UINT64, left_of(rank), 4, nullptr), WEFT_OK);
    EXPECT_EQ(got, value(9, left_of(rank), 1)) << "the message buffered on the group's communicator";
    ASSERT_EQ(weft_request_wait(&k.req, nullptr), WEFT_OK);
    EXPECT_EQ(k.inbox, value(9, left_of(rank), 2));
    ASSERT_EQ(weft_comm_free(&k.comm), WEFT_OK);
    EXPECT_EQ(weft_group_destruct(ctx, "ckpt-all", 0), WEFT_OK) << "the restored group's operations work";
    EXPECT_EQ(weft_ckpt_region_remove(ctx, 9), WEFT_OK);
    all_meet();
    remove_tree(dir);
}

TEST(Ckpt, RegionsComeBackFromTheNewestGeneration) {
    const std::string dir = shared_temp_dir();
    Regions regions;
    weft_restart_info_t info{};
    EXPECT_EQ(weft_restart(ctx, dir.c_str(), &info), WEFT_ERR_NOT_FOUND) << "nothing to restart from: a first start";
    EXPECT_EQ(info.restarted, 0);
    for (uint64_t step = 1; step <= 3; ++step) {
        regions.set(step);
        weft_ckpt_profile_t prof{};
        ASSERT_EQ(weft_checkpoint(ctx, dir.c_str(), &prof), WEFT_OK);
        EXPECT_EQ(prof.generation, step);
        EXPECT_GT(prof.bytes, (131072 + 3) * 8u);
        EXPECT_GT(prof.total_ns, 0u);
        EXPECT_GE(prof.total_ns, prof.drain_ns);
    }
    all_meet();
    // The last two generations are kept (WEFT_CKPT_KEEP's default).
    EXPECT_FALSE(exists(gen_dir(dir, 1)));
    EXPECT_TRUE(exists(gen_dir(dir, 2) + "/MANIFEST"));
    EXPECT_TRUE(exists(gen_dir(dir, 3) + "/MANIFEST"));
    EXPECT_TRUE(exists(image(dir, 3, rank)));
    regions.set(77);
    ASSERT_EQ(weft_restart(ctx, dir.c_str(), &info), WEFT_OK);
    EXPECT_EQ(info.restarted, 1);
    EXPECT_EQ(info.generation, 3u);
    EXPECT_EQ(info.skipped, 0u);
    EXPECT_TRUE(regions.holds(3));
    // A checkpoint after a restart continues the numbering.
    weft_ckpt_profile_t prof{};
    ASSERT_EQ(weft_checkpoint(ctx, dir.c_str(), &prof), WEFT_OK);
    EXPECT_EQ(prof.generation, 4u);
    all_meet();
    EXPECT_FALSE(exists(gen_dir(dir, 2)));
    remove_tree(dir);
}

// One rank's damage makes every rank skip that generation together.
TEST(Ckpt, DamagedNewestGenerationIsSkippedByAll) {
    struct Damage {
        const char* what;
        void (*apply)(const std::string& dir);
    };
    const Damage damages[] = {
        {"a bit flipped in the last rank's image",
         [](const std::string& dir) {
             const std::string p = image(dir, 2, size - 1);
             const int fd = open(p.c_str(), O_RDWR);
             ASSERT_GE(fd, 0);
             uint8_t b = 0;
             ASSERT_EQ(pread(fd, &b, 1, 5000), 1);
             b ^= 0x04;
             ASSERT_EQ(pwrite(fd, &b, 1, 5000), 1);
             close(fd);
         }},
        {"rank 0's image truncated",
         [](const std::string& dir) { ASSERT_EQ(truncate(image(dir, 2, 0).c_str(), 100000), 0); }},
        {"the manifest gone (never committed)",
         [](const std::string& dir) { ASSERT_EQ(unlink((gen_dir(dir, 2) + "/MANIFEST").c_str()), 0); }},
        {"the manifest damaged",
         [](const std::string& dir) {
             const std::string p = gen_dir(dir, 2) + "/MANIFEST";
             const int fd = open(p.c_str(), O_WRONLY);
             ASSERT_GE(fd, 0);
             ASSERT_EQ(pwrite(fd, "X", 1, 20), 1);
             close(fd);
         }},
        {"an image gone", [](const std::string& dir) { ASSERT_EQ(unlink(image(dir, 2, size - 1).c_str()), 0); }},
    };
    Regions regions;
    for (const Damage& d : damages) {
        SCOPED_TRACE(d.what);
        const std::string dir = shared_temp_dir();
        regions.set(10);
        ASSERT_EQ(weft_checkpoint(ctx, dir.c_str(), nullptr), WEFT_OK);
        regions.set(20);
        ASSERT_EQ(weft_checkpoint(ctx, dir.c_str(), nullptr), WEFT_OK);
        all_meet();
        if (rank == 0) d.apply(dir);
        all_meet();
        regions.set(30);
        weft_restart_info_t info{};
        ASSERT_EQ(weft_restart(ctx, dir.c_str(), &info), WEFT_OK);
        EXPECT_EQ(info.generation, 1u);
        EXPECT_EQ(info.skipped, 1u);
        EXPECT_TRUE(regions.holds(10));
        // With the older one damaged too, nothing is restored and the
        // regions are left as they were.
        all_meet();
        if (rank == 0) {
            ASSERT_EQ(truncate(image(dir, 1, 0).c_str(), 64), 0);
        }
        all_meet();
        regions.set(40);
        EXPECT_EQ(weft_restart(ctx, dir.c_str(), &info), WEFT_ERR_NOT_FOUND);
        EXPECT_EQ(info.restarted, 0);
        EXPECT_EQ(info.skipped, 2u);
        EXPECT_TRUE(regions.holds(40));
        all_meet();
        remove_tree(dir);
    }
}

// State this version cannot save fails the checkpoint on every rank, before
// anything is written; so does a posted receive into memory outside every
// protected region (a restart could not deliver into it). Once it is gone
// the checkpoint works.
TEST(Ckpt, UnsavedStateRefusesTheCheckpointEverywhere) {
    const std::string dir = shared_temp_dir();
    Regions regions;
    // A receive posted on one rank only, into memory no region holds.
    weft_request_t req = nullptr;
    uint64_t in = 0;
    if (rank == size - 1) {
        ASSERT_EQ(weft_irecv(world(), &in, 1, WEFT_UINT64, 0, 4242, &req), WEFT_OK);
    }
    EXPECT_EQ(weft_checkpoint(ctx, dir.c_str(), nullptr), WEFT_ERR_INVALID_ARG);
    all_meet();
    EXPECT_FALSE(exists(gen_dir(dir, 1))) << "nothing written";
    if (rank == 0) {
        const uint64_t out = 5;
        ASSERT_EQ(weft_send(world(), &out, 1, WEFT_UINT64, size - 1, 4242), WEFT_OK);
    }
    if (rank == size - 1) {
        ASSERT_EQ(weft_request_wait(&req, nullptr), WEFT_OK);
        EXPECT_EQ(in, 5u);
    }
    // A group construct in progress (rank 0 started it, the others have
    // not called yet).
    uint32_t job = 0;
    ASSERT_EQ(weft_job_id(ctx, &job), WEFT_OK);
    std::vector<weft_proc_t> procs;
    for (uint32_t r = 0; r < size; ++r) procs.push_back(weft_proc_t{job, r});
    weft_group_op_t op = nullptr;
    if (rank == 0) {
        ASSERT_EQ(weft_group_construct_nb(ctx, "ckpt-pending", procs.data(), procs.size(), nullptr, &op), WEFT_OK);
    }
    EXPECT_EQ(weft_checkpoint(ctx, dir.c_str(), nullptr), WEFT_ERR_UNSUPPORTED);
    if (rank == 0) {
        EXPECT_EQ(weft_group_op_wait(&op), WEFT_OK);
    } else {
        EXPECT_EQ(weft_group_construct(ctx, "ckpt-pending", procs.data(), procs.size(), nullptr), WEFT_OK);
    }
    EXPECT_EQ(weft_group_destruct(ctx, "ckpt-pending", 0), WEFT_OK);
    EXPECT_FALSE(exists(gen_dir(dir, 1))) << "nothing written";
    // A revoked communicator (weft/ft.h): its state is not saved yet.
    weft_comm_t dup = nullptr;
    ASSERT_EQ(weft_comm_dup(world(), &dup), WEFT_OK);
    ASSERT_EQ(weft_comm_revoke(dup), WEFT_OK);
    EXPECT_EQ(weft_checkpoint(ctx, dir.c_str(), nullptr), WEFT_ERR_UNSUPPORTED);
    all_meet();
    EXPECT_FALSE(exists(gen_dir(dir, 1))) << "nothing written";
    ASSERT_EQ(weft_comm_free(&dup), WEFT_OK);
    weft_ckpt_profile_t prof{};
    ASSERT_EQ(weft_checkpoint(ctx, dir.c_str(), &prof), WEFT_OK);
    EXPECT_EQ(prof.generation, 1u);
    EXPECT_EQ(prof.requests, 0u);
    all_meet();
    remove_tree(dir);
}

// Committed generations are copied to a second directory in the
// background, each copy verified there, the newest two kept there too; a
// restart whose checkpoint directory lost everything restarts from the
// second one, and the next checkpoint numbers on from what it restored.
TEST(Ckpt, FlushToASecondDirectory) {
    const std::string dir = shared_temp_dir(), second = shared_temp_dir();
    Regions regions;
    ASSERT_EQ(weft_ckpt_flush_dir(ctx, second.c_str()), WEFT_OK);
    for (uint64_t step = 1; step <= 3; ++step) {
        regions.set(step);
        weft_ckpt_profile_t prof{};
        ASSERT_EQ(weft_checkpoint(ctx, dir.c_str(), &prof), WEFT_OK);
        weft_ckpt_flush_info_t fi{};
        ASSERT_EQ(weft_ckpt_flush_wait(ctx, prof.generation, 60000, &fi), WEFT_OK) << "generation " << step;
        EXPECT_GT(fi.copy_ns, 0u);
        EXPECT_GT(fi.verify_ns, 0u);
    }
    all_meet();  // rank 0's wait covered every rank's copy and the manifest
    EXPECT_TRUE(exists(gen_dir(second, 3) + "/MANIFEST"));
    EXPECT_TRUE(exists(gen_dir(second, 2) + "/MANIFEST"));
    EXPECT_TRUE(exists(image(second, 3, rank)));
    EXPECT_FALSE(exists(gen_dir(second, 1))) << "the newest two are kept there too";
    EXPECT_EQ(weft_ckpt_flush_wait(ctx, 99, 10, nullptr), WEFT_ERR_NOT_FOUND) << "never handed to the flush";

    // The checkpoint directory is lost: the restart finds the flushed copy.
    all_meet();
    remove_tree(dir);
    all_meet();
    regions.set(77);
    weft_restart_info_t info{};
    ASSERT_EQ(weft_restart(ctx, dir.c_str(), &info), WEFT_OK);
    EXPECT_EQ(info.generation, 3u);
    EXPECT_TRUE(regions.holds(3));

    // Flushing stopped: the next generation (4, after the one restored) is
    // not copied.
    ASSERT_EQ(weft_ckpt_flush_dir(ctx, nullptr), WEFT_OK);
    weft_ckpt_profile_t prof{};
    ASSERT_EQ(weft_checkpoint(ctx, dir.c_str(), &prof), WEFT_OK);
    EXPECT_EQ(prof.generation, 4u);
    EXPECT_EQ(weft_ckpt_flush_wait(ctx, prof.generation, 10, nullptr), WEFT_ERR_NOT_FOUND);
    // A second directory that cannot be written: the checkpoint commits,
    // the flush reports why, the job goes on.
    ASSERT_EQ(weft_ckpt_flush_dir(ctx, "/proc/weft-cannot-be-here"), WEFT_OK);
    ASSERT_EQ(weft_checkpoint(ctx, dir.c_str(), &prof), WEFT_OK);
    EXPECT_EQ(weft_ckpt_flush_wait(ctx, prof.generation, 60000, nullptr), WEFT_ERR_IO);
    ASSERT_EQ(weft_ckpt_flush_dir(ctx, nullptr), WEFT_OK);
    EXPECT_EQ(weft_ckpt_flush_dir(ctx, ""), WEFT_ERR_INVALID_ARG);
    EXPECT_EQ(weft_ckpt_flush_dir(nullptr, "/tmp"), WEFT_ERR_NOT_INITIALIZED);
    EXPECT_EQ(weft_ckpt_flush_wait(nullptr, 1, 10, nullptr), WEFT_ERR_NOT_INITIALIZED);
    all_meet();
    remove_tree(dir);
    remove_tree(second);
}

TEST(Ckpt, RestartNeedsEverySavedRegionAtItsSize) {
    const std::string dir = shared_temp_dir();
    std::vector<uint8_t> a(64, 1), b(32, 2);
    ASSERT_EQ(weft_ckpt_region_register(ctx, 5, a.data(), a.size()), WEFT_OK);
    ASSERT_EQ(weft_ckpt_region_register(ctx, 6, nullptr, 0), WEFT_OK) << "an empty region";
    ASSERT_EQ(weft_checkpoint(ctx, dir.c_str(), nullptr), WEFT_OK);
    // Another size, on one rank only: refused everywhere, nothing copied.
    if (rank == 0) {
        ASSERT_EQ(weft_ckpt_region_resize(ctx, 5, b.data(), b.size()), WEFT_OK);
    }
    a.assign(64, 9);
    EXPECT_EQ(weft_restart(ctx, dir.c_str(), nullptr), WEFT_ERR_INVALID_ARG);
    EXPECT_EQ(a, std::vector<uint8_t>(64, 9));
    // Not registered at all.
    ASSERT_EQ(weft_ckpt_region_remove(ctx, 5), WEFT_OK);
    EXPECT_EQ(weft_restart(ctx, dir.c_str(), nullptr), WEFT_ERR_INVALID_ARG);
    ASSERT_EQ(weft_ckpt_region_register(ctx, 5, a.data(), a.size()), WEFT_OK);
    ASSERT_EQ(weft_restart(ctx, dir.c_str(), nullptr), WEFT_OK);
    EXPECT_EQ(a, std::vector<uint8_t>(64, 1));
    // A region registered now but not saved is left alone.
    std::vector<uint8_t> c(8, 3);
    ASSERT_EQ(weft_ckpt_region_register(ctx, 7, c.data(), c.size()), WEFT_OK);
    ASSERT_EQ(weft_restart(ctx, dir.c_str(), nullptr), WEFT_OK);
    EXPECT_EQ(c, std::vector<uint8_t>(8, 3));
    for (uint32_t id : {5u, 6u, 7u}) EXPECT_EQ(weft_ckpt_region_remove(ctx, id), WEFT_OK);
    all_meet();
    remove_tree(dir);
}

// An external stack's Collective Clocks (weft_drain_clock_create, as
// libweft-mpi makes for each MPI communicator) are the stack's: a checkpoint
// leaves them out, and a restart made after the stack made them again is
// not refused as if the runtime held communicators of its own (it was:
// WEFT_ERR_BUSY, found by libweft-mpi's mpi.ckpt.*).
TEST(Ckpt, AStacksDrainClocksAreItsOwnAtACheckpointAndARestart) {
    const std::string dir = shared_temp_dir();
    std::vector<uint32_t> everyone(size);
    for (uint32_t r = 0; r < size; ++r) everyone[r] = r;
    weft_drain_clock_t clock = nullptr;
    ASSERT_EQ(weft_drain_clock_create(ctx, everyone.data(), size, 77, &clock), WEFT_OK);
    ASSERT_EQ(weft_drain_commit_begin(clock), WEFT_OK);
    ASSERT_EQ(weft_drain_commit_finish(clock), WEFT_OK);
    std::vector<uint8_t> a(64, 4);
    ASSERT_EQ(weft_ckpt_region_register(ctx, 8, a.data(), a.size()), WEFT_OK);
    weft_ckpt_profile_t prof;
    ASSERT_EQ(weft_checkpoint(ctx, dir.c_str(), &prof), WEFT_OK);
    EXPECT_EQ(prof.communicators, 0u) << "the stack's clock is not saved";
    a.assign(64, 0);
    weft_restart_info_t info;
    ASSERT_EQ(weft_restart(ctx, dir.c_str(), &info), WEFT_OK) << "the stack's clock does not make the rank busy";
    EXPECT_EQ(info.communicators, 0u);
    EXPECT_EQ(a, std::vector<uint8_t>(64, 4));
    // The clock still works after the restart.
    ASSERT_EQ(weft_drain_commit_begin(clock), WEFT_OK);
    ASSERT_EQ(weft_drain_commit_finish(clock), WEFT_OK);
    ASSERT_EQ(weft_drain_clock_free(&clock), WEFT_OK);
    EXPECT_EQ(weft_ckpt_region_remove(ctx, 8), WEFT_OK);
    all_meet();
    remove_tree(dir);
}

TEST(Ckpt, BadInputIsRefusedClearly) {
    uint64_t x = 0;
    EXPECT_EQ(weft_ckpt_region_register(nullptr, 1, &x, 8), WEFT_ERR_NOT_INITIALIZED);
    EXPECT_EQ(weft_ckpt_region_register(ctx, 1, nullptr, 8), WEFT_ERR_INVALID_ARG);
    EXPECT_EQ(weft_ckpt_region_resize(ctx, 99, &x, 8), WEFT_ERR_NOT_FOUND);
    EXPECT_EQ(weft_ckpt_region_remove(ctx, 99), WEFT_ERR_NOT_FOUND);
    EXPECT_EQ(weft_checkpoint(ctx, nullptr, nullptr), WEFT_ERR_INVALID_ARG);
    EXPECT_EQ(weft_checkpoint(ctx, "", nullptr), WEFT_ERR_INVALID_ARG);
    EXPECT_EQ(weft_restart(ctx, nullptr, nullptr), WEFT_ERR_INVALID_ARG);
    EXPECT_EQ(weft_checkpoint(nullptr, "/tmp", nullptr), WEFT_ERR_NOT_INITIALIZED);
    // A directory that cannot be made: every rank fails, the job goes on.
    EXPECT_EQ(weft_checkpoint(ctx, "/proc/weft-cannot-be-here", nullptr), WEFT_ERR_IO);
    // A file where the directory should be.
    const std::string dir = shared_temp_dir();
    if (rank == 0) {
        FILE* f = std::fopen((dir + "/file").c_str(), "w");
        ASSERT_NE(f, nullptr);
        std::fclose(f);
    }
    all_meet();
    EXPECT_EQ(weft_checkpoint(ctx, (dir + "/file").c_str(), nullptr), WEFT_ERR_IO);
    EXPECT_EQ(weft_restart(ctx, (dir + "/file").c_str(), nullptr), WEFT_ERR_IO);
    all_meet();
    remove_tree(dir);
}

// ------------------------------------------------- one job after another
// Run by tests/mp/ckpt_test.sh with WEFT_TEST_CKPT_DIR (and WEFT_TEST_STEP:
// the step a writer saves).
namespace {
std::string job_dir() {
    const char* d = std::getenv("WEFT_TEST_CKPT_DIR");
    return d ? d : "";
}
uint64_t job_step() {
    const char* s = std::getenv("WEFT_TEST_STEP");
    return s ? std::strtoull(s, nullptr, 10) : 1;
}
}  // namespace

TEST(CkptJob, Write) {
    if (job_dir().empty()) GTEST_SKIP() << "run by tests/mp/ckpt_test.sh (WEFT_TEST_CKPT_DIR)";
    Regions regions;
    regions.set(job_step());
    weft_ckpt_profile_t prof{};
    ASSERT_EQ(weft_checkpoint(ctx, job_dir().c_str(), &prof), WEFT_OK);
    if (rank == 0)
        std::printf("CKPT generation %llu: %llu bytes, drain %.1f us, write %.1f us, fsync %.1f us, commit %.1f us\n",
                    static_cast<unsigned long long>(prof.generation), static_cast<unsigned long long>(prof.bytes),
                    prof.drain_ns / 1e3, prof.write_ns / 1e3, prof.fsync_ns / 1e3, prof.commit_ns / 1e3);
}

// A rank is killed inside the write (fault point ckpt.image.written): the
// survivors' checkpoint fails and leaves no valid generation.
TEST(CkptJob, WriteWhileARankDies) {
    if (job_dir().empty()) GTEST_SKIP() << "run by tests/mp/ckpt_test.sh (WEFT_TEST_CKPT_DIR)";
    Regions regions;
    regions.set(job_step());
    const weft_status_t st = weft_checkpoint(ctx, job_dir().c_str(), nullptr);
    EXPECT_NE(st, WEFT_OK) << "a checkpoint that lost a rank cannot succeed";
    std::printf("CKPT rank %u: the checkpoint failed with %s\n", rank, weft_strerror(st));
}

TEST(CkptJob, Restart) {
    if (job_dir().empty()) GTEST_SKIP() << "run by tests/mp/ckpt_test.sh (WEFT_TEST_CKPT_DIR)";
    Regions regions;
    weft_restart_info_t info{};
    ASSERT_EQ(weft_restart(ctx, job_dir().c_str(), &info), WEFT_OK);
    EXPECT_TRUE(regions.holds(job_step())) << "rank " << rank << " restored generation " << info.generation;
    if (rank == 0)
        std::printf("CKPT restarted from generation %llu (%u skipped): find %.1f us, verify %.1f us, load %.1f us\n",
                    static_cast<unsigned long long>(info.generation), info.skipped, info.find_ns / 1e3,
                    info.verify_ns / 1e3, info.load_ns / 1e3);
}

// WEFT_TEST_CKPT_DIR is a 2 MiB tmpfs (ckpt_test.sh): 1 MiB per rank does
// not fit. The checkpoint fails cleanly everywhere, leaves no generation,
// and the job goes on; a checkpoint that fits then works.
TEST(CkptJob, DiskFull) {
    if (job_dir().empty()) GTEST_SKIP() << "run by tests/mp/ckpt_test.sh (WEFT_TEST_CKPT_DIR)";
    {
        Regions regions;
        regions.set(1);
        EXPECT_EQ(weft_checkpoint(ctx, job_dir().c_str(), nullptr), WEFT_ERR_IO);
        EXPECT_EQ(weft_restart(ctx, job_dir().c_str(), nullptr), WEFT_ERR_NOT_FOUND) << "no generation is valid";
        uint64_t one = 1, n = 0;
        ASSERT_EQ(weft_allreduce(world(), &one, &n, 1, WEFT_UINT64, WEFT_OP_SUM), WEFT_OK) << "the job goes on";
        EXPECT_EQ(n, size);
    }
    uint64_t small[8] = {rank, 2, 3, 4, 5, 6, 7, 8};
    ASSERT_EQ(weft_ckpt_region_register(ctx, 3, small, sizeof small), WEFT_OK);
    weft_ckpt_profile_t prof{};
    ASSERT_EQ(weft_checkpoint(ctx, job_dir().c_str(), &prof), WEFT_OK);
    EXPECT_EQ(prof.generation, 1u) << "the failed generation left nothing behind";
    small[0] = 99;
    ASSERT_EQ(weft_restart(ctx, job_dir().c_str(), nullptr), WEFT_OK);
    EXPECT_EQ(small[0], rank);
    EXPECT_EQ(weft_ckpt_region_remove(ctx, 3), WEFT_OK);
}

// Under weft-run --checkpoint-dir DIR with WEFT_CKPT_INTERVAL_S=1: NULL
// names DIR, and weft_ckpt_need says a checkpoint is due a second after the
// last one, on every rank at once (rank 0 alone waits: the allreduce
// carries its answer to the others).
TEST(CkptJob, NeedAfterTheIntervalAndTheLaunchersDirectory) {
    if (job_dir().empty()) GTEST_SKIP() << "run by tests/mp/ckpt_test.sh (WEFT_TEST_CKPT_DIR)";
    uint64_t x = rank;
    ASSERT_EQ(weft_ckpt_region_register(ctx, 4, &x, sizeof x), WEFT_OK);
    int need = -1;
    ASSERT_EQ(weft_ckpt_need(ctx, &need), WEFT_OK);
    EXPECT_EQ(need, 0) << "no time has passed";
    if (rank == 0) usleep(1200000);
    ASSERT_EQ(weft_ckpt_need(ctx, &need), WEFT_OK);
    EXPECT_EQ(need, 1) << "a second passed on rank 0";
    weft_ckpt_profile_t prof{};
    ASSERT_EQ(weft_checkpoint(ctx, nullptr, &prof), WEFT_OK);
    ASSERT_EQ(weft_ckpt_need(ctx, &need), WEFT_OK);
    EXPECT_EQ(need, 0) << "just checkpointed";
    EXPECT_EQ(weft_ckpt_need(ctx, nullptr), WEFT_ERR_INVALID_ARG);
    x = 77;
    ASSERT_EQ(weft_restart(ctx, nullptr, nullptr), WEFT_OK);
    EXPECT_EQ(x, rank);
    all_meet();
    if (rank == 0) {
        EXPECT_TRUE(exists(gen_dir(job_dir(), prof.generation) + "/MANIFEST"))
            << "written into the launcher's directory";
    }
    EXPECT_EQ(weft_ckpt_region_remove(ctx, 4), WEFT_OK);
}

// A job checkpoints with every rank's point-to-point state in flight
// (round 1), then finishes as an uninterrupted run would; each next job
// restarts the newest generation, finishes that round the same way, then
// makes round `step + 1` in flight and checkpoints it: checkpoint, restart,
// checkpoint, restart (ckpt_test.sh). ckpt_test.sh also runs WriteInFlight
// with two ranks' drain threads slowed down at fault points (weft-run
// --fault delay:...): every rank's save must still find every send answered.
TEST(CkptJob, WriteInFlight) {
    if (job_dir().empty()) GTEST_SKIP() << "run by tests/mp/ckpt_test.sh (WEFT_TEST_CKPT_DIR)";
    InFlight s{};
    std::vector<uint64_t> big;
    ASSERT_EQ(weft_ckpt_region_register(ctx, 8, &s, sizeof s), WEFT_OK);
    make_in_flight(s, 1, big);
    weft_ckpt_profile_t prof{};
    ASSERT_EQ(weft_checkpoint(ctx, job_dir().c_str(), &prof), WEFT_OK);
    expect_in_flight_saved(prof.requests, prof.receives, prof.messages, prof.communicators);
    finish_in_flight(s, 1);
    if (rank == 0) std::printf("CKPT in flight: generation %llu\n", static_cast<unsigned long long>(prof.generation));
}

TEST(CkptJob, RestartInFlight) {
    if (job_dir().empty()) GTEST_SKIP() << "run by tests/mp/ckpt_test.sh (WEFT_TEST_CKPT_DIR)";
    const uint64_t round = job_step();
    InFlight s{};
    std::vector<uint64_t> big;
    ASSERT_EQ(weft_ckpt_region_register(ctx, 8, &s, sizeof s), WEFT_OK);
    weft_restart_info_t info{};
    ASSERT_EQ(weft_restart(ctx, job_dir().c_str(), &info), WEFT_OK);
    EXPECT_EQ(info.generation, round);
    expect_in_flight_saved(info.requests, info.receives, info.messages, info.communicators);
    finish_in_flight(s, round);
    if (rank == 0)
        std::printf(
            "CKPT in flight: restarted generation %llu, %u requests and %u messages on %u communicators besides the "
            "world replayed in %.1f us\n",
            static_cast<unsigned long long>(info.generation), info.requests, info.messages, info.communicators,
            info.replay_ns / 1e3);
    // The next round, with requests made and freed since the restart.
    next_round(s);
    make_in_flight(s, round + 1, big);
    weft_ckpt_profile_t prof{};
    ASSERT_EQ(weft_checkpoint(ctx, job_dir().c_str(), &prof), WEFT_OK);
    EXPECT_EQ(prof.generation, round + 1);
    expect_in_flight_saved(prof.requests, prof.receives, prof.messages, prof.communicators);
    finish_in_flight(s, round + 1);
}

// A checkpoint whenever weft_ckpt_need says one is due (ckpt_test.sh sets
// WEFT_CKPT_INTERVAL_S=2) while every rank has point-to-point state in
// flight and 1 MiB of regions, for WEFT_TEST_SOAK_S seconds: every
// checkpoint commits, every round finishes right, nothing hangs (each call
// has weft's deadline, the job weft-run's timeout). The ranks stop together
// on rank 0's clock.
TEST(CkptJob, Soak) {
    if (job_dir().empty()) GTEST_SKIP() << "run by tests/mp/ckpt_test.sh (WEFT_TEST_CKPT_DIR)";
    const char* env = std::getenv("WEFT_TEST_SOAK_S");
    const double seconds = env ? std::strtod(env, nullptr) : 10;
    Regions regions;
    InFlight s{};
    std::vector<uint64_t> big;
    ASSERT_EQ(weft_ckpt_region_register(ctx, 8, &s, sizeof s), WEFT_OK);
    const auto t0 = std::chrono::steady_clock::now();
    uint64_t round = 0, checkpoints = 0;
    double slowest_ms = 0;
    for (;;) {
        const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - t0;
        uint64_t stop = rank == 0 && elapsed.count() >= seconds, any = 0;
        ASSERT_EQ(weft_allreduce(world(), &stop, &any, 1, WEFT_UINT64, WEFT_OP_MAX), WEFT_OK);
        if (any) break;
        ++round;
        regions.set(round);
        next_round(s);
        make_in_flight(s, round, big);
        int need = 0;
        ASSERT_EQ(weft_ckpt_need(ctx, &need), WEFT_OK);
        if (need) {
            weft_ckpt_profile_t prof{};
            ASSERT_EQ(weft_checkpoint(ctx, job_dir().c_str(), &prof), WEFT_OK) << "round " << round;
            expect_in_flight_saved(prof.requests, prof.receives, prof.messages, prof.communicators);
            slowest_ms = std::max(slowest_ms, prof.total_ns / 1e6);
            ++checkpoints;
        }
        finish_in_flight(s, round);
        EXPECT_TRUE(regions.holds(round));
    }
    EXPECT_GE(checkpoints, 1u);
    if (rank == 0)
        std::printf("CKPT soak: %.0f s, %llu rounds in flight, %llu checkpoints, the slowest %.1f ms\n", seconds,
                    static_cast<unsigned long long>(round), static_cast<unsigned long long>(checkpoints), slowest_ms);
    EXPECT_EQ(weft_ckpt_region_remove(ctx, 8), WEFT_OK);
}

TEST(CkptJob, RestartIntoAnotherSizeIsRefused) {
    if (job_dir().empty()) GTEST_SKIP() << "run by tests/mp/ckpt_test.sh (WEFT_TEST_CKPT_DIR)";
    Regions regions;
    regions.set(5);
    EXPECT_EQ(weft_restart(ctx, job_dir().c_str(), nullptr), WEFT_ERR_BAD_PARAM);
    EXPECT_TRUE(regions.holds(5));
}

int main(int argc, char** argv) { return mp::run_all(argc, argv); }
