// hosts.hpp — K simulated hosts on this machine (weft-run --hosts K, and
// weft-hosts for other launchers), so a job spans "hosts" that share
// nothing but a network, as on a cluster.
//
// Each host is one holder process, made by clone() with new network, UTS,
// mount, PID and IPC namespaces (System V shared memory is per IPC
// namespace: without one, UCX's sysv transport joins "hosts" through memory): it is PID 1 of its host, names the host
// (hostname weft-host-H), mounts a private /tmp, /dev/shm and /proc, and
// reaps orphans. The launch's own directories under /tmp stay visible (see
// create). The hosts are joined by a bridge that lives in a network
// namespace of its own (a "switch", also held by a process): each host has
// one veth to it with the address 10.213.0.(H+1)/24. No address is added
// outside the namespaces made here, so no traffic can leave them.
//
// A rank enters its host's namespaces (setns) in the child weft-run forks,
// which then forks the rank itself inside the host's PID namespace and waits
// for it (see Launcher::spawn). Everything is held by processes that die
// with weft-run (PR_SET_PDEATHSIG), and a network namespace goes with its
// last process, so nothing outlives a launch, however it ends.
//
// Needs root (CAP_SYS_ADMIN, CAP_NET_ADMIN) and iproute2's `ip`.
// Thread affinity: weft-run's one thread.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace weft::run {

class SimulatedHosts {
public:
    SimulatedHosts() = default;
    SimulatedHosts(const SimulatedHosts&) = delete;
    SimulatedHosts& operator=(const SimulatedHosts&) = delete;
    // Kills the holders: the namespaces, veths and bridge go with them.
    ~SimulatedHosts();

    // Creates k hosts and their network; false with `error` set. Each
    // host's /tmp is its own, except the top-level entries of /tmp named in
    // keep_in_tmp (the launch's program, working directory, output), which
    // stay the machine's.
    bool create(uint32_t k, const std::vector<std::string>& keep_in_tmp, std::string& error);
    uint32_t count() const { return static_cast<uint32_t>(hosts_.size()); }
    // The holder: PID 1 of host h (as weft-run sees it). SIGKILL to it is a
    // node loss: the kernel kills every process of the host at once.
    pid_t holder(uint32_t h) const { return hosts_[h].holder; }
    // True if pid is one of the holders (weft-run reaped it: the host is
    // gone, and the destructor must not signal its pid, which may be reused).
    bool reaped_holder(pid_t pid);
    std::string address(uint32_t h) const;
    std::string hostname(uint32_t h) const;

    // In a child weft-run forked, before it forks the rank: moves into host
    // h's network, UTS, mount and IPC namespaces, and makes its next child a
    // process of the host's PID namespace. Only syscalls on descriptors
    // opened by create(); false (errno set) if one fails.
    bool enter(uint32_t h) const;

    // A head: a network namespace on the hosts' network (address
    // head_address()), with the machine's PID and mount namespaces, for a
    // launcher that starts daemons on the hosts from outside them
    // (weft-hosts). False with `error` set.
    bool add_head(std::string& error);
    pid_t head() const { return head_; }
    static std::string head_address() { return "10.213.0.254"; }

    // Takes host h's link to the switch down (a cut cable) or up again, and
    // returns once the host's own end shows it (eth0 running or not), so
    // the caller knows when the fault took effect: on a busy machine the
    // kernel can hold a link change for seconds behind other namespaces'
    // work (measured up to 4.8 s here). False if either step fails.
    bool set_link(uint32_t h, bool up);

private:
    struct Host {
        pid_t holder = -1;
        int ns[5] = {-1, -1, -1, -1, -1};  // net, uts, mnt, pid, ipc: /proc/HOLDER/ns/*
        int sock = -1;                     // socket_in(holder): its eth0's state
    };
    static pid_t spawn_holder(int flags, const std::string& hostname, const std::vector<std::string>& keep);
    // Runs `ip args...` inside the network namespace of ns_pid; true if it
    // exits 0 (its stderr goes to weft-run's).
    static bool ip(pid_t ns_pid, const std::vector<std::string>& args);
    // A datagram socket in ns_pid's network namespace (-1 on failure): its
    // ioctls read and set that namespace's interfaces, with no child forked.
    static int socket_in(pid_t ns_pid);
    // True if interface `dev` of sock's network namespace is running.
    static bool link_running(int sock, const char* dev);
    // Waits (10 s at most) until host h's eth0 is running or not; false
    // at the deadline.
    bool await_link(uint32_t h, bool running);

    // Joins ns_pid's network namespace to the bridge through the veth
    // `side` (switch end) / eth0 with `address`.
    bool wire(pid_t ns_pid, const std::string& side, const std::string& address);

    std::vector<Host> hosts_;
    pid_t switch_ = -1;
    int switch_sock_ = -1;  // socket_in(switch_): set_link's ioctls
    pid_t head_ = -1;
};

// The top-level entries of /tmp that the paths name (relative ones from
// the working directory, and "--opt=/tmp/x" forms), plus the working
// directory's: what must stay visible inside the hosts, whose /tmp is
// their own (create's keep_in_tmp).
std::vector<std::string> tmp_entries_to_keep(const std::vector<std::string>& args);

}  // namespace weft::run
