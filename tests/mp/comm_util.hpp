// comm_util.hpp — helpers shared by the communicator, point-to-point and
// collective suites (test_comm.cpp, test_coll.cpp, test_comm_fault.cpp).
//
// Every rank runs the same tests in the same order (mp_main.hpp), so a test
// may call collectives. Failures name the rank (CommTest's trace) and the
// case (each check's message). Nothing here sleeps to synchronise: waits are
// weft's own (bounded by WEFT_TIMEOUT_MS) or poll loops with a deadline.
#pragma once

#include "tests/mp/mp_main.hpp"

#include <weft/comm.h>
#include <weft/state_window.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <ostream>
#include <string>
#include <vector>

// GoogleTest prints statuses by name.
inline void PrintTo(const weft_status_t& s, std::ostream* os) { *os << weft_strerror(s) << " (" << int(s) << ")"; }

namespace mp {

inline weft_comm_t world() {
    weft_comm_t w = nullptr;
    EXPECT_EQ(weft_comm_world(ctx, &w), WEFT_OK);
    return w;
}

inline uint32_t comm_rank(weft_comm_t c) {
    uint32_t r = UINT32_MAX;
    EXPECT_EQ(weft_comm_rank(c, &r), WEFT_OK);
    return r;
}

inline uint32_t comm_size(weft_comm_t c) {
    uint32_t n = 0;
    EXPECT_EQ(weft_comm_size(c, &n), WEFT_OK);
    return n;
}

// UCX over tcp moves a few hundred MB/s with heavy per-message cost: tests
// scale their sizes and iteration counts down there (never their checks).
inline bool slow_fabric() {
    const char* tls = std::getenv("UCX_TLS");
    weft_caps_t caps;
    return tls && std::strstr(tls, "tcp") && weft_query_caps(ctx, &caps) == WEFT_OK &&
           std::strcmp(caps.transport, "ucx") == 0;
}

// Deterministic per (seed, index): every rank can regenerate any rank's data.
inline uint64_t mix(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

struct Rng {
    uint64_t s;
    explicit Rng(uint64_t seed) : s(mix(seed)) {}
    uint64_t next() { return s = mix(s); }
};

// The byte pattern of a message identified by seed.
inline uint8_t pattern_byte(uint64_t seed, size_t i) {
    return static_cast<uint8_t>(mix(seed + (i >> 3)) >> (8 * (i & 7)));
}

inline std::vector<uint8_t> pattern(uint64_t seed, size_t n) {
    std::vector<uint8_t> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = pattern_byte(seed, i);
    return v;
}

// Index of the first byte of p[0..n) that differs from pattern(seed), or
// SIZE_MAX.
inline size_t pattern_mismatch(const uint8_t* p, size_t n, uint64_t seed) {
    for (size_t i = 0; i < n; ++i)
        if (p[i] != pattern_byte(seed, i)) return i;
    return SIZE_MAX;
}

// A message's identity, so a receiver can check where a payload came from.
inline uint64_t msg_seed(uint32_t src, int32_t tag, uint64_t seq) {
    return (uint64_t(src) << 48) ^ (uint64_t(uint32_t(tag)) << 16) ^ seq;
}

// A receive buffer with guard bytes on both sides: nothing may land there.
class Guarded {
public:
    static constexpr size_t kGuard = 64;
    static constexpr uint8_t kFill = 0xa5;
    explicit Guarded(size_t n) : mem_(n + 2 * kGuard, kFill), n_(n) {}
    uint8_t* data() { return mem_.data() + kGuard; }
    size_t size() const { return n_; }
    bool guards_intact() const {
        for (size_t i = 0; i < kGuard; ++i)
            if (mem_[i] != kFill || mem_[kGuard + n_ + i] != kFill) return false;
        return true;
    }
    // The first byte of the payload area that differs from pattern(seed), or SIZE_MAX.
    size_t mismatch(uint64_t seed, size_t len) const { return pattern_mismatch(mem_.data() + kGuard, len, seed); }

private:
    std::vector<uint8_t> mem_;
    size_t n_;
};

inline std::string describe(const weft_msg_status_t& s) {
    return "{source " + std::to_string(s.source) + ", tag " + std::to_string(s.tag) + ", bytes " +
           std::to_string(s.bytes) + ", error " + weft_strerror(s.error) + ", cancelled " +
           std::to_string(s.cancelled) + "}";
}

inline weft_msg_status_t blank_status() {
    weft_msg_status_t s;
    s.source = -99;
    s.tag = -99;
    s.bytes = SIZE_MAX;
    s.error = WEFT_ERR_LAST_;
    s.cancelled = -1;
    return s;
}

// Expects a completed, uncancelled receive's status.
inline void expect_status(const weft_msg_status_t& s, int32_t source, int32_t tag, size_t bytes,
                          weft_status_t error = WEFT_OK) {
    EXPECT_EQ(s.source, source) << describe(s);
    EXPECT_EQ(s.tag, tag) << describe(s);
    EXPECT_EQ(s.bytes, bytes) << describe(s);
    EXPECT_EQ(s.error, error) << describe(s);
    EXPECT_EQ(s.cancelled, 0) << describe(s);
}

// Polls pred (which makes weft calls and so progresses) until it holds;
// false after timeout_s. Between polls weft_wait sleeps at most 1 ms.
template <typename Pred>
bool poll_until(Pred pred, double timeout_s = 60.0) {
    return progress_until(pred, timeout_s);
}

// Waits on a request; the status is returned, the call's result checked.
inline weft_msg_status_t wait_ok(weft_request_t* req, const std::string& what) {
    weft_msg_status_t s = blank_status();
    EXPECT_EQ(weft_request_wait(req, &s), WEFT_OK) << what << " " << describe(s);
    EXPECT_EQ(*req, nullptr) << what << ": completion must clear the handle";
    return s;
}

// A word of this rank's pinned state window (owner-store words only).
inline uint64_t state_word(uint64_t offset) {
    weft_window_t sw = nullptr;
    void* base = nullptr;
    size_t len = 0;
    EXPECT_EQ(weft_state_window(ctx, &sw), WEFT_OK);
    EXPECT_EQ(weft_window_local(sw, &base, &len), WEFT_OK);
    if (!base || offset + 8 > len) return UINT64_MAX;
    return std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(static_cast<char*>(base) + offset))
        .load(std::memory_order_acquire);
}

inline uint64_t clock_word(weft_comm_t c, uint64_t field) {
    uint32_t slot = UINT32_MAX;
    EXPECT_EQ(weft_comm_clock_slot(c, &slot), WEFT_OK);
    EXPECT_LT(slot, WEFT_STATE_COMM_SLOTS);
    return slot < WEFT_STATE_COMM_SLOTS ? state_word(WEFT_STATE_CLOCK_OFF(slot, field)) : UINT64_MAX;
}

// Every element of a vector gathered over c (one T per rank).
template <typename T>
std::vector<T> allgather_one(weft_comm_t c, T v, weft_datatype_t type) {
    std::vector<T> all(comm_size(c));
    EXPECT_EQ(weft_allgather(c, &v, 1, type, all.data()), WEFT_OK);
    return all;
}

// A test over the world communicator; every failure names the rank. Tests
// end together (a bootstrap barrier), so one test's traffic never meets the
// next one's.
class CommTest : public testing::Test {
protected:
    void TearDown() override { barrier(); }
    testing::ScopedTrace trace_{__FILE__, __LINE__, "rank " + std::to_string(rank) + " of " + std::to_string(size)};
    weft_comm_t w_ = world();
    uint32_t right_ = (rank + 1) % size;
    uint32_t left_ = (rank + size - 1) % size;
};

}  // namespace mp
