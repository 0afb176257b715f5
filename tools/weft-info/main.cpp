// weft-info — what this build of weft can use on this machine: backends,
// topology, RDMA devices with their ports, GIDs (and the one weft would
// pick) and atomic capability. Exit status 0 (2 for an argument: it takes
// none but -h/--help); informational only.
#include "transport/backend.hpp"

#include <weft/config.hpp>

#if WEFT_HAVE_VERBS
#include "transport/verbs/verbs_device.hpp"
#endif

#include <hwloc.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

void usage(std::FILE* out) {
    std::fprintf(out,
                 "weft-info: what this build of weft can use on this machine\n"
                 "usage: weft-info [-h|--help]\n"
                 "Prints weft's version, the backends built (WEFT_TRANSPORT), the machine's topology\n"
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
    std::printf("  shm    built (all ranks on one host)\n");
    std::printf("  ucx    %s\n", weft::ucx_backend_built() ? "built" : "not built (no UCX at configure time)");
    std::printf("  verbs  %s\n", weft::verbs_backend_built() ? "built" : "not built (no libibverbs at configure time)");
    std::printf("  PMIx bootstrap %s\n", WEFT_HAVE_PMIX ? "built" : "not built");

    hwloc_topology_t topo;
    if (hwloc_topology_init(&topo) == 0 && hwloc_topology_load(topo) == 0) {
        std::printf("topology: %d package(s), %d NUMA node(s), %d core(s), %d PU(s)\n",
                    hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PACKAGE), hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE),
                    hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE), hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PU));
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
