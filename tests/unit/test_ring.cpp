// test_ring.cpp — the SPSC active-message ring (transport/shm/am_ring).
//
// Single-thread tests drive producer and consumer by hand (ordering across
// many wraps, full ring, max payload, two-piece payloads, pads, corruption);
// RingStress runs them on two threads and is meant to pass under TSan too.
// Rings under corruption tests sit against a PROT_NONE page, so a read past
// the end of the data area faults in every build, not only under ASan; tests
// that may hang or fault run in a forked child bounded by alarm().
#include "transport/shm/am_ring.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <new>
#include <random>
#include <sched.h>
#include <string>
#include <sys/mman.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

using weft::shm::Record;
using weft::shm::RecordHeader;
using weft::shm::RecordType;
using weft::shm::RingConsumer;
using weft::shm::RingControl;
using weft::shm::RingProducer;

namespace {

// A ring (control + data) whose data area ends exactly at a PROT_NONE page.
class GuardedRing {
public:
    explicit GuardedRing(uint64_t capacity) : cap_(capacity) {
        page_ = static_cast<size_t>(sysconf(_SC_PAGESIZE));
        const size_t bytes = weft::shm::ring_bytes(capacity);
        span_ = (bytes + page_ - 1) / page_ * page_ + page_;
        void* m = mmap(nullptr, span_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED) std::abort();
        map_ = static_cast<uint8_t*>(m);
        uint8_t* guard = map_ + span_ - page_;
        if (mprotect(guard, page_, PROT_NONE) != 0) std::abort();
        mem_ = guard - bytes;  // 64-byte aligned: bytes is a multiple of 64
        new (mem_) RingControl{};
    }
    ~GuardedRing() { munmap(map_, span_); }
    GuardedRing(const GuardedRing&) = delete;
    GuardedRing& operator=(const GuardedRing&) = delete;

    void* ring() { return mem_; }
    RingControl* ctl() { return reinterpret_cast<RingControl*>(mem_); }
    uint8_t* data() { return mem_ + sizeof(RingControl); }
    uint64_t capacity() const { return cap_; }
    std::vector<uint8_t> snapshot() const { return std::vector<uint8_t>(mem_, mem_ + weft::shm::ring_bytes(cap_)); }

private:
    uint64_t cap_;
    size_t page_ = 0, span_ = 0;
    uint8_t* map_ = nullptr;
    uint8_t* mem_ = nullptr;
};

uint8_t pattern(uint64_t seq, size_t i) { return static_cast<uint8_t>(seq * 131 + i * 7 + 1); }

std::vector<uint8_t> make_payload(uint64_t seq, size_t len) {
    std::vector<uint8_t> p(len);
    for (size_t i = 0; i < len; ++i) p[i] = pattern(seq, i);
    return p;
}

// Runs fn in a forked child bounded by `seconds`. Returns "" on success, or
// what went wrong (failed / killed by signal N / did not finish).
std::string run_in_child(const std::function<bool()>& fn, unsigned seconds) {
    pid_t pid = fork();
    if (pid < 0) return "fork failed";
    if (pid == 0) {
        alarm(seconds);  // default action kills the child: a hang is bounded
        _exit(fn() ? 0 : 1);
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0) {
    }
    if (WIFEXITED(status)) return WEXITSTATUS(status) == 0 ? "" : "child reported a failure";
    if (WIFSIGNALED(status)) {
        if (WTERMSIG(status) == SIGALRM) return "did not finish (poll loops forever)";
        return "killed by signal " + std::to_string(WTERMSIG(status)) +
               (WTERMSIG(status) == SIGSEGV ? " (read outside the ring)" : "");
    }
    return "unknown child status";
}

struct Expected {
    uint64_t seq;
    uint16_t id;
    uint64_t aux;
    RecordType type;
    size_t len;
};

void expect_record(const Record& r, const Expected& e) {
    ASSERT_EQ(r.header.type, static_cast<uint16_t>(e.type)) << "seq " << e.seq;
    ASSERT_EQ(r.header.id, e.id) << "seq " << e.seq;
    ASSERT_EQ(r.header.aux, e.aux) << "seq " << e.seq;
    ASSERT_EQ(r.header.len, e.len) << "seq " << e.seq;
    if (e.len) {
        ASSERT_NE(r.payload, nullptr);
    }
    for (size_t i = 0; i < e.len; ++i) ASSERT_EQ(r.payload[i], pattern(e.seq, i)) << "seq " << e.seq << " byte " << i;
}

}  // namespace

TEST(Ring, EmptyRingPollsFalse) {
    GuardedRing g(1024);
    RingProducer p(g.ring(), g.capacity());
    RingConsumer c(g.ring(), g.capacity());
    std::vector<uint8_t> scratch;
    Record r{};
    EXPECT_TRUE(c.empty());
    EXPECT_FALSE(c.poll(scratch, r));
    EXPECT_TRUE(p.valid());
    EXPECT_FALSE(RingProducer().valid());
}

TEST(Ring, InOrderRandomSizesAcrossManyWraps) {
    for (uint64_t cap : {1024ull, 4096ull, 65536ull}) {
        GuardedRing g(cap);
        RingProducer p(g.ring(), cap);
        RingConsumer c(g.ring(), cap);
        std::mt19937_64 rng(cap);
        std::deque<Expected> inflight;
        std::vector<uint8_t> scratch;
        uint64_t seq = 0, consumed = 0, bytes = 0;
        const uint64_t records = 20000;
        while (consumed < records) {
            // A burst of pushes (until full or the burst ends) then a burst of polls.
            const int pushes = static_cast<int>(rng() % 12);
            for (int k = 0; k < pushes && seq < records; ++k) {
                size_t len = rng() % 2 ? rng() % 65 : rng() % (p.max_payload() + 1);
                std::vector<uint8_t> pl = make_payload(seq, len);
                const size_t split = len ? rng() % (len + 1) : 0;
                const uint16_t id = static_cast<uint16_t>(rng());
                const uint64_t aux = rng();
                const auto type = static_cast<RecordType>(1 + rng() % 3);
                if (!p.try_push(type, id, aux, pl.data(), static_cast<uint32_t>(split), pl.data() + split,
                                static_cast<uint32_t>(len - split)))
                    break;
                inflight.push_back({seq, id, aux, type, len});
                bytes += len;
                ++seq;
            }
            const int polls = static_cast<int>(rng() % 12);
            for (int k = 0; k < polls; ++k) {
                Record r{};
                if (!c.poll(scratch, r)) {
                    ASSERT_TRUE(inflight.empty()) << "ring lost records";
                    break;
                }
                ASSERT_FALSE(inflight.empty()) << "ring produced a record nobody pushed";
                expect_record(r, inflight.front());
                if (HasFatalFailure()) return;
                inflight.pop_front();
                ++consumed;
            }
        }
        Record r{};
        EXPECT_FALSE(c.poll(scratch, r));
        EXPECT_TRUE(c.empty());
        EXPECT_GT(bytes, 50 * cap) << "the test should wrap the ring many times";
    }
}

TEST(Ring, FullRingReturnsFalseAndWritesNothing) {
    GuardedRing g(1024);
    RingProducer p(g.ring(), g.capacity());
    RingConsumer c(g.ring(), g.capacity());
    std::vector<uint8_t> pl = make_payload(1, 100);
    int pushed = 0;
    while (p.try_push(RecordType::eager, 1, 2, pl.data(), 100)) ++pushed;
    ASSERT_GT(pushed, 0);
    const std::vector<uint8_t> before = g.snapshot();
    // Every size, including ones that would need a pad record first.
    for (uint32_t len = 0; len <= p.max_payload(); len += 8)
        EXPECT_FALSE(
            p.try_push(RecordType::eager, 9, 9, pl.data(), len < 100 ? len : 100, pl.data(), len < 100 ? 0 : len - 100))
            << len;
    EXPECT_EQ(g.snapshot(), before);
    // Space comes back once the consumer takes a record.
    std::vector<uint8_t> scratch;
    Record r{};
    ASSERT_TRUE(c.poll(scratch, r));
    expect_record(r, {1, 1, 2, RecordType::eager, 100});
    EXPECT_TRUE(p.try_push(RecordType::eager, 3, 4, pl.data(), 100));
    int got = 0;
    while (c.poll(scratch, r)) ++got;
    EXPECT_EQ(got, pushed);
}

TEST(Ring, MaxPayload) {
    for (uint64_t cap : {1024ull, 8192ull}) {
        GuardedRing g(cap);
        RingProducer p(g.ring(), cap);
        RingConsumer c(g.ring(), cap);
        ASSERT_EQ(p.max_payload(), cap / 2 - sizeof(RecordHeader));
        const uint32_t max = static_cast<uint32_t>(p.max_payload());
        std::vector<uint8_t> pl = make_payload(5, max + 16);
        std::vector<uint8_t> scratch;
        Record r{};
        // Above the maximum: refused whatever the ring holds, nothing written.
        const std::vector<uint8_t> before = g.snapshot();
        EXPECT_FALSE(p.try_push(RecordType::eager, 0, 0, pl.data(), max + 1));
        EXPECT_FALSE(p.try_push(RecordType::eager, 0, 0, pl.data(), max, pl.data(), 1));
        EXPECT_FALSE(p.try_push(RecordType::eager, 0, 0, pl.data(), UINT32_MAX, pl.data(), UINT32_MAX));
        EXPECT_EQ(g.snapshot(), before);
        EXPECT_TRUE(c.empty());
        // Exactly the maximum fits into an empty ring at every record position.
        for (uint64_t pos = 0; pos < cap; pos += 16) {
            ASSERT_TRUE(p.try_push(RecordType::eager, 7, pos, pl.data(), max)) << "pos " << pos;
            ASSERT_TRUE(c.poll(scratch, r));
            expect_record(r, {5, 7, pos, RecordType::eager, max});
            ASSERT_FALSE(c.poll(scratch, r));
            // Move the head on by 16 bytes for the next position.
            ASSERT_TRUE(p.try_push(RecordType::fin, 0, 0, nullptr, 0));
            ASSERT_TRUE(c.poll(scratch, r));
            ASSERT_EQ(r.header.type, static_cast<uint16_t>(RecordType::fin));
        }
    }
}

TEST(Ring, TwoPiecePayloads) {
    GuardedRing g(4096);
    RingProducer p(g.ring(), g.capacity());
    RingConsumer c(g.ring(), g.capacity());
    std::vector<uint8_t> scratch;
    Record r{};
    const std::vector<uint8_t> whole = make_payload(11, 300);
    struct Split {
        uint32_t a, b;
    };
    for (Split s : {Split{300, 0}, Split{0, 300}, Split{1, 299}, Split{150, 150}, Split{299, 1}, Split{0, 0}}) {
        const uint8_t* b = whole.data() + s.a;
        ASSERT_TRUE(p.try_push(RecordType::eager, 1, s.a, whole.data(), s.a, b, s.b));
        ASSERT_TRUE(c.poll(scratch, r));
        ASSERT_EQ(r.header.len, s.a + s.b);
        ASSERT_EQ(r.header.aux, s.a);
        EXPECT_EQ(std::memcmp(r.payload, whole.data(), s.a + s.b), 0) << s.a << "+" << s.b;
    }
    // A null second piece with length 0 is the one-piece form.
    ASSERT_TRUE(p.try_push(RecordType::rts, 2, 3, whole.data(), 16));
    ASSERT_TRUE(c.poll(scratch, r));
    EXPECT_EQ(r.header.len, 16u);
    EXPECT_EQ(std::memcmp(r.payload, whole.data(), 16), 0);
}

TEST(Ring, PadRecordsAreNeverReturned) {
    // Records of 16 + 48 bytes in a 1024-byte ring: every 16th lands at the
    // end and needs a pad first.
    GuardedRing g(1024);
    RingProducer p(g.ring(), g.capacity());
    RingConsumer c(g.ring(), g.capacity());
    std::vector<uint8_t> scratch;
    Record r{};
    for (uint64_t seq = 0; seq < 999; ++seq) {  // a multiple of 3: all polled
        std::vector<uint8_t> pl = make_payload(seq, 40 + seq % 9);
        ASSERT_TRUE(p.try_push(RecordType::eager, 1, seq, pl.data(), static_cast<uint32_t>(pl.size())));
        if (seq % 3 == 2) {
            for (int k = 0; k < 3; ++k) {
                ASSERT_TRUE(c.poll(scratch, r));
                ASSERT_NE(r.header.type, static_cast<uint16_t>(RecordType::pad));
                const uint64_t s = r.header.aux;
                expect_record(r, {s, 1, s, RecordType::eager, 40 + s % 9});
            }
        }
    }
    EXPECT_FALSE(c.poll(scratch, r));
}

TEST(Ring, ConsumerResumesFromPublishedTail) {
    // A consumer constructed later (e.g. after a restart of progress state)
    // starts at the tail in shared memory, not at zero.
    GuardedRing g(1024);
    RingProducer p(g.ring(), g.capacity());
    std::vector<uint8_t> scratch;
    Record r{};
    {
        RingConsumer c(g.ring(), g.capacity());
        std::vector<uint8_t> pl = make_payload(0, 20);
        ASSERT_TRUE(p.try_push(RecordType::eager, 1, 0, pl.data(), 20));
        ASSERT_TRUE(c.poll(scratch, r));
    }
    std::vector<uint8_t> pl = make_payload(1, 20);
    ASSERT_TRUE(p.try_push(RecordType::eager, 1, 1, pl.data(), 20));
    RingConsumer c2(g.ring(), g.capacity());
    ASSERT_TRUE(c2.poll(scratch, r));
    expect_record(r, {1, 1, 1, RecordType::eager, 20});
}

// ------------------------------------------------------------ corruption

namespace {
// Polls until empty; true if it saw a corruption report (type 0) and then an
// empty ring whose published tail equals head. Bounded: every record the
// ring returns consumes at least 16 bytes, so a sane ring needs at most
// capacity/16 + 1 polls.
bool drain_expect_corruption(RingConsumer& c, RingControl* ctl, uint64_t cap) {
    std::vector<uint8_t> scratch;
    Record r{};
    bool reported = false;
    uint64_t polls = 0;
    while (c.poll(scratch, r)) {
        if (r.header.type == 0) {
            reported = true;
            if (r.payload != nullptr) return false;
        }
        if (++polls > cap / 16 + 1) return false;
    }
    return reported && c.empty() &&
           ctl->head.load(std::memory_order_relaxed) == ctl->tail.load(std::memory_order_relaxed);
}
}  // namespace

TEST(RingCorruption, GarbageInDataAreaIsReportedAndRingRecovers) {
    for (uint8_t garbage : {uint8_t(0xFF), uint8_t(0x7F), uint8_t(0xA5)}) {
        GuardedRing g(1024);
        RingProducer p(g.ring(), g.capacity());
        RingConsumer c(g.ring(), g.capacity());
        std::vector<uint8_t> scratch;
        Record r{};
        // Move the ring off position 0 first so the garbage lands mid-ring.
        std::vector<uint8_t> pl = make_payload(0, 200);
        ASSERT_TRUE(p.try_push(RecordType::eager, 1, 0, pl.data(), 200));
        ASSERT_TRUE(c.poll(scratch, r));
        for (int i = 0; i < 3; ++i) ASSERT_TRUE(p.try_push(RecordType::eager, 1, 0, pl.data(), 100));
        std::memset(g.data(), garbage, g.capacity());
        ASSERT_TRUE(c.poll(scratch, r));
        EXPECT_EQ(r.header.type, 0) << int(garbage);
        EXPECT_EQ(r.payload, nullptr);
        EXPECT_FALSE(c.poll(scratch, r));
        EXPECT_TRUE(c.empty());
        EXPECT_EQ(g.ctl()->tail.load(), g.ctl()->head.load());
        // The ring works again afterwards.
        std::vector<uint8_t> pl2 = make_payload(42, 77);
        ASSERT_TRUE(p.try_push(RecordType::eager, 5, 6, pl2.data(), 77));
        ASSERT_TRUE(c.poll(scratch, r));
        expect_record(r, {42, 5, 6, RecordType::eager, 77});
        EXPECT_FALSE(c.poll(scratch, r));
    }
}

TEST(RingCorruption, LengthBeyondPublishedBytesIsReported) {
    // A header claiming more payload than the producer published (but still
    // inside the ring) must not be read as a record.
    GuardedRing g(1024);
    RingProducer p(g.ring(), g.capacity());
    RingConsumer c(g.ring(), g.capacity());
    std::vector<uint8_t> pl = make_payload(0, 16);
    ASSERT_TRUE(p.try_push(RecordType::eager, 1, 0, pl.data(), 16));
    RecordHeader h{};
    std::memcpy(&h, g.data(), sizeof h);
    h.len = 200;
    std::memcpy(g.data(), &h, sizeof h);
    EXPECT_TRUE(drain_expect_corruption(c, g.ctl(), g.capacity()));
}

TEST(RingCorruption, PadOfWrongLengthIsReported) {
    GuardedRing g(1024);
    RingProducer p(g.ring(), g.capacity());
    RingConsumer c(g.ring(), g.capacity());
    std::vector<uint8_t> pl = make_payload(0, 64);
    ASSERT_TRUE(p.try_push(RecordType::eager, 1, 0, pl.data(), 64));
    RecordHeader h{};
    std::memcpy(&h, g.data(), sizeof h);
    h.type = static_cast<uint16_t>(RecordType::pad);  // a pad must run to the end of the ring
    std::memcpy(g.data(), &h, sizeof h);
    EXPECT_TRUE(drain_expect_corruption(c, g.ctl(), g.capacity()));
}

TEST(RingCorruption, RecordRunningPastEndOfRingIsReported) {
    // Data area fully published (head = tail + capacity) with the last header
    // claiming bytes beyond the end: must be reported, never read (the guard
    // page would fault).
    GuardedRing g(1024);
    RingConsumer c(g.ring(), g.capacity());
    RecordHeader h{0, static_cast<uint16_t>(RecordType::eager), 0, 0};
    for (uint64_t off = 0; off + 16 <= 1024; off += 16) std::memcpy(g.data() + off, &h, sizeof h);
    h.len = 64;
    std::memcpy(g.data() + 1024 - 16, &h, sizeof h);
    g.ctl()->head.store(1024);
    const std::string err = run_in_child([&] { return drain_expect_corruption(c, g.ctl(), g.capacity()); }, 10);
    EXPECT_EQ(err, "");
}

// The two tests below give the consumer control words that no correct
// producer writes: head more than a ring's capacity ahead of tail (a foreign
// or broken writer in the peer's process: head lives in shared memory the
// sender writes), and a tail that is not on a record boundary. The header
// promises "a corrupted header is reported as type 0 and the ring is reset":
// poll must report and reset, in a bounded number of steps, without reading
// outside the ring.

TEST(RingCorruption, HeadFarAheadOfTailIsReportedInBoundedTime) {
    GuardedRing g(1024);
    // The whole data area is one valid-looking pad record.
    RecordHeader pad{1024 - 16, static_cast<uint16_t>(RecordType::pad), 0, 0};
    std::memcpy(g.data(), &pad, sizeof pad);
    g.ctl()->head.store(uint64_t(1) << 62);
    RingConsumer c(g.ring(), g.capacity());
    const std::string err = run_in_child([&] { return drain_expect_corruption(c, g.ctl(), g.capacity()); }, 10);
    EXPECT_EQ(err, "") << "RingConsumer::poll trusts head - tail without bounding it by the capacity";
}

TEST(RingCorruption, UnalignedTailDoesNotReadOutsideRing) {
    GuardedRing g(1024);
    std::memset(g.data(), 0, g.capacity());
    g.ctl()->tail.store(1024 - 8);  // the header read would straddle the end
    g.ctl()->head.store(1024 + 64);
    RingConsumer c(g.ring(), g.capacity());
    const std::string err = run_in_child([&] { return drain_expect_corruption(c, g.ctl(), g.capacity()); }, 10);
    EXPECT_EQ(err, "") << "RingConsumer::poll reads a 16-byte header at tail without checking alignment";
}

// ------------------------------------------------------------------ stress

TEST(RingStress, TwoThreadsOneMillionRecords) {
    constexpr uint64_t n = 1'000'000;
    constexpr uint64_t cap = 4096;
    GuardedRing g(cap);
    RingProducer p(g.ring(), cap);
    RingConsumer c(g.ring(), cap);
    std::atomic<bool> stop{false};  // set by the consumer if it gives up

    std::thread producer([&] {
        uint8_t buf[8 + 40];
        for (uint64_t seq = 0; seq < n && !stop.load(std::memory_order_relaxed); ++seq) {
            const uint32_t extra = static_cast<uint32_t>(seq % 41);
            std::memcpy(buf, &seq, 8);
            for (uint32_t i = 0; i < extra; ++i) buf[8 + i] = pattern(seq, i);
            // Two pieces when there is an extra part, as the rendezvous path does.
            while (!p.try_push(RecordType::eager, static_cast<uint16_t>(seq), seq ^ 0x5555, buf, 8,
                               extra ? buf + 8 : nullptr, extra)) {
                if (stop.load(std::memory_order_relaxed)) return;
                sched_yield();
            }
        }
    });

    std::vector<uint8_t> scratch;
    uint64_t expect = 0;
    std::string failure;
    // Hang guard only (never a timing assertion): give up after a long run
    // of empty polls with no new record.
    uint64_t idle = 0;
    const uint64_t idle_limit = 200'000'000;
    while (expect < n && failure.empty()) {
        Record r{};
        if (!c.poll(scratch, r)) {
            if (++idle > idle_limit) failure = "no record for a very long time";
            sched_yield();
            continue;
        }
        idle = 0;
        uint64_t seq = 0;
        const uint32_t extra = static_cast<uint32_t>(expect % 41);
        if (r.header.len != 8 + extra) {
            failure = "wrong length at " + std::to_string(expect);
            break;
        }
        std::memcpy(&seq, r.payload, 8);
        if (seq != expect || r.header.id != static_cast<uint16_t>(expect) || r.header.aux != (expect ^ 0x5555) ||
            r.header.type != static_cast<uint16_t>(RecordType::eager)) {
            failure = "out of order: got " + std::to_string(seq) + " expected " + std::to_string(expect);
            break;
        }
        for (uint32_t i = 0; i < extra; ++i)
            if (r.payload[8 + i] != pattern(seq, i)) {
                failure = "payload byte " + std::to_string(i) + " of " + std::to_string(seq);
                break;
            }
        ++expect;
    }
    stop.store(true);
    producer.join();
    ASSERT_EQ(failure, "");
    EXPECT_EQ(expect, n);
    Record r{};
    EXPECT_FALSE(c.poll(scratch, r));
}
