// options.hpp — weft-bench's command line: what to measure (-t), over which
// sizes (-m MIN:MAX, powers of two), how often (-i, -x, -W) and where the
// results go (--json, --csv, --plot, --compare). Parsed before weft_init, so
// --help and a bad flag need no launcher; parse_options never starts weft.
#pragma once

#include <cstdint>
#include <string>

namespace weft_bench {

// Every measurement weft-bench can make, in the order it makes them.
enum Test : uint32_t {
    t_put,  // put ping-pong (half a round trip)
    t_get,  // blocking get (full round trip)
    t_fadd,
    t_cswap,
    t_swap,
    t_am,    // active-message ping-pong (half)
    t_send,  // tagged send/recv ping-pong (half)
    t_put_bw,
    t_am_bw,
    t_send_bw,
    t_barrier,
    t_bcast,
    t_allreduce,
    t_allgather,
    t_comm,   // communicator dup and free
    t_group,  // process-group construct and destruct
    t_drain,  // full drain and one observation round
    t_fault,  // a rank killed: time to each survivor's notice (not in the default set)
    t_count
};

// The names -t takes, indexed by Test.
extern const char* const test_names[t_count];

constexpr uint64_t max_message = 4ull << 20;  // 4 MiB, the upper bound

struct Options {
    uint64_t iterations = 1000;
    uint64_t warmup = 100;
    uint64_t window = 64;       // outstanding operations in the bandwidth rows
    uint64_t sample_every = 1;  // the latency rows time 1 iteration in this many
    uint64_t min_size = 1, max_size = max_message;
    uint32_t tests = ((1u << t_count) - 1) & ~(1u << t_fault);  // a bit per Test
    std::string json, csv, plot;
    std::string compare;      // "", "ucx_perftest", "mpi" or "perftest"
    bool rank_sweep = false;  // collectives also on the first 2, 4, 8, ... ranks
};

// A row's warm-up: -x, scaled down above 64 KiB as its iterations are
// (Session::iters_for). Here, not in Session, because --compare mpi gives
// OSU the same warm-up after weft has finalized.
inline uint64_t warmup_for_size(uint64_t warmup, uint64_t bytes) {
    if (bytes <= (64u << 10) || warmup == 0) return warmup;
    const uint64_t scaled = warmup * (64u << 10) / bytes;
    return scaled ? scaled : 1;
}

// The path of `program` in the first directory of $PATH that has it as an
// executable, or "".
std::string path_of(const char* program);
// Whether `program` is an executable in a directory of $PATH.
bool on_path(const char* program);

// Parses argv; on --help prints usage to stdout and exits 0, on a bad flag or
// value prints why to stderr and exits 2.
Options parse_options(int argc, char** argv);

}  // namespace weft_bench
