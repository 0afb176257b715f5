// test_comm.cpp — tagged point-to-point and communicators (weft/comm.h),
// run by ctest under weft-run at 2, 4 and 8 ranks over shm, ucx+shm and
// ucx+tcp.
//
// Point-to-point tests run on the world communicator, each with its own tag
// range so a failed test's leftovers cannot match the next one's receives.
// Ranks talk around a ring (left_ -> rank -> right_); with 2 ranks left and
// right are the same peer.
#include "tests/mp/comm_util.hpp"
#include "tests/mp/raw_enums.h"

#include <unistd.h>

#include <algorithm>
#include <map>
#include <set>

using namespace mp;

namespace {

// A message larger than any eager limit, and a size that certainly is eager.
size_t rendezvous_size() {
    weft_caps_t caps;
    EXPECT_EQ(weft_query_caps(ctx, &caps), WEFT_OK);
    return std::max<size_t>(2 * caps.am_eager_limit + 13, 256u << 10);
}
constexpr size_t kSmall = 24;

// An in-flight message: its buffer lives until the request completes.
struct Outgoing {
    std::vector<uint8_t> data;
    weft_request_t req = nullptr;
};

// isend of pattern(msg_seed(sender, tag, seq)) as bytes.
void isend_pattern(weft_comm_t c, Outgoing& o, size_t n, uint32_t dest, int32_t tag, uint64_t seq = 0) {
    o.data = pattern(msg_seed(comm_rank(c), tag, seq), n);
    ASSERT_EQ(weft_isend(c, o.data.data(), n, WEFT_BYTE, dest, tag, &o.req), WEFT_OK)
        << "isend " << n << " B to " << dest << " tag " << tag;
}

void wait_all(std::vector<Outgoing>& out, const std::string& what) {
    for (auto& o : out)
        if (o.req) wait_ok(&o.req, what);
}

// Checks a received pattern message and the guards around it.
void expect_pattern(const Guarded& g, size_t n, uint32_t src, int32_t tag, uint64_t seq, const std::string& what) {
    const size_t bad = g.mismatch(msg_seed(src, tag, seq), n);
    EXPECT_EQ(bad, SIZE_MAX) << what << ": payload from " << src << " differs at byte " << bad << " of " << n;
    EXPECT_TRUE(g.guards_intact()) << what << ": bytes written outside the receive buffer";
}

// Receives one pattern message from src on tag into a guarded buffer and
// checks it; the receive itself may use wildcards (match_source/match_tag).
constexpr int32_t kExact = -2;
void recv_pattern(weft_comm_t c, size_t n, uint32_t src, int32_t tag, uint64_t seq, const std::string& what,
                  int32_t match_source = kExact, int32_t match_tag = kExact) {
    Guarded g(n);
    weft_msg_status_t s = blank_status();
    EXPECT_EQ(weft_recv(c, g.data(), n, WEFT_BYTE, match_source == kExact ? int32_t(src) : match_source,
                        match_tag == kExact ? tag : match_tag, &s),
              WEFT_OK)
        << what;
    expect_status(s, int32_t(src), tag, n);
    expect_pattern(g, n, src, tag, seq, what);
}

using P2P = CommTest;

// ------------------------------------------------------------ basic exchange

// Every rank sends to every rank (itself included) at sizes from empty to
// rendezvous, as bytes or as 64-bit words; every payload and status checked.
TEST_F(P2P, EveryPairEverySize) {
    const size_t big = slow_fabric() ? (256u << 10) : (4u << 20);
    const size_t sizes[] = {0, 1, 7, 64, 4096, rendezvous_size(), big};
    int32_t tag = 100;
    for (size_t n : sizes) {
        ++tag;
        const bool words = n && n % 8 == 0;
        const weft_datatype_t type = words ? WEFT_UINT64 : WEFT_BYTE;
        const size_t count = words ? n / 8 : n;
        std::vector<Guarded> in;
        in.reserve(size);
        std::vector<weft_request_t> reqs(2 * size, nullptr);
        for (uint32_t p = 0; p < size; ++p) {
            in.emplace_back(n);
            ASSERT_EQ(weft_irecv(w_, in[p].data(), count, type, int32_t(p), tag, &reqs[p]), WEFT_OK);
        }
        const auto out = pattern(msg_seed(rank, tag, 0), n);  // one buffer, every send
        for (uint32_t p = 0; p < size; ++p)
            ASSERT_EQ(weft_isend(w_, n ? out.data() : nullptr, count, type, p, tag, &reqs[size + p]), WEFT_OK);
        std::vector<weft_msg_status_t> st(2 * size, blank_status());
        EXPECT_EQ(weft_request_waitall(reqs.size(), reqs.data(), st.data()), WEFT_OK) << n << " B";
        for (uint32_t p = 0; p < size; ++p) {
            const std::string what = std::to_string(n) + " B from " + std::to_string(p);
            EXPECT_EQ(reqs[p], nullptr) << what;
            expect_status(st[p], int32_t(p), tag, n);
            expect_pattern(in[p], n, p, tag, 0, what);
        }
    }
}

// ----------------------------------------------------- ordering and matching

// Every rank sends K messages to every other rank, tags and sizes (eager and
// rendezvous) cycling; receivers take them with ANY_SOURCE/ANY_TAG and must
// see each sender's sequence in order, with the status naming the sender.
TEST_F(P2P, NonOvertakingPerSourceWithWildcards) {
    const uint64_t k = slow_fabric() ? 8 : 24;
    const size_t sizes[] = {8, 3000, rendezvous_size()};
    const int32_t tags[] = {201, 202, 203};
    auto size_of = [&](uint64_t seq) { return sizes[seq % 3]; };
    auto tag_of = [&](uint64_t seq) { return tags[(seq / 3 + seq) % 3]; };

    std::vector<Outgoing> out((size - 1) * k);
    size_t o = 0;
    for (uint64_t seq = 0; seq < k; ++seq)
        for (uint32_t d = 1; d < size; ++d) {
            const uint32_t dest = (rank + d) % size;
            isend_pattern(w_, out[o++], size_of(seq), dest, tag_of(seq), seq);
        }

    std::vector<uint64_t> next(size, 0);
    Guarded g(sizes[2]);
    for (uint64_t i = 0; i < (size - 1) * k; ++i) {
        weft_msg_status_t s = blank_status();
        ASSERT_EQ(weft_recv(w_, g.data(), sizes[2], WEFT_BYTE, WEFT_ANY_SOURCE, WEFT_ANY_TAG, &s), WEFT_OK)
            << "wildcard receive " << i;
        ASSERT_TRUE(s.source >= 0 && uint32_t(s.source) < size && uint32_t(s.source) != rank) << describe(s);
        const uint32_t src = uint32_t(s.source);
        const uint64_t seq = next[src]++;
        ASSERT_LT(seq, k) << "too many messages from " << src;
        const std::string what = "message " + std::to_string(seq) + " from " + std::to_string(src);
        EXPECT_EQ(s.tag, tag_of(seq)) << what << ": overtaken? " << describe(s);
        EXPECT_EQ(s.bytes, size_of(seq)) << what << ": overtaken? " << describe(s);
        expect_pattern(g, std::min(s.bytes, sizes[2]), src, tag_of(seq), seq, what);
    }
    wait_all(out, "isend");
    for (uint32_t p = 0; p < size; ++p)
        if (p != rank) {
            EXPECT_EQ(next[p], k) << "messages from " << p;
        }
}

// A receive for one tag picks that tag's first message out of the queue;
// ANY_TAG receives then get the rest in send order.
TEST_F(P2P, TagSelectsOutOfOrderThenAnyTagKeepsOrder) {
    const int32_t tags[] = {211, 212, 211, 212, 213, 211};
    std::vector<Outgoing> out(6);
    for (uint64_t seq = 0; seq < 6; ++seq) isend_pattern(w_, out[seq], kSmall + seq, right_, tags[seq], seq);
    recv_pattern(w_, kSmall + 4, left_, 213, 4, "tag 213 first");
    for (uint64_t seq : {0, 1, 2, 3, 5})
        recv_pattern(w_, kSmall + seq, left_, tags[seq], seq, "ANY_TAG seq " + std::to_string(seq), kExact,
                     WEFT_ANY_TAG);
    wait_all(out, "isend");
}

// Messages that arrived before any receive (unexpected) are matched by the
// receives posted later: a wildcard receive takes the earliest arrival, a
// tag receive its own message, rendezvous included.
TEST_F(P2P, UnexpectedThenPosted) {
    const size_t big = rendezvous_size();
    std::vector<Outgoing> out(3);
    isend_pattern(w_, out[0], kSmall, right_, 221, 0);
    isend_pattern(w_, out[1], 100, right_, 222, 1);
    isend_pattern(w_, out[2], big, right_, 221, 2);
    // Until tag 222 (sent second) is visible, the first has arrived too.
    int flag = 0;
    weft_msg_status_t s = blank_status();
    ASSERT_TRUE(poll_until([&] {
        EXPECT_EQ(weft_iprobe(w_, int32_t(left_), 222, &flag, &s), WEFT_OK);
        return flag != 0;
    })) << "message with tag 222 never became visible to iprobe";
    recv_pattern(w_, kSmall, left_, 221, 0, "ANY_TAG takes the earliest arrival", kExact, WEFT_ANY_TAG);
    recv_pattern(w_, big, left_, 221, 2, "unexpected rendezvous");
    recv_pattern(w_, 100, left_, 222, 1, "unexpected eager");
    wait_all(out, "isend");
}

// Across sources (3+ ranks): rank 0 has an unexpected message from rank 1,
// then one from rank 2; an ANY_SOURCE receive takes rank 1's first.
TEST_F(P2P, UnexpectedMatchedInArrivalOrderAcrossSources) {
    if (size < 3) GTEST_SKIP() << "needs 3 ranks";
    const int32_t tag = 231, go = 232;
    uint8_t token = 1;
    auto visible = [&](uint32_t src) {
        int flag = 0;
        weft_msg_status_t s = blank_status();
        return poll_until([&] {
            EXPECT_EQ(weft_iprobe(w_, int32_t(src), tag, &flag, &s), WEFT_OK);
            return flag != 0;
        });
    };
    if (rank == 1) {
        Outgoing o;
        isend_pattern(w_, o, kSmall, 0, tag, 1);
        wait_ok(&o.req, "isend to 0");
    } else if (rank == 2) {
        ASSERT_EQ(weft_recv(w_, &token, 1, WEFT_BYTE, 0, go, nullptr), WEFT_OK);
        Outgoing o;
        isend_pattern(w_, o, kSmall + 1, 0, tag, 2);
        wait_ok(&o.req, "isend to 0");
    } else if (rank == 0) {
        ASSERT_TRUE(visible(1)) << "rank 1's message never arrived";
        ASSERT_EQ(weft_send(w_, &token, 1, WEFT_BYTE, 2, go), WEFT_OK);
        ASSERT_TRUE(visible(2)) << "rank 2's message never arrived";
        for (uint32_t src : {1u, 2u})
            recv_pattern(w_, kSmall + src - 1, src, tag, src, "ANY_SOURCE in arrival order", WEFT_ANY_SOURCE);
    }
}

// Receives posted before the messages exist: each arriving message goes to
// the first posted receive it matches, in posting order.
TEST_F(P2P, PostedReceivesMatchInPostingOrder) {
    const int32_t a = 241, b = 242;
    const size_t big = rendezvous_size();
    // R0 (ANY_SOURCE, a), R1 (left, ANY_TAG), R2 (ANY_SOURCE, ANY_TAG), R3 (left, a)
    std::vector<Guarded> in;
    for (int i = 0; i < 4; ++i) in.emplace_back(big);
    const int32_t srcs[] = {WEFT_ANY_SOURCE, int32_t(left_), WEFT_ANY_SOURCE, int32_t(left_)};
    const int32_t rtags[] = {a, WEFT_ANY_TAG, WEFT_ANY_TAG, a};
    std::vector<weft_request_t> reqs(4, nullptr);
    for (int i = 0; i < 4; ++i)
        ASSERT_EQ(weft_irecv(w_, in[i].data(), big, WEFT_BYTE, srcs[i], rtags[i], &reqs[i]), WEFT_OK);
    // Everyone is posted before anyone sends. (Not a message: it would match
    // the wildcard receives.)
    barrier();
    // Sent b, a, a(big), a: matched by R1, R0, R2, R3.
    const int32_t stags[] = {b, a, a, a};
    const size_t slens[] = {kSmall, 100, big, 7};
    std::vector<Outgoing> out(4);
    for (uint64_t seq = 0; seq < 4; ++seq) isend_pattern(w_, out[seq], slens[seq], right_, stags[seq], seq);
    const uint64_t receiver_of[] = {1, 0, 2, 3};  // message seq -> request index
    std::vector<weft_msg_status_t> st(4, blank_status());
    EXPECT_EQ(weft_request_waitall(4, reqs.data(), st.data()), WEFT_OK);
    for (uint64_t seq = 0; seq < 4; ++seq) {
        const uint64_t r = receiver_of[seq];
        const std::string what = "message " + std::to_string(seq) + " into receive " + std::to_string(r);
        expect_status(st[r], int32_t(left_), stags[seq], slens[seq]);
        expect_pattern(in[r], slens[seq], left_, stags[seq], seq, what);
    }
    wait_all(out, "isend");
}

// ---------------------------------------------------------- synchronous send

// issend to right; the right rank posts its receive only after our "go",
// which we send after watching the issend stay incomplete.
TEST_F(P2P, IssendIncompleteUntilReceiverPosts) {
    const int32_t tag = 251, go = 252;
    for (size_t n : {size_t(0), size_t(8), rendezvous_size()}) {
        const std::string what = "issend of " + std::to_string(n) + " B";
        const auto data = pattern(msg_seed(rank, tag, n), n);
        weft_request_t req = nullptr;
        ASSERT_EQ(weft_issend(w_, n ? data.data() : nullptr, n, WEFT_BYTE, right_, tag, &req), WEFT_OK);
        // Watch it for 20 ms of polling: the receiver cannot have posted.
        const uint64_t end = now_ns() + 20000000;
        int polls = 0;
        while (now_ns() < end) {
            int flag = 0;
            ASSERT_EQ(weft_request_test(&req, &flag, nullptr), WEFT_OK) << what;
            ASSERT_EQ(flag, 0) << what << " completed after " << polls << " tests, before the receive was posted";
            ++polls;
            weft_wait(ctx, 100000);
        }
        uint8_t token = 1;
        ASSERT_EQ(weft_send(w_, &token, 1, WEFT_BYTE, right_, go), WEFT_OK);
        ASSERT_EQ(weft_recv(w_, &token, 1, WEFT_BYTE, int32_t(left_), go, nullptr), WEFT_OK);
        recv_pattern(w_, n, left_, tag, n, what);
        wait_ok(&req, what);
    }
}

// Blocking ssend between pairs (even -> odd, then odd -> even): the receiver
// delays, raises a flag in the sender's window (put + flush), then posts.
// ssend must not return before the flag is up.
TEST_F(P2P, SsendReturnsOnlyAfterReceiverPosted) {
    if (size % 2) GTEST_SKIP() << "pairs need an even rank count";
    const int32_t tag = 261;
    void* base = nullptr;
    weft_window_t win = nullptr;
    ASSERT_EQ(weft_window_allocate(ctx, 64, &base, &win), WEFT_OK);
    auto* flag = static_cast<uint64_t*>(base);
    const uint32_t partner = rank ^ 1u;
    barrier();
    for (uint64_t round = 1; round <= 4; ++round) {
        const size_t n = round % 2 ? 16 : rendezvous_size();
        const bool sender = (rank % 2) == (round / 2 % 2);
        const std::string what = "round " + std::to_string(round) + " ssend " + std::to_string(n) + " B";
        if (sender) {
            const auto data = pattern(msg_seed(rank, tag, round), n);
            ASSERT_EQ(weft_ssend(w_, data.data(), n, WEFT_BYTE, partner, tag), WEFT_OK) << what;
            EXPECT_EQ(std::atomic_ref<uint64_t>(*flag).load(), round) << what << " returned before the receiver posted";
        } else {
            const uint64_t until = now_ns() + 30000000;  // 30 ms for a wrong ssend to return
            while (now_ns() < until) weft_wait(ctx, 1000000);
            ASSERT_EQ(weft_put(win, partner, 0, &round, 8), WEFT_OK);
            ASSERT_EQ(weft_flush(win, partner), WEFT_OK);
            recv_pattern(w_, n, partner, tag, round, what);
        }
    }
    barrier();
    ASSERT_EQ(weft_window_free(win), WEFT_OK);
}

// A receive that matches a buffered synchronous or rendezvous message
// answers its sender before it returns: the sender completes while the
// receiver stays out of weft (it computes, or waits elsewhere). Both
// ranks know the moment T the receiver comes back (now + 4 s, agreed in
// advance); the sender tests its sends until a second before T. Before the
// fix the answer waited for the receiver's next progress, after T.
TEST_F(P2P, AReceiveAnswersItsSenderBeforeReturning) {
    if (size % 2) GTEST_SKIP() << "pairs need an even rank count";
    const int32_t tag = 262;
    const uint32_t partner = rank ^ 1u;
    const size_t sizes[2] = {kSmall, rendezvous_size()};
    uint64_t back_at = now_ns() + 4000000000ull;  // steady clock of rank 0, as a deadline for everyone
    ASSERT_EQ(weft_bcast(w_, &back_at, 1, WEFT_UINT64, 0), WEFT_OK);
    if (rank % 2 == 0) {
        std::vector<uint8_t> data[2];
        weft_request_t reqs[2];
        for (int i = 0; i < 2; ++i) {
            data[i] = pattern(msg_seed(rank, tag + i, 0), sizes[i]);
            ASSERT_EQ(weft_issend(w_, data[i].data(), sizes[i], WEFT_BYTE, partner, tag + i, &reqs[i]), WEFT_OK);
        }
        auto done = [&] { return !reqs[0] && !reqs[1]; };
        while (!done() && now_ns() + 1000000000ull < back_at) {
            for (auto& r : reqs) {
                int flag = 0;
                ASSERT_EQ(weft_request_test(&r, &flag, nullptr), WEFT_OK);
            }
        }
        EXPECT_TRUE(done()) << "the receiver matched both messages and then stayed out of weft; its answers never came";
        ASSERT_EQ(weft_request_waitall(2, reqs, nullptr), WEFT_OK);
    } else {
        // Both messages buffered here first, then received at once.
        weft_msg_status_t st;
        for (int i = 0; i < 2; ++i) {
            ASSERT_EQ(weft_probe(w_, int32_t(partner), tag + i, &st), WEFT_OK);
        }
        for (int i = 0; i < 2; ++i) recv_pattern(w_, sizes[i], partner, tag + i, 0, "matched on the spot");
        while (now_ns() < back_at) usleep(10000);  // out of weft
    }
    barrier();
}

// ---------------------------------------------------------------- rendezvous

// 256 MiB each way between ranks 0 and 1 (32 MiB over tcp), every word
// checked, nothing written past the buffer.
TEST_F(P2P, LargeRendezvousBothWays) {
    if (rank > 1) return;
    const size_t bytes = slow_fabric() ? (32u << 20) : (256u << 20);
    const size_t words = bytes / 8;
    const uint32_t peer = 1 - rank;
    const int32_t tag = 271;
    std::vector<uint64_t> out(words);
    for (size_t i = 0; i < words; ++i) out[i] = (i * 0x9e3779b97f4a7c15ull) ^ rank;
    const size_t guard = 8;
    std::vector<uint64_t> in(words + guard, 0xfeedfacecafebeefull);
    weft_request_t reqs[2] = {nullptr, nullptr};
    ASSERT_EQ(weft_irecv(w_, in.data(), words, WEFT_UINT64, int32_t(peer), tag, &reqs[0]), WEFT_OK);
    ASSERT_EQ(weft_isend(w_, out.data(), words, WEFT_UINT64, peer, tag, &reqs[1]), WEFT_OK);
    weft_msg_status_t st[2] = {blank_status(), blank_status()};
    ASSERT_EQ(weft_request_waitall(2, reqs, st), WEFT_OK) << describe(st[0]);
    expect_status(st[0], int32_t(peer), tag, bytes);
    size_t bad = SIZE_MAX;
    for (size_t i = 0; i < words && bad == SIZE_MAX; ++i)
        if (in[i] != ((i * 0x9e3779b97f4a7c15ull) ^ peer)) bad = i;
    EXPECT_EQ(bad, SIZE_MAX) << bytes << " B from " << peer << ": word " << bad << " corrupted";
    for (size_t i = words; i < words + guard; ++i) EXPECT_EQ(in[i], 0xfeedfacecafebeefull) << "guard word " << i;
}

// ------------------------------------------------------------------- probes

TEST_F(P2P, ProbeAndIprobeReportStatus) {
    const int32_t small = 281, large = 282, never = 283;
    const size_t big = rendezvous_size();
    int flag = 1;
    weft_msg_status_t s = blank_status();
    ASSERT_EQ(weft_iprobe(w_, WEFT_ANY_SOURCE, never, &flag, &s), WEFT_OK);
    EXPECT_EQ(flag, 0) << "nothing was sent with tag " << never;
    std::vector<Outgoing> out(2);
    isend_pattern(w_, out[0], 1234, right_, small);
    isend_pattern(w_, out[1], big, right_, large);
    // Blocking probe for the second message, then the wildcards see the first.
    s = blank_status();
    ASSERT_EQ(weft_probe(w_, int32_t(left_), large, &s), WEFT_OK);
    expect_status(s, int32_t(left_), large, big);
    for (int again = 0; again < 2; ++again) {  // probing does not consume
        s = blank_status();
        flag = 0;
        ASSERT_EQ(weft_iprobe(w_, WEFT_ANY_SOURCE, WEFT_ANY_TAG, &flag, &s), WEFT_OK);
        ASSERT_EQ(flag, 1) << "probe " << again;
        expect_status(s, int32_t(left_), small, 1234);
    }
    ASSERT_EQ(weft_iprobe(w_, int32_t(left_), never, &flag, &s), WEFT_OK);
    EXPECT_EQ(flag, 0);
    recv_pattern(w_, 1234, left_, small, 0, "probed eager");
    recv_pattern(w_, big, left_, large, 0, "probed rendezvous");
    ASSERT_EQ(weft_iprobe(w_, int32_t(left_), WEFT_ANY_TAG, &flag, &s), WEFT_OK);
    EXPECT_EQ(flag, 0) << "both messages were received: " << describe(s);
    wait_all(out, "isend");
}

// ----------------------------------------------------------------- requests

TEST_F(P2P, NullRequestIsInactive) {
    weft_request_t req = nullptr;
    int flag = 0;
    weft_msg_status_t s = blank_status();
    EXPECT_EQ(weft_request_test(&req, &flag, &s), WEFT_OK);
    EXPECT_EQ(flag, 1);
    EXPECT_EQ(s.bytes, 0u) << describe(s);
    EXPECT_EQ(s.cancelled, 0) << describe(s);
    s = blank_status();
    EXPECT_EQ(weft_request_wait(&req, &s), WEFT_OK);
    EXPECT_EQ(s.bytes, 0u) << describe(s);
    weft_request_t none[3] = {nullptr, nullptr, nullptr};
    size_t index = 7;
    EXPECT_EQ(weft_request_waitany(3, none, &index, nullptr), WEFT_OK);
    EXPECT_EQ(index, SIZE_MAX) << "waitany over inactive requests";
    index = 7;
    flag = 0;
    EXPECT_EQ(weft_request_testany(3, none, &index, &flag, nullptr), WEFT_OK);
    EXPECT_EQ(flag, 1) << "testany over inactive requests";
    EXPECT_EQ(index, SIZE_MAX) << "testany over inactive requests";
    EXPECT_EQ(weft_request_waitall(3, none, nullptr), WEFT_OK);
}

// waitany over receives from every peer: each completes exactly once, with
// its own source; testany sees nothing before any peer was told to send.
TEST_F(P2P, WaitanyTestanyWaitall) {
    const int32_t tag = 291, go = 292;
    const size_t n = size;  // one receive per rank, self included
    std::vector<Guarded> in;
    for (size_t p = 0; p < n; ++p) in.emplace_back(64 + p);
    std::vector<weft_request_t> reqs(n, nullptr);
    for (uint32_t p = 0; p < n; ++p)
        ASSERT_EQ(weft_irecv(w_, in[p].data(), 64 + p, WEFT_BYTE, int32_t(p), tag, &reqs[p]), WEFT_OK);
    size_t index = 0;
    int flag = 1;
    ASSERT_EQ(weft_request_testany(n, reqs.data(), &index, &flag, nullptr), WEFT_OK);
    EXPECT_EQ(flag, 0) << "a receive completed before anyone sent (index " << index << ")";
    // Everyone is posted (ours, then a barrier); then send to all.
    barrier();
    std::vector<Outgoing> out(n);
    for (uint32_t k = 0; k < n; ++k) {
        const uint32_t p = (rank + k) % size;  // staggered start
        isend_pattern(w_, out[k], 40 + rank, p, tag);
    }
    std::vector<int> done(n, 0);
    for (size_t i = 0; i < n; ++i) {
        weft_msg_status_t s = blank_status();
        index = SIZE_MAX;
        ASSERT_EQ(weft_request_waitany(n, reqs.data(), &index, &s), WEFT_OK) << describe(s);
        ASSERT_LT(index, n);
        EXPECT_EQ(done[index]++, 0) << "request " << index << " completed twice";
        EXPECT_EQ(reqs[index], nullptr) << "waitany must clear the completed handle";
        expect_status(s, int32_t(index), tag, 40 + index);
        expect_pattern(in[index], 40 + index, uint32_t(index), tag, 0, "waitany from " + std::to_string(index));
    }
    ASSERT_EQ(weft_request_waitany(n, reqs.data(), &index, nullptr), WEFT_OK);
    EXPECT_EQ(index, SIZE_MAX);
    // testany polling a receive that completes later.
    weft_request_t r = nullptr;
    uint8_t token = 0, got = 0;
    ASSERT_EQ(weft_irecv(w_, &got, 1, WEFT_BYTE, int32_t(left_), go, &r), WEFT_OK);
    ASSERT_EQ(weft_send(w_, &token, 1, WEFT_BYTE, right_, go), WEFT_OK);
    flag = 0;
    ASSERT_TRUE(poll_until([&] {
        EXPECT_EQ(weft_request_testany(1, &r, &index, &flag, nullptr), WEFT_OK);
        return flag != 0;
    })) << "testany never saw the receive complete";
    EXPECT_EQ(index, 0u);
    EXPECT_EQ(r, nullptr);
    // Mixed sends in a waitall without statuses.
    std::vector<weft_request_t> sends;
    for (auto& o : out) sends.push_back(o.req);
    EXPECT_EQ(weft_request_waitall(sends.size(), sends.data(), nullptr), WEFT_OK);
    for (auto q : sends) EXPECT_EQ(q, nullptr);
}

// ------------------------------------------------------------------- cancel

// A cancelled receive completes with cancelled = 1 and does not swallow the
// message sent afterwards; a receive already matched is not cancelled.
TEST_F(P2P, CancelUnmatchedReceive) {
    const int32_t tag = 301, go = 302, later = 303;
    uint8_t token = 0;
    Guarded g(64);
    weft_request_t req = nullptr;
    ASSERT_EQ(weft_irecv(w_, g.data(), 64, WEFT_BYTE, int32_t(left_), tag, &req), WEFT_OK);
    ASSERT_EQ(weft_request_cancel(req), WEFT_OK);
    weft_msg_status_t s = blank_status();
    const weft_status_t rc = weft_request_wait(&req, &s);
    EXPECT_EQ(rc, s.error) << describe(s);
    EXPECT_EQ(s.cancelled, 1) << describe(s);
    EXPECT_EQ(req, nullptr);
    EXPECT_TRUE(g.guards_intact());
    // Only now may left send on tag.
    ASSERT_EQ(weft_send(w_, &token, 1, WEFT_BYTE, left_, go), WEFT_OK);
    ASSERT_EQ(weft_recv(w_, &token, 1, WEFT_BYTE, int32_t(right_), go, nullptr), WEFT_OK);
    std::vector<Outgoing> out(2);
    isend_pattern(w_, out[0], 50, right_, tag, 1);
    isend_pattern(w_, out[1], 9, right_, later, 2);
    recv_pattern(w_, 50, left_, tag, 1, "message after a cancelled receive");
    wait_all(out, "isend");

    // Cancelling a receive that matched an arrived message changes nothing.
    int flag = 0;
    ASSERT_TRUE(poll_until([&] {
        EXPECT_EQ(weft_iprobe(w_, int32_t(left_), later, &flag, &s), WEFT_OK);
        return flag != 0;
    }));
    Guarded m(64);
    ASSERT_EQ(weft_irecv(w_, m.data(), 64, WEFT_BYTE, int32_t(left_), later, &req), WEFT_OK);
    ASSERT_EQ(weft_request_cancel(req), WEFT_OK);
    s = wait_ok(&req, "matched receive, then cancel");
    expect_status(s, int32_t(left_), later, 9);
    expect_pattern(m, 9, left_, later, 2, "matched receive, then cancel");

    // A send is never cancelled: it is delivered.
    Outgoing x;
    isend_pattern(w_, x, 33, right_, later, 3);
    ASSERT_EQ(weft_request_cancel(x.req), WEFT_OK);
    s = wait_ok(&x.req, "cancelled isend");
    EXPECT_EQ(s.cancelled, 0) << "a send is not cancelled: " << describe(s);
    recv_pattern(w_, 33, left_, later, 3, "cancelled isend is delivered");
}

// ------------------------------------------------------------- truncation

// A receive buffer smaller than the message: what fits is delivered, the
// status says WEFT_ERR_TRUNCATE, nothing lands past the buffer, and the next
// message on the same path is intact.
TEST_F(P2P, TruncationDeliversWhatFitsAndNothingMore) {
    const int32_t tag = 311;
    const size_t big = rendezvous_size();
    struct Case {
        size_t sent;
        weft_datatype_t type;
        size_t count;  // receive buffer, in elements
    } cases[] = {{100, WEFT_BYTE, 60},
                 {40, WEFT_UINT64, 3},
                 {big, WEFT_INT32, 1000},
                 {big, WEFT_BYTE, big - 1},
                 {8, WEFT_BYTE, 0}};
    uint64_t seq = 0;
    for (const Case& c : cases) {
        ++seq;
        size_t elem = 0;
        ASSERT_EQ(weft_datatype_size(c.type, &elem), WEFT_OK);
        const size_t cap = c.count * elem;
        const std::string what = std::to_string(c.sent) + " B into " + std::to_string(cap) + " B";
        std::vector<Outgoing> out(2);
        isend_pattern(w_, out[0], c.sent, right_, tag, seq);
        isend_pattern(w_, out[1], 16, right_, tag, seq + 100);
        Guarded g(cap);
        weft_msg_status_t s = blank_status();
        weft_request_t req = nullptr;
        ASSERT_EQ(weft_irecv(w_, g.data(), c.count, c.type, int32_t(left_), tag, &req), WEFT_OK);
        EXPECT_EQ(weft_request_wait(&req, &s), WEFT_ERR_TRUNCATE) << what << " " << describe(s);
        expect_status(s, int32_t(left_), tag, cap, WEFT_ERR_TRUNCATE);
        expect_pattern(g, cap, left_, tag, seq, what);
        recv_pattern(w_, 16, left_, tag, seq + 100, "message after a truncated one");
        wait_all(out, what);
    }
    // A blocking recv and a waitall report it too.
    Outgoing o;
    isend_pattern(w_, o, 30, right_, tag, 7);
    Guarded g(10);
    weft_msg_status_t s = blank_status();
    EXPECT_EQ(weft_recv(w_, g.data(), 10, WEFT_BYTE, WEFT_ANY_SOURCE, WEFT_ANY_TAG, &s), WEFT_ERR_TRUNCATE);
    EXPECT_EQ(s.error, WEFT_ERR_TRUNCATE);
    EXPECT_TRUE(g.guards_intact());
    wait_ok(&o.req, "isend");
    isend_pattern(w_, o, 30, right_, tag, 8);
    weft_request_t reqs[2] = {nullptr, nullptr};
    uint8_t ok[30];
    ASSERT_EQ(weft_irecv(w_, g.data(), 10, WEFT_BYTE, int32_t(left_), tag, &reqs[0]), WEFT_OK);
    ASSERT_EQ(weft_irecv(w_, ok, 30, WEFT_BYTE, int32_t(left_), tag + 1, &reqs[1]), WEFT_OK);
    Outgoing o2;
    isend_pattern(w_, o2, 30, right_, tag + 1, 9);
    weft_msg_status_t st[2] = {blank_status(), blank_status()};
    EXPECT_EQ(weft_request_waitall(2, reqs, st), WEFT_ERR_TRUNCATE) << "waitall returns the first error";
    EXPECT_EQ(st[0].error, WEFT_ERR_TRUNCATE);
    EXPECT_EQ(st[1].error, WEFT_OK);
    EXPECT_TRUE(g.guards_intact());
    wait_ok(&o.req, "isend");
    wait_ok(&o2.req, "isend");
}

// weft_msg_status_count: a byte count that is not a whole number of
// elements is WEFT_ERR_TRUNCATE (MPI_UNDEFINED); receiving 10 bytes into
// an int32 buffer is not a truncation.
TEST_F(P2P, StatusCountOfPartialElements) {
    const int32_t tag = 321;
    Outgoing o;
    isend_pattern(w_, o, 10, right_, tag);
    Guarded g(5 * 4);
    weft_msg_status_t s = blank_status();
    ASSERT_EQ(weft_recv(w_, g.data(), 5, WEFT_INT32, int32_t(left_), tag, &s), WEFT_OK);
    expect_status(s, int32_t(left_), tag, 10);
    size_t count = 99;
    EXPECT_EQ(weft_msg_status_count(&s, WEFT_INT32, &count), WEFT_ERR_TRUNCATE);
    EXPECT_EQ(weft_msg_status_count(&s, WEFT_BYTE, &count), WEFT_OK);
    EXPECT_EQ(count, 10u);
    wait_ok(&o.req, "isend");

    const size_t sizes[WEFT_DATATYPE_COUNT_] = {1, 4, 4, 8, 8, 8};
    for (int t = 0; t < WEFT_DATATYPE_COUNT_; ++t) {
        size_t bytes = 0;
        EXPECT_EQ(weft_datatype_size(weft_datatype_t(t), &bytes), WEFT_OK);
        EXPECT_EQ(bytes, sizes[t]) << "datatype " << t;
        s.bytes = 24;
        EXPECT_EQ(weft_msg_status_count(&s, weft_datatype_t(t), &count), WEFT_OK);
        EXPECT_EQ(count, 24 / sizes[t]) << "datatype " << t;
    }
    s.bytes = 12;
    EXPECT_EQ(weft_msg_status_count(&s, WEFT_UINT64, &count), WEFT_ERR_TRUNCATE);
    EXPECT_EQ(weft_msg_status_count(&s, WEFT_DATATYPE_COUNT_, &count), WEFT_ERR_INVALID_ARG);
    EXPECT_EQ(mp_raw_status_count(&s, 1000, &count), WEFT_ERR_INVALID_ARG);
    EXPECT_EQ(weft_msg_status_count(nullptr, WEFT_BYTE, &count), WEFT_ERR_INVALID_ARG);
    EXPECT_EQ(weft_msg_status_count(&s, WEFT_BYTE, nullptr), WEFT_ERR_INVALID_ARG);
    EXPECT_EQ(mp_raw_datatype_size(-1, &count), WEFT_ERR_INVALID_ARG);
    EXPECT_EQ(weft_datatype_size(WEFT_BYTE, nullptr), WEFT_ERR_INVALID_ARG);
}

// The largest tag is usable.
TEST_F(P2P, LargestTagIsValid) {
    uint32_t v = rank, got = UINT32_MAX;
    weft_request_t req = nullptr;
    ASSERT_EQ(weft_irecv(w_, &got, 1, WEFT_UINT32, int32_t(left_), WEFT_TAG_UB, &req), WEFT_OK);
    ASSERT_EQ(weft_send(w_, &v, 1, WEFT_UINT32, right_, WEFT_TAG_UB), WEFT_OK);
    const weft_msg_status_t s = wait_ok(&req, "tag WEFT_TAG_UB");
    expect_status(s, int32_t(left_), WEFT_TAG_UB, 4);
    EXPECT_EQ(got, left_);
}

// A synchronous send whose receive truncates still completes on both sides;
// a synchronous send to oneself completes once one's own receive matched it.
TEST_F(P2P, SynchronousSendTruncatedAndToSelf) {
    const int32_t tag = 331;
    for (size_t n : {size_t(100), rendezvous_size()}) {
        const std::string what = "issend of " + std::to_string(n) + " B into 60 B";
        const auto data = pattern(msg_seed(rank, tag, n), n);
        weft_request_t req = nullptr;
        ASSERT_EQ(weft_issend(w_, data.data(), n, WEFT_BYTE, right_, tag, &req), WEFT_OK);
        Guarded g(60);
        weft_msg_status_t s = blank_status();
        EXPECT_EQ(weft_recv(w_, g.data(), 60, WEFT_BYTE, int32_t(left_), tag, &s), WEFT_ERR_TRUNCATE) << what;
        expect_status(s, int32_t(left_), tag, 60, WEFT_ERR_TRUNCATE);
        expect_pattern(g, 60, left_, tag, n, what);
        wait_ok(&req, what);
    }
    const auto data = pattern(msg_seed(rank, tag + 1, 0), 48);
    weft_request_t req = nullptr;
    ASSERT_EQ(weft_issend(w_, data.data(), 48, WEFT_BYTE, rank, tag + 1, &req), WEFT_OK);
    int flag = 1;
    ASSERT_EQ(weft_request_test(&req, &flag, nullptr), WEFT_OK);
    EXPECT_EQ(flag, 0) << "issend to self completed before its receive was posted";
    recv_pattern(w_, 48, rank, tag + 1, 0, "issend to self");
    wait_ok(&req, "issend to self");
}

// =========================================================== communicators

using Comm = CommTest;

// One message around c's ring (both neighbours, any size), checked.
void ring_exchange(weft_comm_t c, int32_t tag, size_t n, uint64_t seq, const std::string& what) {
    const uint32_t r = comm_rank(c), m = comm_size(c);
    Outgoing o;
    isend_pattern(c, o, n, (r + 1) % m, tag, seq);
    recv_pattern(c, n, (r + m - 1) % m, tag, seq, what);
    wait_ok(&o.req, what);
}

uint64_t context_id(weft_comm_t c) {
    uint64_t id = UINT64_MAX;
    EXPECT_EQ(weft_comm_context_id(c, &id), WEFT_OK);
    return id;
}

// c holds exactly these job ranks in this order, its members agree on its
// context ID, and they can talk on it.
void expect_members(weft_comm_t c, const std::vector<uint32_t>& job_ranks, const std::string& what) {
    ASSERT_NE(c, nullptr) << what;
    ASSERT_EQ(comm_size(c), job_ranks.size()) << what;
    const auto me = std::find(job_ranks.begin(), job_ranks.end(), rank);
    ASSERT_NE(me, job_ranks.end()) << what << ": not a member";
    EXPECT_EQ(comm_rank(c), uint32_t(me - job_ranks.begin())) << what;
    for (uint32_t i = 0; i < job_ranks.size(); ++i) {
        uint32_t jr = UINT32_MAX;
        EXPECT_EQ(weft_comm_job_rank(c, i, &jr), WEFT_OK) << what;
        EXPECT_EQ(jr, job_ranks[i]) << what << ": member " << i;
    }
    const auto ids = allgather_one(c, context_id(c), WEFT_UINT64);
    for (uint32_t i = 0; i < ids.size(); ++i) EXPECT_EQ(ids[i], ids[0]) << what << ": member " << i << "'s context ID";
    ring_exchange(c, 5, 100, job_ranks.size(), what);
}

std::vector<uint32_t> all_ranks() {
    std::vector<uint32_t> v(size);
    for (uint32_t i = 0; i < size; ++i) v[i] = i;
    return v;
}

// Members of this rank's part of split(parent = world) by (colour, key):
// sorted by key, ties by parent rank.
template <typename Colour, typename Key>
std::vector<uint32_t> split_members(Colour colour, Key key) {
    std::vector<uint32_t> v;
    for (uint32_t p = 0; p < size; ++p)
        if (colour(p) == colour(rank)) v.push_back(p);
    std::stable_sort(v.begin(), v.end(), [&](uint32_t a, uint32_t b) { return key(a) < key(b); });
    return v;
}

TEST_F(Comm, WorldIsTheJob) {
    ASSERT_NE(w_, nullptr);
    weft_comm_t again = nullptr;
    ASSERT_EQ(weft_comm_world(ctx, &again), WEFT_OK);
    EXPECT_EQ(again, w_) << "the world is one handle";
    uint32_t slot = 99;
    ASSERT_EQ(weft_comm_clock_slot(w_, &slot), WEFT_OK);
    EXPECT_EQ(slot, 0u) << "docs/state-window.md: slot 0 is the world";
    expect_members(w_, all_ranks(), "world");
}

TEST_F(Comm, DupKeepsMembersWithNewContext) {
    weft_comm_t d = nullptr, dd = nullptr;
    ASSERT_EQ(weft_comm_dup(w_, &d), WEFT_OK);
    expect_members(d, all_ranks(), "dup(world)");
    ASSERT_EQ(weft_comm_dup(d, &dd), WEFT_OK);
    expect_members(dd, all_ranks(), "dup(dup(world))");
    const uint64_t ids[] = {context_id(w_), context_id(d), context_id(dd)};
    EXPECT_NE(ids[0], ids[1]);
    EXPECT_NE(ids[0], ids[2]);
    EXPECT_NE(ids[1], ids[2]);
    ASSERT_EQ(weft_comm_free(&d), WEFT_OK);  // parent first: the child lives on
    EXPECT_EQ(d, nullptr);
    ring_exchange(dd, 6, 10, 0, "dup after its parent was freed");
    ASSERT_EQ(weft_comm_free(&dd), WEFT_OK);
}

TEST_F(Comm, SplitOrdersByKeyThenRank) {
    struct Case {
        const char* what;
        int32_t (*colour)(uint32_t r);
        int32_t (*key)(uint32_t r);
    } cases[] = {
        {"colour r%3, key -r", [](uint32_t r) { return int32_t(r % 3); }, [](uint32_t r) { return -int32_t(r); }},
        {"one colour, key ties broken by rank", [](uint32_t) { return 0; },
         [](uint32_t r) { return int32_t((size - 1 - r) / 2); }},
        {"colour by half, key 0", [](uint32_t r) { return int32_t(r < size / 2 ? 1000 : 7); },
         [](uint32_t) { return 0; }},
    };
    for (const Case& c : cases) {
        weft_comm_t s = nullptr;
        ASSERT_EQ(weft_comm_split(w_, c.colour(rank), c.key(rank), &s), WEFT_OK) << c.what;
        expect_members(s, split_members(c.colour, c.key), c.what);
        // A split of the split (by parity of the new rank) still talks.
        weft_comm_t ss = nullptr;
        ASSERT_EQ(weft_comm_split(s, int32_t(comm_rank(s) % 2), 0, &ss), WEFT_OK) << c.what;
        ASSERT_NE(ss, nullptr);
        EXPECT_EQ(comm_size(ss), (comm_size(s) + 1 - comm_rank(s) % 2) / 2) << c.what << ", split again";
        ring_exchange(ss, 7, 50, 0, std::string(c.what) + ", split again");
        ASSERT_EQ(weft_comm_free(&ss), WEFT_OK);
        ASSERT_EQ(weft_comm_free(&s), WEFT_OK);
    }
}

TEST_F(Comm, SplitUndefinedGivesNull) {
    weft_comm_t s = reinterpret_cast<weft_comm_t>(&s);  // must be overwritten
    const bool out = rank % 2 == 1;
    ASSERT_EQ(weft_comm_split(w_, out ? WEFT_UNDEFINED : 3, 0, &s), WEFT_OK);
    if (out) {
        EXPECT_EQ(s, nullptr) << "WEFT_UNDEFINED joins no communicator";
    } else {
        expect_members(s, split_members([](uint32_t r) { return r % 2; }, [](uint32_t r) { return r; }), "evens");
        ASSERT_EQ(weft_comm_free(&s), WEFT_OK);
    }
}

// Only the listed ranks call; lists may be reordered subsets. Two creations
// over overlapping lists run concurrently (odd ranks do B before A while
// even ranks wait in A), told apart by their tags.
TEST_F(Comm, CreateFromRanksSubsetsReorderedAndConcurrent) {
    std::vector<uint32_t> evens_reversed, odds, all_reversed = all_ranks();
    std::reverse(all_reversed.begin(), all_reversed.end());
    for (uint32_t r : all_reversed) (r % 2 ? odds : evens_reversed).push_back(r);
    std::reverse(odds.begin(), odds.end());
    if (rank % 2 == 0) {
        weft_comm_t e = nullptr;
        ASSERT_EQ(weft_comm_create_from_ranks(w_, evens_reversed.data(), uint32_t(evens_reversed.size()), 11, &e),
                  WEFT_OK);
        expect_members(e, evens_reversed, "evens reversed");
        ASSERT_EQ(weft_comm_free(&e), WEFT_OK);
    }
    weft_comm_t a = nullptr, b = nullptr;
    if (rank % 2 == 1) {
        ASSERT_EQ(weft_comm_create_from_ranks(w_, odds.data(), uint32_t(odds.size()), 12, &b), WEFT_OK);
        expect_members(b, odds, "odds (tag 12)");
    }
    ASSERT_EQ(weft_comm_create_from_ranks(w_, all_reversed.data(), size, 13, &a), WEFT_OK);
    expect_members(a, all_reversed, "all reversed (tag 13)");
    if (b) {
        ASSERT_EQ(weft_comm_free(&b), WEFT_OK);
    }
    ASSERT_EQ(weft_comm_free(&a), WEFT_OK);
}

// Context IDs of every communicator on every rank: members of one agree,
// different communicators differ (split parts included), and a freed
// communicator's ID never comes back.
TEST_F(Comm, ContextIdsUniqueInTheJob) {
    std::vector<weft_comm_t> cs(5, nullptr);
    cs[0] = w_;
    ASSERT_EQ(weft_comm_dup(w_, &cs[1]), WEFT_OK);
    ASSERT_EQ(weft_comm_split(w_, int32_t(rank % 2), 0, &cs[2]), WEFT_OK);
    auto rev = all_ranks();
    std::reverse(rev.begin(), rev.end());
    ASSERT_EQ(weft_comm_create_from_ranks(w_, rev.data(), size, 21, &cs[3]), WEFT_OK);
    ASSERT_EQ(weft_comm_dup(cs[2], &cs[4]), WEFT_OK);
    // Identity of communicator k on rank r: split-derived ones (2, 4) per parity.
    auto identity = [](size_t k, uint32_t r) { return (k == 2 || k == 4) ? int64_t(k * 2 + r % 2) : int64_t(k * 2); };
    std::vector<uint64_t> mine(cs.size());
    for (size_t k = 0; k < cs.size(); ++k) mine[k] = context_id(cs[k]);
    std::vector<uint64_t> all(cs.size() * size);
    ASSERT_EQ(weft_allgather(w_, mine.data(), cs.size(), WEFT_UINT64, all.data()), WEFT_OK);
    std::map<uint64_t, int64_t> owner;  // context ID -> communicator identity
    for (uint32_t r = 0; r < size; ++r)
        for (size_t k = 0; k < cs.size(); ++k) {
            const uint64_t id = all[r * cs.size() + k];
            auto [it, fresh] = owner.emplace(id, identity(k, r));
            EXPECT_EQ(it->second, identity(k, r)) << "context ID " << id << " of communicator " << k << " on rank " << r
                                                  << " also names communicator identity " << it->second;
        }
    // Distinct clock slots on this rank.
    std::set<uint32_t> slots;
    for (weft_comm_t c : cs) {
        uint32_t slot = UINT32_MAX;
        ASSERT_EQ(weft_comm_clock_slot(c, &slot), WEFT_OK);
        EXPECT_TRUE(slots.insert(slot).second) << "clock slot " << slot << " used twice";
    }
    for (size_t k = 1; k < cs.size(); ++k) ASSERT_EQ(weft_comm_free(&cs[k]), WEFT_OK);
    for (int i = 0; i < 4; ++i) {
        weft_comm_t d = nullptr;
        ASSERT_EQ(weft_comm_dup(w_, &d), WEFT_OK);
        EXPECT_EQ(owner.count(context_id(d)), 0u) << "context ID " << context_id(d) << " reused";
        owner.emplace(context_id(d), -1);
        ASSERT_EQ(weft_comm_free(&d), WEFT_OK);
    }
}

// Same tag, same peers, four communicators: each receive (wildcards
// included) gets its own communicator's message, received in reverse order.
TEST_F(Comm, MessagesNeverCrossCommunicators) {
    const int32_t tag = 31;
    std::vector<weft_comm_t> cs(4, w_);
    for (size_t k = 1; k < cs.size(); ++k) ASSERT_EQ(weft_comm_dup(w_, &cs[k]), WEFT_OK);
    // A message pending on the world is invisible on the dups.
    Outgoing first;
    isend_pattern(w_, first, 16, right_, tag, 100);
    int flag = 0;
    weft_msg_status_t s = blank_status();
    ASSERT_TRUE(poll_until([&] {
        EXPECT_EQ(weft_iprobe(w_, int32_t(left_), tag, &flag, &s), WEFT_OK);
        return flag != 0;
    }));
    for (size_t k = 1; k < cs.size(); ++k) {
        ASSERT_EQ(weft_iprobe(cs[k], WEFT_ANY_SOURCE, WEFT_ANY_TAG, &flag, &s), WEFT_OK);
        EXPECT_EQ(flag, 0) << "dup " << k << " sees the world's message: " << describe(s);
    }
    recv_pattern(w_, 16, left_, tag, 100, "world");
    wait_ok(&first.req, "isend");
    barrier();  // nobody sends on the dups before every rank probed them
    std::vector<Outgoing> out(cs.size());
    for (size_t k = 0; k < cs.size(); ++k) isend_pattern(cs[k], out[k], 40, right_, tag, k);
    for (size_t k = cs.size(); k-- > 0;)
        recv_pattern(cs[k], 40, left_, tag, k, "communicator " + std::to_string(k), WEFT_ANY_SOURCE, WEFT_ANY_TAG);
    wait_all(out, "isend");
    for (size_t k = 1; k < cs.size(); ++k) ASSERT_EQ(weft_comm_free(&cs[k]), WEFT_OK);
}

// Free is collective but returns at once: a rank frees right after its send
// completed locally (or with its operations still pending) while its partner
// has not even posted the matching receive yet. Pending operations complete.
TEST_F(Comm, FreeWhilePeersStillUseIt) {
    if (size % 2) GTEST_SKIP() << "pairs need an even rank count";
    const uint32_t partner = rank ^ 1u;
    const bool early = rank % 2 == 1;  // frees first
    const int32_t tag = 41, freed = 42;
    uint8_t token = 0;
    for (size_t n : {size_t(8), rendezvous_size()}) {
        const std::string what = std::to_string(n) + " B on a freed communicator";
        weft_comm_t d = nullptr;
        ASSERT_EQ(weft_comm_dup(w_, &d), WEFT_OK);
        std::vector<Outgoing> out(1);
        Guarded in(n);
        weft_request_t rreq = nullptr;
        if (early) {
            isend_pattern(d, out[0], n, partner, tag, n);
            ASSERT_EQ(weft_irecv(d, in.data(), n, WEFT_BYTE, int32_t(partner), tag, &rreq), WEFT_OK);
            if (n == 8) wait_ok(&out[0].req, "eager isend");  // locally complete, then free
            ASSERT_EQ(weft_comm_free(&d), WEFT_OK);
            EXPECT_EQ(d, nullptr);
            ASSERT_EQ(weft_send(w_, &token, 1, WEFT_BYTE, partner, freed), WEFT_OK);
        } else {
            ASSERT_EQ(weft_recv(w_, &token, 1, WEFT_BYTE, int32_t(partner), freed, nullptr), WEFT_OK);
            isend_pattern(d, out[0], n, partner, tag, n);
            ASSERT_EQ(weft_irecv(d, in.data(), n, WEFT_BYTE, int32_t(partner), tag, &rreq), WEFT_OK);
        }
        const weft_msg_status_t s = wait_ok(&rreq, what);
        expect_status(s, int32_t(partner), tag, n);
        expect_pattern(in, n, partner, tag, n, what);
        wait_all(out, what);
        if (d) {
            ASSERT_EQ(weft_comm_free(&d), WEFT_OK);
        }
    }
}

// A receive still pending on a freed communicator can be cancelled (its
// release waits for it); non-blocking collectives posted just before the
// free complete with the right results.
TEST_F(Comm, PendingOperationsOutliveFree) {
    weft_comm_t d = nullptr;
    ASSERT_EQ(weft_comm_dup(w_, &d), WEFT_OK);
    uint64_t never = 0;
    weft_request_t orphan = nullptr;
    ASSERT_EQ(weft_irecv(d, &never, 1, WEFT_UINT64, WEFT_ANY_SOURCE, 9, &orphan), WEFT_OK);
    std::vector<int64_t> in(1000), sum(1000, 0), bc(3000, -1);
    for (size_t i = 0; i < in.size(); ++i) in[i] = int64_t(rank * 1000 + i);
    if (rank == 1 % size)
        for (size_t i = 0; i < bc.size(); ++i) bc[i] = int64_t(i * 3);
    weft_request_t reqs[2] = {nullptr, nullptr};
    ASSERT_EQ(weft_iallreduce(d, in.data(), sum.data(), in.size(), WEFT_INT64, WEFT_OP_SUM, &reqs[0]), WEFT_OK);
    ASSERT_EQ(weft_ibcast(d, bc.data(), bc.size(), WEFT_INT64, 1 % size, &reqs[1]), WEFT_OK);
    ASSERT_EQ(weft_comm_free(&d), WEFT_OK);
    ASSERT_EQ(weft_request_waitall(2, reqs, nullptr), WEFT_OK) << "collectives posted before the free";
    for (size_t i = 0; i < sum.size(); ++i)
        ASSERT_EQ(sum[i], int64_t(1000 * size * (size - 1) / 2 + size * i)) << "iallreduce element " << i;
    for (size_t i = 0; i < bc.size(); ++i) ASSERT_EQ(bc[i], int64_t(i * 3)) << "ibcast element " << i;
    ASSERT_EQ(weft_request_cancel(orphan), WEFT_OK);
    weft_msg_status_t s = blank_status();
    weft_request_wait(&orphan, &s);
    EXPECT_EQ(s.cancelled, 1) << describe(s);
    EXPECT_EQ(orphan, nullptr);
}

// dup, split and free in a tight loop with traffic in flight, frees in
// varying order (some while operations are pending), ranks skewed; then
// more create/free cycles than there are clock slots.
TEST_F(Comm, DupSplitFreeRaces) {
    const int iters = slow_fabric() ? 40 : 150;
    std::set<uint64_t> ids;
    for (int i = 0; i < iters; ++i) {
        const std::string what = "iteration " + std::to_string(i);
        if ((i + rank) % 7 == 0) {  // skew: this rank falls behind for a moment
            const uint64_t until = now_ns() + 2000000;
            while (now_ns() < until) weft_progress(ctx, nullptr);
        }
        weft_comm_t d = nullptr, s = nullptr;
        ASSERT_EQ(weft_comm_dup(w_, &d), WEFT_OK) << what;
        ASSERT_EQ(weft_comm_split(d, int32_t((rank + i) % 2), i % 2 ? int32_t(rank) : -int32_t(rank), &s), WEFT_OK)
            << what;
        ASSERT_NE(s, nullptr) << what;
        EXPECT_TRUE(ids.insert(context_id(d)).second) << what << ": dup's context ID reused";
        EXPECT_TRUE(ids.insert(context_id(s)).second) << what << ": split's context ID reused";
        // Traffic on both, then frees in one of three orders.
        const uint32_t sr = comm_rank(s), sn = comm_size(s);
        std::vector<Outgoing> out(2);
        std::vector<Guarded> in(2, Guarded(64));
        std::vector<weft_request_t> reqs(4, nullptr);
        isend_pattern(d, out[0], 64, right_, 51, uint64_t(i));
        isend_pattern(s, out[1], 64, (sr + 1) % sn, 52, uint64_t(i));
        ASSERT_EQ(weft_irecv(d, in[0].data(), 64, WEFT_BYTE, int32_t(left_), 51, &reqs[0]), WEFT_OK);
        ASSERT_EQ(weft_irecv(s, in[1].data(), 64, WEFT_BYTE, int32_t((sr + sn - 1) % sn), 52, &reqs[1]), WEFT_OK);
        reqs[2] = out[0].req;
        reqs[3] = out[1].req;
        if (i % 3 == 0) {
            ASSERT_EQ(weft_comm_free(&d), WEFT_OK) << what;
            ASSERT_EQ(weft_comm_free(&s), WEFT_OK) << what;
        }
        if (i % 5 == 0 && s) {
            int64_t v = i, sum = 0;
            ASSERT_EQ(weft_allreduce(s, &v, &sum, 1, WEFT_INT64, WEFT_OP_SUM), WEFT_OK) << what;
            EXPECT_EQ(sum, int64_t(i) * sn) << what;
        }
        std::vector<weft_msg_status_t> st(4, blank_status());
        ASSERT_EQ(weft_request_waitall(4, reqs.data(), st.data()), WEFT_OK) << what;
        expect_pattern(in[0], 64, left_, 51, uint64_t(i), what + " on the dup");
        expect_pattern(in[1], 64, (sr + sn - 1) % sn, 52, uint64_t(i), what + " on the split");
        if (i % 3 == 1) {
            ASSERT_EQ(weft_comm_free(&s), WEFT_OK) << what;
            ASSERT_EQ(weft_comm_free(&d), WEFT_OK) << what;
        } else if (i % 3 == 2) {
            ASSERT_EQ(weft_comm_free(&d), WEFT_OK) << what;
            ASSERT_EQ(weft_comm_free(&s), WEFT_OK) << what;
        }
    }
    // More than WEFT_STATE_COMM_SLOTS communicators over time: freed slots
    // must come back.
    for (uint32_t i = 0; i < WEFT_STATE_COMM_SLOTS + 40; ++i) {
        weft_comm_t d = nullptr;
        ASSERT_EQ(weft_comm_dup(w_, &d), WEFT_OK) << "dup/free cycle " << i;
        EXPECT_TRUE(ids.insert(context_id(d)).second) << "cycle " << i << ": context ID reused";
        ASSERT_EQ(weft_comm_free(&d), WEFT_OK) << "dup/free cycle " << i;
    }
}

// Every clock slot taken (dup until BUSY), every duplicate freed with the
// ranks 300 ms apart, then a dup at once (and the same again with
// create_from_ranks): freed slots come back while their release barriers
// finish, so a program that frees and then creates sees no error.
TEST_F(Comm, CreateRightAfterFreeingEverySlot) {
    for (int form = 0; form < 2; ++form) {
        const char* what = form ? "create_from_ranks" : "dup";
        std::vector<weft_comm_t> all;
        for (;;) {  // ends: BUSY, after WEFT_STATE_COMM_SLOTS - 1 dups (slot 0 is the world's)
            weft_comm_t d = nullptr;
            const weft_status_t st = weft_comm_dup(w_, &d);
            if (st == WEFT_ERR_BUSY) break;
            ASSERT_EQ(st, WEFT_OK) << "dup " << all.size();
            all.push_back(d);
            ASSERT_LT(all.size(), size_t(WEFT_STATE_COMM_SLOTS)) << "never BUSY";
        }
        EXPECT_EQ(all.size(), size_t(WEFT_STATE_COMM_SLOTS) - 1);
        const uint64_t until = now_ns() + 300'000'000ull * rank;  // ranks a few hundred ms apart
        while (now_ns() < until) weft_wait(ctx, 1000000);
        for (weft_comm_t& d : all) ASSERT_EQ(weft_comm_free(&d), WEFT_OK);
        weft_comm_t c = nullptr;
        if (form == 0) {
            ASSERT_EQ(weft_comm_dup(w_, &c), WEFT_OK) << "dup right after freeing every communicator";
        } else {
            std::vector<uint32_t> ranks(size);
            for (uint32_t i = 0; i < size; ++i) ranks[i] = size - 1 - i;
            ASSERT_EQ(weft_comm_create_from_ranks(w_, ranks.data(), size, 9, &c), WEFT_OK)
                << "create_from_ranks right after freeing every communicator";
        }
        EXPECT_EQ(weft_barrier(c), WEFT_OK) << what;
        uint64_t one = 1, n = 0;
        EXPECT_EQ(weft_allreduce(c, &one, &n, 1, WEFT_UINT64, WEFT_OP_SUM), WEFT_OK) << what;
        EXPECT_EQ(n, size) << what;
        EXPECT_EQ(weft_comm_free(&c), WEFT_OK) << what;
    }
}

// Point-to-point counters in the communicator's clock record: messages sent
// and arrived on it (docs/state-window.md), and the context word.
TEST_F(Comm, ClockRecordCountsPointToPoint) {
    weft_comm_t d = nullptr;
    ASSERT_EQ(weft_comm_dup(w_, &d), WEFT_OK);
    EXPECT_EQ(clock_word(d, WEFT_STATE_CLOCK_CONTEXT), context_id(d) + 1);
    const uint64_t sent0 = clock_word(d, WEFT_STATE_CLOCK_SENT), arrived0 = clock_word(d, WEFT_STATE_CLOCK_RECEIVED);
    const uint64_t all_sent0 = state_word(WEFT_STATE_P2P_SENT_OFF),
                   all_arrived0 = state_word(WEFT_STATE_P2P_RECEIVED_OFF);
    barrier();  // counters count arrivals: nobody sends before every rank read them
    const uint64_t k = 5;
    std::vector<Outgoing> out(k);
    for (uint64_t i = 0; i < k; ++i) isend_pattern(d, out[i], i ? 8 : rendezvous_size(), right_, 61, i);
    for (uint64_t i = 0; i < k; ++i) recv_pattern(d, i ? 8 : rendezvous_size(), left_, 61, i, "counted message");
    wait_all(out, "isend");
    EXPECT_EQ(clock_word(d, WEFT_STATE_CLOCK_SENT) - sent0, k);
    EXPECT_EQ(clock_word(d, WEFT_STATE_CLOCK_RECEIVED) - arrived0, k);
    EXPECT_EQ(state_word(WEFT_STATE_P2P_SENT_OFF) - all_sent0, k) << "job-wide counter";
    EXPECT_EQ(state_word(WEFT_STATE_P2P_RECEIVED_OFF) - all_arrived0, k) << "job-wide counter";
    ASSERT_EQ(weft_comm_free(&d), WEFT_OK);
}

// 10,000 iterations (1,000 over tcp) of a ring exchange plus an allreduce on
// a dup: every value checked; the ASan lane checks nothing leaks.
TEST_F(Comm, StressRingAndAllreduce) {
    const uint64_t iters = slow_fabric() ? 1000 : 10000;
    weft_comm_t d = nullptr;
    ASSERT_EQ(weft_comm_dup(w_, &d), WEFT_OK);
    const uint64_t t0 = now_ns();
    for (uint64_t i = 0; i < iters; ++i) {
        uint64_t out = rank * 1000003ull + i, in = UINT64_MAX;
        weft_request_t reqs[2] = {nullptr, nullptr};
        ASSERT_EQ(weft_irecv(d, &in, 1, WEFT_UINT64, int32_t(left_), 71, &reqs[0]), WEFT_OK) << "iteration " << i;
        ASSERT_EQ(weft_isend(d, &out, 1, WEFT_UINT64, right_, 71, &reqs[1]), WEFT_OK) << "iteration " << i;
        ASSERT_EQ(weft_request_waitall(2, reqs, nullptr), WEFT_OK) << "iteration " << i;
        ASSERT_EQ(in, left_ * 1000003ull + i) << "iteration " << i;
        int64_t v = int64_t(rank + i), sum = -1;
        ASSERT_EQ(weft_allreduce(d, &v, &sum, 1, WEFT_INT64, WEFT_OP_SUM), WEFT_OK) << "iteration " << i;
        ASSERT_EQ(sum, int64_t(size * i + size * (size - 1) / 2)) << "iteration " << i;
    }
    if (rank == 0)
        std::printf("%llu iterations: %.1f us each\n", (unsigned long long)iters,
                    double(now_ns() - t0) / 1e3 / double(iters));
    ASSERT_EQ(weft_comm_free(&d), WEFT_OK);
}

// ================================================================ bad input

using BadInput = CommTest;

TEST_F(BadInput, NullFreedAndWorldCommunicators) {
    weft_comm_t out = nullptr;
    EXPECT_EQ(weft_comm_world(nullptr, &out), WEFT_ERR_NOT_INITIALIZED);
    EXPECT_EQ(weft_comm_world(ctx, nullptr), WEFT_ERR_INVALID_ARG);
    weft_comm_t world_copy = w_;
    EXPECT_EQ(weft_comm_free(&world_copy), WEFT_ERR_INVALID_ARG) << "the world belongs to the context";
    EXPECT_EQ(world_copy, w_);
    EXPECT_EQ(weft_comm_free(nullptr), WEFT_ERR_INVALID_ARG);
    weft_comm_t d = nullptr;
    ASSERT_EQ(weft_comm_dup(w_, &d), WEFT_OK);
    weft_comm_t stale = d;
    ASSERT_EQ(weft_comm_free(&d), WEFT_OK);
    // Every communicator call on a NULL or freed handle.
    for (weft_comm_t c : {weft_comm_t(nullptr), stale}) {
        const std::string what = c ? "freed communicator" : "NULL communicator";
        const weft_status_t want = WEFT_ERR_NOT_INITIALIZED;
        uint32_t u = 0;
        uint64_t id = 0, v = 0;
        int flag = 0;
        weft_request_t req = nullptr;
        weft_msg_status_t s = blank_status();
        EXPECT_EQ(weft_comm_rank(c, &u), want) << what;
        EXPECT_EQ(weft_comm_size(c, &u), want) << what;
        EXPECT_EQ(weft_comm_context_id(c, &id), want) << what;
        EXPECT_EQ(weft_comm_job_rank(c, 0, &u), want) << what;
        EXPECT_EQ(weft_comm_clock_slot(c, &u), want) << what;
        EXPECT_EQ(weft_comm_dup(c, &out), want) << what;
        EXPECT_EQ(weft_comm_split(c, 0, 0, &out), want) << what;
        EXPECT_EQ(weft_comm_create_from_ranks(c, &rank, 1, 0, &out), want) << what;
        weft_comm_t copy = c;
        EXPECT_EQ(weft_comm_free(&copy), want) << what;
        EXPECT_EQ(weft_send(c, &v, 1, WEFT_UINT64, 0, 0), want) << what;
        EXPECT_EQ(weft_ssend(c, &v, 1, WEFT_UINT64, 0, 0), want) << what;
        EXPECT_EQ(weft_isend(c, &v, 1, WEFT_UINT64, 0, 0, &req), want) << what;
        EXPECT_EQ(weft_issend(c, &v, 1, WEFT_UINT64, 0, 0, &req), want) << what;
        EXPECT_EQ(weft_recv(c, &v, 1, WEFT_UINT64, 0, 0, &s), want) << what;
        EXPECT_EQ(weft_irecv(c, &v, 1, WEFT_UINT64, 0, 0, &req), want) << what;
        EXPECT_EQ(weft_probe(c, 0, 0, &s), want) << what;
        EXPECT_EQ(weft_iprobe(c, 0, 0, &flag, &s), want) << what;
        EXPECT_EQ(weft_barrier(c), want) << what;
        EXPECT_EQ(weft_bcast(c, &v, 1, WEFT_UINT64, 0), want) << what;
        EXPECT_EQ(weft_allreduce(c, &v, &id, 1, WEFT_UINT64, WEFT_OP_SUM), want) << what;
        EXPECT_EQ(weft_ibarrier(c, &req), want) << what;
        EXPECT_EQ(req, nullptr) << what << ": no request on failure";
    }
    ring_exchange(w_, 81, 8, 0, "world after the failed free");
}

// Arguments a rank checks on its own (no message is sent).
TEST_F(BadInput, PointToPointArguments) {
    uint64_t v = 0;
    weft_request_t req = nullptr;
    weft_msg_status_t s = blank_status();
    int flag = 0;
    const int32_t other = int32_t(right_);
    EXPECT_EQ(weft_send(w_, &v, 1, WEFT_UINT64, size, 0), WEFT_ERR_INVALID_RANK);
    EXPECT_EQ(weft_isend(w_, &v, 1, WEFT_UINT64, UINT32_MAX, 0, &req), WEFT_ERR_INVALID_RANK);
    EXPECT_EQ(weft_ssend(w_, &v, 1, WEFT_UINT64, size + 5, 0), WEFT_ERR_INVALID_RANK);
    EXPECT_EQ(weft_recv(w_, &v, 1, WEFT_UINT64, int32_t(size), 0, &s), WEFT_ERR_INVALID_RANK);
    EXPECT_EQ(weft_irecv(w_, &v, 1, WEFT_UINT64, -2, 0, &req), WEFT_ERR_INVALID_RANK);
    EXPECT_EQ(weft_iprobe(w_, int32_t(size), 0, &flag, &s), WEFT_ERR_INVALID_RANK);
    EXPECT_EQ(weft_probe(w_, -7, 0, &s), WEFT_ERR_INVALID_RANK);
    uint32_t u = 0;
    EXPECT_EQ(weft_comm_job_rank(w_, size, &u), WEFT_ERR_INVALID_RANK);
    // Tags: >= 0 on sends, >= -1 (ANY_TAG) on receives.
    for (int32_t bad : {-1, -2, INT32_MIN}) {
        EXPECT_EQ(weft_send(w_, &v, 1, WEFT_UINT64, right_, bad), WEFT_ERR_INVALID_ARG) << "send tag " << bad;
        EXPECT_EQ(weft_isend(w_, &v, 1, WEFT_UINT64, right_, bad, &req), WEFT_ERR_INVALID_ARG) << "tag " << bad;
        EXPECT_EQ(weft_issend(w_, &v, 1, WEFT_UINT64, right_, bad, &req), WEFT_ERR_INVALID_ARG) << "tag " << bad;
    }
    for (int32_t bad : {-2, -100, INT32_MIN}) {
        EXPECT_EQ(weft_recv(w_, &v, 1, WEFT_UINT64, other, bad, &s), WEFT_ERR_INVALID_ARG) << "recv tag " << bad;
        EXPECT_EQ(weft_irecv(w_, &v, 1, WEFT_UINT64, other, bad, &req), WEFT_ERR_INVALID_ARG) << "tag " << bad;
        EXPECT_EQ(weft_iprobe(w_, other, bad, &flag, &s), WEFT_ERR_INVALID_ARG) << "tag " << bad;
    }
    // NULL buffer with count > 0, bad datatypes, NULL outputs.
    EXPECT_EQ(weft_send(w_, nullptr, 4, WEFT_BYTE, right_, 0), WEFT_ERR_INVALID_ARG);
    EXPECT_EQ(weft_isend(w_, nullptr, 1, WEFT_UINT64, right_, 0, &req), WEFT_ERR_INVALID_ARG);
    EXPECT_EQ(weft_irecv(w_, nullptr, 4, WEFT_BYTE, other, 0, &req), WEFT_ERR_INVALID_ARG);
    EXPECT_EQ(weft_recv(w_, nullptr, 4, WEFT_BYTE, other, 0, &s), WEFT_ERR_INVALID_ARG);
    for (int t : {-1, int(WEFT_DATATYPE_COUNT_), 1000}) {
        EXPECT_EQ(mp_raw_send(w_, &v, 1, t, right_, 0), WEFT_ERR_INVALID_ARG) << "type " << t;
        EXPECT_EQ(mp_raw_irecv(w_, &v, 1, t, other, 0, &req), WEFT_ERR_INVALID_ARG) << "type " << t;
    }
    EXPECT_EQ(weft_isend(w_, &v, 1, WEFT_UINT64, right_, 0, nullptr), WEFT_ERR_INVALID_ARG);
    EXPECT_EQ(weft_irecv(w_, &v, 1, WEFT_UINT64, other, 0, nullptr), WEFT_ERR_INVALID_ARG);
    EXPECT_EQ(weft_iprobe(w_, other, 0, nullptr, &s), WEFT_ERR_INVALID_ARG);
    EXPECT_EQ(weft_comm_rank(w_, nullptr), WEFT_ERR_INVALID_ARG);
    EXPECT_EQ(weft_request_wait(nullptr, &s), WEFT_ERR_INVALID_ARG);
    EXPECT_EQ(weft_request_test(&req, nullptr, &s), WEFT_ERR_INVALID_ARG);
    EXPECT_EQ(weft_request_waitall(2, nullptr, nullptr), WEFT_ERR_INVALID_ARG);
    size_t index = 0;
    EXPECT_EQ(weft_request_waitany(1, &req, nullptr, &s), WEFT_ERR_INVALID_ARG);
    EXPECT_EQ(weft_request_testany(1, &req, &index, nullptr, &s), WEFT_ERR_INVALID_ARG);
    EXPECT_EQ(weft_request_cancel(nullptr), WEFT_ERR_INVALID_ARG);
    EXPECT_EQ(req, nullptr) << "no request was created by any failed call";
    // Nothing above sent anything: the next message on tag 0 is this one.
    ring_exchange(w_, 0, 12, 0, "after the rejected calls");
}

// Collective communicator creation with arguments every rank gets wrong the
// same way: each returns the error, nobody hangs.
TEST_F(BadInput, CommunicatorCreationArguments) {
    weft_comm_t out = reinterpret_cast<weft_comm_t>(&out);
    const weft_comm_t untouched = out;
    EXPECT_EQ(weft_comm_split(w_, -5, 0, &out), WEFT_ERR_INVALID_ARG) << "negative colour";
    EXPECT_EQ(weft_comm_split(w_, WEFT_UNDEFINED + 1, 0, &out), WEFT_ERR_INVALID_ARG) << "negative colour";
    EXPECT_EQ(weft_comm_split(w_, 0, 0, nullptr), WEFT_ERR_INVALID_ARG);
    EXPECT_EQ(weft_comm_dup(w_, nullptr), WEFT_ERR_INVALID_ARG);
    std::vector<uint32_t> dup_list = all_ranks();
    dup_list.push_back(rank);
    EXPECT_EQ(weft_comm_create_from_ranks(w_, dup_list.data(), uint32_t(dup_list.size()), 0, &out),
              WEFT_ERR_INVALID_ARG)
        << "duplicate rank";
    std::vector<uint32_t> without_me;
    for (uint32_t r = 0; r < size; ++r)
        if (r != rank) without_me.push_back(r);
    EXPECT_EQ(weft_comm_create_from_ranks(w_, without_me.data(), uint32_t(without_me.size()), 0, &out),
              WEFT_ERR_INVALID_ARG)
        << "caller not in the list";
    std::vector<uint32_t> beyond = {rank, size};
    EXPECT_EQ(weft_comm_create_from_ranks(w_, beyond.data(), 2, 0, &out), WEFT_ERR_INVALID_RANK) << "rank out of range";
    EXPECT_EQ(weft_comm_create_from_ranks(w_, nullptr, 2, 0, &out), WEFT_ERR_INVALID_ARG);
    EXPECT_EQ(weft_comm_create_from_ranks(w_, &rank, 0, 0, &out), WEFT_ERR_INVALID_ARG) << "empty list";
    EXPECT_EQ(out, untouched) << "outputs are set only on success";
    // The world still creates communicators afterwards.
    weft_comm_t d = nullptr;
    ASSERT_EQ(weft_comm_dup(w_, &d), WEFT_OK);
    expect_members(d, all_ranks(), "dup after the rejected calls");
    ASSERT_EQ(weft_comm_free(&d), WEFT_OK);
}

}  // namespace

int main(int argc, char** argv) { return mp::run_all(argc, argv); }
