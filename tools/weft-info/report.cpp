// report.cpp — gathering weft-info's report: the backend registry and each
// viable backend's capabilities (from a one-rank job of its own, run in a
// child process: weft_query_caps needs a live context), hwloc's topology
// with its network and OpenFabrics devices, the verbs devices, and the
// environment variables weft reads (env_vars.hpp).
#include "tools/weft-info/report.hpp"

#include "tools/weft-info/env_vars.hpp"
#include "transport/registry.hpp"

#include <weft/group.h>
#include <weft/version.h>

#include <hwloc.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <fcntl.h>
#include <map>
#include <poll.h>
#include <sstream>
#include <sys/wait.h>
#include <unistd.h>

namespace weft::info {

namespace {

const char* atomic_impl_name(weft_atomic_impl_t a) {
    switch (a) {
        case WEFT_ATOMICS_CPU:
            return "cpu";
        case WEFT_ATOMICS_HARDWARE:
            return "hardware";
        case WEFT_ATOMICS_EMULATED:
            return "emulated";
        case WEFT_ATOMICS_NONE:
            return "none";
    }
    return "?";
}

// How long a backend's one-rank job may take to report before it is killed.
constexpr int caps_child_deadline_ms = 30000;

// Runs `self --caps NAME` and reads what it prints; on any failure `error`
// says what happened. The child is always reaped.
bool probe_caps(const char* self, const char* name, CapsReport& out, std::string& error) {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) {
        error = std::string("pipe: ") + std::strerror(errno);
        return false;
    }
    const pid_t pid = fork();
    if (pid < 0) {
        error = std::string("fork: ") + std::strerror(errno);
        close(fds[0]);
        close(fds[1]);
        return false;
    }
    if (pid == 0) {
        dup2(fds[1], STDOUT_FILENO);  // dup2 clears close-on-exec on the copy
        execl(self, self, "--caps", name, static_cast<char*>(nullptr));
        _exit(127);
    }
    close(fds[1]);
    std::string text;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(caps_child_deadline_ms);
    bool timed_out = false;
    for (;;) {
        const auto left =
            std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
        if (left.count() <= 0) {
            timed_out = true;
            break;
        }
        pollfd p{fds[0], POLLIN, 0};
        const int r = poll(&p, 1, static_cast<int>(left.count()));
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) continue;  // the deadline check above ends it
        char buf[512];
        const ssize_t n = read(fds[0], buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;  // EOF: the child exited (or closed its stdout)
        text.append(buf, static_cast<size_t>(n));
    }
    close(fds[0]);
    if (timed_out) kill(pid, SIGKILL);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (timed_out) {
        error = "its one-rank job did not report within " + std::to_string(caps_child_deadline_ms / 1000) + " s";
        return false;
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        error = WIFSIGNALED(status) ? std::string("its one-rank job died of signal ") + strsignal(WTERMSIG(status))
                                    : "its one-rank job failed (exit status " + std::to_string(WEXITSTATUS(status)) +
                                          "; run weft-info --caps " + name + " to see why)";
        return false;
    }
    if (!parse_caps_lines(text, out)) {
        error = "its one-rank job printed no capabilities";
        return false;
    }
    return true;
}

std::string bitmap_list(hwloc_const_bitmap_t set) {
    char* text = nullptr;
    if (!set || hwloc_bitmap_list_asprintf(&text, set) < 0 || !text) return "";
    std::string out(text);
    std::free(text);
    return out;
}

TopologyReport gather_topology() {
    TopologyReport t;
    hwloc_topology_t topo;
    if (hwloc_topology_init(&topo) != 0) {
        t.error = std::string("hwloc_topology_init: ") + std::strerror(errno);
        return t;
    }
    // I/O discovery: PCI devices and the OS devices (NICs, RDMA devices) on them.
    hwloc_topology_set_io_types_filter(topo, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
    if (hwloc_topology_load(topo) != 0) {
        t.error = std::string("hwloc_topology_load: ") + std::strerror(errno);
        hwloc_topology_destroy(topo);
        return t;
    }
    // hwloc's PCI plugin keeps libpciaccess's state allocated (by design)
    // and unloads the library with the plugin at the last destroy, after
    // which no global roots that state and LeakSanitizer reports it (CI's
    // ASan stage). Pinning the library, loaded by now, keeps it reachable
    // as in any process that keeps it loaded. A no-op where it is absent.
    if (void* pci = dlopen("libpciaccess.so.0", RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE)) dlclose(pci);
    t.loaded = true;
    t.packages = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PACKAGE);
    t.cores = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE);
    t.pus = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PU);
    for (hwloc_obj_t node = nullptr; (node = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_NUMANODE, node));) {
        NumaNodeReport n;
        n.os_index = node->os_index;
        n.cpus = bitmap_list(node->cpuset);
        n.cores = hwloc_get_nbobjs_inside_cpuset_by_type(topo, node->cpuset, HWLOC_OBJ_CORE);
        n.pus = hwloc_get_nbobjs_inside_cpuset_by_type(topo, node->cpuset, HWLOC_OBJ_PU);
        n.memory_bytes = node->attr ? node->attr->numanode.local_memory : 0;
        t.numa_nodes.push_back(std::move(n));
    }
    for (hwloc_obj_t os = nullptr; (os = hwloc_get_next_osdev(topo, os));) {
        const auto type = os->attr->osdev.type;
        if (type != HWLOC_OBJ_OSDEV_NETWORK && type != HWLOC_OBJ_OSDEV_OPENFABRICS) continue;
        IoDeviceReport d;
        d.name = os->name ? os->name : "";
        d.kind = type == HWLOC_OBJ_OSDEV_NETWORK ? "network" : "openfabrics";
        for (hwloc_obj_t up = os->parent; up; up = up->parent)
            if (up->type == HWLOC_OBJ_PCI_DEVICE) {
                char busid[32];
                std::snprintf(busid, sizeof busid, "%04x:%02x:%02x.%01x", up->attr->pcidev.domain, up->attr->pcidev.bus,
                              up->attr->pcidev.dev, up->attr->pcidev.func);
                d.pci_busid = busid;
                break;
            }
        if (hwloc_obj_t near = hwloc_get_non_io_ancestor_obj(topo, os)) {
            d.numa_nodes = bitmap_list(near->nodeset);
            d.cpus = bitmap_list(near->cpuset);
        }
        t.io_devices.push_back(std::move(d));
    }
    hwloc_topology_destroy(topo);
    return t;
}

}  // namespace

CapsReport caps_report(const weft_caps_t& caps) {
    CapsReport c;
    c.transport = caps.transport ? caps.transport : "?";
    c.atomics = atomic_impl_name(caps.atomics);
    c.atomics_registered = atomic_impl_name(caps.atomics_registered);
    c.atomic_scope = caps.atomic_scope == WEFT_ATOMIC_SCOPE_GLOBAL ? "global" : "device";
    c.ordered_puts = caps.ordered_puts != 0;
    c.peer_failure_immediate = caps.peer_failure_immediate != 0;
    c.am_eager_limit = caps.am_eager_limit;
    c.am_max_size = caps.am_max_size;
    return c;
}

std::string caps_lines(const CapsReport& c) {
    std::ostringstream s;
    s << "transport " << c.transport << "\n"
      << "atomics " << c.atomics << "\n"
      << "atomics_registered " << c.atomics_registered << "\n"
      << "atomic_scope " << c.atomic_scope << "\n"
      << "ordered_puts " << c.ordered_puts << "\n"
      << "peer_failure_immediate " << c.peer_failure_immediate << "\n"
      << "am_eager_limit " << c.am_eager_limit << "\n"
      << "am_max_size " << c.am_max_size << "\n";
    return s.str();
}

bool parse_caps_lines(const std::string& text, CapsReport& out) {
    std::map<std::string, std::string> fields;  // key -> value, from `key value` lines
    std::istringstream in(text);
    for (std::string key, value; in >> key >> value;) fields[key] = value;
    const auto take = [&](const char* key, auto& into) {
        const auto it = fields.find(key);
        if (it == fields.end()) return false;
        std::istringstream v(it->second);
        return static_cast<bool>(v >> into);
    };
    CapsReport c;
    if (!(take("transport", c.transport) && take("atomics", c.atomics) &&
          take("atomics_registered", c.atomics_registered) && take("atomic_scope", c.atomic_scope) &&
          take("ordered_puts", c.ordered_puts) && take("peer_failure_immediate", c.peer_failure_immediate) &&
          take("am_eager_limit", c.am_eager_limit) && take("am_max_size", c.am_max_size)))
        return false;
    out = c;
    return true;
}

Report gather(const char* self) {
    Report r;
    r.version = WEFT_VERSION;
    bool verbs_here = false;
    for (const BackendEntry& b : backend_registry()) {
        BackendReport br;
        br.name = b.name;
        br.built = b.built;
        br.one_host_only = b.one_host_only;
        if (!b.built) {
            br.why = b.not_built_why;
            br.caps_error = "not built";
        } else {
            br.viable = b.viable(br.why) == WEFT_OK;
            if (br.name == "verbs") verbs_here = br.viable;
            CapsReport caps;
            if (!br.viable)
                br.caps_error = "not viable here";
            else if (probe_caps(self, b.name, caps, br.caps_error))
                br.caps = caps;
        }
        r.backends.push_back(std::move(br));
    }
    // What auto picks for a job of this build on hosts like this one.
    r.auto_one_host = auto_backend(true, false)->name;
    if (const BackendEntry* several = auto_backend(false, verbs_here)) r.auto_several_hosts = several->name;
    r.pmix_bootstrap = WEFT_HAVE_PMIX;
    int group_ft = 0;
    r.group_ft = weft_group_ft_supported(&group_ft) == WEFT_OK && group_ft;
    r.topology = gather_topology();
    r.verbs_built = WEFT_HAVE_VERBS;
#if WEFT_HAVE_VERBS
    r.verbs_listed = verbs::list_devices(r.verbs_devices, r.verbs_why);
#else
    r.verbs_why = "the verbs backend is not built";
#endif
    for (const EnvVar& v : env_vars) {
        EnvReport e{v.name, v.read_in, v.fallback, v.meaning, std::nullopt};
        if (const char* value = std::getenv(v.name)) e.value = value;
        r.environment.push_back(std::move(e));
    }
    return r;
}

}  // namespace weft::info
