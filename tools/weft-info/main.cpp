// weft-info — what this build of weft can use on this machine: backends
// (built, viable here and why: transport/registry.hpp), auto's choice,
// topology, RDMA devices with their ports, GIDs (and the one weft would
// pick) and atomic capability. Exit status 0 (2 for an argument: it takes
// none but -h/--help); informational only.
#include "transport/registry.hpp"

#include <weft/config.hpp>

#if WEFT_HAVE_VERBS
#include "transport/verbs/verbs_device.hpp"
#endif

#include <hwloc.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

void usage(std::FILE* out) {
    std::fprintf(out,
                 "weft-info: what this build of weft can use on this machine\n"
                 "usage: weft-info [-h|--help]\n"
                 "Prints weft's version, each backend (WEFT_TRANSPORT): built, viable here and why, what\n"
                 "auto picks, the machine's topology\n"
                 "and each RDMA device's ports, GIDs (and the one weft picks) and atomic capability.\n"
                 "Takes no arguments. Exit status: 0, or 2 for a bad argument.\n");
}

}  // namespace

int main(int argc, char** argv) {
    if (argc > 1) {
        if (std::strcmp(argv[1], "-h") == 0 || std::strcmp(argv[1], "--help") == 0) {
            usage(stdout);
            return 0;
        }
        std::fprintf(stderr, "weft-info: unknown argument '%s' (weft-info takes none)\n", argv[1]);
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
