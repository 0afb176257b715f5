// weft-info — what this build of weft can use on this machine: backends
// (built, viable here and why: transport/registry.hpp) with the capabilities
// weft_query_caps reports for each viable one, auto's choice, the topology
// (hwloc: NUMA nodes, cores, which NIC is near which cores), RDMA devices with
// their ports, GIDs (and the one weft would pick) and atomic capability, and
// the environment variables weft reads (env_vars.hpp). --json prints the same
// as one JSON document. Exit status 0 (2 for a bad argument); informational
// only. docs/tools/weft-info.md shows a run.
//
// weft-info --caps T: start weft as a job of one rank of its own on backend
// T (whatever launcher it runs under) and print weft_query_caps in
// `key value` lines; the report runs it once per viable backend, in a child.
//
// weft-info --job, under a launcher (weft-run, weft-run --hosts, prterun,
// mpirun): every rank starts weft, and rank 0 prints the job's layout — the
// transport chosen, its capabilities, and which ranks run on which host. Exit
// status 1 if weft cannot start.
#include "tools/weft-info/report.hpp"
#include "transport/registry.hpp"

#include <weft/comm.h>
#include <weft/weft.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <unistd.h>
#include <vector>

namespace {

void usage(std::FILE* out) {
    std::fprintf(out,
                 "weft-info: what this build of weft can use on this machine\n"
                 "usage: weft-info [-h|--help] [--json | --job | --caps T]\n"
                 "Prints weft's version, each backend (WEFT_TRANSPORT): built, viable here and why, and\n"
                 "for a viable one the capabilities of a one-rank job on it (weft_query_caps); what auto\n"
                 "picks; the topology (hwloc: NUMA nodes, cores, network and RDMA devices and the cores\n"
                 "near them); each RDMA device's ports, GIDs (and the one weft picks) and atomics; and\n"
                 "every environment variable weft reads, with its value here or its default.\n"
                 "  --json     the same as one JSON document on stdout\n"
                 "  --caps T   start weft as a job of one rank on backend T (shm, ucx, verbs) and print\n"
                 "             its capabilities, one `key value` per line (exit status 1 if it cannot start)\n"
                 "  --job      under a launcher: start weft on every rank; rank 0 prints the transport\n"
                 "             chosen, its capabilities and the hosts with their ranks (exit status 1 if\n"
                 "             weft cannot start)\n"
                 "Exit status: 0, or 2 for a bad argument.\n");
}

// Variables a launcher sets for the ranks it starts (the bootstrap, fault
// points, drain and checkpoint channels): --caps clears them so that its job
// is one rank of its own, never a member of the launcher's job.
constexpr const char* launcher_vars[] = {
    "WEFT_BOOTSTRAP",       "WEFT_SECRET",       "WEFT_JOB",          "WEFT_RANK",      "WEFT_SIZE",
    "WEFT_JOB_SIZES",       "WEFT_FAULT_POINTS", "PMIX_RANK",         "PMIX_NAMESPACE", "WEFT_DRAIN_FD",
    "WEFT_DRAIN_REPORT_FD", "WEFT_CKPT_FD",      "WEFT_CKPT_RESTART",
};

int print_caps(const char* transport) {
    for (const char* v : launcher_vars) unsetenv(v);
    setenv("WEFT_TRANSPORT", transport, 1);
    weft_context_t ctx = nullptr;
    weft_status_t st = weft_init(&ctx);
    if (st != WEFT_OK) {
        std::fprintf(stderr, "weft-info --caps %s: weft_init: %s\n", transport, weft_strerror(st));
        return 1;
    }
    weft_caps_t caps{};
    st = weft_query_caps(ctx, &caps);
    if (st == WEFT_OK)
        std::fputs(weft::info::caps_lines(weft::info::caps_report(caps)).c_str(), stdout);
    else
        std::fprintf(stderr, "weft-info --caps %s: weft_query_caps: %s\n", transport, weft_strerror(st));
    const weft_status_t fin = weft_finalize(ctx);
    if (fin != WEFT_OK) std::fprintf(stderr, "weft-info --caps %s: weft_finalize: %s\n", transport, weft_strerror(fin));
    return st == WEFT_OK && fin == WEFT_OK ? 0 : 1;
}

// One rank's line of the layout.
struct RankRecord {
    char host[64];
    char transport[16];
    uint64_t pid;
};

int job_layout() {
    weft_context_t ctx = nullptr;
    weft_status_t st = weft_init(&ctx);
    if (st != WEFT_OK) {
        std::fprintf(stderr, "weft-info --job: weft_init: %s\n", weft_strerror(st));
        return 1;
    }
    uint32_t rank = 0, size = 0;
    weft_rank(ctx, &rank);
    weft_size(ctx, &size);
    weft_caps_t caps{};
    weft_query_caps(ctx, &caps);
    RankRecord mine{};
    gethostname(mine.host, sizeof mine.host - 1);
    std::snprintf(mine.transport, sizeof mine.transport, "%s", caps.transport ? caps.transport : "?");
    mine.pid = static_cast<uint64_t>(getpid());
    std::vector<RankRecord> all(size);
    weft_comm_t world = nullptr;
    st = weft_comm_world(ctx, &world);
    if (st == WEFT_OK) st = weft_allgather(world, &mine, sizeof mine, WEFT_BYTE, all.data());
    if (st != WEFT_OK) {
        std::fprintf(stderr, "weft-info --job: rank %u: gathering the layout: %s\n", rank, weft_strerror(st));
        weft_finalize(ctx);
        return 1;
    }
    if (rank == 0) {
        std::map<std::string, std::vector<uint32_t>> hosts;  // by name, ranks in order
        for (uint32_t r = 0; r < size; ++r) hosts[all[r].host].push_back(r);
        std::printf("job: %u rank(s) on %zu host(s), transport %s\n", size, hosts.size(), all[0].transport);
        for (const auto& [host, ranks] : hosts) {
            std::printf("  host %s: rank(s)", host.c_str());
            for (uint32_t r : ranks) std::printf(" %u", r);
            std::printf("\n");
        }
        for (uint32_t r = 0; r < size; ++r)
            if (std::strcmp(all[r].transport, all[0].transport) != 0)
                std::printf("  rank %u uses transport %s\n", r, all[r].transport);
        std::printf("  rank 0's capabilities: %s\n", weft::info::caps_sentence(weft::info::caps_report(caps)).c_str());
    }
    st = weft_finalize(ctx);
    return st == WEFT_OK ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
    enum class Mode { report, json, job, caps } mode = Mode::report;
    const char* caps_transport = nullptr;
    int modes = 0;
    for (int i = 1; i < argc; ++i) {
        const char* a = argv[i];
        if (std::strcmp(a, "-h") == 0 || std::strcmp(a, "--help") == 0) {
            usage(stdout);
            return 0;
        }
        if (std::strcmp(a, "--json") == 0) {
            mode = Mode::json;
        } else if (std::strcmp(a, "--job") == 0) {
            mode = Mode::job;
        } else if (std::strcmp(a, "--caps") == 0) {
            if (i + 1 == argc) {
                std::fprintf(stderr, "weft-info: --caps needs a backend (%s)\n", weft::backend_names().c_str());
                return 2;
            }
            caps_transport = argv[++i];
            if (!weft::find_backend(caps_transport)) {
                std::fprintf(stderr, "weft-info: --caps %s: not a backend (%s)\n", caps_transport,
                             weft::backend_names().c_str());
                return 2;
            }
            mode = Mode::caps;
        } else {
            std::fprintf(stderr, "weft-info: unknown argument '%s'\n", a);
            usage(stderr);
            return 2;
        }
        ++modes;
    }
    if (modes > 1) {
        std::fprintf(stderr, "weft-info: --json, --job and --caps go alone\n");
        usage(stderr);
        return 2;
    }
    switch (mode) {
        case Mode::job:
            return job_layout();
        case Mode::caps:
            return print_caps(caps_transport);
        case Mode::json:
            weft::info::print_json(weft::info::gather("/proc/self/exe"), stdout);
            return 0;
        case Mode::report:
            break;
    }
    weft::info::print_text(weft::info::gather("/proc/self/exe"), stdout);
    return 0;
}
