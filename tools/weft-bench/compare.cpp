// compare.cpp — runs ucx_perftest beside weft-bench's rows (compare.hpp).
// One server and one client per row, as bench/ucx_perftest.sh does; the
// client's `-f` line is "iterations p50 avg overall bw_avg bw_overall
// rate_avg rate_overall". Latency rows take the p50 (ucx_perftest reports
// put_lat, am_lat and tag_lat as half a round trip and get and the atomics
// as a full one, as weft-bench does); bandwidth rows take the time per
// message, 1/overall rate. ratio = weft's number / the baseline's: above 1,
// weft is slower.
#include "child.hpp"
#include "compare.hpp"

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <map>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

namespace weft_bench {

namespace {

const std::map<std::string, const char*>& test_for_op() {
    static const std::map<std::string, const char*> m = {
        {"put", "ucp_put_lat"}, {"get", "ucp_get"},    {"fadd", "ucp_fadd"}, {"cswap", "ucp_cswap"},
        {"swap", "ucp_swap"},   {"am", "ucp_am_lat"},  {"send", "tag_lat"},  {"put_bw", "ucp_put_bw"},
        {"am_bw", "ucp_am_bw"}, {"send_bw", "tag_bw"},
    };
    return m;
}

// Starts `ucx_perftest -p PORT` with output to /dev/null; its pid, or -1.
pid_t start_server(int port, const std::string& cpu) {
    const std::string p = std::to_string(port);
    const char* argv[] = {"ucx_perftest", "-p", p.c_str(), cpu.empty() ? nullptr : "-c", cpu.c_str(), nullptr};
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    pid_t pid = -1;
    const int rc = posix_spawnp(&pid, "ucx_perftest", &fa, nullptr, const_cast<char* const*>(argv), environ);
    posix_spawn_file_actions_destroy(&fa);
    return rc == 0 ? pid : -1;
}

// The client's last line, or "" if it failed.
std::string run_client(int port, const std::string& cpu, const char* test, uint64_t iters, uint64_t warmup,
                       uint64_t size) {
    char cmd[256];
    std::snprintf(cmd, sizeof cmd, "timeout 60 ucx_perftest 127.0.0.1 -p %d -t %s -n %llu -w %llu -s %llu -f%s%s 2>&1",
                  port, test, static_cast<unsigned long long>(iters), static_cast<unsigned long long>(warmup),
                  static_cast<unsigned long long>(size), cpu.empty() ? "" : " -c ", cpu.c_str());
    std::FILE* f = popen(cmd, "r");
    if (!f) return "";
    std::string last;
    char line[512];
    while (std::fgets(line, sizeof line, f))
        if (line[0] != '\n') last = line;
    return pclose(f) == 0 ? last : "";
}

// The first CPU of a list such as "3,5-7".
std::string first_cpu(const std::string& list) { return list.substr(0, list.find_first_of(",-")); }

}  // namespace

bool compare_ucx_perftest(std::vector<Row>& rows, uint64_t warmup, uint64_t window, const std::string& tls,
                          const std::vector<std::string>& cpus, std::string& how) {
    setenv("UCX_TLS", tls.c_str(), 1);
    const bool bind = cpus.size() >= 2 && cpus[0] != cpus[1];
    const std::string client_cpu = bind ? first_cpu(cpus[0]) : "", server_cpu = bind ? first_cpu(cpus[1]) : "";
    how = "ucx_perftest (UCX_TLS=" + tls + ", loopback 127.0.0.1, " +
          (bind ? "client on CPU " + client_cpu + ", server on CPU " + server_cpu : std::string("unbound")) +
          ", same sizes, iterations and warm-up); base = its p50 (latency rows) or 1/message rate (bandwidth rows) "
          "in us; ratio = weft / base";
    bool ok = true;
    for (Row& r : rows) {
        const auto t = test_for_op().find(r.op);
        if (t == test_for_op().end()) continue;
        const uint64_t warm = r.bytes > (64u << 10) ? std::max<uint64_t>(1, warmup * (64u << 10) / r.bytes) : warmup;
        std::string line;
        for (int attempt = 0; attempt < 10 && line.empty(); ++attempt) {
            const int port = free_port();
            if (port < 0) {
                std::fprintf(stderr, "weft-bench: no free TCP port for ucx_perftest: %s\n", std::strerror(errno));
                return false;
            }
            const pid_t server = start_server(port, server_cpu);
            if (server < 0) {
                std::fprintf(stderr, "weft-bench: cannot start ucx_perftest: %s\n", std::strerror(errno));
                return false;
            }
            // The client fails fast while the server is not listening yet.
            for (int wait = 0; wait < 10 && line.empty(); ++wait) {
                usleep(200000);
                line = run_client(port, client_cpu, t->second, r.mb_s > 0 ? r.iters * window : r.iters, warm, r.bytes);
                int status = 0;
                if (line.empty() && waitpid(server, &status, WNOHANG) == server) break;  // the server gave up
            }
            kill(server, SIGTERM);
            waitpid(server, nullptr, 0);
        }
        unsigned long long iters = 0;
        double p50 = 0, avg = 0, overall = 0, bw_avg = 0, bw_overall = 0, rate_avg = 0, rate_overall = 0;
        if (line.empty() || std::sscanf(line.c_str(), "%llu %lf %lf %lf %lf %lf %lf %lf", &iters, &p50, &avg, &overall,
                                        &bw_avg, &bw_overall, &rate_avg, &rate_overall) != 8) {
            std::fprintf(stderr, "weft-bench: ucx_perftest -t %s -s %llu gave no result\n", t->second,
                         static_cast<unsigned long long>(r.bytes));
            ok = false;
            continue;
        }
        const bool bandwidth = r.mb_s > 0;
        r.base_us = bandwidth ? (rate_overall > 0 ? 1e6 / rate_overall : 0) : p50;
        const double weft_us = bandwidth ? (r.mmsg_s > 0 ? 1.0 / r.mmsg_s : 0) : r.median_us;
        r.ratio = r.base_us > 0 ? weft_us / r.base_us : 0;
    }
    return ok;
}

}  // namespace weft_bench
