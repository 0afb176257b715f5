// weft_bench.cpp — weft's hot paths, measured between two ranks.
//
//   weft-run -n 2 [--transport shm|ucx] build/bench/weft_bench [--smoke] [benchmark flags]
//
// Rank 0 runs the Google Benchmark suite; rank 1 serves. The backend is
// whatever WEFT_TRANSPORT selects; every benchmark is named after it
// ("shm/...", "ucx/...") and labelled with UCX_TLS for ucx.
//
// Agreement. Before every benchmark run (Google Benchmark calls each
// function several times while it picks an iteration count) rank 0 sends a
// Command {op, iterations, arg} as an active message and waits for READY;
// rank 1 then runs the matching loop for exactly that many iterations. After
// its loop rank 0 sends END and waits for DONE, which carries rank 1's
// verdict (did it see exactly the traffic it expected?). So the two ranks
// can never drift apart across runs, and a lost or duplicated operation
// fails the benchmark instead of skewing it.
//
// Round trips. The benchmark time is real time per iteration: a full round
// trip for every ping-pong. The counters mean_ns / p50_ns / p99_ns are in the
// unit the benchmark reports: for the perftest-style ones (put, active
// message ping-pong) that is HALF a round trip, as ucx_perftest reports, and
// the label says so. Percentiles come from 1 iteration in 16 timed alone
// (see bench_util.hpp for why not every one).
//
// Every wait is bounded (bench::wait_limit_ns, WEFT_BENCH_WAIT_S): on timeout
// the rank prints what it waited for and exits 1; weft-run then ends the job.
#include "bench_util.hpp"
#include "check.hpp"
#include "cli.hpp"

#include <weft/weft.h>

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

namespace {

// ------------------------------------------------------------- protocol
constexpr uint32_t am_cmd = 1;   // 0 -> 1: a Command
constexpr uint32_t am_ctrl = 2;  // 1 -> 0: a Ctrl
constexpr uint32_t am_ping = 3;  // 0 -> 1: 8 bytes
constexpr uint32_t am_pong = 4;  // 1 -> 0: 8 bytes
constexpr uint32_t am_data = 5;  // 0 -> 1: any size, counted by rank 1

enum class Op : uint32_t {
    fadd_pingpong = 1,
    fadd_pingpong_one_line,
    fadd_latency,
    cswap_latency,
    put_pingpong,
    put_bandwidth,
    am_pingpong,
    am_rate,
    am_bandwidth,
    get_latency,
    end,   // rank 0's loop is over: verify and answer DONE
    stop,  // leave the serve loop
};

struct Command {
    Op op;
    uint32_t pad;
    uint64_t iterations;
    uint64_t arg;  // put/AM size, or the AM burst length
};

enum class CtrlKind : uint32_t { ready = 1, done = 2 };
struct Ctrl {
    CtrlKind kind;
    uint32_t ok;  // done: 1 when rank 1 saw exactly what it expected
};

// --------------------------------------------------------- window layout
// One word per cache line: the word a peer changes never shares a line with
// one we poll or one the other benchmark touches.
constexpr uint64_t line = 64;
constexpr uint64_t fadd_off = 0 * line;      // fetch-add ping-pong word (each rank's own)
constexpr uint64_t put_off = 1 * line;       // put ping-pong word
constexpr uint64_t fadd_lat_off = 2 * line;  // rank 1's: one-sided fetch-add target
constexpr uint64_t cswap_off = 3 * line;     // rank 1's: one-sided compare-swap target
constexpr uint64_t fadd1_off = 4 * line;     // rank 1's: the one-line fetch-add ping-pong word
constexpr uint64_t get_off = 5 * line;       // rank 1's: read by get_latency, never written (0)
constexpr uint64_t data_off = 4096;
constexpr uint64_t data_size = 4ull << 20;
constexpr uint64_t window_size = data_off + data_size;
constexpr uint64_t am_max_bench = 16ull << 20;
constexpr uint64_t am_burst = 256;  // message rate: AMs per reply

// ----------------------------------------------------------------- state
struct Bench {
    weft_context_t ctx = nullptr;
    weft_window_t win = nullptr;
    uint8_t* base = nullptr;
    uint32_t rank = 0;
    weft_caps_t caps{};
    bool cpu_coherent = true;  // local CPU loads see remote atomics (scope GLOBAL)
    // The NIC serves one-sided operations (verbs): a waiting rank polls its
    // memory and needs weft's progress only now and then, and a rank that
    // only serves one-sided operations may sleep — as perftest's do.
    bool nic = false;
    std::string label;  // "shm" or "ucx UCX_TLS=..."

    // Rank 1's inbox. Handlers run inside weft_progress on our only thread,
    // so plain fields suffice.
    Command inbox[8]{};
    uint32_t inbox_head = 0, inbox_tail = 0;

    // Running totals; they only grow, so both ranks can name the value that
    // means "iteration i arrived" without resetting anything between runs.
    uint64_t pings = 0, pongs = 0, data_msgs = 0, data_bytes = 0;
    uint32_t readies = 0, dones = 0;
    uint32_t last_done_ok = 0;
    uint64_t fadd_seen = 0;      // our fetch-add ping-pong word, last value seen
    uint64_t put_seq = 0;        // last put ping-pong sequence number
    uint64_t fadd_lat_next = 0;  // rank 0: expected old value of rank 1's fadd_lat word
    uint64_t cswap_next = 0;     // rank 0: current value of rank 1's cswap word

    std::vector<uint8_t> src;  // put / AM source, allocated once
};

Bench g;

[[noreturn, gnu::cold]] void die(const char* what, weft_status_t st = WEFT_OK) {
    std::fprintf(stderr, "weft_bench rank %u: %s%s%s\n", g.rank, what, st != WEFT_OK ? ": " : "",
                 st != WEFT_OK ? weft_strerror(st) : "");
    std::fflush(stdout);
    std::exit(1);
}

inline void check(weft_status_t st, const char* what) {
    if (__builtin_expect(st != WEFT_OK, 0)) die(what, st);
}

void on_cmd(void*, uint32_t, const void* p, size_t len) {
    if (len != sizeof(Command)) die("malformed command");
    if (g.inbox_tail - g.inbox_head >= 8) die("command inbox overflow");
    std::memcpy(&g.inbox[g.inbox_tail++ % 8], p, sizeof(Command));
}
void on_ctrl(void*, uint32_t, const void* p, size_t len) {
    Ctrl c;
    if (len != sizeof c) die("malformed control message");
    std::memcpy(&c, p, sizeof c);
    if (c.kind == CtrlKind::ready)
        ++g.readies;
    else {
        g.last_done_ok = c.ok;
        ++g.dones;
    }
}
void on_ping(void*, uint32_t, const void*, size_t) { ++g.pings; }
void on_pong(void*, uint32_t, const void*, size_t) { ++g.pongs; }
void on_data(void*, uint32_t, const void*, size_t len) {
    ++g.data_msgs;
    g.data_bytes += len;
}
void on_peer_failure(void*, uint32_t peer) {
    std::fprintf(stderr, "weft_bench rank %u: peer %u failed\n", g.rank, peer);
    std::exit(1);
}

// Our own window word, as remote atomics left it. With a transport whose
// atomics are not coherent with the CPU (scope DEVICE) it must be read
// through the transport; shm and ucx here report GLOBAL.
inline uint64_t own_word(uint64_t off) {
    if (__builtin_expect(g.cpu_coherent, 1))
        return std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(g.base + off)).load(std::memory_order_acquire);
    uint64_t v = 0;
    check(weft_atomic_fetch_add(g.win, g.rank, off, 0, &v), "loopback read");
    return v;
}

// A word only puts write: a CPU load is safe on every transport (the
// CPU-vs-NIC rule is about atomics), and it is what perftest's ping-pong
// polls too.
inline uint64_t own_put_word(uint64_t off) {
    return std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(g.base + off)).load(std::memory_order_acquire);
}

inline void progress() {
    // Emulated atomics (ucx over tcp) and every message move only inside
    // progress, so each waiting spin calls it.
    check(weft_progress(g.ctx, nullptr), "weft_progress");
}

template <typename Done>
inline void wait_for(Done&& done, const char* what, uint64_t limit_ns = bench::wait_limit_ns()) {
    uint32_t spins = 0;
    auto poll = [&] {
        if (!g.nic || (++spins & 63) == 0) progress();
    };
    if (__builtin_expect(!bench::spin_until(done, poll, limit_ns), 0)) {
        char buf[160];
        std::snprintf(buf, sizeof buf, "timed out after %llu s waiting for %s",
                      static_cast<unsigned long long>(limit_ns / 1000000000ull), what);
        die(buf);
    }
}

// ------------------------------------------------------------- rank 0
void send_cmd(Op op, uint64_t iterations, uint64_t arg) {
    const Command c{op, 0, iterations, arg};
    check(weft_am_send(g.ctx, 1, am_cmd, &c, sizeof c), "send command");
}

// Starts rank 1's matching loop; returns once it is listening.
void begin(Op op, uint64_t iterations, uint64_t arg = 0) {
    const uint32_t want = g.readies + 1;
    send_cmd(op, iterations, arg);
    wait_for([&] { return g.readies >= want; }, "READY from rank 1");
}

// Ends the run: rank 1 verifies what it saw. Outside the timed loop.
// `scale` turns a full round trip into what the benchmark reports (0.5 for
// the perftest-style half round trips); the counters are in that unit.
void finish(benchmark::State& state, const bench::Samples& s, double mean_ns, double scale, const char* label) {
    const uint32_t want = g.dones + 1;
    send_cmd(Op::end, 0, 0);
    wait_for([&] { return g.dones >= want; }, "DONE from rank 1", 10 * bench::wait_limit_ns());
    if (!g.last_done_ok) die("rank 1 did not see the traffic this run should have produced");
    state.counters["mean_ns"] = mean_ns * scale;
    state.counters["p50_ns"] = s.percentile(0.50) * scale;
    state.counters["p99_ns"] = s.percentile(0.99) * scale;
    state.SetLabel(g.label + "; " + label);
}

void BM_fadd_pingpong(benchmark::State& state) {
    begin(Op::fadd_pingpong, state.max_iterations);
    bench::Samples s(state.max_iterations);
    uint64_t old = 0;
    const double mean = bench::timed_loop(state, s, bench::sample_latency, [&] {
        check(weft_atomic_fetch_add(g.win, 1, fadd_off, 1, &old), "fetch-add");
        const uint64_t want = ++g.fadd_seen;
        wait_for([&] { return own_word(fadd_off) == want; }, "rank 1's fetch-add");
    });
    finish(state, s, mean, 1.0, "full round trip (fetch-add, wait, fetch-add back)");
}

// The floor's exact pattern: both ranks fetch-add one word (in rank 1's
// window); rank 0 makes it odd, rank 1 makes it even again. Rank 0 watches
// the word through weft_get, so the line only bounces between the two.
void BM_fadd_pingpong_one_line(benchmark::State& state) {
    begin(Op::fadd_pingpong_one_line, state.max_iterations);
    bench::Samples s(state.max_iterations);
    uint64_t old = 0, next = 0;
    check(weft_get(g.win, 1, fadd1_off, &next, 8), "get");
    const double mean = bench::timed_loop(state, s, bench::sample_latency, [&] {
        check(weft_atomic_fetch_add(g.win, 1, fadd1_off, 1, &old), "fetch-add");
        next += 2;
        wait_for(
            [&] {
                uint64_t v = 0;
                check(weft_get(g.win, 1, fadd1_off, &v, 8), "get");
                return v == next;
            },
            "rank 1's fetch-add");
    });
    finish(state, s, mean, 1.0, "full round trip on one word (the floor's pattern)");
}

void BM_fadd_latency(benchmark::State& state) {
    begin(Op::fadd_latency, state.max_iterations);
    bench::Samples s(state.max_iterations);
    bool ok = true;
    uint64_t old = 0;
    const double mean = bench::timed_loop(state, s, bench::sample_latency, [&] {
        check(weft_atomic_fetch_add(g.win, 1, fadd_lat_off, 1, &old), "fetch-add");
        ok &= old == g.fadd_lat_next++;  // rank 0 is the word's only writer
    });
    if (!ok) die("fetch-add returned a wrong previous value");
    finish(state, s, mean, 1.0, "one blocking fetch-add to rank 1 (full round trip on ucx)");
}

// ucx_perftest's ucp_get: one blocking 8-byte get (a full round trip).
void BM_get_latency(benchmark::State& state) {
    begin(Op::get_latency, state.max_iterations);
    bench::Samples s(state.max_iterations);
    bool ok = true;
    uint64_t v = 0;
    const double mean = bench::timed_loop(state, s, bench::sample_latency, [&] {
        check(weft_get(g.win, 1, get_off, &v, sizeof v), "get");
        ok &= v == 0;  // nobody writes the word
    });
    if (!ok) die("get returned a wrong value");
    finish(state, s, mean, 1.0, "one blocking 8-byte get from rank 1 (full round trip on ucx)");
}

void BM_cswap_latency(benchmark::State& state) {
    begin(Op::cswap_latency, state.max_iterations);
    bench::Samples s(state.max_iterations);
    bool ok = true;
    uint64_t old = 0;
    const double mean = bench::timed_loop(state, s, bench::sample_latency, [&] {
        // Always succeeds: rank 0 alone writes the word and knows its value.
        check(weft_atomic_compare_swap(g.win, 1, cswap_off, g.cswap_next, g.cswap_next + 1, &old), "compare-swap");
        ok &= old == g.cswap_next++;
    });
    if (!ok) die("compare-swap returned a wrong previous value");
    finish(state, s, mean, 1.0, "one blocking compare-swap to rank 1 (full round trip on ucx)");
}

void BM_put_pingpong(benchmark::State& state) {
    begin(Op::put_pingpong, state.max_iterations);
    bench::Samples s(state.max_iterations);
    const double mean = bench::timed_loop(state, s, bench::sample_latency, [&] {
        const uint64_t seq = ++g.put_seq;
        // No flush: like ucx_perftest's ucp_put_lat, the put is pushed out
        // by progress and the answer is the completion.
        check(weft_put(g.win, 1, put_off, &seq, sizeof seq), "put");
        wait_for([&] { return own_put_word(put_off) == seq; }, "rank 1's put");
    });
    // Leave no put incomplete behind us: a flush over an emulating
    // transport needs the peer to progress, which it does only until the
    // end of the job (window_free's flush would otherwise race the barrier).
    check(weft_flush(g.win, 1), "flush");
    finish(state, s, mean, 0.5,
           "time = full round trip; counters = HALF round trip (8-byte put ping-pong / 2, perftest-style)");
}

void BM_put_bandwidth(benchmark::State& state) {
    const uint64_t size = static_cast<uint64_t>(state.range(0));
    // Enough puts per flush to pipeline, never more than the data area.
    const uint64_t batch = std::max<uint64_t>(1, std::min<uint64_t>(64, data_size / size));
    begin(Op::put_bandwidth, state.max_iterations, size);
    bench::Samples s(state.max_iterations);
    const double mean = bench::timed_loop(state, s, bench::sample_all, [&] {
        for (uint64_t j = 0; j < batch; ++j)
            check(weft_put(g.win, 1, data_off + (j * size) % data_size, g.src.data(), size), "put");
        check(weft_flush(g.win, 1), "flush");
    });
    state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * batch * size));
    state.counters["puts_per_flush"] = static_cast<double>(batch);
    finish(state, s, mean, 1.0, "puts then one flush; counters per batch");
}

void BM_am_pingpong(benchmark::State& state) {
    begin(Op::am_pingpong, state.max_iterations);
    bench::Samples s(state.max_iterations);
    const uint64_t payload = 0;
    const double mean = bench::timed_loop(state, s, bench::sample_latency, [&] {
        const uint64_t want = g.pongs + 1;
        check(weft_am_send(g.ctx, 1, am_ping, &payload, sizeof payload), "am_send");
        wait_for([&] { return g.pongs >= want; }, "rank 1's pong");
    });
    finish(state, s, mean, 0.5,
           "time = full round trip; counters = HALF round trip (8-byte AM ping-pong / 2, perftest-style)");
}

void BM_am_rate(benchmark::State& state) {
    begin(Op::am_rate, state.max_iterations, am_burst);
    bench::Samples s(state.max_iterations);
    const uint64_t payload = 0;
    const double mean = bench::timed_loop(state, s, bench::sample_all, [&] {
        const uint64_t want = g.pongs + 1;
        for (uint64_t j = 0; j < am_burst; ++j)
            check(weft_am_send(g.ctx, 1, am_data, &payload, sizeof payload), "am_send");
        wait_for([&] { return g.pongs >= want; }, "rank 1's reply to a burst");
    });
    state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * am_burst));
    state.counters["burst"] = static_cast<double>(am_burst);
    finish(state, s, mean, 1.0, "8-byte AMs one way, one reply per burst; counters per burst");
}

void BM_am_bandwidth(benchmark::State& state) {
    const uint64_t size = static_cast<uint64_t>(state.range(0));
    begin(Op::am_bandwidth, state.max_iterations, size);
    bench::Samples s(state.max_iterations);
    const double mean = bench::timed_loop(state, s, bench::sample_all, [&] {
        // Above the eager limit: rendezvous, returns once rank 1 pulled it.
        check(weft_am_send(g.ctx, 1, am_data, g.src.data(), size), "am_send");
    });
    state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * size));
    char l[96];
    std::snprintf(l, sizeof l, "one AM per iteration (eager limit %zu B); counters per message", g.caps.am_eager_limit);
    finish(state, s, mean, 1.0, l);
}

void register_all(bool smoke) {
    const std::string t = g.caps.transport;
    auto reg = [&](const char* name, void (*fn)(benchmark::State&)) {
        return benchmark::RegisterBenchmark((t + "/" + name).c_str(), fn)->UseRealTime();
    };
    reg("fadd_pingpong", BM_fadd_pingpong);
    reg("fadd_pingpong_one_line", BM_fadd_pingpong_one_line);
    reg("fadd_latency", BM_fadd_latency);
    reg("cswap_latency", BM_cswap_latency);
    reg("get_latency", BM_get_latency);
    reg("put_pingpong", BM_put_pingpong);
    reg("put_bandwidth", BM_put_bandwidth)->RangeMultiplier(8)->Range(8, static_cast<int64_t>(data_size));
    reg("am_pingpong", BM_am_pingpong);
    reg("am_rate", BM_am_rate);
    reg("am_bandwidth", BM_am_bandwidth)
        ->RangeMultiplier(4)
        ->Range(64 << 10, smoke ? 1 << 20 : static_cast<int64_t>(am_max_bench));
}

// ------------------------------------------------------------- rank 1
void reply(CtrlKind kind, bool ok) {
    const Ctrl c{kind, ok ? 1u : 0u};
    check(weft_am_send(g.ctx, 0, am_ctrl, &c, sizeof c), "send control");
}

Command next_command() {
    // Between runs rank 0 only does bookkeeping; the long limit covers its
    // start-up and reporting.
    wait_for([] { return g.inbox_head != g.inbox_tail; }, "a command from rank 0", 10 * bench::wait_limit_ns());
    return g.inbox[g.inbox_head++ % 8];
}

void serve() {
    for (;;) {
        const Command c = next_command();
        if (c.op == Op::stop) {
            reply(CtrlKind::done, true);
            return;
        }
        if (c.op == Op::end) die("END without a run");
        const uint64_t data_msgs0 = g.data_msgs, data_bytes0 = g.data_bytes, pings0 = g.pings;
        bool ok = true;
        reply(CtrlKind::ready, true);
        switch (c.op) {
            case Op::fadd_pingpong:
                for (uint64_t i = 0; i < c.iterations; ++i) {
                    wait_for([] { return own_word(fadd_off) != g.fadd_seen; }, "rank 0's fetch-add");
                    const uint64_t v = own_word(fadd_off);
                    ok &= v == g.fadd_seen + 1;
                    g.fadd_seen = v;
                    uint64_t old;
                    check(weft_atomic_fetch_add(g.win, 0, fadd_off, 1, &old), "fetch-add");
                }
                break;
            case Op::fadd_pingpong_one_line:
                for (uint64_t i = 0; i < c.iterations; ++i) {
                    wait_for([] { return own_word(fadd1_off) % 2 == 1; }, "rank 0's fetch-add");
                    uint64_t old;
                    check(weft_atomic_fetch_add(g.win, 1, fadd1_off, 1, &old), "fetch-add");
                    ok &= old % 2 == 1;
                }
                break;
            case Op::put_pingpong:
                for (uint64_t i = 0; i < c.iterations; ++i) {
                    const uint64_t seq = ++g.put_seq;
                    wait_for([&] { return own_put_word(put_off) == seq; }, "rank 0's put");
                    check(weft_put(g.win, 0, put_off, &seq, sizeof seq), "put");
                }
                check(weft_flush(g.win, 0), "flush");  // while rank 0 still progresses
                break;
            case Op::am_pingpong:
                for (uint64_t i = 0; i < c.iterations; ++i) {
                    const uint64_t want = pings0 + i + 1;
                    wait_for([&] { return g.pings >= want; }, "rank 0's ping");
                    const uint64_t payload = 0;
                    check(weft_am_send(g.ctx, 0, am_pong, &payload, sizeof payload), "am_send");
                }
                ok = g.pings == pings0 + c.iterations;
                break;
            case Op::am_rate:
                for (uint64_t i = 0; i < c.iterations; ++i) {
                    const uint64_t want = data_msgs0 + (i + 1) * c.arg;
                    wait_for([&] { return g.data_msgs >= want; }, "rank 0's burst");
                    const uint64_t payload = 0;
                    check(weft_am_send(g.ctx, 0, am_pong, &payload, sizeof payload), "am_send");
                }
                break;
            default:  // one-sided or one-way: only progress (below)
                break;
        }
        // Keep progressing until rank 0's END: one-sided operations over an
        // emulating transport (ucx over tcp) move only while we do. Where
        // the NIC serves them we sleep instead, leaving the CPU to whoever
        // needs it (soft-RoCE's kernel work under the VM, like perftest's
        // passive side).
        if (g.nic && c.op != Op::am_pingpong && c.op != Op::am_rate && c.op != Op::am_bandwidth &&
            c.op != Op::put_bandwidth)
            while (g.inbox_head == g.inbox_tail) {
                const weft_status_t st = weft_wait(g.ctx, 100000000);
                if (st != WEFT_ERR_TIMEOUT) check(st, "weft_wait");
            }
        const Command e = next_command();
        if (e.op != Op::end) die("expected END");
        switch (c.op) {
            case Op::am_rate:
                ok &= g.data_msgs - data_msgs0 == c.iterations * c.arg;
                break;
            case Op::am_bandwidth:
                ok &= g.data_msgs - data_msgs0 == c.iterations && g.data_bytes - data_bytes0 == c.iterations * c.arg;
                break;
            default:
                break;
        }
        if (!ok) std::fprintf(stderr, "weft_bench rank 1: op %u: unexpected traffic\n", static_cast<unsigned>(c.op));
        reply(CtrlKind::done, ok);
    }
}

}  // namespace

int main(int argc, char** argv) {
    bench::parse_cli(argc, argv,
                     "weft_bench: weft's hot paths (RMA, atomics, active messages) measured between two ranks\n"
                     "usage: weft-run -n 2 [--transport shm|ucx|verbs] weft_bench [--smoke] [--benchmark_* ...]\n"
                     "  --smoke              a short run (--benchmark_min_time=0.01) for CI\n",
                     {{"--smoke", false}}, true);
    bool smoke = false;
    std::vector<char*> args;
    for (int i = 0; i < argc; ++i) {
        if (std::strcmp(argv[i], "--smoke") == 0)
            smoke = true;
        else
            args.push_back(argv[i]);
    }
    static char min_time[] = "--benchmark_min_time=0.01";
    if (smoke) args.insert(args.begin() + 1, min_time);  // a later explicit flag still wins

    bench::init_or_skip(&g.ctx);
    uint32_t size = 0;
    check(weft_rank(g.ctx, &g.rank), "weft_rank");
    check(weft_size(g.ctx, &size), "weft_size");
    if (size != 2) die("run with exactly 2 ranks: weft-run -n 2 weft_bench");
    check(weft_query_caps(g.ctx, &g.caps), "weft_query_caps");
    g.cpu_coherent = g.caps.atomic_scope == WEFT_ATOMIC_SCOPE_GLOBAL;
    g.nic = g.caps.atomics == WEFT_ATOMICS_HARDWARE;
    g.label = g.caps.transport;
    if (std::strcmp(g.caps.transport, "ucx") == 0) {
        const char* tls = std::getenv("UCX_TLS");
        g.label += std::string(" UCX_TLS=") + (tls ? tls : "(default)");
    }
    g.label += g.caps.atomics == WEFT_ATOMICS_EMULATED ? ", emulated atomics" : "";
    void* base = nullptr;
    check(weft_window_allocate(g.ctx, window_size, &base, &g.win), "weft_window_allocate");
    g.base = static_cast<uint8_t*>(base);
    check(weft_am_register(g.ctx, am_cmd, on_cmd, nullptr), "register");
    check(weft_am_register(g.ctx, am_ctrl, on_ctrl, nullptr), "register");
    check(weft_am_register(g.ctx, am_ping, on_ping, nullptr), "register");
    check(weft_am_register(g.ctx, am_pong, on_pong, nullptr), "register");
    check(weft_am_register(g.ctx, am_data, on_data, nullptr), "register");
    check(weft_set_peer_failure_handler(g.ctx, on_peer_failure, nullptr), "failure handler");
    check(weft_bootstrap_barrier(g.ctx), "barrier");

    if (g.rank == 0) {
        g.src.assign(am_max_bench, 0x5a);
        int bargc = static_cast<int>(args.size());
        args.push_back(nullptr);
        benchmark::Initialize(&bargc, args.data());
        if (benchmark::ReportUnrecognizedArguments(bargc, args.data())) die("unrecognized arguments");
        register_all(smoke);
        benchmark::RunSpecifiedBenchmarks();
        benchmark::Shutdown();
        const uint32_t want_done = g.dones + 1;
        send_cmd(Op::stop, 0, 0);
        wait_for([&] { return g.dones >= want_done; }, "rank 1 to stop");
    } else {
        serve();
    }
    check(weft_window_free(g.win), "weft_window_free");
    check(weft_finalize(g.ctx), "weft_finalize");
    return 0;
}
