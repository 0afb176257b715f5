// report.hpp — everything weft-info says about this build on this machine,
// gathered once into plain structs (report.cpp) and then printed as text or
// JSON (print.cpp), so the two forms cannot disagree.
#pragma once

#include <weft/weft.h>

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include <weft/config.hpp>
#if WEFT_HAVE_VERBS
#include "transport/verbs/verbs_device.hpp"
#endif

namespace weft::info {

// weft_caps_t in words: what weft_query_caps said for one context.
struct CapsReport {
    std::string transport;
    std::string atomics;             // cpu | hardware | emulated | none
    std::string atomics_registered;  // the same, on weft_window_register memory
    std::string atomic_scope;        // global | device
    bool ordered_puts = false;
    bool peer_failure_immediate = false;
    uint64_t am_eager_limit = 0;
    uint64_t am_max_size = 0;
};
CapsReport caps_report(const weft_caps_t& caps);
// The `key value` lines weft-info --caps prints, and their parse (false if
// a field is missing or malformed).
std::string caps_lines(const CapsReport& caps);
bool parse_caps_lines(const std::string& text, CapsReport& out);

struct BackendReport {
    std::string name;
    bool built = false;
    bool viable = false;
    std::string why;  // not built: why; built: what the probe found or why it failed
    bool one_host_only = false;
    // Capabilities of a one-rank job on this backend (weft-info --caps in a
    // child process), when built and viable; else caps_error says why not.
    std::optional<CapsReport> caps;
    std::string caps_error;
};

struct NumaNodeReport {
    unsigned os_index = 0;
    std::string cpus;  // PU list, "0-3,8"
    int cores = 0;
    int pus = 0;
    uint64_t memory_bytes = 0;
};

// A network or OpenFabrics device hwloc found on a PCI bus, and where it sits.
struct IoDeviceReport {
    std::string name;        // the OS's name: eth0, mlx5_0
    std::string kind;        // network | openfabrics
    std::string pci_busid;   // empty when hwloc gives none
    std::string numa_nodes;  // the NUMA nodes it is near (os indexes), "0"
    std::string cpus;        // the PUs it is near
};

struct TopologyReport {
    bool loaded = false;
    std::string error;  // when not loaded
    int packages = 0, cores = 0, pus = 0;
    std::vector<NumaNodeReport> numa_nodes;
    std::vector<IoDeviceReport> io_devices;
};

struct EnvReport {
    const char* name;
    const char* read_in;
    const char* fallback;
    const char* meaning;
    std::optional<std::string> value;  // when set here
};

struct Report {
    std::string version;
    std::vector<BackendReport> backends;
    std::string auto_one_host;
    std::optional<std::string> auto_several_hosts;  // none: no backend fits
    bool pmix_bootstrap = false;
    bool group_ft = false;
    TopologyReport topology;
    bool verbs_built = false;
    bool verbs_listed = false;  // the device list could be had
    std::string verbs_why;      // when not listed
#if WEFT_HAVE_VERBS
    std::vector<verbs::DeviceReport> verbs_devices;
#endif
    std::vector<EnvReport> environment;
};

// The capabilities in one line of words (text output, --job).
std::string caps_sentence(const CapsReport& caps);

// The two forms of the report (print.cpp).
void print_text(const Report& r, std::FILE* out);
void print_json(const Report& r, std::FILE* out);

// Gathers the report. `self` is this program's path, run as `self --caps T`
// for each viable backend.
Report gather(const char* self);

}  // namespace weft::info
