// weft-info — what this build of weft can use on this machine: backends
// (built, viable here and why: transport/registry.hpp), auto's choice,
// topology, RDMA devices with their ports, GIDs (and the one weft would
// pick) and atomic capability. Exit status 0 (2 for a bad argument);
// informational only.
//
// weft-info --job, under a launcher (weft-run, weft-run --hosts, prterun,
// mpirun): every rank starts weft, and rank 0 prints the job's layout — the
// transport chosen, and which ranks run on which host. Exit status 1 if weft
// cannot start.
#include "transport/registry.hpp"

#include <weft/comm.h>
#include <weft/config.hpp>
#include <weft/group.h>
#include <weft/version.h>
#include <weft/weft.h>

#if WEFT_HAVE_VERBS
#include "transport/verbs/verbs_device.hpp"
#endif

#include <hwloc.h>

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
                 "usage: weft-info [-h|--help] [--job]\n"
                 "Prints weft's version, each backend (WEFT_TRANSPORT): built, viable here and why, what\n"
                 "auto picks, the machine's topology\n"
                 "and each RDMA device's ports, GIDs (and the one weft picks) and atomic capability.\n"
                 "  --job   under a launcher: start weft on every rank; rank 0 prints the transport\n"
                 "          chosen and the hosts with their ranks (exit status 1 if weft cannot start)\n"
                 "Exit status: 0, or 2 for a bad argument.\n");
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
    }
    st = weft_finalize(ctx);
    return st == WEFT_OK ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc > 1) {
        if (std::strcmp(argv[1], "-h") == 0 || std::strcmp(argv[1], "--help") == 0) {
            usage(stdout);
            return 0;
        }
        if (std::strcmp(argv[1], "--job") == 0 && argc == 2) return job_layout();
        std::fprintf(stderr, "weft-info: unknown argument '%s'\n", argv[1]);
        usage(stderr);
        return 2;
    }
    std::printf("weft %s\n", WEFT_VERSION);
    std::printf("backends (WEFT_TRANSPORT):\n");
    bool verbs_here = false;
    for (const weft::BackendEntry& b : weft::backend_registry()) {
        if (!b.built) {
            std::printf("  %-6s not built (%s)\n", b.name, b.not_built_why);
            continue;
        }
        std::string why;
        const weft_status_t st = b.viable(why);
        if (&b == weft::find_backend("verbs")) verbs_here = st == WEFT_OK;
        if (st == WEFT_OK)
            std::printf("  %-6s built, viable (%s)\n", b.name, why.c_str());
        else
            std::printf("  %-6s built, not viable: %s\n", b.name, why.c_str());
    }
    // What auto picks for a job of this build on hosts like this one.
    const weft::BackendEntry* several = weft::auto_backend(false, verbs_here);
    std::printf("  auto   %s on one host; %s on several hosts like this one\n", weft::auto_backend(true, false)->name,
                several ? several->name : "none");
    std::printf("  PMIx bootstrap %s\n", WEFT_HAVE_PMIX ? "built" : "not built");
    int group_ft = 0;
    weft_group_ft_supported(&group_ft);
    std::printf("process groups: collective, bootstrap and invite construct, destruct, leave; fault tolerance %s\n",
                group_ft ? "yes (WEFT_CAP_GROUP_FT: FT_COLLECTIVE, MEMBER_FAILED, timeouts, cancel)" : "no");

    hwloc_topology_t topo;
    if (hwloc_topology_init(&topo) == 0 && hwloc_topology_load(topo) == 0) {
        std::printf("topology: %d package(s), %d NUMA node(s), %d core(s), %d PU(s)\n",
                    hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PACKAGE),
                    hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE), hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE),
                    hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PU));
        hwloc_topology_destroy(topo);
    }

    std::printf("verbs devices:\n");
#if WEFT_HAVE_VERBS
    weft::verbs::describe_devices(stdout);
    if (const char* d = std::getenv("WEFT_VERBS_DEVICE")) std::printf("  WEFT_VERBS_DEVICE=%s\n", d);
#else
    std::printf("  (verbs backend not built)\n");
#endif
    return 0;
}
