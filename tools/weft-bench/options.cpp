// options.cpp — parse_options: weft-bench's flags, each value checked
// (sizes powers of two within 1 B..4 MiB, counts positive, known test names,
// writable-looking output paths), with exit status 2 and a message naming
// the flag on any error.
#include "options.hpp"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <unistd.h>

namespace weft_bench {

const char* const test_names[t_count] = {
    "put",     "get",     "fadd",  "cswap",     "swap",      "am",   "send",  "put_bw", "am_bw",
    "send_bw", "barrier", "bcast", "allreduce", "allgather", "comm", "group", "drain",  "fault",
};

namespace {

void usage(std::FILE* out) {
    std::fputs(
        "weft-bench: latency, bandwidth and message rate of weft's operations (perftest/OSU style)\n"
        "usage: weft-run -n N [--transport shm|ucx|verbs] weft-bench [options]\n"
        "  -m MIN:MAX        message sizes, powers of two from 1 to 4194304 bytes (default 1:4194304);\n"
        "                    atomics are 8 bytes only\n"
        "  -i N              timed iterations per row (default 1000; rows above 64 KiB scale it down)\n"
        "  -x N              warm-up iterations per row, not timed (default 100)\n"
        "  -W N              outstanding operations in the bandwidth rows (default 64)\n"
        "  --sample-every N  the latency rows time 1 iteration in N (default 1: every one, as perftest);\n"
        "                    the rest run untimed, as bench/'s Google Benchmark p50 (N = 16) does\n"
        "  -t LIST           comma-separated tests (default all but fault): put,get,fadd,cswap,swap,am,\n"
        "                    send,put_bw,am_bw,send_bw,barrier,bcast,allreduce,allgather,comm,group,drain,\n"
        "                    fault (kills a rank: weft-run --keep-survivors --fault\n"
        "                    kill:rank=R:at=weft-bench.victim, R > 0; time to each survivor's notice)\n"
        "  --rank-sweep      collectives, comm and group rows also on the first 2, 4, 8, ... ranks\n"
        "                    (a communicator split off the world), then on all N\n"
        "  --json FILE       also write the rows as JSON\n"
        "  --csv FILE        also write the rows as CSV\n"
        "  --plot FILE.svg|FILE.png\n"
        "                    draw latency-vs-size and bandwidth-vs-size (log-log): SVG by weft-bench's\n"
        "                    own renderer; PNG from that SVG by rsvg-convert (librsvg2-bin)\n"
        "  --compare ucx_perftest\n"
        "                    after weft's rows, run ucx_perftest over loopback with the same sizes,\n"
        "                    iterations and UCX_TLS, and add its median and a ratio column\n"
        "  --compare mpi     after weft's rows, run the OSU Micro-Benchmarks under Open MPI\n"
        "                    (mpirun.openmpi, ob1 over vader; OSU from $WEFT_OSU_DIR or\n"
        "                    ~/.cache/weft-anchors/osu-openmpi) with the same sizes, iterations, warm-up\n"
        "                    and ranks, and add OSU's average and weft's mean over it\n"
        "  --compare perftest\n"
        "                    after weft's rows on verbs, run Debian's perftest (ib_write_lat, ib_read_lat,\n"
        "                    ib_send_lat, ib_atomic_lat, ib_write_bw, ib_send_bw) over loopback on the device\n"
        "                    and GID weft used, with the same sizes and iterations, and add its median\n"
        "                    (t_typical) and a ratio column\n"
        "  -h, --help        print this and exit\n"
        "Point-to-point rows run between ranks 0 and 1 (others wait); collectives on every rank.\n"
        "Latency in microseconds: 'half' = half a round trip (perftest's write/send), 'full' = a\n"
        "full round trip (read/atomic), 'op' = per operation of a window, 'call' = per call,\n"
        "'round' = one drain observation round, 'event' = from a kill to a survivor's notice.\n"
        "Exit status: 0, 1 if weft fails, any data check fails or a --compare baseline could not run\n"
        "(its reason on stderr, its columns n/a), 2 for a bad argument.\n",
        out);
}

[[noreturn]] void bad(const char* flag, const char* why, const char* value) {
    std::fprintf(stderr, "weft-bench: %s %s: %s (--help for usage)\n", flag, value ? value : "", why);
    std::exit(2);
}

uint64_t parse_count(const char* flag, const char* s, uint64_t min) {
    if (!s) bad(flag, "needs a value", nullptr);
    char* end = nullptr;
    errno = 0;
    const unsigned long long v = std::strtoull(s, &end, 10);
    if (errno || end == s || *end || s[0] == '-' || v < min || v > 100000000ull)
        bad(flag, min ? "not a count from 1 to 100000000" : "not a count from 0 to 100000000", s);
    return v;
}

uint64_t parse_size(const char* flag, const char* s, const char* whole) {
    char* end = nullptr;
    errno = 0;
    const unsigned long long v = std::strtoull(s, &end, 10);
    if (errno || end == s || *end || s[0] == '-') bad(flag, "expected MIN:MAX in bytes", whole);
    if (v == 0 || (v & (v - 1)) || v > max_message) bad(flag, "sizes must be powers of two from 1 to 4194304", whole);
    return v;
}

uint32_t parse_tests(const char* flag, const char* s) {
    if (!s || !*s) bad(flag, "needs a list of tests", s);
    uint32_t mask = 0;
    std::string list = s;
    size_t at = 0;
    while (at <= list.size()) {
        const size_t comma = list.find(',', at);
        const std::string name = list.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
        bool found = false;
        for (uint32_t t = 0; t < t_count; ++t)
            if (name == test_names[t]) {
                mask |= 1u << t;
                found = true;
            }
        if (!found) {
            std::fprintf(stderr, "weft-bench: %s: unknown test '%s' (--help lists them)\n", flag, name.c_str());
            std::exit(2);
        }
        if (comma == std::string::npos) break;
        at = comma + 1;
    }
    return mask;
}

// An output file is written at the end of the run: refuse at once a path
// whose directory is missing or not writable, rather than after the work.
const char* writable(const char* flag, const char* path) {
    const std::string p = path;
    const size_t slash = p.rfind('/');
    const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : p.substr(0, slash);
    if (p.empty() || p.back() == '/') bad(flag, "needs a file name", path);
    if (access(dir.c_str(), W_OK) != 0) bad(flag, "its directory does not exist or is not writable", path);
    return path;
}

bool ends_with(const std::string& s, const char* tail) {
    const size_t n = std::strlen(tail);
    return s.size() >= n && s.compare(s.size() - n, n, tail) == 0;
}

}  // namespace

std::string path_of(const char* program) {
    const char* path = std::getenv("PATH");
    std::string dirs = path ? path : "/usr/bin:/bin";
    size_t at = 0;
    while (at <= dirs.size()) {
        const size_t colon = dirs.find(':', at);
        const std::string dir = dirs.substr(at, colon == std::string::npos ? std::string::npos : colon - at);
        const std::string candidate = (dir.empty() ? "." : dir) + "/" + program;
        if (access(candidate.c_str(), X_OK) == 0) return candidate;
        if (colon == std::string::npos) break;
        at = colon + 1;
    }
    return "";
}

bool on_path(const char* program) { return !path_of(program).empty(); }

Options parse_options(int argc, char** argv) {
    for (int i = 1; i < argc; ++i)
        if (!std::strcmp(argv[i], "-h") || !std::strcmp(argv[i], "--help")) {
            usage(stdout);
            std::exit(0);
        }
    Options o;
    for (int i = 1; i < argc; ++i) {
        const char* a = argv[i];
        const char* v = i + 1 < argc ? argv[i + 1] : nullptr;
        auto value = [&]() -> const char* {
            if (!v) bad(a, "needs a value", nullptr);
            ++i;
            return v;
        };
        if (!std::strcmp(a, "-i")) {
            o.iterations = parse_count(a, value(), 1);
        } else if (!std::strcmp(a, "-x")) {
            o.warmup = parse_count(a, value(), 0);
        } else if (!std::strcmp(a, "-W")) {
            o.window = parse_count(a, value(), 1);
            if (o.window > 4096) bad(a, "at most 4096", v);
        } else if (!std::strcmp(a, "--sample-every")) {
            o.sample_every = parse_count(a, value(), 1);
            if (o.sample_every > 1024) bad(a, "at most 1024", v);
        } else if (!std::strcmp(a, "-m")) {
            const char* s = value();
            const char* colon = std::strchr(s, ':');
            if (!colon) bad(a, "expected MIN:MAX in bytes", s);
            const std::string lo(s, colon);
            o.min_size = parse_size(a, lo.c_str(), s);
            o.max_size = parse_size(a, colon + 1, s);
            if (o.min_size > o.max_size) bad(a, "MIN is larger than MAX", s);
        } else if (!std::strcmp(a, "-t")) {
            o.tests = parse_tests(a, value());
        } else if (!std::strcmp(a, "--rank-sweep")) {
            o.rank_sweep = true;
        } else if (!std::strcmp(a, "--json")) {
            o.json = writable(a, value());
        } else if (!std::strcmp(a, "--csv")) {
            o.csv = writable(a, value());
        } else if (!std::strcmp(a, "--plot")) {
            o.plot = writable(a, value());
            if (ends_with(o.plot, ".png")) {
                if (!on_path("rsvg-convert"))
                    bad(a,
                        "a PNG needs rsvg-convert (Debian: librsvg2-bin), which is not on PATH; FILE.svg needs nothing",
                        v);
            } else if (!ends_with(o.plot, ".svg")) {
                bad(a, "FILE.svg or FILE.png", v);
            }
        } else if (!std::strcmp(a, "--compare")) {
            o.compare = value();
            if (o.compare != "ucx_perftest" && o.compare != "mpi" && o.compare != "perftest")
                bad(a, "expected ucx_perftest, mpi or perftest", v);
        } else {
            std::fprintf(stderr, "weft-bench: unknown option '%s' (--help for usage)\n", a);
            std::exit(2);
        }
    }
    return o;
}

}  // namespace weft_bench
