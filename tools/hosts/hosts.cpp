// hosts.cpp — the simulated hosts of weft-run --hosts and weft-hosts (see
// hosts.hpp).
#include "tools/hosts/hosts.hpp"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <net/if.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

namespace weft::run {

namespace {

constexpr size_t holder_stack = 256 * 1024;

struct HolderArgs {
    const char* hostname;                  // null: the switch (a network namespace only)
    const std::vector<std::string>* keep;  // top-level entries of /tmp the launch needs
    int ready_fd;
};

// A host's namespaces are set up by its PID 1, the only process that can
// mount a /proc of the new PID namespace.
bool setup_host(const HolderArgs& a) {
    if (sethostname(a.hostname, std::strlen(a.hostname)) != 0) return false;
    // Nothing mounted here propagates back to the machine.
    if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) return false;
    const int old_tmp = open("/tmp", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (old_tmp < 0) return false;
    if (mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777") != 0) return false;
    // The launch's own directories under /tmp (where the program, its
    // working directory or its output live) stay reachable; the rest of
    // /tmp is this host's own.
    for (const std::string& name : *a.keep) {
        const std::string from = "/proc/self/fd/" + std::to_string(old_tmp) + "/" + name, to = "/tmp/" + name;
        struct stat st;
        if (stat(from.c_str(), &st) != 0) continue;
        if (S_ISDIR(st.st_mode))
            mkdir(to.c_str(), 0700);
        else
            close(open(to.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0600));
        if (mount(from.c_str(), to.c_str(), nullptr, MS_BIND | MS_REC, nullptr) != 0) return false;
    }
    close(old_tmp);
    if (mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777") != 0) return false;
    if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) != 0) return false;
    return true;
}

// Brings the loopback interface of the current network namespace up.
bool loopback_up() {
    const int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (s < 0) return false;
    ifreq ifr{};
    std::strncpy(ifr.ifr_name, "lo", IFNAMSIZ - 1);
    bool ok = ioctl(s, SIOCGIFFLAGS, &ifr) == 0;
    ifr.ifr_flags |= IFF_UP;
    ok = ok && ioctl(s, SIOCSIFFLAGS, &ifr) == 0;
    close(s);
    return ok;
}

int holder_main(void* arg) {
    const HolderArgs& a = *static_cast<const HolderArgs*>(arg);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    const bool ok = (!a.hostname || setup_host(a)) && loopback_up();
    const char verdict = ok ? '1' : '0';
    if (write(a.ready_fd, &verdict, 1) != 1 || !ok) _exit(1);
    close(a.ready_fd);
    // PID 1 of the host: reap what is orphaned here until killed. SIGCHLD
    // is blocked (inherited from weft-run), so sigwaitinfo sees it.
    sigset_t chld;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    for (;;) {
        while (waitpid(-1, nullptr, WNOHANG) > 0) {
        }
        sigwaitinfo(&chld, nullptr);
    }
}

}  // namespace

pid_t SimulatedHosts::spawn_holder(int flags, const std::string& hostname, const std::vector<std::string>& keep) {
    int ready[2];
    if (pipe2(ready, O_CLOEXEC) != 0) return -1;
    void* stack = mmap(nullptr, holder_stack, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
    if (stack == MAP_FAILED) return -1;
    HolderArgs args{hostname.empty() ? nullptr : hostname.c_str(), &keep, ready[1]};
    const pid_t pid = clone(holder_main, static_cast<char*>(stack) + holder_stack, flags | SIGCHLD, &args);
    // Without CLONE_VM the child runs on its own copy of the stack.
    munmap(stack, holder_stack);
    close(ready[1]);
    char verdict = '0';
    const bool ready_ok = pid > 0 && read(ready[0], &verdict, 1) == 1 && verdict == '1';
    close(ready[0]);
    if (pid > 0 && !ready_ok) {
        kill(pid, SIGKILL);
        waitpid(pid, nullptr, 0);
        return -1;
    }
    return pid;
}

namespace {

// Runs in_child() in a child moved into ns_pid's network namespace (setns
// would move weft-run itself); the child's exit status, or -1.
template <typename F>
int in_netns(pid_t ns_pid, F in_child) {
    const std::string ns = "/proc/" + std::to_string(ns_pid) + "/ns/net";
    const int fd = open(ns.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    const pid_t pid = fork();
    if (pid == 0) {
        if (setns(fd, CLONE_NEWNET) != 0) _exit(126);
        _exit(in_child());
    }
    close(fd);
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return -1;
    return WEXITSTATUS(status);
}

}  // namespace

bool SimulatedHosts::ip(pid_t ns_pid, const std::vector<std::string>& args) {
    std::vector<char*> argv;
    std::vector<std::string> all = {"ip"};
    all.insert(all.end(), args.begin(), args.end());
    for (auto& s : all) argv.push_back(s.data());
    argv.push_back(nullptr);
    const int rc = in_netns(ns_pid, [&] {
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, nullptr);
        execvp("ip", argv.data());
        return 127;
    });
    if (rc == 127) std::fprintf(stderr, "weft-run: --hosts: cannot run 'ip' (apt-get install iproute2)\n");
    return rc == 0;
}

int SimulatedHosts::socket_in(pid_t ns_pid) {
    // weft-run steps into the namespace and back (its one thread: no other
    // thread sees it away), instead of forking a child there: see set_link.
    const std::string ns = "/proc/" + std::to_string(ns_pid) + "/ns/net";
    const int there = open(ns.c_str(), O_RDONLY | O_CLOEXEC);
    const int here = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
    int s = -1;
    if (there >= 0 && here >= 0 && setns(there, CLONE_NEWNET) == 0) {
        s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (setns(here, CLONE_NEWNET) != 0) {
            // Left in a host's network: nothing weft-run does after this
            // would be where it belongs.
            std::fprintf(stderr, "weft-run: --hosts: cannot return to its own network namespace: %s\n",
                         std::strerror(errno));
            _exit(1);
        }
    }
    for (int fd : {there, here})
        if (fd >= 0) close(fd);
    return s;
}

namespace {

// Interface dev's flags through sock (its namespace's); false if unknown.
bool read_flags(int sock, const std::string& dev, ifreq& ifr) {
    ifr = ifreq{};
    std::strncpy(ifr.ifr_name, dev.c_str(), IFNAMSIZ - 1);
    return sock >= 0 && ioctl(sock, SIOCGIFFLAGS, &ifr) == 0;
}

}  // namespace

bool SimulatedHosts::link_running(int sock, const char* dev) {
    ifreq ifr;
    return read_flags(sock, dev, ifr) && (ifr.ifr_flags & IFF_RUNNING);
}

bool SimulatedHosts::create(uint32_t k, const std::vector<std::string>& keep_in_tmp, std::string& error) {
    if (geteuid() != 0) {
        error = "--hosts needs root (network, mount and PID namespaces)";
        return false;
    }
    switch_ = spawn_holder(CLONE_NEWNET, "", keep_in_tmp);
    if (switch_ < 0) {
        error = std::string("cannot create the switch's network namespace: ") + std::strerror(errno);
        return false;
    }
    switch_sock_ = socket_in(switch_);
    if (switch_sock_ < 0) {
        error = std::string("cannot open a socket in the switch's network namespace: ") + std::strerror(errno);
        return false;
    }
    if (!ip(switch_, {"link", "add", "wbr", "type", "bridge"}) || !ip(switch_, {"link", "set", "wbr", "up"})) {
        error = "cannot create the bridge";
        return false;
    }
    for (uint32_t h = 0; h < k; ++h) {
        Host host;
        host.holder = spawn_holder(CLONE_NEWNET | CLONE_NEWUTS | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC, hostname(h),
                                   keep_in_tmp);
        if (host.holder < 0) {
            error = "cannot create host " + std::to_string(h) + "'s namespaces";
            return false;
        }
        hosts_.push_back(host);
        const char* names[5] = {"net", "uts", "mnt", "pid", "ipc"};
        for (int i = 0; i < 5; ++i) {
            const std::string path = "/proc/" + std::to_string(host.holder) + "/ns/" + names[i];
            hosts_.back().ns[i] = open(path.c_str(), O_RDONLY | O_CLOEXEC);
            if (hosts_.back().ns[i] < 0) {
                error = "cannot open " + path + ": " + std::strerror(errno);
                return false;
            }
        }
        hosts_.back().sock = socket_in(host.holder);
        if (hosts_.back().sock < 0) {
            error =
                "cannot open a socket in host " + std::to_string(h) + "'s network namespace: " + std::strerror(errno);
            return false;
        }
        // One veth: "eth0" in the host, "hH" on the switch's bridge.
        if (!wire(host.holder, "h" + std::to_string(h), address(h))) {
            error = "cannot wire host " + std::to_string(h) + " to the switch";
            return false;
        }
    }
    // A veth carries traffic once both ends are up and the kernel says so
    // (IFF_RUNNING), which may lag under load; UCX opens tcp only on running
    // interfaces, so a rank started before would find no route off its host.
    for (uint32_t h = 0; h < k; ++h)
        if (!await_link(h, true)) {
            error = "host " + std::to_string(h) + "'s link did not come up within 10 s";
            return false;
        }
    return true;
}

bool SimulatedHosts::wire(pid_t ns_pid, const std::string& side, const std::string& address) {
    return ip(switch_,
              {"link", "add", side, "type", "veth", "peer", "name", "eth0", "netns", std::to_string(ns_pid)}) &&
           ip(switch_, {"link", "set", side, "master", "wbr", "up"}) &&
           ip(ns_pid, {"addr", "add", address + "/24", "dev", "eth0"}) && ip(ns_pid, {"link", "set", "eth0", "up"});
}

bool SimulatedHosts::add_head(std::string& error) {
    head_ = spawn_holder(CLONE_NEWNET, "", {});
    if (head_ < 0) {
        error = std::string("cannot create the head's network namespace: ") + std::strerror(errno);
        return false;
    }
    if (!wire(head_, "head", head_address())) {
        error = "cannot wire the head to the switch";
        return false;
    }
    const int sock = socket_in(head_);
    for (int waited_ms = 0; !link_running(sock, "eth0"); waited_ms += 10) {
        if (waited_ms >= 10000) {
            error = "the head's link did not come up within 10 s";
            if (sock >= 0) close(sock);
            return false;
        }
        usleep(10000);
    }
    close(sock);
    return true;
}

bool SimulatedHosts::await_link(uint32_t h, bool running) {
    for (int waited_ms = 0; link_running(hosts_[h].sock, "eth0") != running; waited_ms += 10) {
        if (waited_ms >= 10000) return false;
        usleep(10000);
    }
    return true;
}

SimulatedHosts::~SimulatedHosts() {
    if (switch_sock_ >= 0) close(switch_sock_);
    for (Host& h : hosts_) {
        for (int fd : h.ns)
            if (fd >= 0) close(fd);
        if (h.sock >= 0) close(h.sock);
        if (h.holder > 0) {
            kill(h.holder, SIGKILL);
            waitpid(h.holder, nullptr, 0);
        }
    }
    for (pid_t p : {head_, switch_})
        if (p > 0) {
            kill(p, SIGKILL);
            waitpid(p, nullptr, 0);
        }
}

bool SimulatedHosts::reaped_holder(pid_t pid) {
    if (pid <= 0) return false;
    if (pid == head_) {
        head_ = -1;
        return true;
    }
    if (pid == switch_) {
        switch_ = -1;
        return true;
    }
    for (Host& h : hosts_)
        if (h.holder == pid) {
            h.holder = -1;
            return true;
        }
    return false;
}

std::string SimulatedHosts::address(uint32_t h) const { return "10.213.0." + std::to_string(h + 1); }

std::string SimulatedHosts::hostname(uint32_t h) const { return "weft-host-" + std::to_string(h); }

bool SimulatedHosts::enter(uint32_t h) const {
    const Host& host = hosts_[h];
    // The mount namespace resets the working directory to its root: come
    // back to ours (the same path: only /tmp, /dev/shm, /proc differ there).
    char cwd[4096];
    if (!getcwd(cwd, sizeof cwd)) return false;
    const int types[5] = {CLONE_NEWNET, CLONE_NEWUTS, CLONE_NEWNS, CLONE_NEWPID, CLONE_NEWIPC};
    for (int i = 0; i < 5; ++i)
        if (setns(host.ns[i], types[i]) != 0) return false;
    return chdir(cwd) == 0;
}

bool SimulatedHosts::set_link(uint32_t h, bool up) {
    // A veth's far end follows at once when it goes down, and once the
    // kernel says so when it comes up (see create()).
    // Through sockets opened in the namespaces at create(), not `ip` in a
    // forked child: the fork copies weft-run's address space under its
    // mmap lock, and with 8 ranks polling on 2 cores that fork once stood
    // in the kernel (dup_mmap, uninterruptible) until the ranks exited, so
    // a cut at 2 s took effect after 118 s.
    ifreq ifr;
    if (!read_flags(switch_sock_, "h" + std::to_string(h), ifr)) return false;
    ifr.ifr_flags = static_cast<short>(up ? ifr.ifr_flags | IFF_UP : ifr.ifr_flags & ~IFF_UP);
    return ioctl(switch_sock_, SIOCSIFFLAGS, &ifr) == 0 && await_link(h, up);
}

std::vector<std::string> tmp_entries_to_keep(const std::vector<std::string>& args) {
    std::vector<std::string> keep;
    char cwd[4096];
    const std::string here = getcwd(cwd, sizeof cwd) ? cwd : "";
    auto keep_path = [&](std::string path) {
        if (path.empty()) return;
        if (path[0] != '/') {
            if (here.empty()) return;
            path = here + "/" + path;
        }
        if (path.rfind("/tmp/", 0) != 0) return;
        const size_t end = path.find('/', 5);
        const std::string top = path.substr(5, end == std::string::npos ? std::string::npos : end - 5);
        if (!top.empty() && std::find(keep.begin(), keep.end(), top) == keep.end()) keep.push_back(top);
    };
    keep_path(here);
    for (const std::string& a : args) {
        const size_t eq = a.find("=/");  // --out=/tmp/x
        if (eq != std::string::npos)
            keep_path(a.substr(eq + 1));
        else if (a.find('/') != std::string::npos)
            keep_path(a);
    }
    return keep;
}

}  // namespace weft::run
