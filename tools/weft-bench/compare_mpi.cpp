// compare_mpi.cpp — --compare mpi (compare.hpp): the OSU Micro-Benchmarks
// 7.4 under Debian's Open MPI 4.1 beside weft-bench's rows. One mpirun per
// run of rows that share an operation, a rank count, an iteration count, a
// warm-up and (send_bw) a window: rows up to 64 KiB take one run over their
// sizes (-m MIN:MAX); each larger size, whose iterations weft scaled down,
// takes its own, since OSU's -i applies to every size of a run.
//
// What OSU prints, per program (read from OSU 7.4's output, one result line
// per size after '#' comments):
//   osu_latency, osu_put/get_latency   SIZE AVG_US       (no -f)
//   osu_bw                             SIZE MB_S         (MB = 10^6 bytes)
//   osu_fop/cas_latency                4 AVG_US          (-T mpi_int: one size)
//   osu_bcast/allreduce/allgather -f   SIZE AVG_US MIN_US MAX_US ITERATIONS
//   osu_barrier -f                     AVG_US MIN_US MAX_US ITERATIONS
// OSU times each size's whole loop and divides, so the only number every
// program has is the average: base = that average, ratio = weft's mean over
// it (bandwidth rows: µs per message on both sides).
#include "child.hpp"
#include "compare.hpp"
#include "options.hpp"

#include <cstdio>
#include <cstdlib>
#include <map>
#include <sys/stat.h>
#include <unistd.h>

extern char** environ;

namespace weft_bench {

namespace {

// How an OSU program takes weft's parameters and prints its results.
enum class Shape {
    sizes,       // -m MIN:MAX; "SIZE VALUE" per size
    collective,  // -m MIN:MAX -f; "SIZE AVG MIN MAX ITERATIONS" per size
    barrier,     // -f; one line "AVG MIN MAX ITERATIONS"
    atomic,      // one line "4 AVG": the size is the datatype's, not -m's
};

struct OsuTest {
    const char* op;       // weft-bench's row
    const char* program;  // under OSU's mpi/ directory
    Shape shape;
    // Beyond -m, -i, -x and -f. One-sided: the window from MPI_Win_allocate
    // and each operation completed by MPI_Win_flush (OSU's defaults, said
    // explicitly); the atomics and allreduce on MPI_INT, OSU's widest integer
    // type (weft's are 64-bit); OSU's default MPI_CHAR elsewhere.
    const char* extra[6];
};

constexpr OsuTest osu_tests[] = {
    {"send", "pt2pt/osu_latency", Shape::sizes, {}},
    {"send_bw", "pt2pt/osu_bw", Shape::sizes, {}},
    {"put", "one-sided/osu_put_latency", Shape::sizes, {"-w", "allocate", "-s", "flush"}},
    {"get", "one-sided/osu_get_latency", Shape::sizes, {"-w", "allocate", "-s", "flush"}},
    {"fadd", "one-sided/osu_fop_latency", Shape::atomic, {"-w", "allocate", "-s", "flush", "-T", "mpi_int"}},
    {"cswap", "one-sided/osu_cas_latency", Shape::atomic, {"-w", "allocate", "-s", "flush", "-T", "mpi_int"}},
    {"barrier", "collective/osu_barrier", Shape::barrier, {}},
    {"bcast", "collective/osu_bcast", Shape::collective, {}},
    {"allreduce", "collective/osu_allreduce", Shape::collective, {"-T", "mpi_int"}},
    {"allgather", "collective/osu_allgather", Shape::collective, {}},
};

// osu_bw's requests live in a fixed array of MAX_REQ_NUM (1000) entries
// and -W is not checked against it: a larger window would overrun it.
constexpr uint64_t osu_max_window = 1000;

const OsuTest* osu_test_for(const std::string& op) {
    for (const OsuTest& t : osu_tests)
        if (op == t.op) return &t;
    return nullptr;
}

bool is_dir(const std::string& path) {
    struct stat st {};
    return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// OSU's mpi/ directory: $WEFT_OSU_DIR (that directory, or the prefix it was
// installed under), else where .ci/run and build-osu.sh put it.
std::string osu_dir() {
    const char* env = std::getenv("WEFT_OSU_DIR");
    const char* home = std::getenv("HOME");
    std::string dir = env && *env ? env : std::string(home ? home : "") + "/.cache/weft-anchors/osu-openmpi";
    const std::string under_prefix = dir + "/libexec/osu-micro-benchmarks/mpi";
    return is_dir(under_prefix) ? under_prefix : dir;
}

// Each mpirun's bound; WEFT_OSU_TIMEOUT_S (seconds) overrides it.
double run_limit_s() {
    const char* env = std::getenv("WEFT_OSU_TIMEOUT_S");
    const double s = env ? std::strtod(env, nullptr) : 0;
    return s > 0 ? s : 120;
}

// mpirun's environment: ours without what a PMIx launcher around weft-bench
// set for it (PMIX_*, PRTE_*, OMPI_* but the user's OMPI_MCA_* settings),
// which would make mpirun or its ranks take themselves for part of that job.
std::vector<std::string> mpirun_environment() {
    std::vector<std::string> env;
    for (char** e = environ; *e; ++e) {
        const std::string entry = *e;
        const bool launcher = entry.starts_with("PMIX_") || entry.starts_with("PRTE_") ||
                              (entry.starts_with("OMPI_") && !entry.starts_with("OMPI_MCA_"));
        if (!launcher) env.push_back(entry);
    }
    return env;
}

// OSU's result lines: those that are numbers only (not its '#' comments,
// nor a warning Open MPI printed).
std::vector<std::vector<double>> result_lines(const std::string& out) {
    std::vector<std::vector<double>> lines;
    size_t at = 0;
    while (at < out.size()) {
        size_t end = out.find('\n', at);
        if (end == std::string::npos) end = out.size();
        const std::string line = out.substr(at, end - at);
        at = end + 1;
        std::vector<double> nums;
        const char* p = line.c_str();
        bool numeric = true;
        while (*p) {
            while (*p == ' ' || *p == '\t' || *p == '\r') ++p;
            if (!*p) break;
            char* next = nullptr;
            const double v = std::strtod(p, &next);
            if (next == p || (*next && *next != ' ' && *next != '\t' && *next != '\r')) {
                numeric = false;
                break;
            }
            nums.push_back(v);
            p = next;
        }
        if (numeric && !nums.empty()) lines.push_back(nums);
    }
    return lines;
}

// What a run of rows needs to be one OSU run: the same program, ranks,
// iterations, warm-up and window.
bool same_run(const Row& a, const Row& b, uint64_t warmup) {
    return a.op == b.op && a.ranks == b.ranks && a.iters == b.iters && a.window == b.window &&
           warmup_for_size(warmup, a.bytes) == warmup_for_size(warmup, b.bytes);
}

struct Setup {
    std::string mpirun, taskset, dir;
    std::vector<std::string> env;
    const std::vector<std::string>* cpus;
    double limit_s;
};

// The mpirun command of one OSU run over rows [first, last].
std::vector<std::string> command(const Setup& s, const OsuTest& t, const Row& first, const Row& last, uint64_t warm) {
    std::vector<std::string> flags;
    if (t.shape == Shape::sizes || t.shape == Shape::collective)
        flags = {"-m", std::to_string(first.bytes) + ":" + std::to_string(last.bytes)};
    flags.insert(flags.end(), {"-i", std::to_string(first.iters), "-x", std::to_string(warm)});
    if (t.shape == Shape::collective || t.shape == Shape::barrier) flags.push_back("-f");
    if (first.window > 0) flags.insert(flags.end(), {"-W", std::to_string(first.window)});
    for (const char* e : t.extra)
        if (e) flags.push_back(e);
    const std::string program = s.dir + "/" + t.program;
    std::vector<std::string> args = {s.mpirun, "--allow-run-as-root", "--oversubscribe", "--mca", "pml", "ob1", "--mca",
                                     "btl",    "self,vader"};
    if (s.taskset.empty() || s.cpus->size() < first.ranks) {
        args.insert(args.end(), {"-n", std::to_string(first.ranks), program});
        args.insert(args.end(), flags.begin(), flags.end());
        return args;
    }
    // Rank k on weft's rank k's CPUs: one app context per rank, each under
    // taskset, and Open MPI told not to bind over it.
    args.insert(args.end(), {"--bind-to", "none"});
    for (uint32_t k = 0; k < first.ranks; ++k) {
        if (k) args.push_back(":");
        args.insert(args.end(), {"-n", "1", s.taskset, "-c", (*s.cpus)[k], program});
        args.insert(args.end(), flags.begin(), flags.end());
    }
    return args;
}

// One OSU run for rows [first, last); fills their base and ratio. False
// (having said why) if it failed or lacked a size.
bool run_osu(const Setup& s, const OsuTest& t, Row* first, Row* last, uint64_t warm) {
    const std::vector<std::string> args = command(s, t, *first, *(last - 1), warm);
    // Past the bound, SIGTERM makes mpirun end its ranks (2-3 s here), which
    // sit in process groups of their own: a signal to mpirun's group would
    // miss them.
    const Finished f = run_bounded(args, s.env, s.limit_s);
    if (!f.exited_ok()) {
        std::fprintf(stderr, "weft-bench: --compare mpi: %s %s:\n  %s\n%s\n", t.program,
                     f.timed_out ? "took longer than its bound (WEFT_OSU_TIMEOUT_S) and was ended" : "failed",
                     joined(args).c_str(), tail(f.err.empty() ? f.out : f.err, 5).c_str());
        return false;
    }
    // size -> (average, OSU's iteration count or 0 where it prints none)
    std::map<uint64_t, std::pair<double, double>> by_size;
    for (const auto& l : result_lines(f.out)) {
        if (t.shape == Shape::barrier && l.size() >= 4) by_size[0] = {l[0], l[3]};
        if (t.shape == Shape::atomic && l.size() >= 2) by_size[first->bytes] = {l[1], 0};
        if (t.shape == Shape::sizes && l.size() >= 2) by_size[static_cast<uint64_t>(l[0])] = {l[1], 0};
        if (t.shape == Shape::collective && l.size() >= 5) by_size[static_cast<uint64_t>(l[0])] = {l[1], l[4]};
    }
    bool ok = true;
    for (Row* r = first; r != last; ++r) {
        const auto got = by_size.find(r->bytes);
        if (got == by_size.end() || got->second.first <= 0 ||
            (got->second.second > 0 && got->second.second != static_cast<double>(r->iters))) {
            std::fprintf(stderr, "weft-bench: --compare mpi: %s gave no usable result for %llu B:\n  %s\n%s", t.program,
                         static_cast<unsigned long long>(r->bytes), joined(args).c_str(), f.out.c_str());
            ok = false;
            continue;
        }
        if (r->mb_s > 0) {
            // osu_bw's MB/s -> µs per message, against weft's.
            r->base_us = static_cast<double>(r->bytes) / got->second.first;
            r->ratio = r->mmsg_s > 0 ? 1.0 / r->mmsg_s / r->base_us : 0;
        } else {
            r->base_us = got->second.first;
            r->ratio = r->mean_us / r->base_us;
        }
    }
    return ok;
}

}  // namespace

bool compare_mpi(std::vector<Row>& rows, uint64_t warmup, const std::vector<std::string>& cpus, std::string& how) {
    Setup s;
    s.mpirun = path_of("mpirun.openmpi");
    s.taskset = path_of("taskset");
    s.dir = osu_dir();
    s.env = mpirun_environment();
    s.cpus = &cpus;
    s.limit_s = run_limit_s();
    how = "OSU Micro-Benchmarks (" + s.dir + ") under Open MPI (mpirun.openmpi --mca pml ob1 --mca btl self,vader";
    if (s.mpirun.empty()) {
        how += "): not run, mpirun.openmpi is not on PATH";
        std::fprintf(stderr,
                     "weft-bench: --compare mpi: mpirun.openmpi is not on PATH (Debian: openmpi-bin); "
                     "no baseline\n");
        return false;
    }
    if (access((s.dir + "/pt2pt/osu_latency").c_str(), X_OK) != 0) {
        how += "): not run, OSU is not built there";
        std::fprintf(stderr,
                     "weft-bench: --compare mpi: no OSU Micro-Benchmarks at %s (set WEFT_OSU_DIR, or build them: "
                     "bash build-osu.sh ~/.cache/weft-anchors/osu-openmpi openmpi); no baseline\n",
                     s.dir.c_str());
        return false;
    }
    how += s.taskset.empty() ? ", Open MPI's default binding: taskset is not on PATH"
                             : ", each rank on the CPUs weft's rank of that number had (taskset -c, --bind-to none)";
    how +=
        "; same sizes, iterations, warm-up and window); base = OSU's average in us (send_bw: size / osu_bw's "
        "MB/s, us per message); ratio = weft's mean (send_bw: us per message) / base";
    bool ok = true;
    for (size_t i = 0; i < rows.size();) {
        const OsuTest* t = osu_test_for(rows[i].op);
        size_t end = i + 1;
        while (t && t->shape != Shape::atomic && t->shape != Shape::barrier && end < rows.size() &&
               same_run(rows[i], rows[end], warmup))
            ++end;
        if (!t) {
            i = end;
            continue;
        }
        if (rows[i].ranks < 2) {
            std::fprintf(stderr, "weft-bench: --compare mpi: OSU's %s needs 2 ranks or more: %s rows n/a\n", t->program,
                         rows[i].op.c_str());
        } else if (rows[i].window > osu_max_window) {
            std::fprintf(stderr,
                         "weft-bench: --compare mpi: osu_bw takes a window of at most %llu: send_bw rows "
                         "with -W %llu n/a\n",
                         static_cast<unsigned long long>(osu_max_window),
                         static_cast<unsigned long long>(rows[i].window));
        } else if (!run_osu(s, *t, &rows[i], rows.data() + end, warmup_for_size(warmup, rows[i].bytes))) {
            ok = false;
        }
        i = end;
    }
    return ok;
}

}  // namespace weft_bench
