// checks.cpp — the distributed half of weft-fabric-check: what every rank
// does, through weft's public C API only (weft.h windows, RMA and atomics;
// comm.h point-to-point and the fault-tolerant agreement of ft.h).
//
// Phases, each closed by weft_comm_agree (fault tolerant, so a rank that
// dies mid-run is agreed failed on every survivor and the later phases go on
// without it instead of hanging):
//   1. pairs: origin by origin (the others serve: they progress weft until
//      the origin says done, or fails), connectivity, integrity, latency and
//      bandwidth to every target;
//   2. atomics under contention: every rank fetch-adds every rank's word,
//      then draws compare-swap tickets from every rank's ticket word;
//   3. rings: rank order and a seeded random order, point-to-point;
//   then every rank sends rank 0 what it found (point-to-point, so a failed
//   rank is a PEER_FAILED receive, never a hang), and
//   4. with --fault-check, one rank dies and every survivor times its
//      failure notice (weft_event_register, WEFT_EVENT_PROC_FAILED).
#include "fabric_check.hpp"

#include <weft/ft.h>

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <unistd.h>

namespace fabric {

namespace {

uint64_t now_ns() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

// Window layout on every rank: a 64-byte header, then one region per origin.
constexpr uint64_t stamp_offset = 0;    // the rank's stamp (connectivity)
constexpr uint64_t fadd_offset = 8;     // the fetch-add word
constexpr uint64_t ticket_offset = 16;  // the compare-swap ticket word
constexpr uint64_t header_bytes = 64;
constexpr uint64_t stamp_of(uint32_t rank) { return 0xfab0c0de00000000ull | rank; }

constexpr uint32_t am_done = 1;  // "origin finished its pairs"
constexpr int32_t tag_pairs = 301, tag_atomics = 302, tag_tickets = 303, tag_rings = 304, tag_fault = 305;
constexpr int32_t tag_ring0 = 310;
constexpr uint64_t serve_deadline_ns = 300ull * 1000000000ull;

// A one-line progress bar on rank 0's stderr, only when that is a terminal.
struct Progress {
    bool on = false;
    void show(const char* phase, uint32_t done, uint32_t total) {
        if (!on) return;
        constexpr int width = 30;
        const int filled = total ? int(uint64_t(width) * done / total) : width;
        std::fprintf(stderr, "\rweft-fabric-check: %-10s [%.*s%.*s] %u/%u ", phase, filled,
                     "##############################", width - filled, "------------------------------", done, total);
        std::fflush(stderr);
    }
    void finish() {
        if (on) std::fprintf(stderr, "\r%-80s\r", "");
    }
};

struct Job {
    const Options& opt;
    weft_context_t ctx = nullptr;
    weft_comm_t world = nullptr;
    weft_window_t win = nullptr;
    uint8_t* base = nullptr;
    uint32_t rank = 0, size = 0;
    uint64_t region_bytes = 0;           // one origin's region at each target
    std::vector<uint64_t> failed_at_ns;  // by peer, when this rank heard (0 = not failed)
    std::vector<int> done_from;          // by origin: its am_done arrived
    std::vector<int> lost;               // the agreed failed set (weft_comm_get_failed GLOBAL)
    std::vector<int> pair_member;        // by rank: measures pairs (all, or the lowest rank per host)
    std::vector<uint8_t> out, in, expect;
    int64_t corrupt_src = -1, corrupt_dst = -1;
    Progress progress;

    explicit Job(const Options& o) : opt(o) {}
    bool failed(uint32_t peer) {
        int f = 0;
        return lost[peer] || (weft_peer_failed(ctx, peer, &f) == WEFT_OK && f);
    }
    std::vector<uint32_t> live() const {
        std::vector<uint32_t> l;
        for (uint32_t r = 0; r < size; ++r)
            if (!lost[r]) l.push_back(r);
        return l;
    }
};

void on_done(void* arg, uint32_t source, const void*, size_t) {
    auto* j = static_cast<Job*>(arg);
    if (source < j->done_from.size()) j->done_from[source] = 1;
}

void on_failure(void* arg, weft_event_t, uint32_t peer) {
    auto* j = static_cast<Job*>(arg);
    if (peer < j->failed_at_ns.size() && j->failed_at_ns[peer] == 0) j->failed_at_ns[peer] = now_ns();
}

// The end of a phase: a fault-tolerant agreement, after which every survivor
// holds the same failed set.
void end_phase(Job& j) {
    int flag = 1;
    weft_status_t st = weft_comm_agree(j.world, &flag);
    if (st == WEFT_ERR_PEER_FAILED) st = weft_comm_validate_global(j.world, nullptr, nullptr);
    if (st != WEFT_OK)
        std::fprintf(stderr, "weft-fabric-check: rank %u: agreement at the end of a phase: %s\n", j.rank,
                     weft_strerror(st));
    size_t count = 0;
    std::vector<uint32_t> ranks(j.size);
    if (weft_comm_get_failed(j.world, WEFT_FAILED_GLOBAL, WEFT_FAILED_ALL, ranks.data(), ranks.size(), &count) ==
        WEFT_OK)
        for (size_t i = 0; i < count; ++i) j.lost[ranks[i]] = 1;
}

// The bytes of one integrity transfer of `len` bytes landing at `remote_off`.
void fill_pattern(int pattern, uint8_t* buf, size_t len, uint64_t remote_off, uint64_t seed, uint32_t origin,
                  uint32_t target) {
    for (size_t i = 0; i < len; i += 8) {
        uint64_t word = 0;
        const uint64_t k = i / 8;
        if (pattern == 0)
            word = 1ull << (k % 64);  // walking ones
        else if (pattern == 1)
            word = mix64(seed ^ (uint64_t(origin) << 48) ^ (uint64_t(target) << 32) ^ (len << 8) ^ k);
        else
            word = (uint64_t(origin) << 48) | (remote_off + i);  // address-in-data: where it should land
        std::memcpy(buf + i, &word, std::min<size_t>(8, len - i));
    }
}

double median(std::vector<double>& v) {
    if (v.empty()) return 0;
    std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
    return v[v.size() / 2];
}

// Origin j.rank against target t: everything a pair checks.
PairResult measure_pair(Job& j, uint32_t t) {
    PairResult r{};
    r.origin = j.rank;
    r.target = t;
    r.measured = 1;
    auto failed = [&](weft_status_t st, const char* what) {
        r.status = st;
        std::snprintf(r.detail, sizeof r.detail, "%s: %s", what, weft_strerror(st));
        return r;
    };
    weft_window_t w = j.win;
    uint64_t stamp = 0;
    if (weft_status_t st = weft_get(w, t, stamp_offset, &stamp, 8); st != WEFT_OK) return failed(st, "connectivity");
    if (stamp != stamp_of(t)) {
        std::snprintf(r.detail, sizeof r.detail, "connectivity: read 0x%016llx from rank %u, expected 0x%016llx",
                      (unsigned long long)stamp, t, (unsigned long long)stamp_of(t));
        return r;
    }
    r.connected = 1;

    const uint64_t region = header_bytes + uint64_t(j.rank) * j.region_bytes;
    for (size_t len = j.opt.min_size; len <= j.opt.max_size; len *= 2) {
        for (uint64_t off : integrity_offsets) {
            for (int p = 0; p < pattern_count; ++p) {
                const uint64_t at = region + off;
                fill_pattern(p, j.out.data(), len, at, j.opt.seed, j.rank, t);
                for (size_t i = 0; i < len; ++i) j.in[i] = uint8_t(~j.out[i]);  // a get that writes nothing fails
                if (weft_status_t st = weft_put(w, t, at, j.out.data(), len); st != WEFT_OK) return failed(st, "put");
                if (weft_status_t st = weft_flush(w, t); st != WEFT_OK) return failed(st, "flush");
                if (r.integrity_checks == 0 && j.corrupt_src == j.rank && j.corrupt_dst == t) {
                    // Test-only fault point: make the target hold a wrong byte.
                    const uint8_t wrong = uint8_t(~j.out[len / 2]);
                    if (weft_status_t st = weft_put(w, t, at + len / 2, &wrong, 1); st != WEFT_OK)
                        return failed(st, "put");
                    if (weft_status_t st = weft_flush(w, t); st != WEFT_OK) return failed(st, "flush");
                }
                if (weft_status_t st = weft_get(w, t, at, j.in.data(), len); st != WEFT_OK) return failed(st, "get");
                ++r.integrity_checks;
                if (std::memcmp(j.in.data(), j.out.data(), len) == 0) continue;
                if (r.integrity_failures++ == 0) {
                    size_t bad = 0;
                    while (j.in[bad] == j.out[bad]) ++bad;
                    std::snprintf(
                        r.detail, sizeof r.detail,
                        "integrity: pattern %s, %zu bytes at offset %llu: byte %zu is 0x%02x, expected 0x%02x",
                        pattern_names[p], len, (unsigned long long)off, bad, j.in[bad], j.out[bad]);
                }
            }
        }
    }

    std::vector<double> samples;
    samples.reserve(size_t(std::max(j.opt.iters, j.opt.bw_iters)));
    uint64_t word = 0;
    for (int i = 0; i < 3; ++i)  // warm-up
        if (weft_status_t st = weft_get(w, t, region, &word, 8); st != WEFT_OK) return failed(st, "latency get");
    for (int i = 0; i < j.opt.iters; ++i) {
        const uint64_t t0 = now_ns();
        if (weft_status_t st = weft_get(w, t, region, &word, 8); st != WEFT_OK) return failed(st, "latency get");
        samples.push_back(double(now_ns() - t0));
    }
    r.lat_us = median(samples) / 1e3;
    samples.clear();
    for (int i = 0; i < j.opt.bw_iters; ++i) {
        const uint64_t t0 = now_ns();
        if (weft_status_t st = weft_put(w, t, region, j.out.data(), j.opt.bw_size); st != WEFT_OK)
            return failed(st, "bandwidth put");
        if (weft_status_t st = weft_flush(w, t); st != WEFT_OK) return failed(st, "bandwidth flush");
        samples.push_back(double(now_ns() - t0));
    }
    const double ns = median(samples);
    r.bw_gbs = ns > 0 ? double(j.opt.bw_size) / ns : 0;  // bytes per ns = GB/s
    return r;
}

void run_pairs(Job& j, std::vector<PairResult>& mine) {
    for (uint32_t o = 0; o < j.size; ++o) {
        j.progress.show("pairs", o, j.size);
        if (j.lost[o] || !j.pair_member[o]) continue;
        if (o == j.rank) {
            weft_fault_point("fabric-check.origin");  // a test kills a rank here (weft-run --fault ...:at=)
            for (uint32_t t = 0; t < j.size; ++t) {
                if (t == o || !j.pair_member[t]) continue;
                if (j.failed(t)) {
                    mine[t] = PairResult{o, t, WEFT_ERR_PEER_FAILED, 1, 0, 0, 0, 0, 0, {}};
                    std::snprintf(mine[t].detail, sizeof mine[t].detail, "rank %u had failed", t);
                    continue;
                }
                mine[t] = measure_pair(j, t);
            }
            for (uint32_t t = 0; t < j.size; ++t)
                if (t != o && !j.failed(t)) weft_am_send(j.ctx, t, am_done, &o, sizeof o);  // a failed t needs none
            continue;
        }
        // Serve: progress weft (emulated atomics, rendezvous) until the origin is done.
        const uint64_t deadline = now_ns() + serve_deadline_ns;
        while (!j.done_from[o] && !j.failed(o) && now_ns() < deadline) weft_wait(j.ctx, 1000000);
        if (!j.done_from[o] && !j.failed(o))
            std::fprintf(stderr, "weft-fabric-check: rank %u: rank %u never finished its pairs\n", j.rank, o);
    }
    j.progress.show("pairs", j.size, j.size);
    end_phase(j);
}

// Every live rank hammers every live rank's fetch-add word, then draws
// tickets from every live rank's ticket word by compare-swap. All ranks visit
// the hosts in the same order, so each word is contended by everyone at once.
void run_atomics(Job& j, AtomicsLocal& a, std::vector<uint64_t>& tickets) {
    const std::vector<uint32_t> live = j.live();
    a.status = WEFT_OK;
    auto note = [&](weft_status_t st, uint32_t host) {
        if (a.status == WEFT_OK) a.status = st, a.failed_host = host;
    };
    for (size_t i = 0; i < live.size(); ++i) {
        j.progress.show("atomics", uint32_t(i), uint32_t(2 * live.size()));
        const uint32_t h = live[i];
        uint64_t old = 0;
        for (int k = 0; k < j.opt.atomic_iters; ++k)
            if (weft_status_t st = weft_atomic_fetch_add(j.win, h, fadd_offset, 1, &old); st != WEFT_OK) {
                note(st, h);
                break;
            }
    }
    for (size_t i = 0; i < live.size(); ++i) {
        j.progress.show("atomics", uint32_t(live.size() + i), uint32_t(2 * live.size()));
        const uint32_t h = live[i];
        uint64_t guess = 0;
        for (int k = 0; k < j.opt.tickets; ++k) {
            // The ticket lock: the value swapped from guess to guess+1 is ours.
            weft_status_t st = WEFT_OK;
            for (uint64_t attempt = 0; attempt < 10000000; ++attempt) {
                uint64_t old = 0;
                st = weft_atomic_compare_swap(j.win, h, ticket_offset, guess, guess + 1, &old);
                if (st != WEFT_OK) break;
                if (old == guess) {
                    tickets[size_t(h) * size_t(j.opt.tickets) + size_t(k)] = guess;
                    ++guess;
                    break;
                }
                guess = old;
            }
            if (st != WEFT_OK) {
                note(st, h);
                break;
            }
        }
    }
    end_phase(j);
    // Everyone is done: read this rank's words through weft (never mixing CPU
    // and NIC atomics on a word).
    weft_status_t st = weft_atomic_fetch_add(j.win, j.rank, fadd_offset, 0, &a.fadd_final);
    if (st == WEFT_OK) st = weft_atomic_fetch_add(j.win, j.rank, ticket_offset, 0, &a.ticket_final);
    if (st != WEFT_OK) note(st, j.rank);
}

// Two rings over the live ranks: rank order and a seeded random order. Each
// rank sends bw_size bytes right and receives from the left, bw_iters times,
// and checks every byte it received.
void run_rings(Job& j, RingLocal& out) {
    std::vector<uint32_t> order = j.live();
    for (int ring = 0; ring < 2; ++ring) {
        j.progress.show("rings", uint32_t(ring), 2);
        if (ring == 1)  // Fisher-Yates with the seed: the same order on every rank
            for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[mix64(j.opt.seed + i) % i]);
        out.status[ring] = WEFT_OK;
        const auto me = std::find(order.begin(), order.end(), j.rank) - order.begin();
        const size_t n = order.size();
        const uint32_t right = order[size_t(me + 1) % n], left = order[(size_t(me) + n - 1) % n];
        out.left[ring] = left;
        const size_t len = j.opt.bw_size;
        fill_pattern(1, j.out.data(), len, 0, j.opt.seed, j.rank, uint32_t(ring));
        fill_pattern(1, j.expect.data(), len, 0, j.opt.seed, left, uint32_t(ring));
        end_phase(j);  // start together
        if (n < 2) continue;
        const uint64_t t0 = now_ns();
        for (int it = 0; it < j.opt.bw_iters; ++it) {
            const uint64_t stamp = uint64_t(it);
            std::memcpy(j.out.data(), &stamp, 8);
            std::memcpy(j.expect.data(), &stamp, 8);
            weft_request_t reqs[2] = {nullptr, nullptr};
            weft_status_t st =
                weft_irecv(j.world, j.in.data(), len, WEFT_BYTE, int32_t(left), tag_ring0 + ring, &reqs[0]);
            if (st == WEFT_OK)
                st = weft_isend(j.world, j.out.data(), len, WEFT_BYTE, right, tag_ring0 + ring, &reqs[1]);
            const weft_status_t done = weft_request_waitall(2, reqs, nullptr);
            if (st == WEFT_OK) st = done;
            if (st != WEFT_OK) {
                out.status[ring] = st;
                break;
            }
            if (std::memcmp(j.in.data(), j.expect.data(), len) != 0) ++out.data_errors[ring];
        }
        const uint64_t elapsed = now_ns() - t0;
        out.gbs[ring] = out.status[ring] == WEFT_OK && elapsed ? double(len) * j.opt.bw_iters / double(elapsed) : 0;
    }
    j.progress.show("rings", 2, 2);
    end_phase(j);
}

// Rank 0 receives one record (or array) from every other live rank; a rank
// that cannot deliver is marked in `got` as missing.
template <typename T>
void gather(Job& j, const T* mine, size_t count, int32_t tag, std::vector<T>& all, std::vector<int>& got) {
    if (j.rank != 0) {
        if (!j.lost[0]) weft_send(j.world, mine, sizeof(T) * count, WEFT_BYTE, 0, tag);
        return;
    }
    all.assign(size_t(j.size) * count, T{});
    got.assign(j.size, 0);
    std::copy(mine, mine + count, all.begin());
    got[0] = 1;
    for (uint32_t r = 1; r < j.size; ++r) {
        if (j.lost[r]) continue;
        weft_msg_status_t status{};
        const weft_status_t st =
            weft_recv(j.world, all.data() + size_t(r) * count, sizeof(T) * count, WEFT_BYTE, int32_t(r), tag, &status);
        got[r] = st == WEFT_OK && status.bytes == sizeof(T) * count;
    }
}

// One rank dies; every survivor times weft's failure notice.
void run_fault_check(Job& j, uint32_t victim, FaultLocal& f) {
    end_phase(j);
    j.progress.show("fault", 0, 1);
    const uint64_t t0 = now_ns();
    if (j.rank == victim) {
        weft_fault_point("fabric-check.fault");  // weft-run --keep-survivors --fault kill:rank=R:at=fabric-check.fault
        std::raise(SIGKILL);                     // or die here, abruptly, without finalize
    }
    const uint64_t bound = uint64_t(j.opt.fault_bound_s * 1e9);
    while (j.failed_at_ns[victim] == 0 && now_ns() - t0 < bound) weft_wait(j.ctx, 1000000);
    const uint64_t at = j.failed_at_ns[victim];
    f.detect_ms = at ? double(at > t0 ? at - t0 : 0) / 1e6 : -1;
    f.detected = at != 0 && at - std::min(at, t0) <= bound;
    j.progress.show("fault", 1, 1);
    end_phase(j);
}

}  // namespace

int run_checks(const Options& opt, Report& rep, uint32_t& rank_out) {
    Job j(opt);
    weft_status_t st = weft_init(&j.ctx);
    if (st != WEFT_OK) {
        std::fprintf(stderr, "weft-fabric-check: weft_init: %s\n", weft_strerror(st));
        return 1;
    }
    weft_rank(j.ctx, &j.rank);
    weft_size(j.ctx, &j.size);
    rank_out = j.rank;
    weft_comm_world(j.ctx, &j.world);
    const uint32_t victim = opt.fault_victim >= 0 ? uint32_t(opt.fault_victim) : j.size - 1;
    if (opt.fault_check && (j.size < 2 || victim >= j.size)) {
        if (j.rank == 0)
            std::fprintf(stderr, "weft-fabric-check: --fault-check needs at least 2 ranks and a victim rank 1..%u\n",
                         j.size ? j.size - 1 : 0);
        weft_finalize(j.ctx);
        return 2;
    }
    if (const char* c = std::getenv("WEFT_FABRIC_CHECK_CORRUPT")) {
        unsigned src = 0, dst = 0;
        char tail = 0;
        if (std::sscanf(c, "%u:%u%c", &src, &dst, &tail) != 2) {
            std::fprintf(stderr, "weft-fabric-check: WEFT_FABRIC_CHECK_CORRUPT='%s': want SRC:DST\n", c);
            weft_finalize(j.ctx);
            return 2;
        }
        j.corrupt_src = src;
        j.corrupt_dst = dst;
    }
    j.progress.on = j.rank == 0 && !opt.quiet && isatty(STDERR_FILENO);
    j.failed_at_ns.assign(j.size, 0);
    j.done_from.assign(j.size, 0);
    j.lost.assign(j.size, 0);
    uint64_t event_id = 0;
    weft_event_register(j.ctx, WEFT_EVENT_PROC_FAILED, on_failure, &j, &event_id);
    weft_am_register(j.ctx, am_done, on_done, &j);

    // Regions hold the largest integrity transfer at the largest offset, or a
    // bandwidth transfer; rounded to 64 bytes.
    const uint64_t need = std::max<uint64_t>(opt.max_size + integrity_offsets[offset_count - 1], opt.bw_size);
    j.region_bytes = (need + 63) / 64 * 64;
    const size_t buffer = std::max(opt.max_size, opt.bw_size);
    j.out.resize(buffer);
    j.in.resize(buffer);
    j.expect.resize(buffer);
    void* base = nullptr;
    st = weft_window_allocate(j.ctx, header_bytes + j.region_bytes * j.size, &base, &j.win);
    if (st != WEFT_OK) {
        std::fprintf(stderr, "weft-fabric-check: rank %u: weft_window_allocate: %s\n", j.rank, weft_strerror(st));
        weft_finalize(j.ctx);
        return 1;
    }
    j.base = static_cast<uint8_t*>(base);
    const uint64_t stamp = stamp_of(j.rank);
    std::memcpy(j.base + stamp_offset, &stamp, 8);  // before anyone reads it: the agreement below orders it
    weft_caps_t caps{};
    weft_query_caps(j.ctx, &caps);
    // Host names: for --per-host, and for the report.
    struct HostName {
        char name[64];
    };
    HostName mine{};
    gethostname(mine.name, sizeof mine.name - 1);
    std::vector<HostName> hosts(j.size);
    st = weft_allgather(j.world, &mine, sizeof mine, WEFT_BYTE, hosts.data());
    if (st != WEFT_OK) {
        std::fprintf(stderr, "weft-fabric-check: rank %u: gathering host names: %s\n", j.rank, weft_strerror(st));
        weft_finalize(j.ctx);
        return 1;
    }
    j.pair_member.assign(j.size, 1);
    if (opt.per_host)
        for (uint32_t r = 0; r < j.size; ++r)
            for (uint32_t q = 0; q < r && j.pair_member[r]; ++q)
                if (std::strcmp(hosts[q].name, hosts[r].name) == 0) j.pair_member[r] = 0;
    end_phase(j);

    std::vector<PairResult> pairs(j.size);
    run_pairs(j, pairs);
    AtomicsLocal atomics{};
    std::vector<uint64_t> tickets(size_t(j.size) * size_t(opt.tickets), UINT64_MAX);
    const bool atomics_usable = caps.atomics != WEFT_ATOMICS_NONE;
    if (atomics_usable) run_atomics(j, atomics, tickets);
    RingLocal rings{};
    run_rings(j, rings);

    gather(j, pairs.data(), pairs.size(), tag_pairs, rep.pairs, rep.rank_lost);
    std::vector<int> got;
    gather(j, &atomics, 1, tag_atomics, rep.atomics, rep.atomics_reported);
    std::vector<uint64_t> all_tickets;
    gather(j, tickets.data(), tickets.size(), tag_tickets, all_tickets, got);
    gather(j, &rings, 1, tag_rings, rep.rings, rep.rings_reported);
    if (j.rank == 0) {
        for (uint32_t r = 0; r < j.size; ++r) rep.rank_lost[r] = !rep.rank_lost[r];  // got -> lost
        rep.tickets.assign(j.size, {});
        for (uint32_t r = 0; r < j.size; ++r)
            rep.tickets[r].assign(all_tickets.begin() + ptrdiff_t(r * tickets.size()),
                                  all_tickets.begin() + ptrdiff_t((r + 1) * tickets.size()));
        if (!atomics_usable) rep.atomics_reported.assign(j.size, 0);
    }
    if (opt.fault_check && j.lost[victim] && j.rank == 0)
        std::fprintf(stderr, "weft-fabric-check: fault check not run: rank %u had already failed\n", victim);
    if (opt.fault_check && !j.lost[victim]) {  // a victim already lost is reported as a failure instead
        FaultLocal fault{};
        run_fault_check(j, victim, fault);
        gather(j, &fault, 1, tag_fault, rep.fault, rep.fault_reported);
        rep.fault_ran = true;
        rep.fault_victim = victim;
    }
    j.progress.finish();
    if (j.rank == 0) {
        rep.size = j.size;
        for (uint32_t r = 0; r < j.size; ++r) {
            rep.hosts.push_back(hosts[r].name);
            if (j.pair_member[r]) rep.pair_ranks.push_back(r);
        }
        rep.transport = caps.transport ? caps.transport : "?";
        rep.atomics_kind = caps.atomics == WEFT_ATOMICS_CPU        ? "cpu"
                           : caps.atomics == WEFT_ATOMICS_HARDWARE ? "nic"
                           : caps.atomics == WEFT_ATOMICS_EMULATED ? "emulated"
                                                                   : "none";
        // A rank lost after it reported (the fault check's victim) is lost too.
        for (uint32_t r = 0; r < j.size; ++r) rep.rank_lost[r] = rep.rank_lost[r] || j.lost[r];
    }
    end_phase(j);  // leave together: rank 0 exiting 1 early would make weft-run kill the rest
    bool anyone_lost = false;
    for (int l : j.lost) anyone_lost = anyone_lost || l;
    if (!anyone_lost) weft_window_free(j.win);  // collective: only when every rank is there
    weft_event_deregister(j.ctx, event_id);
    weft_finalize(j.ctx);
    return 0;
}

}  // namespace fabric
