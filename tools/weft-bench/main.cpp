// weft-bench — perftest/OSU-style latency, bandwidth and message rate of
// weft's operations, run under weft-run (or any PMIx launcher):
//   weft-run -n 2 [--transport shm|ucx|verbs] weft-bench [-m MIN:MAX] [-i N] [-x N] [--json F] ...
// Rank 0 decides the parameters and broadcasts them, so every rank runs the
// same rows with the same iteration counts; point-to-point rows run between
// ranks 0 and 1 (p2p.cpp), collectives and the rest on every rank
// (coll.cpp). Rank 0 prints an aligned table and writes JSON, CSV and an SVG
// plot (report.cpp); --compare ucx_perftest, mpi and perftest add a baseline
// (compare.cpp, compare_mpi.cpp, compare_perftest.cpp).
// Every operation's result is checked; a wrong byte, sum or old value exits
// 1. Not bench/weft_bench.cpp (Google Benchmark, target weft_bench): that one
// is the project's regression suite, this one the user-facing tool.
#include "compare.hpp"
#include "options.hpp"
#include "report.hpp"
#include "session.hpp"

#include <weft/comm.h>
#include <weft/weft.h>

#include <cmath>
#include <cstring>
#include <sched.h>
#include <string>

namespace weft_bench {

void die(const Session& s, const char* what, weft_status_t st) {
    std::fprintf(stderr, "weft-bench: rank %u: %s%s%s\n", s.rank, what, st != WEFT_OK ? ": " : "",
                 st != WEFT_OK ? weft_strerror(st) : "");
    std::fflush(stdout);
    std::exit(1);
}

void verify(const Session& s, const void* got, const uint8_t* want, uint64_t size, const char* op, uint64_t iteration) {
    if (__builtin_expect(std::memcmp(got, want, size) == 0, 1)) return;
    const uint8_t* g = static_cast<const uint8_t*>(got);
    uint64_t at = 0;
    while (g[at] == want[at]) ++at;
    char buf[160];
    std::snprintf(buf, sizeof buf, "%s of %llu B, iteration %llu: byte %llu is %u, expected %u", op,
                  static_cast<unsigned long long>(size), static_cast<unsigned long long>(iteration),
                  static_cast<unsigned long long>(at), g[at], want[at]);
    die(s, buf);
}

void row_barrier(Session& s) {
    weft_request_t req = nullptr;
    check(s, weft_ibarrier(s.world, &req), "weft_ibarrier");
    const uint64_t deadline = bench::now_ns() + row_limit_ns;
    for (int done = 0;;) {
        check(s, weft_request_test(&req, &done, nullptr), "weft_request_test");
        if (done) return;
        if (bench::now_ns() >= deadline) die(s, "timed out after an hour waiting for the other ranks' row");
        const weft_status_t st = weft_wait(s.ctx, 1000000);
        if (st != WEFT_ERR_TIMEOUT) check(s, st, "weft_wait");
    }
}

weft_status_t Samples::pool(weft_comm_t comm) {
    weft_status_t st = weft_allreduce(comm, WEFT_IN_PLACE, hist_->counts, BENCH_HIST_BUCKETS, WEFT_UINT32, WEFT_OP_SUM);
    uint64_t sums[2] = {hist_->n, sum_};
    if (st == WEFT_OK) st = weft_allreduce(comm, WEFT_IN_PLACE, sums, 2, WEFT_UINT64, WEFT_OP_SUM);
    if (st == WEFT_OK) st = weft_allreduce(comm, WEFT_IN_PLACE, &min_, 1, WEFT_UINT64, WEFT_OP_MIN);
    if (st == WEFT_OK) st = weft_allreduce(comm, WEFT_IN_PLACE, &max_, 1, WEFT_UINT64, WEFT_OP_MAX);
    hist_->n = sums[0];
    sum_ = sums[1];
    return st;
}

Row Samples::row(const char* op, const char* unit, uint64_t bytes, uint32_t ranks, double scale) const {
    Row r;
    r.op = op;
    r.unit = unit;
    r.bytes = bytes;
    r.ranks = ranks;
    r.iters = hist_->n;
    if (hist_->n == 0) return r;
    const double us = scale / 1e3;
    r.min_us = static_cast<double>(min_) * us;
    r.max_us = static_cast<double>(max_) * us;
    r.mean_us = static_cast<double>(sum_) / static_cast<double>(hist_->n) * us;
    // Nearest rank: the value of the ceil(q * n)-th sample, so the median of
    // 3 samples is the second and p99 of 100 the 99th (bench_hist_percentile
    // rounds down, which for a handful of samples — one death's survivors —
    // names a smaller one). The histogram's bucket floor can sit below the
    // exact minimum: clamp.
    auto pct = [&](double q) {
        const uint64_t want =
            std::max<uint64_t>(1, static_cast<uint64_t>(std::ceil(q * static_cast<double>(hist_->n))));
        uint64_t seen = 0;
        size_t i = 0;
        while (i + 1 < BENCH_HIST_BUCKETS && (seen += hist_->counts[i]) < want) ++i;
        return std::max(r.min_us, std::min(r.max_us, static_cast<double>(bench_hist_value(i)) * us));
    };
    r.median_us = pct(0.5);
    r.p99_us = pct(0.99);
    r.p999_us = pct(0.999);
    return r;
}

namespace {

// This process's CPUs as a list ("0-1", "3,5-7").
std::string cpu_list() {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) != 0) return "?";
    std::string out;
    for (int c = 0; c < CPU_SETSIZE; ++c) {
        if (!CPU_ISSET(c, &set)) continue;
        int e = c;
        while (e + 1 < CPU_SETSIZE && CPU_ISSET(e + 1, &set)) ++e;
        out += (out.empty() ? "" : ",") + std::to_string(c) + (e > c ? "-" + std::to_string(e) : "");
        c = e;
    }
    return out;
}

void on_ctl(void* a, uint32_t, const void*, size_t) { ++static_cast<Session*>(a)->ctl; }
void on_ack(void* a, uint32_t, const void*, size_t) { ++static_cast<Session*>(a)->acks; }
// Each data message must carry the pattern of its sequence number.
void count_and_check(Session& s, uint64_t& counter, const void* p, size_t len) {
    ++counter;
    if (len != s.am_size || std::memcmp(p, s.pat(counter), len) != 0) s.am_bad = true;
}
void on_ping(void* a, uint32_t, const void* p, size_t len) {
    auto& s = *static_cast<Session*>(a);
    count_and_check(s, s.pings, p, len);
}
void on_pong(void* a, uint32_t, const void* p, size_t len) {
    auto& s = *static_cast<Session*>(a);
    count_and_check(s, s.pongs, p, len);
}
void on_data(void* a, uint32_t, const void* p, size_t len) {
    auto& s = *static_cast<Session*>(a);
    count_and_check(s, s.data_msgs, p, len);
}
void on_peer_failure(void* a, uint32_t peer) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "peer %u failed", peer);
    die(*static_cast<Session*>(a), buf);
}

std::string transport_label(const Session& s) {
    std::string l = s.caps.transport ? s.caps.transport : "?";
    if (l == "ucx") {
        const char* tls = std::getenv("UCX_TLS");
        l += std::string(" UCX_TLS=") + (tls ? tls : "(default)");
    }
    if (s.caps.atomics == WEFT_ATOMICS_EMULATED) l += ", emulated atomics";
    return l;
}

}  // namespace

}  // namespace weft_bench

int main(int argc, char** argv) {
    using namespace weft_bench;
    const Options opt = parse_options(argc, argv);
    Session s;
    weft_status_t st = weft_init(&s.ctx);
    if (st != WEFT_OK) {
        std::fprintf(stderr, "weft-bench: weft_init: %s\n", weft_strerror(st));
        return 1;
    }
    check(s, weft_rank(s.ctx, &s.rank), "weft_rank");
    check(s, weft_size(s.ctx, &s.size), "weft_size");
    check(s, weft_job_id(s.ctx, &s.job), "weft_job_id");
    check(s, weft_query_caps(s.ctx, &s.caps), "weft_query_caps");
    check(s, weft_comm_world(s.ctx, &s.world), "weft_comm_world");
    s.nic = s.caps.atomics == WEFT_ATOMICS_HARDWARE;

    // Rank 0's parameters for everyone.
    s.p = {opt.iterations, opt.warmup,       opt.window, opt.min_size,
           opt.max_size,   opt.sample_every, opt.tests,  opt.rank_sweep ? 1u : 0u};
    check(s, weft_bcast(s.world, &s.p, sizeof s.p, WEFT_BYTE, 0), "broadcasting the parameters");
    s.slot_bytes = std::max<uint64_t>(s.p.max_size, 1u << 20);
    s.pattern.resize(s.p.max_size + 251);
    for (size_t k = 0; k < s.pattern.size(); ++k) s.pattern[k] = static_cast<uint8_t>(1 + k % 251);

    char mine[64] = {};
    std::snprintf(mine, sizeof mine, "%s", cpu_list().c_str());
    std::vector<char> all(64 * s.size);
    check(s, weft_allgather(s.world, mine, sizeof mine, WEFT_BYTE, all.data()), "gathering the CPU binding");

    // -t fault: exactly one rank, not rank 0 (it prints), armed by weft-run.
    const uint8_t armed = armed_as_victim() ? 1 : 0;
    std::vector<uint8_t> armed_all(s.size);
    check(s, weft_allgather(s.world, &armed, 1, WEFT_BYTE, armed_all.data()), "gathering the fault point");
    for (uint32_t r = 0; r < s.size; ++r)
        if (armed_all[r]) s.victim = s.victim == UINT32_MAX ? r : UINT32_MAX - 1;
    if (s.has(t_fault) && (s.victim == 0 || s.victim >= s.size)) {
        if (s.rank == 0)
            std::fprintf(stderr,
                         "weft-bench: -t fault needs one rank other than 0 armed: weft-run -n N (N >= 2) "
                         "--keep-survivors --fault kill:rank=R:at=weft-bench.victim with 0 < R < N\n");
        weft_finalize(s.ctx);
        return 2;
    }

    void* base = nullptr;
    check(s, weft_window_allocate(s.ctx, data_off + 2 * s.slot_bytes, &base, &s.win), "weft_window_allocate");
    s.base = static_cast<uint8_t*>(base);
    check(s, weft_am_register(s.ctx, am_ctl, on_ctl, &s), "weft_am_register");
    check(s, weft_am_register(s.ctx, am_ping, on_ping, &s), "weft_am_register");
    check(s, weft_am_register(s.ctx, am_pong, on_pong, &s), "weft_am_register");
    check(s, weft_am_register(s.ctx, am_data, on_data, &s), "weft_am_register");
    check(s, weft_am_register(s.ctx, am_ack, on_ack, &s), "weft_am_register");
    check(s, weft_set_peer_failure_handler(s.ctx, on_peer_failure, &s), "weft_set_peer_failure_handler");
    (void)bench::ns_per_tick();  // calibrate the sample clock before any row
    check(s, weft_barrier(s.world), "barrier");

    run_p2p(s);
    run_collectives(s);
    if (s.has(t_fault)) run_fault(s);

    Header h;
    h.transport = transport_label(s);
    h.ranks = s.size;
    h.iterations = s.p.iterations;
    h.warmup = s.p.warmup;
    h.window = s.p.window;
    h.min_size = s.p.min_size;
    h.max_size = s.p.max_size;
    for (uint32_t r = 0; r < s.size; ++r) h.cpu_binding.emplace_back(all.data() + 64 * r);
    const std::string transport = s.caps.transport ? s.caps.transport : "";
    // A window's free is collective over the job: with a rank killed, the
    // window goes with weft_finalize.
    if (!s.has(t_fault)) check(s, weft_window_free(s.win), "weft_window_free");
    check(s, weft_finalize(s.ctx), "weft_finalize");
    if (s.rank != 0) return 0;

    int status = 0;
    if (opt.compare == "ucx_perftest") {
        // The same transport: ucx's UCX_TLS as it is; for weft's shm, UCX's
        // shared-memory transports.
        const char* tls = std::getenv("UCX_TLS");
        const std::string use = tls && *tls ? tls : transport == "shm" ? "shm" : "all";
        if (!compare_ucx_perftest(s.rows, s.p.warmup, s.p.window, use, h.cpu_binding, h.compare)) status = 1;
    } else if (opt.compare == "mpi") {
        if (!compare_mpi(s.rows, s.p.warmup, h.cpu_binding, h.compare)) status = 1;
    } else if (opt.compare == "perftest") {
        if (!compare_perftest(s.rows, transport, h.cpu_binding, h.compare)) status = 1;
    }
    write_table(stdout, h, s.rows);
    std::fflush(stdout);
    if (!opt.json.empty() && !write_json(opt.json, h, s.rows)) status = 1;
    if (!opt.csv.empty() && !write_csv(opt.csv, h, s.rows)) status = 1;
    if (!opt.plot.empty()) {
        const bool png = opt.plot.size() > 4 && opt.plot.compare(opt.plot.size() - 4, 4, ".png") == 0;
        if (!(png ? write_png(opt.plot, h, s.rows) : write_svg(opt.plot, h, s.rows))) status = 1;
    }
    return status;
}
