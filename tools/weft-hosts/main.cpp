// weft-hosts — simulated hosts for launchers other than weft-run (issue 19:
// PRRTE's prterun across hosts, as on a cluster).
//
//   weft-hosts K [--] COMMAND [ARGS...]
//     (root) makes K simulated hosts (tools/hosts/hosts.hpp: weft-host-0 ..
//     weft-host-K-1, each with its own network, PID, mount, UTS and IPC
//     namespaces, joined by a private bridge) and a *head* on their network
//     (10.213.0.254: its own network namespace, the machine's PID and mount
//     namespaces), runs COMMAND on the head, and removes everything when it
//     ends, however it ends. COMMAND gets:
//       WEFT_HOSTS        the hosts' names, comma-separated (prterun --host)
//       WEFT_HOSTS_MAP    name=PID of each host's PID 1 (what --enter reads)
//       WEFT_HOSTS_AGENT  "/path/weft-hosts --enter": a launch agent
//                         (PRRTE's plm_rsh_agent, in place of ssh)
//     Exit status: COMMAND's (128+N for a signal), 2 for a bad command line,
//     1 if the hosts cannot be made.
//
//   weft-hosts --enter HOST COMMAND...
//     the launch agent: runs COMMAND (its words joined, through /bin/sh -c,
//     as ssh runs a remote command) inside HOST's namespaces, with HOST's
//     PID 1 from WEFT_HOSTS_MAP; exits with its status.
//
// The head exists because the launcher's daemons must start inside the
// hosts (the agent enters them through /proc/PID/ns, which needs the
// machine's PID namespace), while the launcher must reach them over the
// hosts' network: no address is added outside the namespaces made here.
#include "tools/hosts/hosts.hpp"

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <sched.h>
#include <string>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

namespace {

void usage(std::FILE* out) {
    std::fprintf(out,
                 "weft-hosts: simulated hosts on this machine for another launcher (e.g. PRRTE's prterun)\n"
                 "usage: weft-hosts K [--] COMMAND [ARGS...]   (root) make K hosts and a head on their network,\n"
                 "                                            run COMMAND on the head, remove everything after\n"
                 "       weft-hosts --enter HOST COMMAND...    the launch agent: run COMMAND (through /bin/sh -c)\n"
                 "                                            inside HOST (its PID 1 from WEFT_HOSTS_MAP)\n"
                 "       weft-hosts -h | --help\n"
                 "COMMAND's environment: WEFT_HOSTS (names, comma-separated), WEFT_HOSTS_MAP (name=PID ...),\n"
                 "WEFT_HOSTS_AGENT (this program with --enter: PRRTE's plm_rsh_agent). Example:\n"
                 "  weft-hosts 2 sh -c 'prterun --allow-run-as-root --prtemca plm_rsh_agent \"$WEFT_HOSTS_AGENT\" \\\n"
                 "      --host \"$WEFT_HOSTS\" -n 2 hostname'\n"
                 "Exit status: COMMAND's (128+N for a signal); 2 for a bad command line; 1 if the hosts\n"
                 "cannot be made or entered.\n");
}

int exit_status(int status) {
    if (WIFEXITED(status)) return WEXITSTATUS(status);
    if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
    return 1;
}

// The PID of `host`'s PID 1 in WEFT_HOSTS_MAP ("name=PID name=PID ..."), or -1.
pid_t host_pid(const std::string& host) {
    const char* map = std::getenv("WEFT_HOSTS_MAP");
    if (!map) return -1;
    const std::string all = map, key = host + "=";
    for (size_t at = 0; at < all.size();) {
        const size_t end = all.find(' ', at);
        const std::string entry = all.substr(at, end == std::string::npos ? std::string::npos : end - at);
        if (entry.rfind(key, 0) == 0) return static_cast<pid_t>(std::atol(entry.c_str() + key.size()));
        if (end == std::string::npos) break;
        at = end + 1;
    }
    return -1;
}

// --enter HOST COMMAND...: the launch agent.
int enter(const std::string& host, int argc, char** argv) {
    const pid_t pid = host_pid(host);
    if (pid <= 0) {
        std::fprintf(stderr, "weft-hosts --enter: no host '%s' in WEFT_HOSTS_MAP (run under weft-hosts)\n",
                     host.c_str());
        return 1;
    }
    std::string command;
    for (int i = 0; i < argc; ++i) command += (i ? " " : "") + std::string(argv[i]);
    // Open every namespace first: entering the mount namespace changes
    // what /proc shows. The PID namespace applies to our next child.
    const char* names[5] = {"ipc", "uts", "net", "pid", "mnt"};
    const int types[5] = {CLONE_NEWIPC, CLONE_NEWUTS, CLONE_NEWNET, CLONE_NEWPID, CLONE_NEWNS};
    int fds[5];
    for (int i = 0; i < 5; ++i) {
        const std::string path = "/proc/" + std::to_string(pid) + "/ns/" + names[i];
        fds[i] = open(path.c_str(), O_RDONLY | O_CLOEXEC);
        if (fds[i] < 0) {
            std::fprintf(stderr, "weft-hosts --enter %s: %s: %s\n", host.c_str(), path.c_str(), std::strerror(errno));
            return 1;
        }
    }
    char cwd[4096];
    const bool have_cwd = getcwd(cwd, sizeof cwd) != nullptr;
    for (int i = 0; i < 5; ++i)
        if (setns(fds[i], types[i]) != 0) {
            std::fprintf(stderr, "weft-hosts --enter %s: setns(%s): %s\n", host.c_str(), names[i],
                         std::strerror(errno));
            return 1;
        }
    const pid_t child = fork();
    if (child < 0) return 1;
    if (child == 0) {
        // The same working directory when the host has it (its /tmp is its own).
        if (!have_cwd || chdir(cwd) != 0) (void)chdir("/");
        execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
        _exit(127);
    }
    int status = 0;
    while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
    }
    // _exit: nothing is buffered, and the process now sits across two PID
    // namespaces, where LeakSanitizer's exit-time check (in an ASan build)
    // cannot trace itself and spins forever.
    _exit(exit_status(status));
}

volatile sig_atomic_t stop_signal = 0;  // the first SIGTERM, SIGINT or SIGHUP run() got

uint64_t monotonic_ms() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return uint64_t(ts.tv_sec) * 1000 + uint64_t(ts.tv_nsec) / 1000000;
}

// K [--] COMMAND...: the hosts, the head, and COMMAND on the head.
int run(uint32_t k, char** command, const char* self) {
    // The hosts' PID 1s reap orphans with SIGCHLD blocked (hosts.cpp).
    sigset_t chld;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    sigprocmask(SIG_BLOCK, &chld, nullptr);
    std::vector<std::string> args;
    for (char** a = command; *a; ++a) args.push_back(*a);
    weft::run::SimulatedHosts hosts;
    std::string error;
    if (!hosts.create(k, weft::run::tmp_entries_to_keep(args), error) || !hosts.add_head(error)) {
        std::fprintf(stderr, "weft-hosts: %s\n", error.c_str());
        return 1;
    }
    std::string names, map;
    for (uint32_t h = 0; h < k; ++h) {
        names += (h ? "," : "") + hosts.hostname(h);
        map += (h ? " " : "") + hosts.hostname(h) + "=" + std::to_string(hosts.holder(h));
    }
    char exe[4096];
    const ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    const std::string agent = (n > 0 ? std::string(exe, size_t(n)) : std::string(self)) + " --enter";
    const std::string head_ns = "/proc/" + std::to_string(hosts.head()) + "/ns/net";
    const int head_fd = open(head_ns.c_str(), O_RDONLY | O_CLOEXEC);
    if (head_fd < 0) {
        std::fprintf(stderr, "weft-hosts: %s: %s\n", head_ns.c_str(), std::strerror(errno));
        return 1;
    }
    // SIGTERM, SIGINT and SIGHUP go to COMMAND's process group; if it has
    // not ended 5 s later, the group is killed. A launcher may take a
    // signal as a request it never finishes (prterun, whose daemons cannot
    // answer, prints "Abort is in progress" and waits): without this a
    // `timeout` around weft-hosts ended nothing, and the processes it left
    // on the head held the caller's pipes open.
    struct sigaction on_stop {};
    on_stop.sa_handler = [](int sig) { stop_signal = sig; };
    sigemptyset(&on_stop.sa_mask);
    on_stop.sa_flags = 0;  // no SA_RESTART: waitpid returns EINTR
    for (int sig : {SIGTERM, SIGINT, SIGHUP}) sigaction(sig, &on_stop, nullptr);
    const pid_t child = fork();
    if (child < 0) return 1;
    if (child == 0) {
        setpgid(0, 0);
        for (int sig : {SIGTERM, SIGINT, SIGHUP}) signal(sig, SIG_DFL);
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        sigprocmask(SIG_UNBLOCK, &chld, nullptr);
        if (setns(head_fd, CLONE_NEWNET) != 0) _exit(126);
        setenv("WEFT_HOSTS", names.c_str(), 1);
        setenv("WEFT_HOSTS_MAP", map.c_str(), 1);
        setenv("WEFT_HOSTS_AGENT", agent.c_str(), 1);
        execvp(command[0], command);
        std::fprintf(stderr, "weft-hosts: cannot run %s: %s\n", command[0], std::strerror(errno));
        _exit(127);
    }
    close(head_fd);
    setpgid(child, child);  // as the child does: whichever runs first
    // COMMAND may be interactive (a shell on the head): its group takes the
    // terminal while it runs, as a shell's job would.
    const bool owns_terminal = isatty(STDIN_FILENO) && tcgetpgrp(STDIN_FILENO) == getpgrp();
    if (owns_terminal) {
        signal(SIGTTOU, SIG_IGN);
        tcsetpgrp(STDIN_FILENO, child);
    }
    int status = 0;
    uint64_t kill_at_ms = 0;
    for (;;) {
        const pid_t got = waitpid(child, &status, kill_at_ms ? WNOHANG : 0);
        if (got == child) break;
        if (got < 0 && errno != EINTR) return 1;
        if (stop_signal && !kill_at_ms) {
            kill(-child, stop_signal);
            kill_at_ms = monotonic_ms() + 5000;
        } else if (kill_at_ms && monotonic_ms() >= kill_at_ms) {
            std::fprintf(stderr, "weft-hosts: %s did not end within 5 s of signal %d: killing its process group\n",
                         command[0], static_cast<int>(stop_signal));
            kill(-child, SIGKILL);
            kill_at_ms = UINT64_MAX;
        } else if (kill_at_ms) {
            usleep(20000);
        }
    }
    // What COMMAND left running on the head goes with it; the hosts go
    // when we return.
    kill(-child, SIGKILL);
    if (owns_terminal) tcsetpgrp(STDIN_FILENO, getpgrp());
    return exit_status(status);
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const std::string first = argv[1];
    if (first == "-h" || first == "--help") {
        usage(stdout);
        return 0;
    }
    if (first == "--enter") {
        if (argc < 4) {
            std::fprintf(stderr, "weft-hosts --enter: needs HOST and a COMMAND\n");
            usage(stderr);
            return 2;
        }
        return enter(argv[2], argc - 3, argv + 3);
    }
    if (first[0] == '-') {
        std::fprintf(stderr, "weft-hosts: unknown option '%s'\n", first.c_str());
        usage(stderr);
        return 2;
    }
    char* end = nullptr;
    const unsigned long k = std::strtoul(first.c_str(), &end, 10);
    if (first.empty() || *end != '\0' || k < 1 || k > 200) {
        std::fprintf(stderr, "weft-hosts: '%s' is not a number of hosts (1 to 200)\n", first.c_str());
        usage(stderr);
        return 2;
    }
    int at = 2;
    if (at < argc && std::strcmp(argv[at], "--") == 0) ++at;
    if (at >= argc) {
        std::fprintf(stderr, "weft-hosts: no COMMAND to run on the head\n");
        usage(stderr);
        return 2;
    }
    if (geteuid() != 0) {
        std::fprintf(stderr, "weft-hosts: needs root (network, mount and PID namespaces)\n");
        return 1;
    }
    return run(static_cast<uint32_t>(k), argv + at, argv[0]);
}
