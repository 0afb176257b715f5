// fabric_check.hpp — the types weft-fabric-check's parts share: its options,
// what each check measured on one rank (sent to rank 0 as plain bytes, so
// every record here is trivially copyable), and the job-wide report rank 0
// assembles, judges and prints (summary, JSON, SVG heat map).
#pragma once

#include <weft/comm.h>
#include <weft/weft.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <type_traits>
#include <vector>

namespace fabric {

struct Options {
    size_t min_size = 8;            // integrity transfer sizes: powers of two MIN..MAX
    size_t max_size = 65536;        //
    int iters = 50;                 // latency samples per pair (8-byte get round trips)
    int bw_iters = 8;               // bandwidth samples per pair and ring exchanges
    size_t bw_size = 1 << 20;       // bytes per bandwidth transfer
    double lat_tolerance = 1.5;     // flag a pair slower than this x the median latency
    double bw_tolerance = 1.5;      // flag a pair below the median bandwidth / this
    bool fail_on_outliers = false;  // outliers fail the verdict (default: reported only)
    int atomic_iters = 100;         // fetch-adds per rank on each rank's word
    int tickets = 16;               // compare-swap tickets per rank from each rank's lock
    std::string json_path;          // --json FILE
    std::string heatmap_path;       // --heatmap FILE.svg
    bool fault_check = false;       // kill one rank, every survivor must notice
    int64_t fault_victim = -1;      // -1: the last rank
    double fault_bound_s = 10;      // survivors must notice within this
    uint64_t seed = 1;              // random patterns and the random ring
    bool quiet = false;             // no progress bar
    bool per_host = false;          // pairs among one rank per host only
};

enum class ParseOutcome { run, help, bad };
// Fills opt from argv; on a bad argument sets error (naming it).
ParseOutcome parse_options(int argc, char** argv, Options& opt, std::string& error);
void usage(std::FILE* out);

// Integrity patterns, in the order the checks run them.
constexpr const char* pattern_names[] = {"walking-ones", "random", "address-in-data"};
constexpr int pattern_count = 3;
// Offsets into the target's region: aligned and not.
constexpr uint64_t integrity_offsets[] = {0, 1, 3, 61};
constexpr int offset_count = 4;

// One ordered pair origin -> target, as the origin measured it.
struct PairResult {
    uint32_t origin, target;
    int32_t status;      // first weft error on the pair (WEFT_OK = none)
    uint32_t measured;   // 1 once the origin ran the pair
    uint32_t connected;  // 1 = the target's stamp came back by get
    uint32_t integrity_checks, integrity_failures;
    double lat_us;     // median 8-byte get round trip
    double bw_gbs;     // bw_size / median put+flush time
    char detail[192];  // the first failure, human readable ("" = none)
};

// What one rank learned in the atomics phase: the final values of the two
// words it hosts, and the tickets it drew from every host's lock.
struct AtomicsLocal {
    int32_t status;         // first weft error (WEFT_OK = none)
    uint32_t failed_host;   // the host that error came from
    uint64_t fadd_final;    // this rank's fetch-add word after everyone added
    uint64_t ticket_final;  // this rank's ticket word after everyone drew
};

// One rank's view of the two rings (0: rank order, 1: seeded random order).
struct RingLocal {
    double gbs[2];            // received bytes / time, per ring
    int32_t status[2];        // first weft error per ring
    uint32_t data_errors[2];  // messages that arrived with wrong bytes
    uint32_t left[2];         // the rank it received from
};

struct FaultLocal {
    int32_t detected;  // 1 = the failure notice arrived within the bound
    double detect_ms;  // from the end of the agreement before the kill
};

static_assert(std::is_trivially_copyable_v<PairResult> && std::is_trivially_copyable_v<AtomicsLocal> &&
              std::is_trivially_copyable_v<RingLocal> && std::is_trivially_copyable_v<FaultLocal>);

// The job-wide picture rank 0 assembles.
struct Report {
    uint32_t size = 0;
    std::string transport, atomics_kind;
    std::vector<PairResult> pairs;     // size*size, [origin*size + target]; the diagonal is unused
    std::vector<uint32_t> pair_ranks;  // the ranks that measured pairs (all, or one per host), ascending
    std::vector<std::string> hosts;    // each rank's host name
    std::vector<int> rank_lost;        // 1 = the rank failed during the run (or never reported)
    std::vector<AtomicsLocal> atomics;
    std::vector<std::vector<uint64_t>> tickets;  // [drawer][host*tickets + k], UINT64_MAX = not drawn
    std::vector<int> atomics_reported;
    std::vector<RingLocal> rings;
    std::vector<int> rings_reported;
    bool fault_ran = false;
    uint32_t fault_victim = 0;
    std::vector<FaultLocal> fault;
    std::vector<int> fault_reported;
};

// Judgement of a report: outliers and every failure, as lines naming the pair.
struct Verdict {
    double lat_median_us = 0, bw_median_gbs = 0;
    std::vector<int> lat_flag, bw_flag;  // size*size
    std::vector<std::string> failures;   // each names its pair or rank
    std::vector<std::string> outliers;
    // Atomics, per host: expected and found, lost and duplicated tickets.
    std::vector<uint64_t> fadd_expected, ticket_expected, tickets_lost, tickets_duplicated;
    std::vector<uint32_t> live_ranks;  // ranks that did not fail
    bool pass = false;
};

// Runs every check on this rank (weft_init to weft_finalize). On rank 0, rep
// holds the job's results after. Returns the exit status so far: 0, 1 when
// weft could not start, 2 for a bad run-time argument.
int run_checks(const Options& opt, Report& rep, uint32_t& rank);

Verdict judge(const Options& opt, const Report& rep);
void print_summary(std::FILE* out, const Options& opt, const Report& rep, const Verdict& v);
// Each returns false (with a message on stderr) when the file cannot be written.
bool write_json(const std::string& path, const Options& opt, const Report& rep, const Verdict& v);
bool write_heatmap(const std::string& path, const Report& rep, const Verdict& v);
// Closes an output file; false (with a message naming path) when a write failed.
bool close_output(std::FILE* f, const std::string& path);

// splitmix64: the seeded stream of the random pattern and the random ring.
inline uint64_t mix64(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

}  // namespace fabric
