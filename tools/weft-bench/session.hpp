// session.hpp — what every part of weft-bench's measuring shares: the weft
// handles, the parameters rank 0 decided and broadcast (so every rank runs
// exactly the same rows with the same iteration counts), the message
// patterns that make every byte checkable, per-row samples, and the bounded
// waits. Rows are made by p2p.cpp (ranks 0 and 1) and coll.cpp (all ranks).
#pragma once

#include "options.hpp"
#include "report.hpp"

#include "bench/bench_util.hpp"

#include <weft/comm.h>
#include <weft/weft.h>

#include <cstdint>
#include <memory>
#include <vector>

namespace weft_bench {

// Decided by rank 0, broadcast before any row (weft_bcast of these bytes).
struct Params {
    uint64_t iterations, warmup, window, min_size, max_size, sample_every;
    uint32_t tests, rank_sweep;  // rank_sweep: --rank-sweep (1) or not (0)
};

// Window layout (every rank's window is the same): the three atomic words and
// the put ping-pong's flag and the fault row's time stamp (written only by
// puts) on their own cache lines, then two message slots of slot_bytes each (ping-pong
// alternates them; the bandwidth rows use both as one area).
constexpr uint64_t fadd_off = 0, cswap_off = 64, swap_off = 128, flag_off = 192, fault_stamp_off = 256;
constexpr uint64_t data_off = 4096;

// Active-message ids weft-bench registers.
enum : uint32_t { am_ctl = 40, am_ping, am_pong, am_data, am_ack };

// One row's per-iteration times: exact min, max and mean; percentiles from
// bench_stats.h's histogram (exact below 1024 ns, within 1.6% above: the loop
// stays in cache, see bench_stats.h), so -i may be large.
class Samples {
public:
    Samples() : hist_(std::make_unique<bench_hist_t>()) {}
    void add(uint64_t ns) {
        bench_hist_add(hist_.get(), ns);
        min_ = ns < min_ ? ns : min_;
        max_ = ns > max_ ? ns : max_;
        sum_ += ns;
    }
    // Every rank's samples together (collective over comm).
    weft_status_t pool(weft_comm_t comm);
    // The row, times scaled by `scale` (0.5: half a round trip).
    Row row(const char* op, const char* unit, uint64_t bytes, uint32_t ranks, double scale = 1.0) const;
    uint64_t count() const { return hist_->n; }
    uint64_t sum_ns() const { return sum_; }

private:
    std::unique_ptr<bench_hist_t> hist_;
    uint64_t min_ = UINT64_MAX, max_ = 0, sum_ = 0;
};

struct Session {
    weft_context_t ctx = nullptr;
    weft_comm_t world = nullptr;
    weft_window_t win = nullptr;
    uint8_t* base = nullptr;
    uint32_t rank = 0, size = 0, job = 0;
    weft_caps_t caps{};
    bool nic = false;  // one-sided operations served by the NIC: poll progress only now and then
    Params p{};
    uint64_t slot_bytes = 0;  // each of the two message slots
    std::vector<uint8_t> pattern;
    std::vector<Row> rows;  // rank 0's

    // Counters the active-message handlers move (they run inside
    // weft_progress on our only thread, so plain fields suffice).
    uint64_t ctl = 0, pings = 0, pongs = 0, data_msgs = 0, acks = 0;
    uint64_t am_size = 0;  // the size every data AM of the row must have
    bool am_bad = false;   // a handler saw a wrong payload

    // Rank 0's view of rank 1's atomic words: it is their only writer.
    uint64_t fadd_value = 0, cswap_value = 0, swap_value = 0;
    uint64_t drains = 0;
    uint32_t victim = UINT32_MAX;  // -t fault: the rank weft-run will kill

    bool has(Test t) const { return (p.tests >> t) & 1u; }
    // The message of sequence number seq: byte j is 1 + (seq + j) % 251, so
    // never 0 (a cleared buffer never matches) and consecutive sequence
    // numbers differ in every byte. A view into `pattern`, never copied.
    const uint8_t* pat(uint64_t seq) const { return pattern.data() + seq % 251; }
    // Rows above 64 KiB run fewer iterations (as OSU does), by the same rule
    // on every rank.
    uint64_t iters_for(uint64_t bytes) const {
        if (bytes <= (64u << 10)) return p.iterations;
        const uint64_t scaled = p.iterations * (64u << 10) / bytes;
        return scaled < 10 ? (p.iterations < 10 ? p.iterations : 10) : scaled;
    }
    uint64_t warmup_for(uint64_t bytes) const { return warmup_for_size(p.warmup, bytes); }
};

[[noreturn, gnu::cold]] void die(const Session& s, const char* what, weft_status_t st = WEFT_OK);

inline void check(const Session& s, weft_status_t st, const char* what) {
    if (__builtin_expect(st != WEFT_OK, 0)) die(s, what, st);
}

inline void progress(const Session& s) { check(s, weft_progress(s.ctx, nullptr), "weft_progress"); }

// Spins until done(), progressing weft between looks (every 64th look where
// the NIC serves one-sided operations); dies naming `what` after `limit_ns`:
// by default bench::wait_limit_ns (WEFT_BENCH_WAIT_S, default 20 s), the
// bound of one message's wait.
template <typename Done>
inline void wait_for(const Session& s, Done&& done, const char* what, uint64_t limit_ns = bench::wait_limit_ns()) {
    uint32_t spins = 0;
    auto poll = [&] {
        if (!s.nic || (++spins & 63) == 0) progress(s);
    };
    if (__builtin_expect(!bench::spin_until(done, poll, limit_ns), 0)) {
        char buf[160];
        std::snprintf(buf, sizeof buf, "timed out after %llu s waiting for %s",
                      static_cast<unsigned long long>(limit_ns / 1000000000ull), what);
        die(s, buf);
    }
}

// The bound of a wait that lasts a whole row (the peer's loop): an hour.
// Rows are longer than any one message's wait bound, and what really
// bounds them is weft-run --timeout.
constexpr uint64_t row_limit_ns = 3600ull * 1000000000ull;

// A barrier of the world that may wait longer than a blocking call's
// deadline (WEFT_TIMEOUT_MS): ranks that sit out a row (2 and up in the
// point-to-point rows, those outside a --rank-sweep count) wait on a
// nonblocking barrier inside weft (weft_wait, 1 ms at a time: off the CPU
// the measuring ranks need), bounded by row_limit_ns.
void row_barrier(Session& s);

// Per-iteration timing: start() just before the operation, lap() just
// after, so a sample is the operation alone plus one clock read (ticks_begin/
// ticks_end, bench_util.hpp) — the data checks and bookkeeping between iterations are
// never timed. The same method as bench/weft_bench.cpp's sampled p50
// (which times 1 iteration in 16 this way). Warm-up iterations are dropped;
// `per` divides each sample (a bandwidth row's window: time per operation).
// With `every` > 1 (--sample-every) only iterations it % every == 0 are
// timed; the others run with no clock read, as in bench/'s sampled p50.
// That is not only cheaper: in a ping-pong the bookkeeping after each
// sample shifts when the next operation meets the peer's poll, and on UCX
// over shared memory an 8-byte put timed 1 in 16 took 72-107 ns against
// 119-125 ns timed every iteration, in the same run.
class Stopwatch {
public:
    Stopwatch(Samples& samples, uint64_t warmup, uint64_t per = 1, uint64_t every = 1)
        : samples_(samples), warmup_(warmup), every_(every), scale_(bench::ns_per_tick() / static_cast<double>(per)) {}
    // Iteration `it` starts now. Whether it is timed is decided here, so
    // nothing but the clock read stands between the operation and lap's.
    void start(uint64_t it = 0) {
        timed_ = it % every_ == 0;
        if (timed_) start_ = bench::ticks_begin();
    }
    // Iteration `it` ended now.
    void lap(uint64_t it) {
        if (!timed_) return;
        const uint64_t t = bench::ticks_end();
        if (it >= warmup_) samples_.add(static_cast<uint64_t>(static_cast<double>(t - start_) * scale_));
    }

private:
    Samples& samples_;
    uint64_t warmup_, every_, start_ = 0;
    bool timed_ = true;
    double scale_;
};

// Dies unless `got` holds `want` (size bytes): the data check after every
// operation, outside its timing.
void verify(const Session& s, const void* got, const uint8_t* want, uint64_t size, const char* op, uint64_t iteration);

void run_p2p(Session& s);
void run_collectives(Session& s);
// fault.cpp: whether weft-run armed this rank's weft-bench.victim fault
// point, and the row that uses it (last: a rank dies in it).
bool armed_as_victim();
void run_fault(Session& s);

}  // namespace weft_bench
