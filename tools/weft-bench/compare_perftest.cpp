// compare_perftest.cpp — --compare perftest (compare.hpp): Debian's
// perftest (linux-rdma/perftest 4.5) beside weft-bench's rows, on the RDMA
// device, port and GID weft used. One server and one client per row, as
// tests/rxe/bench-vs-perftest.sh runs them: `PROGRAM -d DEV -i PORT -x GID
// -n ITERS -F -p TCP_PORT ...`, the server first, then the client to
// 127.0.0.1 (perftest's out-of-band TCP is IPv4 only).
//
// The client writes its result with --out_json --out_json_file=F. Despite
// its name the file is "key: value," lines with bare keys (perftest 4.5's
// print_report_lat and print_full_bw_report), read here line by line:
//   latency    MsgSize, n_iterations, t_min, t_max, t_typical, t_avg, ...
//   bandwidth  MsgSize, n_iterations, BW_peak, BW_average, MsgRate (Mpps)
// base = t_typical (perftest's median, in us; half a round trip for write
// and send, a full one for read and the atomics, as weft-bench's units) or
// 1 / MsgRate (us per message); ratio = weft's median (bandwidth rows: us
// per message) over it, as --compare ucx_perftest does.
#include "child.hpp"
#include "compare.hpp"
#include "options.hpp"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <glob.h>
#include <iterator>
#include <sstream>
#include <strings.h>
#include <unistd.h>

extern char** environ;

namespace weft_bench {

namespace {

struct PerftestTest {
    const char* op;       // weft-bench's row
    const char* program;  // perftest's
    const char* atomic;   // ib_atomic_lat -A's value, else nullptr
    bool bandwidth;
};

// weft-bench has no get_bw row, so ib_read_bw has none to meet.
constexpr PerftestTest perftest_tests[] = {
    {"put", "ib_write_lat", nullptr, false},           {"get", "ib_read_lat", nullptr, false},
    {"send", "ib_send_lat", nullptr, false},           {"fadd", "ib_atomic_lat", "FETCH_AND_ADD", false},
    {"cswap", "ib_atomic_lat", "CMP_AND_SWAP", false}, {"put_bw", "ib_write_bw", nullptr, true},
    {"send_bw", "ib_send_bw", nullptr, true},
};

const PerftestTest* perftest_test_for(const std::string& op) {
    for (const PerftestTest& t : perftest_tests)
        if (op == t.op) return &t;
    return nullptr;
}

// perftest's -n range (MIN_ITER, MAX_ITER in perftest_parameters.h).
constexpr uint64_t perftest_min_iters = 5, perftest_max_iters = 100000000;

// Each server's and client's bound; WEFT_PERFTEST_TIMEOUT_S (seconds)
// overrides it.
double run_limit_s() {
    const char* env = std::getenv("WEFT_PERFTEST_TIMEOUT_S");
    const double s = env ? std::strtod(env, nullptr) : 0;
    return s > 0 ? s : 60;
}

// weft-info's bound: it runs a one-rank job per viable backend (--caps),
// each bounded by 30 s; 0.3 s in all on this host, seconds under TCG.
constexpr double weft_info_limit_s = 120;

// Where perftest runs: the device, port and GID weft used.
struct Target {
    std::string device;
    int port = 0;
    int gid = -1;  // -x; -1: none (InfiniBand routes by LID)
};

// weft-info beside this program (the build tree's tools/, or the
// installation's bin/), else on PATH; "" if neither.
std::string weft_info_path() {
    char self[4096];
    const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n > 0) {
        std::string dir(self, static_cast<size_t>(n));
        dir = dir.substr(0, dir.rfind('/') + 1);
        if (access((dir + "weft-info").c_str(), X_OK) == 0) return dir + "weft-info";
    }
    return path_of("weft-info");
}

// The device weft opened, from weft-info's report, whose verbs section
// (transport/verbs/verbs_device.cpp, describe_devices) reads:
//   "  rxe0: 1 port(s), atomics ..."                 a device
//   "    port 1: active, Ethernet (RoCE), ..."       each of its ports
//   "      weft uses gid[1] (RoCE v2, IPv4-mapped)"  a RoCE port's choice
// and weft's own rule (verbs_device.cpp, open_device): WEFT_VERBS_DEVICE's
// device ("name" or "name:port"), else the first device, in the same order,
// whose first ACTIVE port (or the one named) has a usable GID;
// WEFT_VERBS_GID_INDEX overrides the choice. False, with why, if none.
bool find_target(const std::string& report, Target& t, std::string& why) {
    const char* spec = std::getenv("WEFT_VERBS_DEVICE");
    std::string want = spec ? spec : "";
    int want_port = 0;
    if (const size_t colon = want.find(':'); colon != std::string::npos) {
        want_port = std::atoi(want.c_str() + colon + 1);
        want.resize(colon);
    }
    struct Port {
        std::string device;
        int port = 0;
        bool active = false, roce = false;
        int gid = -1;
    };
    std::vector<Port> ports;
    std::istringstream in(report);
    std::string line, device;
    bool in_verbs = false;
    while (std::getline(in, line)) {
        if (!in_verbs) {
            in_verbs = line == "verbs devices:";
            continue;
        }
        if (line.empty() || line[0] != ' ') break;  // the next section
        char name[256] = {}, state[64] = {}, link[64] = {};
        int port = 0, gid = 0, count = 0;
        if (std::sscanf(line.c_str(), "  %255[^: ]: %d port(s)", name, &count) == 2) {
            device = name;
        } else if (std::sscanf(line.c_str(), "    port %d: %63[^,], %63[^,]", &port, state, link) == 3) {
            // ibv_port_state_str's text: "active" (rdma-core 44 here), or
            // "PORT_ACTIVE" in older ones.
            const bool active = strcasecmp(state, "active") == 0 || strcasecmp(state, "PORT_ACTIVE") == 0;
            ports.push_back({device, port, active, std::strncmp(link, "Ethernet", 8) == 0, -1});
        } else if (std::sscanf(line.c_str(), "      weft uses gid[%d]", &gid) == 1 && !ports.empty()) {
            ports.back().gid = gid;
        }
    }
    if (!in_verbs) {
        why = "weft-info printed no verbs devices section";
        return false;
    }
    const char* forced = std::getenv("WEFT_VERBS_GID_INDEX");
    std::string seen;
    for (size_t i = 0; i < ports.size(); ++i) {
        const Port& p = ports[i];
        if (!want.empty() && p.device != want) continue;
        if (want_port ? p.port != want_port : !p.active) continue;
        // This device's first active port: weft takes it or the next device.
        if (!seen.empty() && seen == p.device) continue;
        seen = p.device;
        const int gid = forced && *forced ? std::atoi(forced) : p.roce ? p.gid : -1;
        if (!p.active || (p.roce && gid < 0)) continue;
        t.device = p.device;
        t.port = p.port;
        t.gid = gid;
        return true;
    }
    why = want.empty() ? "weft-info lists no device with an active port and a usable GID"
                       : "weft-info lists no usable device " + std::string(spec);
    return false;
}

// Whether something listens on TCP `port` (IPv4): /proc/net/tcp's LISTEN
// (0A) entries. Probing with a connection instead would use up the perftest
// server's only accept.
bool listening(int port) {
    std::ifstream tcp("/proc/net/tcp");
    std::string line;
    std::getline(tcp, line);  // the header
    while (std::getline(tcp, line)) {
        unsigned local_port = 0, state = 0;
        if (std::sscanf(line.c_str(), " %*d: %*x:%x %*x:%*x %x", &local_port, &state) == 2 &&
            static_cast<int>(local_port) == port && state == 0x0A)
            return true;
    }
    return false;
}

// A "key: value," line of perftest's --out_json file, as a number; NaN if
// the key is missing (and inf or nan as perftest printed them).
double json_value(const std::string& text, const std::string& key) {
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line))
        if (line.starts_with(key + ": ")) return std::strtod(line.c_str() + key.size() + 2, nullptr);
    return std::nan("");
}

struct Run {
    const Target* target;
    std::vector<std::string> env;
    std::string client_cpus, server_cpus;  // "": every CPU
    std::string json;                      // the client's --out_json_file
    double limit_s;
};

// The command of one side (the client's has the server's address last).
std::vector<std::string> command(const Run& run, const PerftestTest& t, const std::string& program, const Row& r,
                                 uint64_t iters, int tcp_port, bool client) {
    std::vector<std::string> args = {program, "-d", run.target->device, "-i", std::to_string(run.target->port)};
    if (run.target->gid >= 0) args.insert(args.end(), {"-x", std::to_string(run.target->gid)});
    args.insert(args.end(), {"-n", std::to_string(iters), "-F", "-p", std::to_string(tcp_port)});
    if (t.atomic)
        args.insert(args.end(), {"-A", t.atomic});  // 8 bytes, perftest's only atomic size
    else
        args.insert(args.end(), {"-s", std::to_string(r.bytes)});
    if (t.bandwidth) args.insert(args.end(), {"-t", std::to_string(r.window)});
    if (client) args.insert(args.end(), {"--out_json", "--out_json_file=" + run.json, "127.0.0.1"});
    return args;
}

// One server + client pair for row r: its base in us, or 0 having said
// why in `why`. A result of inf or nan (perftest converts cycles to time at
// the CPU frequency it reads, which under qemu TCG now and then comes out
// as 0) is a failed attempt: up to 3.
double measure(const Run& run, const PerftestTest& t, const std::string& program, const Row& r, uint64_t iters,
               std::string& why) {
    for (int attempt = 0; attempt < 3; ++attempt) {
        const int tcp_port = free_port();
        if (tcp_port < 0) {
            why = std::string("no free TCP port: ") + std::strerror(errno);
            return 0;
        }
        std::remove(run.json.c_str());
        const std::vector<std::string> server_args = command(run, t, program, r, iters, tcp_port, false);
        const std::vector<std::string> client_args = command(run, t, program, r, iters, tcp_port, true);
        Child server(server_args, run.env, run.server_cpus);
        if (!server.started()) {
            why = "cannot start " + program + ": " + server.start_error();
            return 0;
        }
        // The client fails at once if the server is not listening yet: it
        // opens the device first, which takes seconds under TCG.
        const double until = now_s() + run.limit_s;
        while (!listening(tcp_port) && !server.exited() && now_s() < until) usleep(20000);
        if (!listening(tcp_port)) {
            const Finished s = server.finish(now_s());
            why = "the server never listened on port " + std::to_string(tcp_port) + ":\n  " + joined(server_args) +
                  "\n" + tail(s.out + s.err, 5);
            continue;
        }
        Child client(client_args, run.env, run.client_cpus);
        const Finished c = client.finish(now_s() + run.limit_s);
        // It ends once the client has: bounded all the same.
        const Finished s = server.finish(now_s() + 10);
        if (!c.exited_ok()) {
            why = std::string(c.timed_out ? "the client took longer than its bound (WEFT_PERFTEST_TIMEOUT_S) and was "
                                            "ended"
                                          : "the client failed") +
                  ":\n  " + joined(client_args) + "\n" + tail(c.out + c.err, 5) +
                  "\n  server: " + tail(s.out + s.err, 3);
            continue;
        }
        std::ifstream in(run.json);
        const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        const double size = json_value(text, "MsgSize"), n = json_value(text, "n_iterations");
        const double v = json_value(text, t.bandwidth ? "MsgRate" : "t_typical");
        if (size != static_cast<double>(t.atomic ? 8 : r.bytes) || n != static_cast<double>(iters) ||
            !std::isfinite(v) || v <= 0) {
            why = "no usable result in " + run.json + " (MsgSize " + std::to_string(size) + ", n_iterations " +
                  std::to_string(n) + ", " + (t.bandwidth ? "MsgRate " : "t_typical ") + std::to_string(v) + "):\n  " +
                  joined(client_args) + "\n" + tail(c.out, 5);
            continue;
        }
        return t.bandwidth ? 1.0 / v : v;  // MsgRate is in 10^6 messages/s
    }
    return 0;
}

// Why perftest cannot be compared here, or "".
std::string unsuitable(const std::string& transport) {
    if (transport != "verbs")
        return "weft ran on " + (transport.empty() ? std::string("?") : transport) +
               ", not verbs: perftest measures an RDMA device's verbs (weft-run --transport verbs)";
    glob_t g{};
    const bool device = glob("/sys/class/infiniband/*", 0, nullptr, &g) == 0 && g.gl_pathc > 0;
    globfree(&g);
    if (!device) return "no RDMA device in /sys/class/infiniband";
    for (const PerftestTest& t : perftest_tests)
        if (!on_path(t.program)) return std::string(t.program) + " is not on PATH (Debian: perftest)";
    return "";
}

}  // namespace

bool compare_perftest(std::vector<Row>& rows, const std::string& transport, const std::vector<std::string>& cpus,
                      std::string& how) {
    how = "perftest (Debian's ib_*_lat and ib_*_bw, a server and a client over loopback";
    std::string why = unsuitable(transport);
    std::vector<std::string> env;
    for (char** e = environ; *e; ++e) env.emplace_back(*e);
    Target target;
    if (why.empty()) {
        const std::string info = weft_info_path();
        if (info.empty()) {
            why = "weft-info, which says which device and GID weft uses, is neither beside weft-bench nor on PATH";
        } else {
            const Finished f = run_bounded({info}, env, weft_info_limit_s);
            if (!f.exited_ok())
                why = info + " failed:\n" + tail(f.err.empty() ? f.out : f.err, 5);
            else if (find_target(f.out, target, why))
                why.clear();
        }
    }
    if (!why.empty()) {
        how += "): not run, " + why;
        std::fprintf(stderr, "weft-bench: --compare perftest: %s; no baseline\n", why.c_str());
        return false;
    }
    Run run;
    run.target = &target;
    run.env = env;
    const bool bind = cpus.size() >= 2 && cpus[0] != cpus[1];
    run.client_cpus = bind ? cpus[0] : "";
    run.server_cpus = bind ? cpus[1] : "";
    char dir[] = "/tmp/weft-bench-perftest.XXXXXX";
    if (!mkdtemp(dir)) {
        how += "): not run, no temporary directory";
        std::fprintf(stderr, "weft-bench: --compare perftest: mkdtemp: %s; no baseline\n", std::strerror(errno));
        return false;
    }
    run.json = std::string(dir) + "/client.json";
    run.limit_s = run_limit_s();
    how += ", device " + target.device + " port " + std::to_string(target.port) +
           (target.gid >= 0 ? " gid[" + std::to_string(target.gid) + "]" : std::string(", no GID (InfiniBand)")) +
           " as weft's, " +
           (bind ? "client on CPUs " + run.client_cpus + ", server on CPUs " + run.server_cpus
                 : std::string("on every CPU")) +
           "; same sizes, iterations (bandwidth rows: iterations x window messages, -t window)); base = its "
           "t_typical (median) in us (latency rows) or 1/MsgRate, us per message (bandwidth rows); ratio = weft's "
           "median (bandwidth rows: us per message) / base";
    bool ok = true;
    for (Row& r : rows) {
        const PerftestTest* t = perftest_test_for(r.op);
        if (!t) continue;
        const uint64_t iters = t->bandwidth ? r.iters * r.window : r.iters;
        if (iters < perftest_min_iters || iters > perftest_max_iters) {
            std::fprintf(stderr,
                         "weft-bench: --compare perftest: %s -n takes %llu to %llu iterations, not %llu: %s %llu B "
                         "n/a\n",
                         t->program, static_cast<unsigned long long>(perftest_min_iters),
                         static_cast<unsigned long long>(perftest_max_iters), static_cast<unsigned long long>(iters),
                         r.op.c_str(), static_cast<unsigned long long>(r.bytes));
            continue;
        }
        std::string failure;
        const double base = measure(run, *t, path_of(t->program), r, iters, failure);
        if (base <= 0) {
            std::fprintf(stderr, "weft-bench: --compare perftest: %s for %s %llu B gave no result: %s\n", t->program,
                         r.op.c_str(), static_cast<unsigned long long>(r.bytes), failure.c_str());
            ok = false;
            continue;
        }
        r.base_us = base;
        const double weft_us = t->bandwidth ? (r.mmsg_s > 0 ? 1.0 / r.mmsg_s : 0) : r.median_us;
        r.ratio = weft_us / base;
    }
    std::remove(run.json.c_str());
    rmdir(dir);
    return ok;
}

}  // namespace weft_bench
