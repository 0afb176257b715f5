// weft_demo — weft's main job, end to end, on one machine (scripts/demo.sh,
// examples/main_job.sh). One program, launched twice by weft-run:
//
//   weft-run -n 8 --checkpoint-dir D --keep-survivors
//            --fault kill:rank=5:at=demo.kill  weft_demo --report R
//     1. start        weft_init on every rank
//     2. group        construct a process group of all ranks with a context
//                     ID, and make it a communicator
//     3. traffic      ring exchange, put/get, fetch-add from every rank on
//                     one word, 8-byte and 1 MiB allreduce — every result
//                     checked, each timed next to the machine's floor
//     4. steps        a small application: each rank's state lives in a
//                     protected region (weft/ckpt.h) and is updated by
//                     exchanging with its neighbours in the group
//     5. checkpoint   a message is left in flight on purpose; then drain +
//                     write + fsync + commit
//     6. kill         more steps (lost on purpose: the restart rolls back),
//                     then weft-run SIGKILLs rank 5 at the fault point; every
//                     survivor gets the failure notice
//     7. recover      validate_global agrees on the failed set, shrink
//                     builds the survivors' communicator, a check on it
//
//   weft-run -n 8 --restart D  weft_demo --restart --report R
//     8. restart      the newest valid checkpoint is found, verified and
//                     loaded; the state, the group, its communicator handle
//                     and the in-flight message are back; the application
//                     runs to its end and its answer is checked against a
//                     serial computation; rank 0 prints the summary table
//                     of both launches.
//
// Rank 0 measures the floors before weft starts: a cache-line round trip
// between two processes (the least a message between two ranks can cost
// here), a memory copy, and write+fsync of a file as large as its image.
// Exit status 0 only if every check passed (the first launch's survivors;
// rank 5 is killed on purpose, so weft-run itself reports 137 for it).
#include <weft/ckpt.h>
#include <weft/comm.h>
#include <weft/ft.h>
#include <weft/group.h>
#include <weft/weft.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <new>
#include <sched.h>
#include <string>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

namespace {

uint64_t now_ns() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

// Every weft call is checked; the first failure ends this rank loudly.
#define CHECK(expr)                                                                       \
    do {                                                                                  \
        weft_status_t s_ = (expr);                                                        \
        if (s_ != WEFT_OK) {                                                              \
            std::fprintf(stderr, "weft_demo: %s failed: %s\n", #expr, weft_strerror(s_)); \
            std::exit(1);                                                                 \
        }                                                                                 \
    } while (0)

// ------------------------------------------------------------------ floors

// Two processes bounce one cache line: ns per full round trip.
double cache_line_round_trip_ns(int rounds) {
    auto* line = static_cast<std::atomic<uint64_t>*>(
        mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
    if (line == MAP_FAILED) return -1;
    new (line) std::atomic<uint64_t>(0);
    // weft-run bound this rank to one core; a round trip between two ranks
    // crosses cores, so put the two processes on different cores.
    cpu_set_t saved, mine, other;
    sched_getaffinity(0, sizeof saved, &saved);
    const long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    CPU_ZERO(&mine);
    CPU_ZERO(&other);
    CPU_SET(0, &mine);
    CPU_SET(ncpu > 1 ? 1 : 0, &other);
    sched_setaffinity(0, sizeof mine, &mine);
    const pid_t child = fork();
    if (child == 0) {
        sched_setaffinity(0, sizeof other, &other);
        for (uint64_t i = 1; i <= uint64_t(rounds); ++i) {
            uint64_t spins = 0;
            while (line->load(std::memory_order_acquire) != 2 * i - 1)
                if (++spins % 4096 == 0) sched_yield();  // never burn a shared core
            line->store(2 * i, std::memory_order_release);
        }
        _exit(0);
    }
    const uint64_t t0 = now_ns();
    for (uint64_t i = 1; i <= uint64_t(rounds); ++i) {
        line->store(2 * i - 1, std::memory_order_release);
        uint64_t spins = 0;
        while (line->load(std::memory_order_acquire) != 2 * i)
            if (++spins % 4096 == 0) sched_yield();
    }
    const double ns = double(now_ns() - t0) / rounds;
    waitpid(child, nullptr, 0);
    sched_setaffinity(0, sizeof saved, &saved);
    munmap(line, 4096);
    return ns;
}

// ns to copy `bytes` once (the best of a few runs).
double memory_copy_ns(size_t bytes) {
    std::vector<char> a(bytes, 1), b(bytes, 0);
    double best = 1e18;
    for (int i = 0; i < 5; ++i) {
        const uint64_t t0 = now_ns();
        std::memcpy(b.data(), a.data(), bytes);
        best = std::min(best, double(now_ns() - t0));
        a[size_t(i)] = b[bytes - 1 - size_t(i)];  // keep the copy observable
    }
    return best;
}

// ns to write `bytes` to a new file in `dir` and fsync it; -1 on error.
double write_fsync_ns(const std::string& dir, size_t bytes) {
    const std::string path = dir + "/.weft_demo_floor";
    std::vector<char> data(bytes, 7);
    const uint64_t t0 = now_ns();
    const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0) return -1;
    bool ok = write(fd, data.data(), bytes) == ssize_t(bytes) && fsync(fd) == 0;
    close(fd);
    const double ns = double(now_ns() - t0);
    unlink(path.c_str());
    return ok ? ns : -1;
}

template <typename F>
double time_ns(int iters, F&& f) {
    const uint64_t t0 = now_ns();
    for (int i = 0; i < iters; ++i) f(i);
    return double(now_ns() - t0) / iters;
}

// ------------------------------------------------------- the application

// The application's state, in one protected region (ID 1): what a restart
// must give back. Handles kept here stay valid across a restart (weft/ckpt.h).
constexpr uint32_t app_region = 1;
constexpr size_t field_len = 4096;
struct AppState {
    uint64_t step;
    uint64_t group_context_id;
    weft_comm_t group_comm;
    uint64_t field[field_len];
};

constexpr uint64_t steps_before_checkpoint = 10;
constexpr uint64_t steps_lost = 5;  // run after the checkpoint, before the kill: rolled back
constexpr uint64_t steps_total = 20;
constexpr int32_t in_flight_tag = 77;

uint64_t initial_value(uint32_t rank, size_t i) { return uint64_t(rank) * 1000003u + i; }

// One step on one rank, given the left neighbour's digest.
void advance(uint64_t* field, uint64_t left_digest) {
    for (size_t i = 0; i < field_len; ++i) field[i] = field[i] * 6364136223846793005ull + left_digest + i;
}
uint64_t digest(const uint64_t* field) {
    uint64_t d = 0;
    for (size_t i = 0; i < field_len; ++i) d = d * 31 + field[i];
    return d;
}

// A step: send my digest to the right neighbour, receive the left's, advance.
void step(AppState& s, uint32_t rank, uint32_t size) {
    uint64_t mine = digest(s.field), left = 0;
    weft_request_t r[2];
    CHECK(weft_irecv(s.group_comm, &left, 1, WEFT_UINT64, int32_t((rank + size - 1) % size), 1, &r[0]));
    CHECK(weft_isend(s.group_comm, &mine, 1, WEFT_UINT64, (rank + 1) % size, 1, &r[1]));
    CHECK(weft_request_waitall(2, r, nullptr));
    advance(s.field, left);
    ++s.step;
}

// The answer an uninterrupted run gives: every rank's field, serially.
uint64_t expected_answer(uint32_t size) {
    std::vector<std::vector<uint64_t>> f(size, std::vector<uint64_t>(field_len));
    for (uint32_t r = 0; r < size; ++r)
        for (size_t i = 0; i < field_len; ++i) f[r][i] = initial_value(r, i);
    for (uint64_t k = 0; k < steps_total; ++k) {
        std::vector<uint64_t> d(size);
        for (uint32_t r = 0; r < size; ++r) d[r] = digest(f[r].data());
        for (uint32_t r = 0; r < size; ++r) advance(f[r].data(), d[(r + size - 1) % size]);
    }
    uint64_t sum = 0;
    for (uint32_t r = 0; r < size; ++r) sum += digest(f[r].data());
    return sum;
}

// ----------------------------------------------------------------- report

// One row of the summary: a phase, its time (the slowest rank's, for a
// collective phase), and where it applies the machine's floor for it.
struct Row {
    std::string phase, what;
    double ns;
    std::string floor_what;
    double floor_ns;  // < 0: none
};

struct Demo {
    weft_context_t ctx = nullptr;
    uint32_t rank = 0, size = 0;
    weft_comm_t world = nullptr;
    uint32_t bad = 0;  // failed checks on this rank
    std::vector<Row> rows;
    double floor_rtt_ns = -1, floor_copy_ns = -1;
};

// The slowest rank's value of a time measured on every rank of comm.
double slowest(weft_comm_t comm, double ns) {
    double out = 0;
    CHECK(weft_allreduce(comm, &ns, &out, 1, WEFT_DOUBLE, WEFT_OP_MAX));
    return out;
}

void add(Demo& d, const char* phase, const char* what, double ns, const char* floor_what = "", double floor_ns = -1) {
    d.rows.push_back(Row{phase, what, ns, floor_what, floor_ns});
}

void expect(Demo& d, bool ok, const char* what) {
    if (ok) return;
    ++d.bad;
    std::fprintf(stderr, "weft_demo: rank %u: CHECK FAILED: %s\n", d.rank, what);
}

// Are all checks good on every rank of comm? Rank 0 says so for the phase.
bool all_good(Demo& d, weft_comm_t comm, const char* phase) {
    uint64_t mine = d.bad, total = 0;
    CHECK(weft_allreduce(comm, &mine, &total, 1, WEFT_UINT64, WEFT_OP_SUM));
    if (d.rank == 0) std::printf("  %-11s %s\n", phase, total ? "SOME CHECKS FAILED" : "checks passed");
    std::fflush(stdout);
    return total == 0;
}

// The report file carries the first launch's rows to the second:
// "phase\twhat\tns\tfloor_what\tfloor_ns" per line.
void save_rows(const std::vector<Row>& rows, const std::string& path) {
    FILE* f = std::fopen(path.c_str(), "w");
    if (!f) {
        std::fprintf(stderr, "weft_demo: cannot write %s: %s\n", path.c_str(), std::strerror(errno));
        std::exit(1);
    }
    for (const Row& r : rows)
        std::fprintf(f, "%s\t%s\t%.0f\t%s\t%.0f\n", r.phase.c_str(), r.what.c_str(), r.ns, r.floor_what.c_str(),
                     r.floor_ns);
    std::fclose(f);
}

std::vector<Row> load_rows(const std::string& path) {
    std::vector<Row> rows;
    FILE* f = std::fopen(path.c_str(), "r");
    if (!f) return rows;
    char line[512];
    while (std::fgets(line, sizeof line, f)) {
        std::vector<std::string> cols;
        std::string cur;
        for (const char* p = line; *p && *p != '\n'; ++p) {
            if (*p == '\t') {
                cols.push_back(cur);
                cur.clear();
            } else {
                cur += *p;
            }
        }
        cols.push_back(cur);
        if (cols.size() == 5)
            rows.push_back(Row{cols[0], cols[1], std::atof(cols[2].c_str()), cols[3], std::atof(cols[4].c_str())});
    }
    std::fclose(f);
    return rows;
}

std::string human(double ns) {
    char b[32];
    if (ns < 0) return "";
    if (ns < 1e4)
        std::snprintf(b, sizeof b, "%.0f ns", ns);
    else if (ns < 1e6)
        std::snprintf(b, sizeof b, "%.1f us", ns / 1e3);
    else
        std::snprintf(b, sizeof b, "%.2f ms", ns / 1e6);
    return b;
}

void print_table(const std::vector<Row>& rows) {
    std::printf("\n%-11s %-50s %10s   %-32s %10s\n", "phase", "what", "time", "floor on this machine", "");
    std::string last;
    for (const Row& r : rows) {
        std::printf("%-11s %-50s %10s   %-32s %10s\n", r.phase == last ? "" : r.phase.c_str(), r.what.c_str(),
                    human(r.ns).c_str(), r.floor_what.c_str(), human(r.floor_ns).c_str());
        last = r.phase;
    }
}

// ------------------------------------------------------ the first launch

// 2. A process group of every rank with a context ID, as a communicator.
void phase_group(Demo& d, AppState& s) {
    std::vector<weft_proc_t> all(d.size);
    uint32_t job = 0;
    CHECK(weft_job_id(d.ctx, &job));
    for (uint32_t r = 0; r < d.size; ++r) all[r] = weft_proc_t{job, r};
    weft_group_options_t opts{};
    // NOTIFY_TERMINATION: a member's death is reported at destruct instead
    // of failing it (the seed's rule; phase 7 relies on it).
    opts.flags = WEFT_GROUP_ASSIGN_CONTEXT_ID | WEFT_GROUP_NOTIFY_TERMINATION;
    // Leaders may list themselves in any order: every one gets the same group.
    std::rotate(all.begin(), all.begin() + d.rank, all.end());
    const uint64_t t0 = now_ns();
    CHECK(weft_group_construct(d.ctx, "demo", all.data(), all.size(), &opts));
    const double construct_ns = double(now_ns() - t0);
    const uint64_t t1 = now_ns();
    CHECK(weft_group_comm(d.ctx, "demo", &s.group_comm));
    const double comm_ns = double(now_ns() - t1);
    CHECK(weft_group_context_id(d.ctx, "demo", &s.group_context_id));
    uint32_t members = 0;
    CHECK(weft_group_size(d.ctx, "demo", &members));
    expect(d, members == d.size, "the group has every rank");
    uint64_t ids[2] = {s.group_context_id, ~s.group_context_id}, agreed[2] = {};
    CHECK(weft_allreduce(d.world, ids, agreed, 2, WEFT_UINT64, WEFT_OP_MAX));
    expect(d, agreed[0] == s.group_context_id && agreed[1] == ~s.group_context_id,
           "every member got the same context ID");
    add(d, "group", "construct 'demo' (8 leaders, context ID)", slowest(d.world, construct_ns));
    add(d, "group", "make it a communicator", slowest(d.world, comm_ns));
    if (d.rank == 0)
        std::printf("  %-11s group 'demo': %u members, context ID %#llx\n", "", members,
                    static_cast<unsigned long long>(s.group_context_id));
    all_good(d, d.world, "group");
}

// 3. Traffic on the group's communicator and a window, every result checked.
void phase_traffic(Demo& d, AppState& s, weft_window_t win, uint64_t* base) {
    const int iters = 1000;
    const uint32_t right = (d.rank + 1) % d.size, left = (d.rank + d.size - 1) % d.size;
    const double ring_ns = time_ns(iters, [&](int i) {
        uint64_t out = d.rank * 1000000ull + uint64_t(i), in = ~0ull;
        weft_request_t r[2];
        CHECK(weft_irecv(s.group_comm, &in, 1, WEFT_UINT64, int32_t(left), 2, &r[0]));
        CHECK(weft_isend(s.group_comm, &out, 1, WEFT_UINT64, right, 2, &r[1]));
        CHECK(weft_request_waitall(2, r, nullptr));
        if (in != left * 1000000ull + uint64_t(i)) expect(d, false, "ring message from the left neighbour");
    });
    add(d, "traffic", "ring exchange, 8 B (per step, every rank at once)", slowest(d.world, ring_ns),
        "a cache line, one way", d.floor_rtt_ns / 2);

    // put + flush into the right neighbour's window, then get it back.
    uint64_t out[8], in[8];
    const double put_ns = time_ns(iters, [&](int i) {
        for (int k = 0; k < 8; ++k) out[k] = (uint64_t(d.rank) << 32) + uint64_t(i * 8 + k);
        CHECK(weft_put(win, right, 64 + 64 * d.rank, out, sizeof out));
        CHECK(weft_flush(win, right));
    });
    const double get_ns = time_ns(iters, [&](int) { CHECK(weft_get(win, right, 64 + 64 * d.rank, in, sizeof in)); });
    expect(d, std::memcmp(in, out, sizeof in) == 0, "get returns what put wrote");
    add(d, "traffic", "put 64 B + flush (to the right neighbour)", slowest(d.world, put_ns));
    add(d, "traffic", "get 64 B", slowest(d.world, get_ns));

    // Every rank fetch-adds rank 0's first word: the total must be exact.
    uint64_t old = 0;
    const double fadd_ns = time_ns(iters, [&](int) { CHECK(weft_atomic_fetch_add(win, 0, 0, 1, &old)); });
    CHECK(weft_barrier(d.world));
    if (d.rank == 0) expect(d, base[0] == uint64_t(iters) * d.size, "fetch-adds from every rank sum exactly");
    add(d, "traffic", "fetch-add on one word (all ranks contend)", slowest(d.world, fadd_ns));

    uint64_t one = 1, sum = 0;
    const double allreduce_ns = time_ns(iters, [&](int) {
        CHECK(weft_allreduce(s.group_comm, &one, &sum, 1, WEFT_UINT64, WEFT_OP_SUM));
        if (sum != d.size) expect(d, false, "8-byte allreduce sums every rank");
    });
    // log2(size) steps, each at least a cache line one way.
    uint32_t steps = 0;
    while ((1u << steps) < d.size) ++steps;
    char floor_what[48];
    std::snprintf(floor_what, sizeof floor_what, "%u cache lines, one way each", steps);
    add(d, "traffic", "allreduce, 8 B", slowest(d.world, allreduce_ns), floor_what, d.floor_rtt_ns * steps / 2);

    std::vector<double> big(1 << 17, double(d.rank)), total(big.size());
    const double big_ns = time_ns(20, [&](int) {
        CHECK(weft_allreduce(s.group_comm, big.data(), total.data(), big.size(), WEFT_DOUBLE, WEFT_OP_SUM));
    });
    const double want = double(d.size) * (d.size - 1) / 2;
    expect(d, std::all_of(total.begin(), total.end(), [&](double v) { return v == want; }),
           "1 MiB allreduce, element by element");
    add(d, "traffic", "allreduce, 1 MiB of doubles", slowest(d.world, big_ns), "copy 1 MiB once", d.floor_copy_ns);
    all_good(d, d.world, "traffic");
}

void run_steps(Demo& d, AppState& s, uint64_t until, const char* phase, const char* what) {
    const uint64_t first = s.step;
    const uint64_t t0 = now_ns();
    while (s.step < until) step(s, d.rank, d.size);
    add(d, phase, what, slowest(d.world, double(now_ns() - t0) / double(until - first)));
}

// 5. The checkpoint, with one message in flight: each rank sends to its
// right neighbour, which receives it only after the checkpoint.
void phase_checkpoint(Demo& d, const std::string& report_dir) {
    const uint64_t token = 0xC0FFEE00ull + d.rank;
    CHECK(weft_send(d.world, &token, 1, WEFT_UINT64, (d.rank + 1) % d.size, in_flight_tag));
    CHECK(weft_barrier(d.world));  // every token is in weft's buffer now
    weft_ckpt_profile_t p{};
    CHECK(weft_checkpoint(d.ctx, nullptr, &p));
    expect(d, p.messages == 1, "the in-flight message is in the image");
    expect(d, p.groups == 1, "the group is in the image");
    const double floor = d.rank == 0 ? write_fsync_ns(report_dir, p.bytes) : -1;
    char what[80];
    std::snprintf(what, sizeof what, "write generation %llu (%llu KiB per rank)",
                  static_cast<unsigned long long>(p.generation), static_cast<unsigned long long>(p.bytes >> 10));
    add(d, "checkpoint", "drain to a quiescent point", slowest(d.world, double(p.drain_ns)));
    add(d, "checkpoint", what, slowest(d.world, double(p.write_ns)));
    add(d, "checkpoint", "fsync", slowest(d.world, double(p.fsync_ns)), "write+fsync one image, alone", floor);
    add(d, "checkpoint", "commit (every image on disk, manifest)", slowest(d.world, double(p.commit_ns)));
    uint64_t got = 0;
    const uint32_t left = (d.rank + d.size - 1) % d.size;
    CHECK(weft_recv(d.world, &got, 1, WEFT_UINT64, int32_t(left), in_flight_tag, nullptr));
    expect(d, got == 0xC0FFEE00ull + left, "the in-flight message arrives after the checkpoint");
    all_good(d, d.world, "checkpoint");
}

// 6 and 7. Rank 5 dies; the survivors notice, agree and shrink.
std::atomic<uint64_t> notice_at_ns{0};
void on_failure(void*, weft_event_t, uint32_t) {
    uint64_t zero = 0;
    notice_at_ns.compare_exchange_strong(zero, now_ns());
}

int phase_kill_and_recover(Demo& d) {
    const uint32_t victim = d.size > 5 ? 5 : d.size - 1;
    uint64_t id = 0;
    CHECK(weft_event_register(d.ctx, WEFT_EVENT_PROC_FAILED, on_failure, nullptr, &id));
    // Detection is timed from the last barrier the victim took part in: it
    // kills itself as it leaves it, about when the first survivor leaves it
    // (one machine: one monotonic clock for every rank).
    CHECK(weft_barrier(d.world));
    const double left_barrier_ns = double(now_ns());
    if (d.rank == victim) {
        weft_fault_point("demo.kill");  // weft-run SIGKILLs this rank here
        std::fprintf(stderr, "weft_demo: rank %u was not killed: run me with --fault kill:rank=%u:at=demo.kill\n",
                     d.rank, victim);
        return 1;
    }
    const uint64_t deadline = now_ns() + 30000000000ull;
    while (notice_at_ns.load() == 0) {
        weft_wait(d.ctx, 1000000);
        if (now_ns() > deadline) {
            std::fprintf(stderr, "weft_demo: rank %u: no failure notice for rank %u in 30 s\n", d.rank, victim);
            return 1;
        }
    }
    int failed = 0;
    CHECK(weft_peer_failed(d.ctx, victim, &failed));
    expect(d, failed == 1, "the failure named is the killed rank");

    uint32_t num_failed = 0, num_new = 0;
    uint64_t t0 = now_ns();
    CHECK(weft_comm_validate_global(d.world, &num_failed, &num_new));
    const double validate_ns = double(now_ns() - t0);
    expect(d, num_failed == 1, "validate_global: one failed rank, the same everywhere");
    weft_comm_t survivors = nullptr;
    t0 = now_ns();
    CHECK(weft_comm_shrink(d.world, &survivors));
    const double shrink_ns = double(now_ns() - t0);
    uint32_t n = 0;
    CHECK(weft_comm_size(survivors, &n));
    expect(d, n == d.size - 1, "the shrunk communicator has the survivors");
    uint64_t one = 1, sum = 0;
    CHECK(weft_allreduce(survivors, &one, &sum, 1, WEFT_UINT64, WEFT_OP_SUM));
    expect(d, sum == d.size - 1, "an allreduce over the survivors");
    // The group's destruct reports the dead member instead of failing
    // (NOTIFY_TERMINATION) once every survivor has called.
    t0 = now_ns();
    CHECK(weft_group_destruct(d.ctx, "demo", 10000));
    const double destruct_ns = double(now_ns() - t0);

    double first_left_ns = 0;
    CHECK(weft_allreduce(survivors, &left_barrier_ns, &first_left_ns, 1, WEFT_DOUBLE, WEFT_OP_MIN));
    add(d, "kill", "rank 5 SIGKILLed: every survivor has the notice",
        slowest(survivors, double(notice_at_ns.load())) - first_left_ns);
    add(d, "recover", "validate_global (agree on the failed set)", slowest(survivors, validate_ns));
    add(d, "recover", "shrink to the 7 survivors", slowest(survivors, shrink_ns));
    add(d, "recover", "destruct the group (member failed, notified)", slowest(survivors, destruct_ns));
    if (d.rank == 0)
        std::printf("  %-11s rank %u killed; every survivor noticed; %u survivors agree and shrink\n", "kill", victim,
                    n);
    const bool ok = all_good(d, survivors, "recover");
    CHECK(weft_comm_free(&survivors));
    CHECK(weft_event_deregister(d.ctx, id));
    return ok ? 0 : 1;
}

// ----------------------------------------------------- the second launch

int restart(Demo& d, AppState& s, const std::string& report) {
    weft_restart_info_t info{};
    CHECK(weft_restart(d.ctx, nullptr, &info));
    expect(d, info.restarted == 1, "restarted from a checkpoint");
    expect(d, s.step == steps_before_checkpoint, "the state is the checkpoint's, not the lost steps'");
    expect(d, info.messages == 1 && info.groups == 1, "the in-flight message and the group are back");
    uint64_t cid = 0;
    CHECK(weft_group_context_id(d.ctx, "demo", &cid));
    expect(d, cid == s.group_context_id, "the group has its context ID again");
    uint64_t got = 0;
    const uint32_t left = (d.rank + d.size - 1) % d.size;
    CHECK(weft_recv(d.world, &got, 1, WEFT_UINT64, int32_t(left), in_flight_tag, nullptr));
    expect(d, got == 0xC0FFEE00ull + left, "the in-flight message is received after the restart");

    // The table: the first launch's rows, then this one's.
    std::vector<Row> this_launch = std::move(d.rows);
    d.rows = d.rank == 0 ? load_rows(report) : std::vector<Row>{};
    d.rows.insert(d.rows.end(), this_launch.begin(), this_launch.end());
    char what[80];
    std::snprintf(what, sizeof what, "find and verify generation %llu",
                  static_cast<unsigned long long>(info.generation));
    add(d, "restart", what, slowest(d.world, double(info.find_ns + info.verify_ns)));
    add(d, "restart", "load the protected regions", slowest(d.world, double(info.load_ns)), "copy the region once",
        d.floor_copy_ns >= 0 ? d.floor_copy_ns * double(sizeof(AppState)) / double(1 << 20) : -1);
    add(d, "restart", "replay: group, communicator, message", slowest(d.world, double(info.replay_ns)));
    run_steps(d, s, steps_total, "restart", "application steps 11-20 (per step)");

    uint64_t mine = digest(s.field), answer = 0;
    CHECK(weft_allreduce(s.group_comm, &mine, &answer, 1, WEFT_UINT64, WEFT_OP_SUM));
    if (d.rank == 0) expect(d, answer == expected_answer(d.size), "the answer equals an uninterrupted run's");
    const bool ok = all_good(d, d.world, "restart");
    if (d.rank == 0) {
        print_table(d.rows);
        std::printf(
            "\n(times are the slowest rank's; with %u ranks on %ld cores, ranks share cores, so a message\n"
            " often waits for its receiver to be scheduled: the floors are for two processes on two cores)\n",
            d.size, sysconf(_SC_NPROCESSORS_ONLN));
        std::printf("\nweft demo: %s\n", ok ? "every check passed, in both launches" : "SOME CHECKS FAILED");
    }
    return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
    bool restarting = false;
    std::string report;
    for (int i = 1; i < argc; ++i) {
        if (std::strcmp(argv[i], "--restart") == 0)
            restarting = true;
        else if (std::strcmp(argv[i], "--report") == 0 && i + 1 < argc)
            report = argv[++i];
        else {
            std::fprintf(stderr, "usage: weft_demo [--restart] --report FILE (see examples/main_job.sh)\n");
            return 2;
        }
    }
    if (report.empty()) {
        std::fprintf(stderr, "weft_demo: --report FILE is required (see examples/main_job.sh)\n");
        return 2;
    }
    const std::string report_dir = report.substr(0, report.find_last_of('/') + 1) + ".";

    Demo d;
    // Rank 0 measures the floors before weft starts (the other ranks wait
    // for it inside weft_init), on a machine not yet busy with the job.
    const char* r_env = std::getenv("WEFT_RANK");
    if (!r_env || std::strcmp(r_env, "0") == 0) {
        d.floor_rtt_ns = cache_line_round_trip_ns(20000);
        d.floor_copy_ns = memory_copy_ns(1 << 20);
    }
    const uint64_t t0 = now_ns();
    CHECK(weft_init(&d.ctx));
    const double init_ns = double(now_ns() - t0);
    CHECK(weft_rank(d.ctx, &d.rank));
    CHECK(weft_size(d.ctx, &d.size));
    CHECK(weft_comm_world(d.ctx, &d.world));
    weft_caps_t caps{};
    CHECK(weft_query_caps(d.ctx, &caps));

    // The application's state, registered before anything else (a restart
    // fills it in).
    auto* s = static_cast<AppState*>(std::calloc(1, sizeof(AppState)));
    CHECK(weft_ckpt_region_register(d.ctx, app_region, s, sizeof *s));
    if (d.rank == 0)
        std::printf("weft demo, %s launch: %u ranks on %ld cores, transport %s\n", restarting ? "second" : "first",
                    d.size, sysconf(_SC_NPROCESSORS_ONLN), caps.transport);
    std::fflush(stdout);

    int rc = 0;
    if (restarting) {
        add(d, "restart", "weft_init: start-up, connect every rank", slowest(d.world, init_ns));
        rc = restart(d, *s, report);
    } else {
        add(d, "start", "weft_init on 8 ranks (start-up exchange)", slowest(d.world, init_ns));
        void* base = nullptr;
        weft_window_t win = nullptr;
        CHECK(weft_window_allocate(d.ctx, 64 + 64 * size_t(d.size), &base, &win));
        std::memset(base, 0, 64 + 64 * size_t(d.size));
        CHECK(weft_barrier(d.world));
        phase_group(d, *s);
        phase_traffic(d, *s, win, static_cast<uint64_t*>(base));
        CHECK(weft_window_free(win));  // collective: while every rank lives
        for (size_t i = 0; i < field_len; ++i) s->field[i] = initial_value(d.rank, i);
        run_steps(d, *s, steps_before_checkpoint, "steps", "application steps 1-10 (per step)");
        phase_checkpoint(d, report_dir);
        run_steps(d, *s, steps_before_checkpoint + steps_lost, "steps", "steps 11-15 (lost: the restart rolls back)");
        rc = phase_kill_and_recover(d);
        if (d.rank == 0 && rc == 0) save_rows(d.rows, report);
    }
    CHECK(weft_ckpt_region_remove(d.ctx, app_region));
    CHECK(weft_finalize(d.ctx));
    std::free(s);
    return rc;
}
