// options.cpp — weft-fabric-check's command line: every value is checked
// here, before weft starts, so a bad one is a message on stderr and exit 2
// on every rank instead of a half-started job.
#include "fabric_check.hpp"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <unistd.h>

namespace fabric {

void usage(std::FILE* out) {
    std::fprintf(out,
                 "weft-fabric-check: validate a fabric through weft, pair by pair, under weft-run or a PMIx launcher\n"
                 "usage: weft-run -n N weft-fabric-check [options]\n"
                 "For every ordered pair of ranks: connectivity, RMA integrity (walking ones, seeded random,\n"
                 "address-in-data; every size MIN..MAX in powers of two, at offsets 0, 1, 3 and 61), 8-byte get\n"
                 "latency and put bandwidth; then atomics under contention (every rank fetch-adds every rank's\n"
                 "word: exact sums; a compare-swap ticket lock on every rank: no ticket lost or duplicated),\n"
                 "ring and random-ring bandwidth, and with --fault-check a killed rank every survivor must notice.\n"
                 "Rank 0 prints the summary; the exit status is 1 when a check fails (the bad pair is named).\n"
                 "options:\n"
                 "  --sizes MIN:MAX       integrity transfer sizes in bytes, K/M suffixes (default 8:64K)\n"
                 "  --iters N             latency samples per pair (default 50)\n"
                 "  --bw-iters N          bandwidth samples per pair and ring exchanges (default 8)\n"
                 "  --bw-size BYTES       bytes per bandwidth transfer (default 1M)\n"
                 "  --atomic-iters N      fetch-adds per rank on each rank's word (default 100)\n"
                 "  --tickets N           compare-swap tickets per rank from each rank's lock (default 16)\n"
                 "  --lat-tolerance X     flag a pair whose latency exceeds X x the median (default 1.5)\n"
                 "  --bw-tolerance X      flag a pair whose bandwidth is below the median / X (default 1.5)\n"
                 "  --fail-on-outliers    flagged pairs fail the run (default: reported, exit status unchanged)\n"
                 "  --per-host            measure pairs between one rank per host only (the lowest rank of each);\n"
                 "                        the other ranks still take part in the atomics and rings\n"
                 "  --json FILE           write the JSON report to FILE\n"
                 "  --heatmap FILE        write the latency and bandwidth matrices as an SVG heat map\n"
                 "  --fault-check         after the checks, one rank dies; every survivor must get weft's failure\n"
                 "                        notice within the bound (run weft-run with --keep-survivors)\n"
                 "  --fault-victim R      the rank that dies (default: the last; not 0, which reports)\n"
                 "  --fault-bound SEC     the detection bound (default 10)\n"
                 "  --seed N              seed of the random pattern and the random ring (default 1)\n"
                 "  --quiet               no progress bar (it is shown only when stderr is a terminal)\n"
                 "  -h, --help            print this and exit\n"
                 "Exit status: 0 all checks passed, 1 a check failed, 2 a bad command line.\n"
                 "Test-only: WEFT_FABRIC_CHECK_CORRUPT=SRC:DST flips a byte of what DST holds for pair SRC->DST\n"
                 "before it is verified (the check must then fail naming SRC->DST).\n");
}

namespace {

// "64", "4K", "1M", "1G" -> bytes.
bool parse_bytes(const char* text, size_t& out) {
    errno = 0;
    char* end = nullptr;
    const unsigned long long v = std::strtoull(text, &end, 10);
    if (errno || end == text || text[0] == '-') return false;
    unsigned long long scale = 1;
    if (*end == 'K' || *end == 'k')
        scale = 1ull << 10, ++end;
    else if (*end == 'M' || *end == 'm')
        scale = 1ull << 20, ++end;
    else if (*end == 'G' || *end == 'g')
        scale = 1ull << 30, ++end;
    if (*end != '\0') return false;
    out = size_t(v * scale);
    return true;
}

bool parse_u64(const char* text, uint64_t& out) {
    errno = 0;
    char* end = nullptr;
    out = std::strtoull(text, &end, 10);
    return !errno && end != text && *end == '\0' && text[0] != '-';
}

bool parse_positive_int(const char* text, int max, int& out) {
    uint64_t v = 0;
    if (!parse_u64(text, v) || v == 0 || v > uint64_t(max)) return false;
    out = int(v);
    return true;
}

bool parse_double(const char* text, double& out) {
    errno = 0;
    char* end = nullptr;
    out = std::strtod(text, &end);
    return !errno && end != text && *end == '\0' && std::isfinite(out);
}

}  // namespace

ParseOutcome parse_options(int argc, char** argv, Options& opt, std::string& error) {
    constexpr size_t max_transfer = size_t(64) << 20;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "-h" || a == "--help") return ParseOutcome::help;
        if (a == "--fault-check") {
            opt.fault_check = true;
            continue;
        }
        if (a == "--quiet") {
            opt.quiet = true;
            continue;
        }
        if (a == "--per-host") {
            opt.per_host = true;
            continue;
        }
        if (a == "--fail-on-outliers") {
            opt.fail_on_outliers = true;
            continue;
        }
        static const char* const with_value[] = {"--sizes",        "--iters",   "--bw-iters",      "--bw-size",
                                                 "--atomic-iters", "--tickets", "--lat-tolerance", "--bw-tolerance",
                                                 "--json",         "--heatmap", "--fault-victim",  "--fault-bound",
                                                 "--seed"};
        bool known = false;
        for (const char* name : with_value) known = known || a == name;
        if (!known) {
            error = "unknown argument '" + a + "'";
            return ParseOutcome::bad;
        }
        if (i + 1 >= argc) {
            error = a + " needs a value";
            return ParseOutcome::bad;
        }
        const char* v = argv[++i];
        const std::string bad = a + ": bad value '" + v + "'";
        bool ok = true;
        if (a == "--sizes") {
            const char* colon = std::strchr(v, ':');
            std::string lo = colon ? std::string(v, colon) : std::string(v);
            ok = colon && parse_bytes(lo.c_str(), opt.min_size) && parse_bytes(colon + 1, opt.max_size) &&
                 opt.min_size >= 1 && opt.min_size <= opt.max_size && opt.max_size <= max_transfer;
            if (!ok) error = bad + " (want MIN:MAX bytes, 1 <= MIN <= MAX <= 64M)";
        } else if (a == "--iters") {
            ok = parse_positive_int(v, 1000000, opt.iters);
        } else if (a == "--bw-iters") {
            ok = parse_positive_int(v, 100000, opt.bw_iters);
        } else if (a == "--bw-size") {
            ok = parse_bytes(v, opt.bw_size) && opt.bw_size >= 8 && opt.bw_size <= max_transfer;
            if (!ok) error = bad + " (want 8 to 64M bytes)";
        } else if (a == "--atomic-iters") {
            ok = parse_positive_int(v, 1000000, opt.atomic_iters);
        } else if (a == "--tickets") {
            ok = parse_positive_int(v, 100000, opt.tickets);
        } else if (a == "--lat-tolerance" || a == "--bw-tolerance") {
            double x = 0;
            ok = parse_double(v, x) && x >= 1.0;
            if (!ok) error = bad + " (want a number >= 1)";
            (a == "--lat-tolerance" ? opt.lat_tolerance : opt.bw_tolerance) = x;
        } else if (a == "--json") {
            opt.json_path = v;
            ok = !opt.json_path.empty();
        } else if (a == "--heatmap") {
            opt.heatmap_path = v;
            ok = !opt.heatmap_path.empty();
        } else if (a == "--fault-victim") {
            uint64_t r = 0;
            ok = parse_u64(v, r) && r >= 1 && r < (1u << 24);
            if (!ok) error = bad + " (want a rank >= 1: rank 0 reports)";
            opt.fault_victim = int64_t(r);
        } else if (a == "--fault-bound") {
            ok = parse_double(v, opt.fault_bound_s) && opt.fault_bound_s > 0 && opt.fault_bound_s <= 3600;
            if (!ok) error = bad + " (want seconds, 0 < SEC <= 3600)";
        } else if (a == "--seed") {
            ok = parse_u64(v, opt.seed);
        }
        if (!ok) {
            if (error.empty()) error = bad;
            return ParseOutcome::bad;
        }
    }
    // Output files are written at the end, by rank 0: find an unwritable
    // folder now, on every rank, rather than after the whole run.
    for (const std::string* path : {&opt.json_path, &opt.heatmap_path}) {
        if (path->empty()) continue;
        const size_t slash = path->rfind('/');
        const std::string folder = slash == std::string::npos ? "." : slash == 0 ? "/" : path->substr(0, slash);
        if (access(folder.c_str(), W_OK) != 0) {
            error = "cannot write " + *path + ": " + folder + ": " + std::strerror(errno);
            return ParseOutcome::bad;
        }
    }
    if (opt.fault_victim >= 0 && !opt.fault_check) {
        error = "--fault-victim needs --fault-check";
        return ParseOutcome::bad;
    }
    return ParseOutcome::run;
}

}  // namespace fabric
