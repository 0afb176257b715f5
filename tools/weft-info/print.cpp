// print.cpp — weft-info's report in its two forms: text for people (the
// first lines keep the shape tests/mp/select_test.sh and tests/rxe read) and
// JSON (--json) for programs; docs/tools/weft-info.md shows both.
#include "tools/weft-info/json.hpp"
#include "tools/weft-info/report.hpp"

namespace weft::info {

namespace {

std::string bytes_text(uint64_t b) {
    char buf[48];
    if (b >= (1ull << 30))
        std::snprintf(buf, sizeof buf, "%.1f GiB", static_cast<double>(b) / double(1ull << 30));
    else
        std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(b) / double(1ull << 20));
    return buf;
}

void text_topology(const TopologyReport& t, std::FILE* out) {
    if (!t.loaded) {
        std::fprintf(out, "topology: unknown (%s)\n", t.error.c_str());
        return;
    }
    std::fprintf(out, "topology (hwloc): %d package(s), %zu NUMA node(s), %d core(s), %d PU(s)\n", t.packages,
                 t.numa_nodes.size(), t.cores, t.pus);
    for (const NumaNodeReport& n : t.numa_nodes)
        std::fprintf(out, "  NUMA node %u: PUs %s (%d core(s), %d PU(s)), %s of memory\n", n.os_index, n.cpus.c_str(),
                     n.cores, n.pus, bytes_text(n.memory_bytes).c_str());
    if (t.io_devices.empty()) std::fprintf(out, "  network and OpenFabrics devices: none on a PCI bus hwloc sees\n");
    for (const IoDeviceReport& d : t.io_devices)
        std::fprintf(out, "  %s (%s%s%s): near NUMA node(s) %s, PUs %s\n", d.name.c_str(), d.kind.c_str(),
                     d.pci_busid.empty() ? "" : ", PCI ", d.pci_busid.c_str(),
                     d.numa_nodes.empty() ? "?" : d.numa_nodes.c_str(), d.cpus.empty() ? "?" : d.cpus.c_str());
}

void json_caps(JsonWriter& j, const CapsReport& c) {
    j.begin_object();
    j.key("transport").string(c.transport);
    j.key("atomics").string(c.atomics);
    j.key("atomics_registered").string(c.atomics_registered);
    j.key("atomic_scope").string(c.atomic_scope);
    j.key("ordered_puts").boolean(c.ordered_puts);
    j.key("peer_failure_immediate").boolean(c.peer_failure_immediate);
    j.key("am_eager_limit").number(c.am_eager_limit);
    j.key("am_max_size").number(c.am_max_size);
    j.end_object();
}

void json_topology(JsonWriter& j, const TopologyReport& t) {
    j.begin_object();
    j.key("loaded").boolean(t.loaded);
    j.key("error").string_if(!t.loaded, t.error);
    j.key("packages").number(t.packages);
    j.key("cores").number(t.cores);
    j.key("pus").number(t.pus);
    j.key("numa_nodes").begin_array();
    for (const NumaNodeReport& n : t.numa_nodes) {
        j.begin_object();
        j.key("os_index").number(n.os_index);
        j.key("cpus").string(n.cpus);
        j.key("cores").number(n.cores);
        j.key("pus").number(n.pus);
        j.key("memory_bytes").number(n.memory_bytes);
        j.end_object();
    }
    j.end_array();
    j.key("io_devices").begin_array();
    for (const IoDeviceReport& d : t.io_devices) {
        j.begin_object();
        j.key("name").string(d.name);
        j.key("kind").string(d.kind);
        j.key("pci_busid").string(d.pci_busid);
        j.key("numa_nodes").string(d.numa_nodes);
        j.key("cpus").string(d.cpus);
        j.end_object();
    }
    j.end_array();
    j.end_object();
}

#if WEFT_HAVE_VERBS
void json_verbs_devices(JsonWriter& j, const std::vector<verbs::DeviceReport>& devices) {
    j.begin_array();
    for (const verbs::DeviceReport& d : devices) {
        j.begin_object();
        j.key("name").string(d.name);
        j.key("error").string_if(!d.error.empty(), d.error);
        j.key("atomics").string(d.atomics);
        j.key("port_count").number(d.port_count);
        j.key("max_qp_wr").number(d.max_qp_wr);
        j.key("max_cqe").number(d.max_cqe);
        j.key("max_mr_size").number(d.max_mr_size);
        j.key("ports").begin_array();
        for (const verbs::PortReport& p : d.ports) {
            j.begin_object();
            j.key("port").number(p.port);
            j.key("state").string(p.state);
            j.key("link_layer").string(p.link_layer);
            j.key("lid").number(p.lid);
            j.key("active_mtu").number(p.active_mtu);
            j.key("gids").begin_array();
            for (const verbs::GidReport& g : p.gids)
                j.begin_object()
                    .key("index")
                    .number(g.index)
                    .key("address")
                    .string(g.address)
                    .key("type")
                    .string(g.type)
                    .end_object();
            j.end_array();
            j.key("chosen_gid").number(p.chosen_gid);
            j.key("chosen_gid_why").string(p.chosen_why);
            j.key("rdma_cm_address").string_if(p.cm_usable, p.cm_address);
            j.key("rdma_cm_why").string(p.cm_usable ? "" : p.cm_why);
            j.end_object();
        }
        j.end_array();
        j.end_object();
    }
    j.end_array();
}
#endif

}  // namespace

std::string caps_sentence(const CapsReport& c) {
    return "atomics " + c.atomics + " (on registered memory: " + c.atomics_registered + "), scope " + c.atomic_scope +
           ", puts " + (c.ordered_puts ? "ordered" : "unordered") + ", peer failure reported " +
           (c.peer_failure_immediate ? "at once" : "after a timeout") + ", AM eager up to " +
           std::to_string(c.am_eager_limit) + " B, max " + std::to_string(c.am_max_size) + " B";
}

void print_text(const Report& r, std::FILE* out) {
    std::fprintf(out, "weft %s\n", r.version.c_str());
    std::fprintf(out, "backends (WEFT_TRANSPORT):\n");
    for (const BackendReport& b : r.backends) {
        if (!b.built) {
            std::fprintf(out, "  %-6s not built (%s)\n", b.name.c_str(), b.why.c_str());
            continue;
        }
        if (!b.viable) {
            std::fprintf(out, "  %-6s built, not viable: %s\n", b.name.c_str(), b.why.c_str());
            continue;
        }
        std::fprintf(out, "  %-6s built, viable (%s)\n", b.name.c_str(), b.why.c_str());
        if (b.caps)
            std::fprintf(out, "         one-rank job: %s\n", caps_sentence(*b.caps).c_str());
        else
            std::fprintf(out, "         one-rank job: no capabilities: %s\n", b.caps_error.c_str());
    }
    std::fprintf(out, "  auto   %s on one host; %s on several hosts like this one\n", r.auto_one_host.c_str(),
                 r.auto_several_hosts ? r.auto_several_hosts->c_str() : "none");
    std::fprintf(out, "  PMIx bootstrap %s\n", r.pmix_bootstrap ? "built" : "not built");
    std::fprintf(out,
                 "process groups: collective, bootstrap and invite construct, destruct, leave; fault tolerance %s\n",
                 r.group_ft ? "yes (WEFT_CAP_GROUP_FT: FT_COLLECTIVE, MEMBER_FAILED, timeouts, cancel)" : "no");
    text_topology(r.topology, out);
    std::fprintf(out, "verbs devices:\n");
#if WEFT_HAVE_VERBS
    std::fflush(out);
    verbs::describe_devices(out);
#else
    std::fprintf(out, "  (verbs backend not built)\n");
#endif
    std::fprintf(out, "environment weft reads (value here, else unset and the default weft assumes):\n");
    for (const EnvReport& e : r.environment) {
        if (e.value)
            std::fprintf(out, "  %-26s = %s  -- %s\n", e.name, e.value->c_str(), e.meaning);
        else
            std::fprintf(out, "  %-26s unset: %s  -- %s\n", e.name, e.fallback, e.meaning);
    }
}

void print_json(const Report& r, std::FILE* out) {
    JsonWriter j(out);
    j.begin_object();
    j.key("version").string(r.version);
    j.key("backends").begin_array();
    for (const BackendReport& b : r.backends) {
        j.begin_object();
        j.key("name").string(b.name);
        j.key("built").boolean(b.built);
        j.key("viable").boolean(b.viable);
        j.key("why").string(b.why);
        j.key("one_host_only").boolean(b.one_host_only);
        j.key("caps");
        if (b.caps)
            json_caps(j, *b.caps);
        else
            j.null();
        j.key("caps_error").string_if(!b.caps, b.caps_error);
        j.end_object();
    }
    j.end_array();
    j.key("auto").begin_object();
    j.key("one_host").string(r.auto_one_host);
    j.key("several_hosts").string_if(r.auto_several_hosts.has_value(), r.auto_several_hosts.value_or(""));
    j.end_object();
    j.key("pmix_bootstrap").boolean(r.pmix_bootstrap);
    j.key("group_ft").boolean(r.group_ft);
    j.key("topology");
    json_topology(j, r.topology);
    j.key("verbs").begin_object();
    j.key("built").boolean(r.verbs_built);
    j.key("listed").boolean(r.verbs_listed);
    j.key("why").string_if(!r.verbs_listed, r.verbs_why);
    j.key("devices");
#if WEFT_HAVE_VERBS
    json_verbs_devices(j, r.verbs_devices);
#else
    j.begin_array().end_array();
#endif
    j.end_object();
    j.key("environment").begin_array();
    for (const EnvReport& e : r.environment) {
        j.begin_object();
        j.key("name").string(e.name);
        j.key("read_in").string(e.read_in);
        j.key("default").string(e.fallback);
        j.key("meaning").string(e.meaning);
        j.key("value").string_if(e.value.has_value(), e.value.value_or(""));
        j.end_object();
    }
    j.end_array();
    j.end_object();
    j.finish();
}

}  // namespace weft::info
