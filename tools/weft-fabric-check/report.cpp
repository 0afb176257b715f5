// report.cpp — rank 0's judgement of what the ranks found (every failure as
// a line naming its pair or rank; latency and bandwidth outliers against the
// median, as ClusterKit flags them), the human summary and the JSON report.
#include "fabric_check.hpp"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cinttypes>
#include <cmath>
#include <cstdarg>
#include <cstring>
#include <map>
#include <string>

namespace fabric {

namespace {

std::string format(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
std::string format(const char* fmt, ...) {
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    return buf;
}

double median_of(std::vector<double> v) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

const char* ring_names[] = {"ring", "random ring"};

}  // namespace

Verdict judge(const Options& opt, const Report& rep) {
    Verdict v;
    const uint32_t n = rep.size;
    v.lat_flag.assign(size_t(n) * n, 0);
    v.bw_flag.assign(size_t(n) * n, 0);
    auto victim = [&](uint32_t r) { return rep.fault_ran && r == rep.fault_victim; };
    for (uint32_t r = 0; r < n; ++r) {
        if (!rep.rank_lost[r] || victim(r)) v.live_ranks.push_back(r);
        if (rep.rank_lost[r] && !victim(r)) v.failures.push_back(format("rank %u failed during the run", r));
    }

    // Pairs.
    std::vector<double> lats, bws;
    for (uint32_t o : rep.pair_ranks) {
        bool origin_reported = false;
        for (uint32_t t : rep.pair_ranks) origin_reported = origin_reported || rep.pairs[size_t(o) * n + t].measured;
        if (!origin_reported && rep.pair_ranks.size() > 1) {
            v.failures.push_back(format("pairs %u->*: not measured (rank %u did not report)", o, o));
            continue;
        }
        for (uint32_t t : rep.pair_ranks) {
            if (t == o) continue;
            const PairResult& p = rep.pairs[size_t(o) * n + t];
            if (p.status != WEFT_OK || !p.connected)
                v.failures.push_back(format("pair %u->%u: %s", o, t, p.detail));
            else if (p.integrity_failures)
                v.failures.push_back(format("pair %u->%u: %u of %u transfers corrupted; first: %s", o, t,
                                            p.integrity_failures, p.integrity_checks, p.detail));
            if (p.status == WEFT_OK && p.connected) lats.push_back(p.lat_us), bws.push_back(p.bw_gbs);
        }
    }
    v.lat_median_us = median_of(lats);
    v.bw_median_gbs = median_of(bws);
    for (uint32_t o : rep.pair_ranks)
        for (uint32_t t : rep.pair_ranks) {
            const PairResult& p = rep.pairs[size_t(o) * n + t];
            if (t == o || p.status != WEFT_OK || !p.connected) continue;
            const size_t i = size_t(o) * n + t;
            if (p.lat_us > opt.lat_tolerance * v.lat_median_us) {
                v.lat_flag[i] = 1;
                v.outliers.push_back(format("pair %u->%u: latency %.3f us > %.2g x median %.3f us", o, t, p.lat_us,
                                            opt.lat_tolerance, v.lat_median_us));
            }
            if (p.bw_gbs < v.bw_median_gbs / opt.bw_tolerance) {
                v.bw_flag[i] = 1;
                v.outliers.push_back(format("pair %u->%u: bandwidth %.3f GB/s < median %.3f GB/s / %.2g", o, t,
                                            p.bw_gbs, v.bw_median_gbs, opt.bw_tolerance));
            }
        }

    // Atomics: every rank that reported took part, and hosted two words.
    std::vector<uint32_t> part;
    for (uint32_t r = 0; r < n; ++r)
        if (!rep.atomics_reported.empty() && rep.atomics_reported[r]) part.push_back(r);
    v.fadd_expected.assign(n, 0);
    v.ticket_expected.assign(n, 0);
    v.tickets_lost.assign(n, 0);
    v.tickets_duplicated.assign(n, 0);
    const uint64_t k = uint64_t(opt.tickets);
    for (uint32_t h : part) {
        const AtomicsLocal& a = rep.atomics[h];
        v.fadd_expected[h] = part.size() * uint64_t(opt.atomic_iters);
        v.ticket_expected[h] = part.size() * k;
        if (a.fadd_final != v.fadd_expected[h])
            v.failures.push_back(format("atomics: rank %u's fetch-add word holds %" PRIu64 ", expected %" PRIu64
                                        " (%zu ranks x %d)",
                                        h, a.fadd_final, v.fadd_expected[h], part.size(), opt.atomic_iters));
        if (a.ticket_final != v.ticket_expected[h])
            v.failures.push_back(format("atomics: rank %u's ticket word holds %" PRIu64 ", expected %" PRIu64, h,
                                        a.ticket_final, v.ticket_expected[h]));
        // Who drew each ticket of host h: exactly one drawer per ticket 0..P*k-1.
        std::map<uint64_t, std::vector<uint32_t>> drawers;
        for (uint32_t r : part)
            for (uint64_t i = 0; i < k; ++i) {
                const uint64_t ticket = rep.tickets[r][size_t(h * k + i)];
                if (ticket != UINT64_MAX) drawers[ticket].push_back(r);
            }
        std::string first_dup;
        for (const auto& [ticket, who] : drawers)
            if (who.size() > 1) {
                v.tickets_duplicated[h] += who.size() - 1;
                if (first_dup.empty())
                    first_dup = format("ticket %" PRIu64 " drawn by ranks %u and %u", ticket, who[0], who[1]);
            }
        for (uint64_t t = 0; t < v.ticket_expected[h]; ++t) v.tickets_lost[h] += drawers.count(t) == 0;
        if (v.tickets_lost[h] || v.tickets_duplicated[h])
            v.failures.push_back(
                format("atomics: rank %u's ticket lock: %" PRIu64 " ticket(s) lost, %" PRIu64 " duplicated%s%s", h,
                       v.tickets_lost[h], v.tickets_duplicated[h], first_dup.empty() ? "" : "; ", first_dup.c_str()));
    }
    for (uint32_t r : part)
        if (rep.atomics[r].status != WEFT_OK)
            v.failures.push_back(format("atomics: pair %u->%u: %s", r, rep.atomics[r].failed_host,
                                        weft_strerror(weft_status_t(rep.atomics[r].status))));

    // Rings.
    for (int ring = 0; ring < 2; ++ring) {
        std::vector<double> gbs;
        for (uint32_t r = 0; r < n; ++r) {
            if (rep.rings_reported.empty() || !rep.rings_reported[r]) continue;
            const RingLocal& g = rep.rings[r];
            if (g.status[ring] != WEFT_OK)
                v.failures.push_back(format("%s: pair %u->%u: %s", ring_names[ring], g.left[ring], r,
                                            weft_strerror(weft_status_t(g.status[ring]))));
            else if (g.data_errors[ring])
                v.failures.push_back(format("%s: pair %u->%u: %u message(s) arrived with wrong bytes", ring_names[ring],
                                            g.left[ring], r, g.data_errors[ring]));
            else
                gbs.push_back(g.gbs[ring]);
        }
        const double med = median_of(gbs);
        for (uint32_t r = 0; r < n; ++r)
            if (!rep.rings_reported.empty() && rep.rings_reported[r] && rep.rings[r].status[ring] == WEFT_OK &&
                rep.rings[r].gbs[ring] < med / opt.bw_tolerance)
                v.outliers.push_back(format("%s: pair %u->%u: %.3f GB/s < median %.3f GB/s / %.2g", ring_names[ring],
                                            rep.rings[r].left[ring], r, rep.rings[r].gbs[ring], med, opt.bw_tolerance));
    }

    // Fault check.
    if (rep.fault_ran)
        for (uint32_t r = 0; r < n; ++r) {
            if (victim(r) || (rep.rank_lost[r] && !rep.fault_reported[r])) continue;
            if (!rep.fault_reported[r])
                v.failures.push_back(
                    format("fault check: pair %u->%u: rank %u did not report", r, rep.fault_victim, r));
            else if (!rep.fault[r].detected)
                v.failures.push_back(
                    format("fault check: pair %u->%u: rank %u did not notice rank %u's failure "
                           "within %.3g s",
                           r, rep.fault_victim, r, rep.fault_victim, opt.fault_bound_s));
        }

    if (opt.fail_on_outliers)
        for (const std::string& o : v.outliers) v.failures.push_back("outlier: " + o);
    v.pass = v.failures.empty();
    return v;
}

namespace {

void print_matrix(std::FILE* out, const Report& rep, const std::vector<int>& flags, bool latency) {
    const uint32_t n = rep.size;
    std::fprintf(out, "  %6s", "o\\t");
    for (uint32_t t : rep.pair_ranks) std::fprintf(out, " %9u", t);
    std::fprintf(out, "\n");
    for (uint32_t o : rep.pair_ranks) {
        std::string line = format("  %6u", o);
        for (uint32_t t : rep.pair_ranks) {
            const PairResult& p = rep.pairs[size_t(o) * n + t];
            if (t == o)
                line += format(" %9s", "-");
            else if (p.status != WEFT_OK || !p.connected)
                line += format(" %9s", "FAIL");
            else
                line += format(" %8.3f%c", latency ? p.lat_us : p.bw_gbs, flags[size_t(o) * n + t] ? '*' : ' ');
        }
        line.erase(line.find_last_not_of(' ') + 1);  // no trailing blanks
        std::fprintf(out, "%s\n", line.c_str());
    }
}

}  // namespace

void print_summary(std::FILE* out, const Options& opt, const Report& rep, const Verdict& v) {
    const uint32_t n = rep.size;
    std::fprintf(out,
                 "weft-fabric-check: %u ranks, transport %s (atomics %s), sizes %zu..%zu B, %d latency / %d "
                 "bandwidth samples of %zu B, seed %" PRIu64 "\n",
                 n, rep.transport.c_str(), rep.atomics_kind.c_str(), opt.min_size, opt.max_size, opt.iters,
                 opt.bw_iters, opt.bw_size, opt.seed);
    uint32_t pairs = 0, connected = 0, intact = 0, transfers = 0;
    for (uint32_t o : rep.pair_ranks)
        for (uint32_t t : rep.pair_ranks) {
            if (t == o) continue;
            const PairResult& p = rep.pairs[size_t(o) * n + t];
            ++pairs;
            connected += p.connected;
            intact += p.connected && p.status == WEFT_OK && p.integrity_failures == 0;
            transfers += p.integrity_checks;
        }
    if (rep.pair_ranks.size() != n) {
        std::fprintf(out, "pairs: one rank per host, %zu hosts: ranks", rep.pair_ranks.size());
        for (uint32_t r : rep.pair_ranks) std::fprintf(out, " %u", r);
        std::fprintf(out, "\n");
    }
    std::fprintf(out, "connectivity: %u/%u pairs\n", connected, pairs);
    std::fprintf(out,
                 "integrity: %u/%u pairs intact, %u transfers verified (walking-ones, random, address-in-data; "
                 "offsets 0 1 3 61)\n",
                 intact, pairs, transfers);
    uint32_t hosts = 0;
    for (uint64_t e : v.fadd_expected) hosts += e != 0;
    if (hosts == 0)
        std::fprintf(out, "atomics: not run (atomics %s)\n", rep.atomics_kind.c_str());
    else {
        uint64_t lost = 0, dup = 0;
        for (uint32_t h = 0; h < n; ++h) lost += v.tickets_lost[h], dup += v.tickets_duplicated[h];
        std::fprintf(out,
                     "atomics: %u ranks fetch-added each of %u words %d times; compare-swap ticket locks: %d tickets "
                     "per rank per lock, %" PRIu64 " lost, %" PRIu64 " duplicated\n",
                     hosts, hosts, opt.atomic_iters, opt.tickets, lost, dup);
    }
    std::fprintf(out, "latency (8-byte get round trip, median, us; * = above %.2g x median %.3f us):\n",
                 opt.lat_tolerance, v.lat_median_us);
    print_matrix(out, rep, v.lat_flag, true);
    std::fprintf(out, "bandwidth (%zu-byte put+flush, GB/s; * = below median %.3f / %.2g):\n", opt.bw_size,
                 v.bw_median_gbs, opt.bw_tolerance);
    print_matrix(out, rep, v.bw_flag, false);
    for (int ring = 0; ring < 2; ++ring) {
        std::vector<double> gbs;
        for (uint32_t r = 0; r < n; ++r)
            if (!rep.rings_reported.empty() && rep.rings_reported[r] && rep.rings[r].status[ring] == WEFT_OK)
                gbs.push_back(rep.rings[r].gbs[ring]);
        if (gbs.empty()) continue;
        std::sort(gbs.begin(), gbs.end());
        std::fprintf(out, "%s: %zu ranks, per rank GB/s min %.3f median %.3f max %.3f\n", ring_names[ring], gbs.size(),
                     gbs.front(), gbs[gbs.size() / 2], gbs.back());
    }
    if (rep.fault_ran) {
        std::fprintf(out, "fault check: rank %u killed; detection (ms from the kill's agreement):", rep.fault_victim);
        for (uint32_t r = 0; r < n; ++r) {
            if (r == rep.fault_victim || rep.fault_reported.empty() || !rep.fault_reported[r]) continue;
            if (rep.fault[r].detected)
                std::fprintf(out, " %u:%.1f", r, rep.fault[r].detect_ms);
            else
                std::fprintf(out, " %u:missed", r);
        }
        std::fprintf(out, " (bound %.3g s)\n", opt.fault_bound_s);
    }
    std::fprintf(
        out, "outliers: %zu%s\n", v.outliers.size(),
        v.outliers.empty() ? "" : (opt.fail_on_outliers ? " (failing: --fail-on-outliers)" : " (reported only)"));
    for (const std::string& o : v.outliers) std::fprintf(out, "  %s\n", o.c_str());
    if (v.pass)
        std::fprintf(out, "verdict: PASS\n");
    else {
        std::fprintf(out, "verdict: FAIL (%zu)\n", v.failures.size());
        for (const std::string& f : v.failures) std::fprintf(out, "  FAIL %s\n", f.c_str());
    }
}

namespace {

std::string json_string(const std::string& s) {
    std::string out = "\"";
    for (char c : s) {
        if (c == '"' || c == '\\')
            out += '\\', out += c;
        else if (uint8_t(c) < 0x20)
            out += format("\\u%04x", unsigned(uint8_t(c)));
        else
            out += c;
    }
    return out + "\"";
}

// The shortest text that reads back as the same double, so a reader rounds
// it exactly as the summary did.
std::string json_number(double x) {
    if (!std::isfinite(x)) return "null";
    char buf[32];
    const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, x);
    return ec == std::errc() ? std::string(buf, end) : format("%.17g", x);
}

}  // namespace

bool close_output(std::FILE* f, const std::string& path) {
    const bool ok = std::ferror(f) == 0;
    if (std::fclose(f) != 0 || !ok) {
        std::fprintf(stderr, "weft-fabric-check: writing %s failed\n", path.c_str());
        return false;
    }
    return true;
}

bool write_json(const std::string& path, const Options& opt, const Report& rep, const Verdict& v) {
    std::FILE* f = std::fopen(path.c_str(), "w");
    if (!f) {
        std::fprintf(stderr, "weft-fabric-check: cannot write %s: %s\n", path.c_str(), std::strerror(errno));
        return false;
    }
    const uint32_t n = rep.size;
    std::fprintf(f, "{\n  \"tool\": \"weft-fabric-check\",\n  \"ranks\": %u,\n  \"transport\": %s,\n", n,
                 json_string(rep.transport).c_str());
    std::fprintf(f, "  \"atomics_kind\": %s,\n", json_string(rep.atomics_kind).c_str());
    std::fprintf(f,
                 "  \"options\": {\"min_size\": %zu, \"max_size\": %zu, \"iters\": %d, \"bw_iters\": %d, "
                 "\"bw_size\": %zu, \"atomic_iters\": %d, \"tickets\": %d, \"lat_tolerance\": %s, "
                 "\"bw_tolerance\": %s, \"fail_on_outliers\": %s, \"per_host\": %s, \"seed\": %" PRIu64 "},\n",
                 opt.min_size, opt.max_size, opt.iters, opt.bw_iters, opt.bw_size, opt.atomic_iters, opt.tickets,
                 json_number(opt.lat_tolerance).c_str(), json_number(opt.bw_tolerance).c_str(),
                 opt.fail_on_outliers ? "true" : "false", opt.per_host ? "true" : "false", opt.seed);
    std::fprintf(f, "  \"lost_ranks\": [");
    bool first = true;
    for (uint32_t r = 0; r < n; ++r)
        if (rep.rank_lost[r]) std::fprintf(f, "%s%u", first ? "" : ", ", r), first = false;
    std::fprintf(f, "],\n  \"pair_ranks\": [");
    for (size_t i = 0; i < rep.pair_ranks.size(); ++i) std::fprintf(f, "%s%u", i ? ", " : "", rep.pair_ranks[i]);
    std::fprintf(f, "],\n  \"hosts\": [");
    for (size_t i = 0; i < rep.hosts.size(); ++i)
        std::fprintf(f, "%s%s", i ? ", " : "", json_string(rep.hosts[i]).c_str());
    std::fprintf(f, "],\n  \"latency_median_us\": %s,\n  \"bandwidth_median_gbs\": %s,\n",
                 json_number(v.lat_median_us).c_str(), json_number(v.bw_median_gbs).c_str());
    std::fprintf(f, "  \"pairs\": [");
    first = true;
    for (uint32_t o : rep.pair_ranks)
        for (uint32_t t : rep.pair_ranks) {
            if (t == o) continue;
            const PairResult& p = rep.pairs[size_t(o) * n + t];
            const size_t i = size_t(o) * n + t;
            const bool ok = p.measured && p.status == WEFT_OK && p.connected && p.integrity_failures == 0;
            std::fprintf(f,
                         "%s\n    {\"origin\": %u, \"target\": %u, \"measured\": %s, \"connected\": %s, "
                         "\"status\": %s, \"integrity_checks\": %u, \"integrity_failures\": %u, \"latency_us\": %s, "
                         "\"bandwidth_gbs\": %s, \"latency_outlier\": %s, \"bandwidth_outlier\": %s, \"ok\": %s, "
                         "\"detail\": %s}",
                         first ? "" : ",", o, t, p.measured ? "true" : "false", p.connected ? "true" : "false",
                         json_string(weft_strerror(weft_status_t(p.status))).c_str(), p.integrity_checks,
                         p.integrity_failures, json_number(p.lat_us).c_str(), json_number(p.bw_gbs).c_str(),
                         v.lat_flag[i] ? "true" : "false", v.bw_flag[i] ? "true" : "false", ok ? "true" : "false",
                         json_string(p.detail).c_str());
            first = false;
        }
    std::fprintf(f, "\n  ],\n  \"atomics\": [");
    first = true;
    for (uint32_t h = 0; h < n; ++h) {
        if (v.fadd_expected[h] == 0) continue;
        const AtomicsLocal& a = rep.atomics[h];
        std::fprintf(f,
                     "%s\n    {\"host\": %u, \"fetch_add_expected\": %" PRIu64 ", \"fetch_add_final\": %" PRIu64
                     ", \"tickets_expected\": %" PRIu64 ", \"ticket_word_final\": %" PRIu64
                     ", \"tickets_lost\": %" PRIu64 ", \"tickets_duplicated\": %" PRIu64 ", \"status\": %s}",
                     first ? "" : ",", h, v.fadd_expected[h], a.fadd_final, v.ticket_expected[h], a.ticket_final,
                     v.tickets_lost[h], v.tickets_duplicated[h],
                     json_string(weft_strerror(weft_status_t(a.status))).c_str());
        first = false;
    }
    std::fprintf(f, "\n  ],\n  \"rings\": [");
    first = true;
    for (int ring = 0; ring < 2; ++ring)
        for (uint32_t r = 0; r < n; ++r) {
            if (rep.rings_reported.empty() || !rep.rings_reported[r]) continue;
            const RingLocal& g = rep.rings[r];
            std::fprintf(f,
                         "%s\n    {\"ring\": %s, \"from\": %u, \"to\": %u, \"gbs\": %s, \"status\": %s, "
                         "\"data_errors\": %u}",
                         first ? "" : ",", json_string(ring_names[ring]).c_str(), g.left[ring], r,
                         json_number(g.gbs[ring]).c_str(),
                         json_string(weft_strerror(weft_status_t(g.status[ring]))).c_str(), g.data_errors[ring]);
            first = false;
        }
    std::fprintf(f, "\n  ],\n  \"fault_check\": ");
    if (!rep.fault_ran)
        std::fprintf(f, "null");
    else {
        std::fprintf(f, "{\"victim\": %u, \"bound_s\": %s, \"survivors\": [", rep.fault_victim,
                     json_number(opt.fault_bound_s).c_str());
        first = true;
        for (uint32_t r = 0; r < n; ++r) {
            if (r == rep.fault_victim) continue;
            const bool got = rep.fault_reported[r];
            std::fprintf(f, "%s{\"rank\": %u, \"reported\": %s, \"detected\": %s, \"detect_ms\": %s}",
                         first ? "" : ", ", r, got ? "true" : "false", got && rep.fault[r].detected ? "true" : "false",
                         got ? json_number(rep.fault[r].detect_ms).c_str() : "null");
            first = false;
        }
        std::fprintf(f, "]}");
    }
    std::fprintf(f, ",\n  \"outliers\": [");
    for (size_t i = 0; i < v.outliers.size(); ++i)
        std::fprintf(f, "%s\n    %s", i ? "," : "", json_string(v.outliers[i]).c_str());
    std::fprintf(f, "\n  ],\n  \"failures\": [");
    for (size_t i = 0; i < v.failures.size(); ++i)
        std::fprintf(f, "%s\n    %s", i ? "," : "", json_string(v.failures[i]).c_str());
    std::fprintf(f, "\n  ],\n  \"verdict\": %s\n}\n", v.pass ? "\"pass\"" : "\"fail\"");
    return close_output(f, path);
}

}  // namespace fabric
