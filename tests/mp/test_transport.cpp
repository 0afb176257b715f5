// test_transport.cpp — the transport suite every backend must pass, run by
// ctest under weft-run at 2, 4 and 8 ranks over shm, ucx+shm and ucx+tcp.
#include "tests/mp/comm_util.hpp"
#include "tests/mp/mp_main.hpp"

#include <weft/state_window.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

using namespace mp;

namespace {

uint8_t pattern(uint32_t origin, uint32_t target, size_t i) {
    return static_cast<uint8_t>(origin * 131u + target * 29u + i * 7u + (i >> 8));
}

TEST(Transport, ReportsCapabilities) {
    weft_caps_t caps;
    ASSERT_EQ(weft_query_caps(ctx, &caps), WEFT_OK);
    ASSERT_NE(caps.transport, nullptr);
    EXPECT_GT(caps.am_eager_limit, 0u);
    EXPECT_GE(caps.am_max_size, caps.am_eager_limit);
    if (rank == 0)
        std::printf("transport %s, atomics %d, eager limit %zu\n", caps.transport, caps.atomics, caps.am_eager_limit);
}

// Every rank puts a distinct pattern into a distinct slot of every rank's
// window, at several sizes and unaligned offsets; then every rank checks
// what landed and reads every other rank's slots back with get.
TEST(Transport, AllPairsPutGetPatterns) {
    for (size_t len : {size_t(1), size_t(8), size_t(1000), size_t(4096), size_t(65536 + 3)}) {
        const size_t slot = len + 64;
        void* base = nullptr;
        weft_window_t w = nullptr;
        WEFT_OK_OR_FAIL(weft_window_allocate(ctx, slot * size, &base, &w));
        std::vector<uint8_t> src(len);
        for (uint32_t t = 0; t < size; ++t) {
            for (size_t i = 0; i < len; ++i) src[i] = pattern(rank, t, i);
            // Offset +5 inside the slot: unaligned on purpose.
            WEFT_OK_OR_FAIL(weft_put(w, t, rank * slot + 5, src.data(), len));
        }
        WEFT_OK_OR_FAIL(weft_flush(w, WEFT_RANK_ALL));
        barrier();
        const uint8_t* mem = static_cast<const uint8_t*>(base);
        for (uint32_t o = 0; o < size; ++o)
            for (size_t i = 0; i < len; ++i)
                ASSERT_EQ(mem[o * slot + 5 + i], pattern(o, rank, i))
                    << "len " << len << " origin " << o << " byte " << i;
        std::vector<uint8_t> dst(len);
        for (uint32_t t = 0; t < size; ++t)
            for (uint32_t o = 0; o < size; ++o) {
                WEFT_OK_OR_FAIL(weft_get(w, t, o * slot + 5, dst.data(), len));
                for (size_t i = 0; i < len; ++i)
                    ASSERT_EQ(dst[i], pattern(o, t, i)) << "get len " << len << " from " << t;
            }
        barrier();
        WEFT_OK_OR_FAIL(weft_window_free(w));
    }
}

// All ranks hammer one word of rank 0 (and one word of every rank): the sum
// must be exact and every returned value distinct per origin and increasing.
TEST(Transport, ConcurrentFetchAddIsExact) {
    // Over UCX's tcp emulation every atomic is a round trip that needs the
    // target's CPU: 8 ranks on 2 cores took 41 s for 2000 rounds. 400 still
    // has every rank contend on every word for thousands of operations.
    const uint64_t iters = slow_fabric() && size > 4 ? 400 : 2000;
    void* base = nullptr;
    weft_window_t w = nullptr;
    WEFT_OK_OR_FAIL(weft_window_allocate(ctx, 64 * size, &base, &w));
    uint64_t last = 0;
    for (uint64_t i = 0; i < iters; ++i) {
        uint64_t old = 0;
        WEFT_OK_OR_FAIL(weft_atomic_fetch_add(w, 0, 0, 1, &old));
        if (i) {
            ASSERT_GT(old, last);
        }
        last = old;
        for (uint32_t t = 0; t < size; ++t) WEFT_OK_OR_FAIL(weft_atomic_fetch_add(w, t, 64, 3, &old));
    }
    barrier();
    uint64_t v = 0;
    WEFT_OK_OR_FAIL(weft_get(w, 0, 0, &v, 8));
    EXPECT_EQ(v, iters * size);
    WEFT_OK_OR_FAIL(weft_get(w, rank, 64, &v, 8));
    EXPECT_EQ(v, 3 * iters * size);
    barrier();
    WEFT_OK_OR_FAIL(weft_window_free(w));
}

// A compare-swap spin lock on rank 0 protects a non-atomic counter updated
// with get + put: any lost update means mutual exclusion broke.
TEST(Transport, CompareSwapLockUnderContention) {
    const uint64_t iters = 300;
    void* base = nullptr;
    weft_window_t w = nullptr;
    WEFT_OK_OR_FAIL(weft_window_allocate(ctx, 128, &base, &w));
    barrier();
    for (uint64_t i = 0; i < iters; ++i) {
        uint64_t old = 1;
        const uint64_t start = now_ns();
        for (;;) {
            WEFT_OK_OR_FAIL(weft_atomic_compare_swap(w, 0, 0, 0, rank + 1, &old));
            if (old == 0) break;
            ASSERT_LT(now_ns() - start, 20000000000ull) << "lock never acquired";
            weft_progress(ctx, nullptr);
        }
        uint64_t counter = 0;
        WEFT_OK_OR_FAIL(weft_get(w, 0, 64, &counter, 8));
        ++counter;
        WEFT_OK_OR_FAIL(weft_put(w, 0, 64, &counter, 8));
        WEFT_OK_OR_FAIL(weft_flush(w, 0));
        WEFT_OK_OR_FAIL(weft_atomic_swap(w, 0, 0, 0, &old));
        ASSERT_EQ(old, rank + 1u) << "someone else held our lock";
    }
    barrier();
    uint64_t counter = 0;
    WEFT_OK_OR_FAIL(weft_get(w, 0, 64, &counter, 8));
    EXPECT_EQ(counter, iters * size);
    barrier();
    WEFT_OK_OR_FAIL(weft_window_free(w));
}

// ------------------------------------------------------- active messages
struct OrderState {
    std::vector<uint64_t> next;  // next sequence expected per source
    uint64_t received = 0;
    bool bad = false;
    std::string why;
};

void on_ordered(void* arg, uint32_t src, const void* payload, size_t len) {
    auto* s = static_cast<OrderState*>(arg);
    uint64_t seq = 0;
    if (len < 8) {
        s->bad = true;
        s->why = "short message";
        return;
    }
    std::memcpy(&seq, payload, 8);
    const uint8_t* b = static_cast<const uint8_t*>(payload);
    for (size_t i = 8; i < len; i += 97)
        if (b[i] != static_cast<uint8_t>(seq + i + src)) {
            s->bad = true;
            s->why = "corrupted payload";
        }
    if (src >= s->next.size() || seq != s->next[src]) {
        s->bad = true;
        s->why = "out of order from " + std::to_string(src) + ": got " + std::to_string(seq);
    } else {
        ++s->next[src];
    }
    ++s->received;
}

// Sizes cycle through eager and rendezvous so that ordering across the two
// protocols is checked too.
TEST(Transport, ActiveMessagesArriveInOrder) {
    OrderState st;
    st.next.assign(size, 0);
    WEFT_OK_OR_FAIL(weft_am_register(ctx, 3, on_ordered, &st));
    barrier();  // nobody sends before every rank has its handler
    weft_caps_t caps;
    WEFT_OK_OR_FAIL(weft_query_caps(ctx, &caps));
    const size_t sizes[] = {8, 64, 1000, caps.am_eager_limit, caps.am_eager_limit + 1, 100000};
    const uint64_t per_peer = size <= 4 ? 600 : 200;
    std::vector<uint8_t> buf(100000);
    for (uint64_t seq = 0; seq < per_peer; ++seq) {
        for (uint32_t k = 1; k <= size; ++k) {
            const uint32_t dst = (rank + k) % size;  // includes self
            const size_t len = sizes[(seq + dst) % 6];
            std::memcpy(buf.data(), &seq, 8);
            for (size_t i = 8; i < len; i += 97) buf[i] = static_cast<uint8_t>(seq + i + rank);
            WEFT_OK_OR_FAIL(weft_am_send(ctx, dst, 3, buf.data(), len));
        }
        weft_progress(ctx, nullptr);
    }
    ASSERT_TRUE(progress_until([&] { return st.received == per_peer * size || st.bad; }))
        << "received " << st.received << " of " << per_peer * size;
    EXPECT_FALSE(st.bad) << st.why;
    barrier();
    WEFT_OK_OR_FAIL(weft_am_register(ctx, 3, nullptr, nullptr));
}

struct BigState {
    bool done = false;
    bool ok = false;
    size_t len = 0;
};

void on_big(void* arg, uint32_t src, const void* payload, size_t len) {
    auto* s = static_cast<BigState*>(arg);
    const uint64_t* w = static_cast<const uint64_t*>(payload);
    bool ok = true;
    for (size_t i = 0; i < len / 8; ++i)
        if (w[i] != ((i * 0x9e3779b97f4a7c15ull) ^ src)) {
            ok = false;
            break;
        }
    s->ok = ok;
    s->len = len;
    s->done = true;
}

// 256 MiB by rendezvous from rank 0 to rank 1, every word verified.
TEST(Transport, LargeRendezvous256MiB) {
    const size_t len = 256u << 20;
    BigState st;
    WEFT_OK_OR_FAIL(weft_am_register(ctx, 4, on_big, &st));
    barrier();
    if (rank == 0) {
        std::vector<uint64_t> data(len / 8);
        for (size_t i = 0; i < data.size(); ++i) data[i] = (i * 0x9e3779b97f4a7c15ull) ^ 0;
        WEFT_OK_OR_FAIL(weft_am_send(ctx, 1, 4, data.data(), len));
    } else if (rank == 1) {
        ASSERT_TRUE(progress_until([&] { return st.done; }, 60)) << "256 MiB message never arrived";
        EXPECT_EQ(st.len, len);
        EXPECT_TRUE(st.ok) << "256 MiB payload corrupted";
    }
    barrier();
    WEFT_OK_OR_FAIL(weft_am_register(ctx, 4, nullptr, nullptr));
}

// Head-of-line: a rendezvous being pulled from one peer holds back only that
// peer's later messages (transport/arrivals.hpp). A (rank 0) sends C (rank 2)
// a0, a 64 MiB message, a2; C, on a0, tells B (rank 1) to ping-pong 8-byte
// probes with it until C has the large message. A probe delivered between a0
// and the large message shows it was not held: the first probe leaves B only
// after a0 reached C, and A's rendezvous announcement follows a0 at once, so
// a receiver that queues behind the rendezvous holds that probe (and with it
// the ping-pong) until the pull is done. Every source's messages in order;
// all counted. A ping-pong rather than a stream: B sleeps in weft_wait
// between probes, leaving the CPU to the pull (the soft-RoCE VM's 2 slow
// vCPUs, where a starved rank is declared failed). Messages carry their
// round: a late answer from one round is not taken for the next one's.
constexpr uint32_t hol_to_c = 11, hol_to_b = 12;
constexpr size_t hol_big = 64u << 20;
constexpr uint64_t hol_max_probes = 4000;
constexpr uint64_t hol_last = UINT64_MAX;  // seq of B's last word and of A's warm-up

// Every message starts {seq (C) or kind (B), round}.
struct HolWords {
    uint64_t w, round;
};

struct HolState {
    uint64_t round = 0;
    std::vector<std::pair<uint32_t, uint64_t>> order;  // C: (source, seq) as delivered
    bool big_ok = false;
    uint64_t probes_sent = UINT64_MAX;  // C: B's final count
    bool go = false, stop = false;      // B
    uint64_t acks = 0;                  // B: probes C answered
};

void hol_send(uint32_t to, uint32_t id, uint64_t w, uint64_t round, uint64_t extra = 0) {
    const uint64_t words[3] = {w, round, extra};
    EXPECT_EQ(weft_am_send(ctx, to, id, words, sizeof words), WEFT_OK);
}

void on_hol_to_c(void* arg, uint32_t src, const void* payload, size_t len) {
    auto* s = static_cast<HolState*>(arg);
    HolWords h;
    std::memcpy(&h, payload, sizeof h);
    if (h.round != s->round) return;  // A's warm-up
    if (h.w == hol_last) {            // B's last word: how many it sent
        std::memcpy(&s->probes_sent, static_cast<const uint8_t*>(payload) + sizeof h, 8);
        return;
    }
    s->order.emplace_back(src, h.w);
    if (src == 0 && len == hol_big) {
        const uint8_t* b = static_cast<const uint8_t*>(payload);
        s->big_ok = b[16] == 0xa5 && b[len / 2] == 0xa5 && b[len - 1] == 0xa5;
    }
    // C -> B: GO (0) after A's first message, STOP (1) once the large one is
    // here, ACK (2) for each probe.
    if (src == 1 || h.w == 0 || h.w == 1) hol_send(1, hol_to_b, src == 1 ? 2 : h.w, s->round);
}

void on_hol_to_b(void* arg, uint32_t, const void* payload, size_t) {
    auto* s = static_cast<HolState*>(arg);
    HolWords h;
    std::memcpy(&h, payload, sizeof h);
    if (h.round != s->round) return;
    if (h.w == 2)
        ++s->acks;
    else
        (h.w == 0 ? s->go : s->stop) = true;
}

TEST(Transport, SmallMessageNotHeldBehindAnotherPeersRendezvous) {
    if (size < 3) GTEST_SKIP() << "needs three ranks (a sender of a large message, of small ones, a receiver)";
    weft_caps_t caps;
    WEFT_OK_OR_FAIL(weft_query_caps(ctx, &caps));
    // Asserted where the pull is known to outlast a probe's round trip by
    // far (UCX over shm or tcp: 10 to 300 probes during it), with three
    // rounds against a rank descheduled at the wrong moment on a loaded
    // machine. Not over shm (it pulls inside the poll of the sender's ring,
    // before it reads another ring: no queue to be held in), nor in the
    // soft-RoCE VM (verbs, UCX on rc_verbs), where under TCG the pull can end
    // before B's first probe leaves; unit.arrivals.* checks the queue itself
    // on every build.
    const char* tls = std::getenv("UCX_TLS");
    const bool asserted = std::strcmp(caps.transport, "ucx") == 0 && tls &&
                          (std::strcmp(tls, "shm") == 0 || std::strcmp(tls, "tcp") == 0);
    const uint64_t rounds = asserted ? 3 : 1;
    HolState st;
    WEFT_OK_OR_FAIL(weft_am_register(ctx, hol_to_c, on_hol_to_c, &st));
    WEFT_OK_OR_FAIL(weft_am_register(ctx, hol_to_b, on_hol_to_b, &st));
    std::vector<uint8_t> big(rank == 0 ? hol_big : 0, 0xa5);
    int64_t most_between = 0;
    for (uint64_t round = 1; round <= rounds; ++round) {
        st = HolState{};
        st.round = round;
        barrier();
        if (rank == 0) {
            // The first round sends once more first, so that what a transport
            // does only once for a buffer (mapping, caching its registration)
            // is done before a0: then the announcement follows a0 closely.
            for (uint64_t seq = round == 1 ? hol_last : 0; seq != 3; seq = seq == hol_last ? 0 : seq + 1) {
                const HolWords h{seq, seq == hol_last ? 0 : round};
                std::memcpy(big.data(), &h, sizeof h);
                const bool large = seq == 1 || seq == hol_last;
                WEFT_OK_OR_FAIL(weft_am_send(ctx, 2, hol_to_c, big.data(), large ? hol_big : sizeof h));
            }
        } else if (rank == 1) {
            ASSERT_TRUE(progress_until([&] { return st.go; }, 60)) << "no GO from rank 2";
            uint64_t sent = 0;
            while (!st.stop && sent < hol_max_probes) {
                hol_send(2, hol_to_c, sent, round);
                ++sent;
                ASSERT_TRUE(progress_until([&] { return st.acks == sent || st.stop; }, 60))
                    << "no answer to probe " << sent;
            }
            hol_send(2, hol_to_c, hol_last, round, sent);
        } else if (rank == 2) {
            auto count = [&](uint32_t src) {
                return static_cast<uint64_t>(
                    std::count_if(st.order.begin(), st.order.end(), [&](const auto& e) { return e.first == src; }));
            };
            ASSERT_TRUE(progress_until([&] { return count(0) == 3 && count(1) == st.probes_sent; }, 120))
                << "from rank 0: " << count(0) << " of 3; from rank 1: " << count(1) << " of " << st.probes_sent;
            EXPECT_TRUE(st.big_ok) << "64 MiB payload corrupted";
            // FIFO per source.
            uint64_t next[2] = {0, 0};
            size_t big_at = 0, a0_at = 0;
            for (size_t i = 0; i < st.order.size(); ++i) {
                const auto [src, seq] = st.order[i];
                ASSERT_LT(src, 2u);
                EXPECT_EQ(seq, next[src]) << "out of order from rank " << src;
                next[src] = seq + 1;
                if (src == 0 && seq == 0) a0_at = i;
                if (src == 0 && seq == 1) big_at = i;
            }
            const auto between = std::count_if(st.order.begin() + static_cast<std::ptrdiff_t>(a0_at),
                                               st.order.begin() + static_cast<std::ptrdiff_t>(big_at),
                                               [](const auto& e) { return e.first == 1; });
            std::printf(
                "head-of-line (%s), round %llu: %lld of rank 1's %llu probes delivered while rank 0's 64 MiB "
                "was pulled\n",
                caps.transport, static_cast<unsigned long long>(round), static_cast<long long>(between),
                static_cast<unsigned long long>(st.probes_sent));
            most_between = std::max<int64_t>(most_between, between);
        }
    }
    if (rank == 2 && asserted) {
        EXPECT_GE(most_between, 1) << "rank 1's probes were held behind rank 0's rendezvous";
    }
    barrier();
    WEFT_OK_OR_FAIL(weft_am_register(ctx, hol_to_c, nullptr, nullptr));
    WEFT_OK_OR_FAIL(weft_am_register(ctx, hol_to_b, nullptr, nullptr));
}

// Memory the program owns, exposed with weft_window_register.
TEST(Transport, RegisteredWindowPutGet) {
    std::vector<uint8_t> mine(4096 * size, 0);
    weft_window_t w = nullptr;
    WEFT_OK_OR_FAIL(weft_window_register(ctx, mine.data(), mine.size(), &w));
    std::vector<uint8_t> src(4096);
    for (uint32_t t = 0; t < size; ++t) {
        for (size_t i = 0; i < src.size(); ++i) src[i] = pattern(rank, t, i);
        WEFT_OK_OR_FAIL(weft_put(w, t, rank * 4096, src.data(), src.size()));
    }
    WEFT_OK_OR_FAIL(weft_flush(w, WEFT_RANK_ALL));
    barrier();
    for (uint32_t o = 0; o < size; ++o)
        for (size_t i = 0; i < 4096; ++i) ASSERT_EQ(mine[o * 4096 + i], pattern(o, rank, i));
    std::vector<uint8_t> dst(4096);
    const uint32_t t = (rank + 1) % size;
    WEFT_OK_OR_FAIL(weft_get(w, t, rank * 4096, dst.data(), dst.size()));
    for (size_t i = 0; i < 4096; ++i) ASSERT_EQ(dst[i], pattern(rank, t, i));
    barrier();
    WEFT_OK_OR_FAIL(weft_window_free(w));
}

// The pinned state window: layout words are where state_window.h says, on
// every rank, and peers can update its remote-atomic words.
TEST(Transport, StateWindowLayoutAndRemoteAtomics) {
    weft_window_t sw = nullptr;
    WEFT_OK_OR_FAIL(weft_state_window(ctx, &sw));
    for (uint32_t t = 0; t < size; ++t) {
        uint64_t v = 0;
        WEFT_OK_OR_FAIL(weft_get(sw, t, WEFT_STATE_MAGIC_OFF, &v, 8));
        EXPECT_EQ(v, WEFT_STATE_MAGIC);
        WEFT_OK_OR_FAIL(weft_get(sw, t, WEFT_STATE_OWNER_RANK_OFF, &v, 8));
        EXPECT_EQ(v, t);
        WEFT_OK_OR_FAIL(weft_get(sw, t, WEFT_STATE_VERSION_OFF, &v, 8));
        EXPECT_EQ(v, WEFT_STATE_LAYOUT_VERSION);
    }
    // Raise every rank's clock target for slot 7 to at least our rank + 10
    // with a compare-swap max: the result must be the max over ranks.
    for (uint32_t t = 0; t < size; ++t) {
        uint64_t cur = 0, old = 0;
        const uint64_t want = rank + 10;
        WEFT_OK_OR_FAIL(weft_get(sw, t, WEFT_STATE_CLOCK_OFF(7, WEFT_STATE_CLOCK_TARGET), &cur, 8));
        while (cur < want) {
            WEFT_OK_OR_FAIL(
                weft_atomic_compare_swap(sw, t, WEFT_STATE_CLOCK_OFF(7, WEFT_STATE_CLOCK_TARGET), cur, want, &old));
            if (old == cur) break;
            cur = old;
        }
    }
    barrier();
    uint64_t v = 0;
    WEFT_OK_OR_FAIL(weft_get(sw, rank, WEFT_STATE_CLOCK_OFF(7, WEFT_STATE_CLOCK_TARGET), &v, 8));
    EXPECT_EQ(v, size - 1 + 10u);
    barrier();
    EXPECT_EQ(weft_window_free(sw), WEFT_ERR_INVALID_ARG) << "the state window is not the caller's to free";
}

// Bad input against real peers: clear statuses, nothing crashes.
TEST(Transport, BadInputGetsClearStatus) {
    void* base = nullptr;
    weft_window_t w = nullptr;
    // Sizes differ per rank: rank r exposes 64 * (r + 1) bytes.
    WEFT_OK_OR_FAIL(weft_window_allocate(ctx, 64 * (rank + 1), &base, &w));
    uint64_t v = 0, old = 0;
    const uint32_t t = (rank + 1) % size;
    EXPECT_EQ(weft_put(w, size, 0, &v, 8), WEFT_ERR_INVALID_RANK);
    EXPECT_EQ(weft_get(w, UINT32_MAX - 1, 0, &v, 8), WEFT_ERR_INVALID_RANK);
    EXPECT_EQ(weft_put(w, t, 64 * (t + 1) - 4, &v, 8), WEFT_ERR_OUT_OF_RANGE);
    EXPECT_EQ(weft_get(w, t, UINT64_MAX - 3, &v, 8), WEFT_ERR_OUT_OF_RANGE);
    EXPECT_EQ(weft_atomic_fetch_add(w, t, 4, 1, &old), WEFT_ERR_UNALIGNED);
    EXPECT_EQ(weft_atomic_fetch_add(w, t, 64 * (t + 1), 1, &old), WEFT_ERR_OUT_OF_RANGE);
    EXPECT_EQ(weft_atomic_compare_swap(w, t, 0, 0, 1, nullptr), WEFT_ERR_INVALID_ARG);
    EXPECT_EQ(weft_put(w, t, 0, nullptr, 8), WEFT_ERR_INVALID_ARG);
    EXPECT_EQ(weft_put(w, t, 0, &v, 0), WEFT_OK) << "zero-length put is a no-op";
    EXPECT_EQ(weft_am_send(ctx, t, 5, &v, 0), WEFT_ERR_MSG_SIZE);
    EXPECT_EQ(weft_am_send(ctx, 100000, 5, &v, 8), WEFT_ERR_INVALID_RANK);
    EXPECT_EQ(weft_flush(w, size + 3), WEFT_ERR_INVALID_RANK);
    barrier();
    WEFT_OK_OR_FAIL(weft_window_free(w));
    EXPECT_EQ(weft_put(w, t, 0, &v, 8), WEFT_ERR_NOT_INITIALIZED) << "freed window";
}

}  // namespace

int main(int argc, char** argv) { return mp::run_all(argc, argv); }
