// launcher.cpp — weft-run's event loop.
//
// One thread, one poll(): the listening socket, every rank's connection, a
// signalfd (SIGCHLD and the signals we forward) and the nearest timer (fault
// injection, --timeout). The socket lives in the abstract namespace (nothing
// in /tmp to leak) and a connection is accepted only if it presents the
// launch secret *and* comes from the very process we forked for that rank
// (SO_PEERCRED pid) — anything else is refused and logged.
//
// With --hosts the ranks run on simulated hosts (hosts.hpp): the socket is
// then a file (an abstract socket belongs to one network namespace), and
// each rank is the child of a small waiter process that entered its host's
// namespaces; signals go to the rank, its exit is read from the waiter.
#include "tools/weft-run/launcher.hpp"

#include "tools/hosts/hosts.hpp"

#include "transport/bootstrap/wire.hpp"

#include <hwloc.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <map>
#include <string_view>
#include <poll.h>
#include <fcntl.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

namespace weft::run {

namespace {

double now_s() { return static_cast<double>(weft::now_ns()) * 1e-9; }

struct Proc {
    uint32_t job = 0, rank = 0, universe = 0;
    uint32_t host = 0;  // --hosts: the simulated host it runs on
    pid_t pid = -1;     // the rank (signals, SO_PEERCRED)
    pid_t waiter = -1;  // our child, whose exit is the rank's (pid without --hosts)
    bool exited = false;
    bool expected_death = false;    // the victim of an injected fault
    bool stopped_by_fault = false;  // its peers may fence it with SIGKILL
    int status = 0;                 // waitpid status once exited
    int conn = -1;                  // index into connections, -1 if none
};

// It exited with status 0 (after weft_finalize): departed, not failed.
bool departed(const Proc& p) { return p.exited && WIFEXITED(p.status) && WEXITSTATUS(p.status) == 0; }

// Why an exchange cannot complete, `when` the member went: a departure or a
// death, and how it died.
std::string gone_text(const Proc& p, const char* when) {
    char text[160];
    if (departed(p))
        std::snprintf(text, sizeof text, "job %u rank %u finalized and exited (status 0) %s", p.job, p.rank, when);
    else if (WIFSIGNALED(p.status))
        std::snprintf(text, sizeof text, "job %u rank %u died (signal %d) %s", p.job, p.rank, WTERMSIG(p.status), when);
    else
        std::snprintf(text, sizeof text, "job %u rank %u died (exit status %d) %s", p.job, p.rank,
                      WEXITSTATUS(p.status), when);
    return text;
}

struct Conn {
    int fd = -1;
    int proc = -1;  // set after a valid hello
    std::vector<uint8_t> in;
};

// A collective being gathered: one contribution per member.
struct Collective {
    std::vector<std::vector<uint8_t>> blobs;
    std::vector<bool> have;
    uint32_t count = 0;
};

struct Timer {
    enum Kind { signal_rank, launch_timeout, kill_host, signal_host, link_down, link_up };
    double at;
    Kind kind;
    uint32_t target;  // a proc index, or a host
    int sig;
};

class Launcher {
public:
    explicit Launcher(const Options& o) : opt_(o) {}
    int run();

private:
    bool setup_socket();
    bool setup_hosts();
    void remove_socket_file() {
        if (socket_dir_.empty()) return;
        unlink(address_.c_str());
        rmdir(socket_dir_.c_str());
    }
    bool spawn_all();
    void fire(const Timer& t);
    void spawn(uint32_t index);
    void loop();
    void on_accept();
    void on_readable(size_t ci);
    void process_frame(size_t ci, const wire::Header& h, std::span<const uint8_t> payload);
    void on_exchange(uint32_t pi, uint32_t seq, const wire::Exchange& e);
    void fail_collectives_with(uint32_t dead);
    void on_signal();
    void reap();
    void close_conn(size_t ci);
    void send_to(uint32_t pi, const std::vector<uint8_t>& frame);
    void kill_all(int sig);
    bool all_exited() const;
    uint32_t alive_count() const;
    std::vector<uint32_t> members(wire::Scope scope, uint32_t job) const;
    void say(const char* fmt, ...) __attribute__((format(printf, 2, 3)));

    const Options& opt_;
    std::vector<Proc> procs_;
    std::vector<Conn> conns_;
    std::vector<Timer> timers_;
    std::map<std::tuple<int, uint32_t, uint32_t>, Collective> collectives_;  // (scope, job, seq)
    uint8_t secret_[wire::secret_size];
    char secret_hex_[2 * wire::secret_size + 1];
    std::string address_;
    std::string socket_dir_;  // --hosts: the directory of the socket file
    SimulatedHosts hosts_;
    int listen_fd_ = -1;
    int signal_fd_ = -1;
    // --drain-on: an eventfd the ranks' drain threads watch (the first to
    // read it asks the job for a drain) and a pipe they report on.
    int drain_fd_ = -1, report_rd_ = -1, report_wr_ = -1;
    // --checkpoint-on: an eventfd the ranks' weft_ckpt_need reads (the
    // first to read it tells the others through its allreduce).
    int checkpoint_fd_ = -1;
    std::string checkpoint_dir_;  // absolute
    void on_report();
    sigset_t old_mask_;
    hwloc_topology_t topo_ = nullptr;
    int exit_code_ = 0;
    bool failed_ = false;  // an unexpected failure happened
    bool timed_out_ = false;
};

void Launcher::say(const char* fmt, ...) {
    if (!opt_.verbose) return;
    va_list ap;
    va_start(ap, fmt);
    std::fprintf(stderr, "weft-run: ");
    std::vfprintf(stderr, fmt, ap);
    std::fprintf(stderr, "\n");
    va_end(ap);
}

bool Launcher::setup_socket() {
    if (getrandom(secret_, sizeof secret_, 0) != static_cast<ssize_t>(sizeof secret_)) {
        std::fprintf(stderr, "weft-run: getrandom: %s\n", std::strerror(errno));
        return false;
    }
    for (size_t i = 0; i < sizeof secret_; ++i) std::snprintf(secret_hex_ + 2 * i, 3, "%02x", secret_[i]);
    uint32_t tag;
    std::memcpy(&tag, secret_ + 28, 4);  // a name that is hard to guess is not a secret: the secret is
    char name[64];
    std::snprintf(name, sizeof name, "@weft-run-%d-%08x", static_cast<int>(getpid()), tag);
    address_ = name;
    if (opt_.hosts) {
        // A file every host sees (/run is not one of the private mounts).
        char dir[] = "/run/weft-run-XXXXXX";
        if (!mkdtemp(dir)) {
            std::fprintf(stderr, "weft-run: --hosts: %s: %s\n", dir, std::strerror(errno));
            return false;
        }
        socket_dir_ = dir;
        address_ = socket_dir_ + "/bootstrap";
    }
    listen_fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (listen_fd_ < 0) return false;
    sockaddr_un sa{};
    sa.sun_family = AF_UNIX;
    // Abstract ('@': a leading NUL) or a path.
    std::memcpy(sa.sun_path + (address_[0] == '@'), address_.data() + (address_[0] == '@'),
                address_.size() - (address_[0] == '@'));
    socklen_t len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + address_.size() + (address_[0] != '@'));
    if (bind(listen_fd_, reinterpret_cast<sockaddr*>(&sa), len) != 0 || listen(listen_fd_, 4096) != 0) {
        std::fprintf(stderr, "weft-run: bootstrap socket: %s\n", std::strerror(errno));
        return false;
    }
    return true;
}

bool Launcher::setup_hosts() {
    if (!opt_.hosts) return true;
    // What the launch names under /tmp stays visible on every host: the
    // working directory, the programs and the arguments that are paths
    // there (an output directory), by their top-level entry.
    std::vector<std::string> args;
    for (const auto& job : opt_.jobs) args.insert(args.end(), job.argv.begin(), job.argv.end());
    const std::vector<std::string> keep = tmp_entries_to_keep(args);
    std::string error;
    if (!hosts_.create(opt_.hosts, keep, error)) {
        std::fprintf(stderr, "weft-run: --hosts %u: %s\n", opt_.hosts, error.c_str());
        return false;
    }
    for (uint32_t h = 0; h < opt_.hosts; ++h)
        say("host %u: %s at %s (PID 1 is pid %d)", h, hosts_.hostname(h).c_str(), hosts_.address(h).c_str(),
            static_cast<int>(hosts_.holder(h)));
    return true;
}

void Launcher::spawn(uint32_t index) {
    Proc& p = procs_[index];
    const JobSpec& job = opt_.jobs[p.job];
    std::string sizes;
    for (size_t j = 0; j < opt_.jobs.size(); ++j) {
        if (j) sizes += ",";
        sizes += std::to_string(opt_.jobs[j].size);
    }
    std::string points;
    for (const auto& f : opt_.faults) {
        if (f.at.empty() || f.job != p.job || f.rank != p.rank) continue;
        if (!points.empty()) points += ";";
        const std::string action = f.action == FaultAction::kill ? "kill"
                                   : f.action == FaultAction::stop
                                       ? "stop"
                                       : "delay" + std::to_string(uint64_t((f.for_s >= 0 ? f.for_s : 0.5) * 1000));
        points += action + "@" + f.at + "#" + std::to_string(f.count);
        if (f.action == FaultAction::kill) p.expected_death = true;
    }
    for (const auto& f : opt_.faults) {
        if (f.job != p.job || f.rank != p.rank) continue;
        if (f.after_s >= 0 && f.action == FaultAction::kill) p.expected_death = true;
        if (f.action == FaultAction::stop) p.stopped_by_fault = true;
    }
    // Prepare everything before fork: the child only calls async-signal-safe
    // functions (and hwloc's binding, which only issues a syscall).
    std::vector<std::string> env_strings = {
        "WEFT_BOOTSTRAP=unix:" + address_,       std::string("WEFT_SECRET=") + secret_hex_,
        "WEFT_JOB=" + std::to_string(p.job),     "WEFT_RANK=" + std::to_string(p.rank),
        "WEFT_SIZE=" + std::to_string(job.size), "WEFT_JOB_SIZES=" + sizes,
    };
    if (!opt_.transport.empty()) env_strings.push_back("WEFT_TRANSPORT=" + opt_.transport);
    if (!points.empty()) env_strings.push_back("WEFT_FAULT_POINTS=" + points);
    if (drain_fd_ >= 0) {
        env_strings.push_back("WEFT_DRAIN_FD=" + std::to_string(drain_fd_));
        env_strings.push_back("WEFT_DRAIN_REPORT_FD=" + std::to_string(report_wr_));
    }
    if (checkpoint_fd_ >= 0) env_strings.push_back("WEFT_CKPT_FD=" + std::to_string(checkpoint_fd_));
    if (!checkpoint_dir_.empty()) env_strings.push_back("WEFT_CKPT_DIR=" + checkpoint_dir_);
    if (opt_.restart) env_strings.push_back("WEFT_CKPT_RESTART=1");
    // The ranks inherit this environment without what belongs to a launcher
    // around weft-run itself (its bootstrap, fault points, descriptors,
    // PMIx) and without every variable set here: getenv takes the first of
    // two, so an inherited WEFT_TRANSPORT would beat --transport.
    const auto name_of = [](std::string_view entry) { return entry.substr(0, entry.find('=')); };
    static constexpr std::string_view launcher_owned[] = {
        "WEFT_BOOTSTRAP",       "WEFT_SECRET",  "WEFT_FAULT_POINTS", "WEFT_DRAIN_FD",
        "WEFT_DRAIN_REPORT_FD", "WEFT_CKPT_FD", "WEFT_CKPT_RESTART"};
    std::vector<char*> envp;
    for (char** e = environ; *e; ++e) {
        const std::string_view name = name_of(*e);
        const bool set_here =
            std::ranges::any_of(env_strings, [&](const std::string& mine) { return name_of(mine) == name; });
        if (set_here || name.starts_with("PMIX_") ||
            std::ranges::find(launcher_owned, name) != std::end(launcher_owned))
            continue;
        envp.push_back(*e);
    }
    for (auto& s : env_strings) envp.push_back(s.data());
    envp.push_back(nullptr);
    std::vector<char*> argv;
    std::vector<std::string> args = job.argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    hwloc_obj_t core = nullptr;
    if (opt_.bind && topo_) {
        int ncores = hwloc_get_nbobjs_by_type(topo_, HWLOC_OBJ_CORE);
        if (ncores > 0) core = hwloc_get_obj_by_type(topo_, HWLOC_OBJ_CORE, p.universe % ncores);
    }
    const pid_t parent = getpid();
    int rank_pid[2] = {-1, -1};  // --hosts: the waiter tells us the rank's pid
    if (opt_.hosts && pipe2(rank_pid, O_CLOEXEC) != 0) {
        std::fprintf(stderr, "weft-run: pipe: %s\n", std::strerror(errno));
        return;
    }

    pid_t pid = fork();
    if (pid < 0) {
        std::fprintf(stderr, "weft-run: fork: %s\n", std::strerror(errno));
        return;
    }
    if (pid == 0) {
        // The rank must not outlive the launcher (a SIGKILLed weft-run leaves
        // nothing running).
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) _exit(127);
        if (opt_.hosts) {
            // The waiter: into the host, then the rank as our child there.
            if (!hosts_.enter(p.host)) {
                char msg[160];
                int n = std::snprintf(msg, sizeof msg, "weft-run: cannot enter host %u: %s\n", p.host,
                                      std::strerror(errno));
                ssize_t r = write(2, msg, n > 0 ? static_cast<size_t>(n) : 0);
                (void)r;
                _exit(127);
            }
            const pid_t rank = fork();
            if (rank < 0) _exit(127);
            if (rank > 0) {
                // In our namespace (weft-run's), the rank's pid is `rank`.
                ssize_t w = write(rank_pid[1], &rank, sizeof rank);
                (void)w;
                int status = 0;
                while (waitpid(rank, &status, 0) < 0 && errno == EINTR) {
                }
                if (WIFSIGNALED(status)) {
                    // Die the same way, so weft-run reads the rank's death.
                    sigset_t all;
                    sigfillset(&all);
                    sigprocmask(SIG_UNBLOCK, &all, nullptr);
                    signal(WTERMSIG(status), SIG_DFL);
                    kill(getpid(), WTERMSIG(status));
                    _exit(128 + WTERMSIG(status));
                }
                _exit(WEXITSTATUS(status));
            }
            // The waiter is outside the host's PID namespace: getppid() is 0
            // while it lives, 1 (the host's PID 1) once it has died.
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            if (getppid() != 0) _exit(127);
        }
        sigprocmask(SIG_SETMASK, &old_mask_, nullptr);
        if (core && core->cpuset) hwloc_set_cpubind(topo_, core->cpuset, HWLOC_CPUBIND_PROCESS);
        execvpe(argv[0], argv.data(), envp.data());
        // The launcher is single-threaded, so formatting here is safe.
        char msg[512];
        int n = std::snprintf(msg, sizeof msg, "weft-run: cannot execute %s: %s\n", argv[0], std::strerror(errno));
        ssize_t r = write(2, msg, n > 0 ? static_cast<size_t>(n) : 0);
        (void)r;
        _exit(127);
    }
    p.pid = p.waiter = pid;
    if (opt_.hosts) {
        close(rank_pid[1]);
        pid_t rank = -1;
        if (read(rank_pid[0], &rank, sizeof rank) == static_cast<ssize_t>(sizeof rank)) p.pid = rank;
        close(rank_pid[0]);
        // No pid: the waiter failed and exits; reap() reports it.
    }
    say("job %u rank %u: pid %d%s%s", p.job, p.rank, static_cast<int>(p.pid), opt_.hosts ? " on " : "",
        opt_.hosts ? hosts_.hostname(p.host).c_str() : "");
}

bool Launcher::spawn_all() {
    uint32_t u = 0, universe = 0;
    for (const auto& j : opt_.jobs) universe += j.size;
    // --hosts: ranks in blocks, as launchers map by slot.
    const uint32_t per_host = opt_.hosts ? (universe + opt_.hosts - 1) / opt_.hosts : universe;
    for (uint32_t j = 0; j < opt_.jobs.size(); ++j)
        for (uint32_t r = 0; r < opt_.jobs[j].size; ++r) {
            Proc p;
            p.job = j;
            p.rank = r;
            p.universe = u++;
            p.host = p.universe / per_host;
            for (const auto& f : opt_.faults) {
                if (f.host < 0 || static_cast<uint32_t>(f.host) != p.host) continue;
                if (f.action == FaultAction::kill) p.expected_death = true;
                if (f.action == FaultAction::stop) p.stopped_by_fault = true;
            }
            procs_.push_back(p);
        }
    for (uint32_t i = 0; i < procs_.size(); ++i) {
        spawn(i);
        if (procs_[i].pid < 0) return false;
    }
    double t0 = now_s();
    for (const auto& f : opt_.faults) {
        if (f.after_s < 0) continue;
        if (f.host >= 0) {
            const uint32_t h = static_cast<uint32_t>(f.host);
            const double end = t0 + f.after_s + f.for_s;
            if (f.action == FaultAction::kill) timers_.push_back({t0 + f.after_s, Timer::kill_host, h, SIGKILL});
            if (f.action == FaultAction::stop) {
                timers_.push_back({t0 + f.after_s, Timer::signal_host, h, SIGSTOP});
                if (f.for_s >= 0) timers_.push_back({end, Timer::signal_host, h, SIGCONT});
            }
            if (f.action == FaultAction::cut) {
                timers_.push_back({t0 + f.after_s, Timer::link_down, h, 0});
                if (f.for_s >= 0) timers_.push_back({end, Timer::link_up, h, 0});
            }
            continue;
        }
        uint32_t pi = 0;
        while (procs_[pi].job != f.job || procs_[pi].rank != f.rank) ++pi;
        timers_.push_back({t0 + f.after_s, Timer::signal_rank, pi, f.action == FaultAction::kill ? SIGKILL : SIGSTOP});
        if (f.for_s >= 0) timers_.push_back({t0 + f.after_s + f.for_s, Timer::signal_rank, pi, SIGCONT});
    }
    if (opt_.timeout_s > 0) timers_.push_back({t0 + opt_.timeout_s, Timer::launch_timeout, 0, SIGKILL});
    return true;
}

std::vector<uint32_t> Launcher::members(wire::Scope scope, uint32_t job) const {
    std::vector<uint32_t> m;
    for (uint32_t i = 0; i < procs_.size(); ++i)
        if (scope == wire::Scope::universe || procs_[i].job == job) m.push_back(i);
    return m;
}

void Launcher::send_to(uint32_t pi, const std::vector<uint8_t>& frame) {
    int ci = procs_[pi].conn;
    if (ci < 0) return;
    // Ranks read promptly; a short deadline keeps one stuck rank from
    // stalling the launcher.
    if (wire::send_all(conns_[ci].fd, frame, Deadline::after_ns(2000000000ull)) != WEFT_OK)
        close_conn(static_cast<size_t>(ci));
}

void Launcher::on_exchange(uint32_t pi, uint32_t seq, const wire::Exchange& e) {
    const Proc& p = procs_[pi];
    const uint32_t job = e.scope == wire::Scope::universe ? UINT32_MAX : p.job;
    auto m = members(e.scope, p.job);
    // Position of this process among the members.
    uint32_t slot = static_cast<uint32_t>(std::find(m.begin(), m.end(), pi) - m.begin());
    auto key = std::make_tuple(static_cast<int>(e.scope), job, seq);
    Collective& c = collectives_[key];
    if (c.have.empty()) {
        c.have.assign(m.size(), false);
        c.blobs.assign(m.size(), {});
    }
    if (c.have[slot]) {
        std::vector<uint8_t> out;
        wire::encode_error(out, seq, WEFT_ERR_PROTOCOL, "duplicate contribution to an exchange");
        send_to(pi, out);
        return;
    }
    c.have[slot] = true;
    c.blobs[slot].assign(e.blob.begin(), e.blob.end());
    ++c.count;
    // A member that already exited will never contribute: fail the exchange
    // now instead of letting the others wait for their deadline. Name one
    // that died if there is one; one that finalized and exited 0 departed.
    int gone = -1;
    for (uint32_t k = 0; k < m.size(); ++k)
        if (!c.have[k] && procs_[m[k]].exited && (gone < 0 || departed(procs_[m[gone]]))) gone = static_cast<int>(k);
    if (gone >= 0) {
        std::vector<uint8_t> out;
        const Proc& g = procs_[m[gone]];
        wire::encode_error(out, seq, WEFT_ERR_PEER_FAILED, gone_text(g, "before this exchange completed"), departed(g));
        for (uint32_t k2 = 0; k2 < m.size(); ++k2)
            if (c.have[k2]) send_to(m[k2], out);
        collectives_.erase(key);
        return;
    }
    if (c.count < m.size()) return;
    std::vector<uint8_t> out;
    wire::encode_exchange_result(out, seq, c.blobs);
    collectives_.erase(key);
    for (uint32_t q : m) send_to(q, out);
}

void Launcher::fail_collectives_with(uint32_t dead) {
    for (auto it = collectives_.begin(); it != collectives_.end();) {
        auto [scope, job, seq] = it->first;
        auto m = members(static_cast<wire::Scope>(scope), job == UINT32_MAX ? 0 : job);
        auto pos = std::find(m.begin(), m.end(), dead);
        if (pos == m.end() || it->second.have[pos - m.begin()]) {
            ++it;
            continue;
        }
        std::vector<uint8_t> out;
        wire::encode_error(out, seq, WEFT_ERR_PEER_FAILED, gone_text(procs_[dead], "during this exchange"),
                           departed(procs_[dead]));
        for (size_t k = 0; k < m.size(); ++k)
            if (it->second.have[k]) send_to(m[k], out);
        it = collectives_.erase(it);
    }
}

void Launcher::close_conn(size_t ci) {
    Conn& c = conns_[ci];
    if (c.fd < 0) return;
    close(c.fd);
    c.fd = -1;
    if (c.proc >= 0) procs_[c.proc].conn = -1;
    c.proc = -1;
    c.in.clear();
}

void Launcher::on_accept() {
    // Ends: the socket is non-blocking; accept4 fails (EAGAIN) once every
    // pending connection is taken.
    for (;;) {
        int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) return;
        Conn c;
        c.fd = fd;
        conns_.push_back(std::move(c));
    }
}

void Launcher::process_frame(size_t ci, const wire::Header& h, std::span<const uint8_t> payload) {
    Conn& c = conns_[ci];
    if (c.proc < 0) {
        // The first frame must be a valid hello from the process we forked.
        wire::Hello hello;
        ucred cred{};
        socklen_t cl = sizeof cred;
        getsockopt(c.fd, SOL_SOCKET, SO_PEERCRED, &cred, &cl);
        const char* why = nullptr;
        int pi = -1;
        if (h.type != wire::Type::hello || wire::decode_hello(payload, hello) != WEFT_OK) {
            why = "first frame is not a hello";
        } else {
            unsigned diff = 0;
            for (size_t i = 0; i < wire::secret_size; ++i) diff |= unsigned(hello.secret[i] ^ secret_[i]);
            if (diff) why = "wrong launch secret";
            for (uint32_t i = 0; !why && i < procs_.size(); ++i)
                if (procs_[i].job == hello.job && procs_[i].rank == hello.rank) pi = static_cast<int>(i);
            if (!why && pi < 0) why = "no such job/rank";
            if (!why && procs_[pi].pid != cred.pid) why = "not the process launched for that rank";
            if (!why && procs_[pi].conn >= 0) why = wire::already_connected;
        }
        if (why) {
            std::fprintf(stderr, "weft-run: refused a bootstrap connection from pid %d: %s\n",
                         static_cast<int>(cred.pid), why);
            std::vector<uint8_t> out;
            wire::encode_error(out, 0, WEFT_ERR_BOOTSTRAP, why);
            wire::send_all(c.fd, out, Deadline::after_ns(100000000ull));
            close_conn(ci);
            return;
        }
        c.proc = pi;
        procs_[pi].conn = static_cast<int>(ci);
        std::vector<uint8_t> out;
        wire::encode_welcome(out);
        send_to(static_cast<uint32_t>(pi), out);
        return;
    }
    if (h.type == wire::Type::exchange) {
        wire::Exchange e;
        if (wire::decode_exchange(payload, e) == WEFT_OK) {
            on_exchange(static_cast<uint32_t>(c.proc), h.seq, e);
            return;
        }
    }
    std::fprintf(stderr, "weft-run: job %u rank %u sent a malformed frame (type %u); closing it\n", procs_[c.proc].job,
                 procs_[c.proc].rank, static_cast<unsigned>(h.type));
    close_conn(ci);
}

void Launcher::on_readable(size_t ci) {
    uint8_t buf[65536];
    // Ends: the socket is non-blocking (EAGAIN once what has arrived is
    // read), at its close, or, before hello, at one frame's worth of room.
    for (;;) {
        ssize_t n = recv(conns_[ci].fd, buf, sizeof buf, 0);
        if (n == 0) {
            close_conn(ci);
            return;
        }
        if (n < 0) {
            if (errno == EINTR) continue;
            if (errno != EAGAIN) close_conn(ci);
            break;
        }
        conns_[ci].in.insert(conns_[ci].in.end(), buf, buf + n);
        // A connection that has not said hello gets one frame's worth of room.
        if (conns_[ci].proc < 0 && conns_[ci].in.size() > wire::header_size + 256) break;
    }
    // Ends: each pass takes one whole frame out of what was read above, and
    // returns when less than a frame is left (or the connection closed).
    for (;;) {
        Conn& c = conns_[ci];
        if (c.fd < 0 || c.in.size() < wire::header_size) return;
        wire::Header h;
        if (wire::decode_header(c.in, h) != WEFT_OK || (c.proc < 0 && h.length > wire::secret_size + 64)) {
            std::fprintf(stderr, "weft-run: corrupted bootstrap frame on a connection%s; closing it\n",
                         c.proc < 0 ? " (before hello)" : "");
            close_conn(ci);
            return;
        }
        if (c.in.size() < wire::header_size + h.length) return;
        std::vector<uint8_t> frame(c.in.begin(), c.in.begin() + wire::header_size + h.length);
        c.in.erase(c.in.begin(), c.in.begin() + wire::header_size + h.length);
        process_frame(ci, h, std::span<const uint8_t>(frame).subspan(wire::header_size));
    }
}

void Launcher::kill_all(int sig) {
    for (auto& p : procs_)
        if (!p.exited && p.pid > 0) kill(p.pid, sig);
}

bool Launcher::all_exited() const {
    for (const auto& p : procs_)
        if (!p.exited) return false;
    return true;
}

uint32_t Launcher::alive_count() const {
    uint32_t n = 0;
    for (const auto& p : procs_) n += !p.exited;
    return n;
}

void Launcher::reap() {
    // Ends: waitpid(WNOHANG) returns 0 once no exited child is left to reap.
    for (;;) {
        int status = 0;
        pid_t pid = waitpid(-1, &status, WNOHANG);
        if (pid <= 0) return;
        if (hosts_.reaped_holder(pid)) {
            say("a simulated host's PID 1 (pid %d) is gone", static_cast<int>(pid));
            continue;
        }
        for (uint32_t i = 0; i < procs_.size(); ++i) {
            Proc& p = procs_[i];
            if (p.waiter != pid) continue;
            p.exited = true;
            p.status = status;
            const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
            const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
            if (!ok && p.expected_death && opt_.keep_survivors && WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) {
                say("job %u rank %u was killed as the fault asked", p.job, p.rank);
            } else if (!ok && p.stopped_by_fault && opt_.keep_survivors && WIFSIGNALED(status) &&
                       WTERMSIG(status) == SIGKILL) {
                // Stopped past the failure timeout: its peers declared it
                // failed and fenced it (WEFT_FT_FENCE=kill).
                say("job %u rank %u was killed after its stop (fenced by its peers)", p.job, p.rank);
            } else if (!ok) {
                if (WIFSIGNALED(status))
                    std::fprintf(stderr, "weft-run: job %u rank %u (pid %d) killed by signal %d (%s)\n", p.job, p.rank,
                                 static_cast<int>(pid), WTERMSIG(status), strsignal(WTERMSIG(status)));
                else
                    std::fprintf(stderr, "weft-run: job %u rank %u (pid %d) exited with status %d\n", p.job, p.rank,
                                 static_cast<int>(pid), code);
                if (!failed_ && !timed_out_) {
                    failed_ = true;
                    exit_code_ = code;
                    if (!opt_.keep_survivors && alive_count() > 0) {
                        std::fprintf(stderr, "weft-run: killing the other %u ranks\n", alive_count());
                        kill_all(SIGKILL);
                    }
                }
            }
            // Tell the survivors; fail exchanges that can no longer complete.
            std::vector<uint8_t> out;
            wire::encode_peer_failed(out, wire::PeerFailed{p.job, p.rank});
            if (!ok)
                for (uint32_t q = 0; q < procs_.size(); ++q)
                    if (!procs_[q].exited) send_to(q, out);
            fail_collectives_with(i);
        }
    }
}

void Launcher::on_signal() {
    signalfd_siginfo si;
    while (read(signal_fd_, &si, sizeof si) == static_cast<ssize_t>(sizeof si)) {
        int sig = static_cast<int>(si.ssi_signo);
        if (sig == SIGCHLD) {
            reap();
            continue;
        }
        if (sig == opt_.drain_signal && drain_fd_ >= 0) {
            std::fprintf(stderr, "weft-run: signal %d: asking the job for a drain\n", sig);
            const uint64_t one = 1;
            if (write(drain_fd_, &one, sizeof one) != static_cast<ssize_t>(sizeof one))
                std::fprintf(stderr, "weft-run: drain request not written: %s\n", std::strerror(errno));
            continue;
        }
        if (sig == opt_.checkpoint_signal && checkpoint_fd_ >= 0) {
            std::fprintf(stderr, "weft-run: signal %d: asking the job for a checkpoint into %s\n", sig,
                         checkpoint_dir_.c_str());
            const uint64_t one = 1;
            if (write(checkpoint_fd_, &one, sizeof one) != static_cast<ssize_t>(sizeof one))
                std::fprintf(stderr, "weft-run: checkpoint request not written: %s\n", std::strerror(errno));
            continue;
        }
        say("forwarding signal %d", sig);
        kill_all(sig);
    }
}

void Launcher::on_report() {
    char buf[4096];
    ssize_t n;
    while ((n = read(report_rd_, buf, sizeof buf)) > 0) {
        std::fprintf(stdout, "weft-run: %.*s", static_cast<int>(n), buf);
        std::fflush(stdout);
    }
}

void Launcher::fire(const Timer& t) {
    const char* sig = t.sig == SIGKILL ? "SIGKILL" : t.sig == SIGSTOP ? "SIGSTOP" : "SIGCONT";
    switch (t.kind) {
        case Timer::launch_timeout:
            std::fprintf(stderr, "weft-run: timeout after %.1f s: killing %u ranks\n", opt_.timeout_s, alive_count());
            timed_out_ = true;
            exit_code_ = 124;
            kill_all(SIGKILL);
            kill_all(SIGCONT);
            break;
        case Timer::signal_rank:
            if (procs_[t.target].exited) break;
            std::fprintf(stderr, "weft-run: fault: %s job %u rank %u (pid %d)\n", sig, procs_[t.target].job,
                         procs_[t.target].rank, static_cast<int>(procs_[t.target].pid));
            kill(procs_[t.target].pid, t.sig);
            break;
        case Timer::kill_host: {
            // PID 1 of the host: the kernel kills every process there at once.
            const pid_t holder = hosts_.holder(t.target);
            std::fprintf(stderr, "weft-run: fault: host %u lost (SIGKILL to its PID 1, pid %d)\n", t.target,
                         static_cast<int>(holder));
            if (holder <= 0 || kill(holder, SIGKILL) != 0)
                std::fprintf(stderr, "weft-run: host %u's PID 1 (pid %d) could not be killed: %s\n", t.target,
                             static_cast<int>(holder), std::strerror(errno));
            // And its ranks, each: one CI run (ASan, fa6d85a) saw a lost
            // host's ranks outlive its PID 1 for 40 s, cause not found; a
            // node loss must take every rank of the node whatever the cause.
            for (const Proc& p : procs_)
                if (p.host == t.target && !p.exited && p.pid > 0) kill(p.pid, SIGKILL);
            break;
        }
        case Timer::signal_host:
            std::fprintf(stderr, "weft-run: fault: %s every rank of host %u\n", sig, t.target);
            for (const Proc& p : procs_)
                if (p.host == t.target && !p.exited && p.pid > 0) kill(p.pid, t.sig);
            break;
        case Timer::link_down:
        case Timer::link_up: {
            const bool up = t.kind == Timer::link_up;
            // The time it took is printed: the kernel serialises link
            // changes behind other network-namespace work (rtnl), so a cut
            // can take effect late on a busy machine.
            const double begun = now_s();
            const bool ok = hosts_.set_link(t.target, up);
            std::fprintf(stderr,
                         "weft-run: fault: host %u's link %s (%.0f ms after its time, the change took %.0f ms)\n",
                         t.target, up ? "up again" : "cut", (begun - t.at) * 1e3, (now_s() - begun) * 1e3);
            if (!ok) std::fprintf(stderr, "weft-run: could not set host %u's link %s\n", t.target, up ? "up" : "down");
            break;
        }
    }
}

void Launcher::loop() {
    while (!all_exited()) {
        std::vector<pollfd> fds;
        fds.push_back({signal_fd_, POLLIN, 0});
        fds.push_back({listen_fd_, POLLIN, 0});
        fds.push_back({report_rd_, static_cast<short>(report_rd_ >= 0 ? POLLIN : 0), 0});
        std::vector<size_t> which;
        for (size_t i = 0; i < conns_.size(); ++i)
            if (conns_[i].fd >= 0) {
                fds.push_back({conns_[i].fd, POLLIN, 0});
                which.push_back(i);
            }
        int timeout_ms = -1;
        double now = now_s();
        for (const auto& t : timers_) {
            int ms = t.at <= now ? 0 : static_cast<int>((t.at - now) * 1000) + 1;
            if (timeout_ms < 0 || ms < timeout_ms) timeout_ms = ms;
        }
        int r = poll(fds.data(), fds.size(), timeout_ms);
        if (r < 0 && errno != EINTR) {
            std::fprintf(stderr, "weft-run: poll: %s\n", std::strerror(errno));
            kill_all(SIGKILL);
            timed_out_ = true;
            exit_code_ = 1;
        }
        now = now_s();
        for (size_t k = 0; k < timers_.size();) {
            Timer t = timers_[k];
            if (t.at > now) {
                ++k;
                continue;
            }
            timers_.erase(timers_.begin() + static_cast<long>(k));
            fire(t);
        }
        if (r <= 0) continue;
        if (fds[0].revents) on_signal();
        if (fds[1].revents) on_accept();
        if (fds[2].revents) on_report();
        for (size_t k = 3; k < fds.size(); ++k)
            if (fds[k].revents && conns_[which[k - 3]].fd >= 0) on_readable(which[k - 3]);
    }
}

int Launcher::run() {
    sigset_t mask;
    sigemptyset(&mask);
    for (int s : {SIGCHLD, SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2}) sigaddset(&mask, s);
    if (opt_.drain_signal) sigaddset(&mask, opt_.drain_signal);
    if (opt_.checkpoint_signal) sigaddset(&mask, opt_.checkpoint_signal);
    sigprocmask(SIG_BLOCK, &mask, &old_mask_);
    signal_fd_ = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
    signal(SIGPIPE, SIG_IGN);
    if (signal_fd_ < 0 || !setup_socket()) return 1;
    if (!setup_hosts()) {
        close(listen_fd_);
        remove_socket_file();
        return 1;
    }
    if (opt_.drain_signal) {
        int p[2];
        drain_fd_ = eventfd(0, EFD_NONBLOCK);  // inherited by the ranks
        if (drain_fd_ < 0 || pipe2(p, 0) != 0) {
            std::fprintf(stderr, "weft-run: --drain-on: %s\n", std::strerror(errno));
            return 1;
        }
        report_rd_ = p[0];
        report_wr_ = p[1];
        fcntl(report_rd_, F_SETFD, FD_CLOEXEC);
        fcntl(report_rd_, F_SETFL, O_NONBLOCK);
    }
    if (!opt_.checkpoint_dir.empty()) {
        // Absolute, so that a rank that changes its directory still finds it.
        checkpoint_dir_ = opt_.checkpoint_dir;
        if (checkpoint_dir_[0] != '/') {
            char cwd[4096];
            if (!getcwd(cwd, sizeof cwd)) {
                std::fprintf(stderr, "weft-run: --checkpoint-dir: %s\n", std::strerror(errno));
                return 1;
            }
            checkpoint_dir_ = std::string(cwd) + "/" + checkpoint_dir_;
        }
    }
    if (opt_.checkpoint_signal) {
        checkpoint_fd_ = eventfd(0, EFD_NONBLOCK);  // inherited by the ranks
        if (checkpoint_fd_ < 0) {
            std::fprintf(stderr, "weft-run: --checkpoint-on: %s\n", std::strerror(errno));
            return 1;
        }
    }
    if (opt_.bind && hwloc_topology_init(&topo_) == 0) {
        if (hwloc_topology_load(topo_) != 0) {
            hwloc_topology_destroy(topo_);
            topo_ = nullptr;
        }
    }
    if (!spawn_all()) {
        kill_all(SIGKILL);
        exit_code_ = 1;
    }
    loop();
    for (size_t i = 0; i < conns_.size(); ++i) close_conn(i);
    close(listen_fd_);
    remove_socket_file();
    if (report_rd_ >= 0) {
        on_report();
        close(report_rd_);
        close(report_wr_);
        close(drain_fd_);
    }
    if (checkpoint_fd_ >= 0) close(checkpoint_fd_);
    if (topo_) hwloc_topology_destroy(topo_);
    return exit_code_;
}

}  // namespace

int run(const Options& opt) {
    Launcher l(opt);
    return l.run();
}

}  // namespace weft::run
