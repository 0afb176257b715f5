// child.cpp — bounded child processes for --compare (child.hpp).
#include "child.hpp"

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

namespace weft_bench {

namespace {

// The CPUs of a list such as "3,5-7"; every CPU for "" (or a list that
// names none).
cpu_set_t cpu_set_of(const std::string& list) {
    cpu_set_t set;
    CPU_ZERO(&set);
    const char* p = list.c_str();
    while (*p) {
        char* end = nullptr;
        const long first = std::strtol(p, &end, 10);
        if (end == p) break;
        long last = first;
        if (*end == '-') {
            p = end + 1;
            last = std::strtol(p, &end, 10);
            if (end == p) break;
        }
        for (long c = first; c <= last && c < CPU_SETSIZE; ++c)
            if (c >= 0) CPU_SET(static_cast<int>(c), &set);
        if (*end != ',') break;
        p = end + 1;
    }
    if (CPU_COUNT(&set) == 0)
        for (int c = 0; c < CPU_SETSIZE; ++c) CPU_SET(c, &set);
    return set;
}

// Reads fds (stdout's, stderr's) into `into` until both close; false if
// `until` came first.
bool drain(pollfd (&fds)[2], std::string* (&into)[2], double until) {
    while (fds[0].fd >= 0 || fds[1].fd >= 0) {
        const double left = until - now_s();
        if (left <= 0) return false;
        const int n = poll(fds, 2, static_cast<int>(left * 1000) + 1);
        if (n < 0 && errno != EINTR) return false;
        for (int k = 0; k < 2 && n > 0; ++k) {
            if (fds[k].fd < 0 || !fds[k].revents) continue;
            char buf[4096];
            const ssize_t got = read(fds[k].fd, buf, sizeof buf);
            if (got > 0) {
                into[k]->append(buf, static_cast<size_t>(got));
            } else if (got == 0 || errno != EINTR) {
                close(fds[k].fd);
                fds[k].fd = -1;  // poll skips it from now on
            }
        }
    }
    return true;
}

}  // namespace

double now_s() {
    timespec t{};
    clock_gettime(CLOCK_MONOTONIC, &t);
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

bool Finished::exited_ok() const { return !timed_out && WIFEXITED(status) && WEXITSTATUS(status) == 0; }

Child::Child(std::vector<std::string> args, std::vector<std::string> env, const std::string& cpus) {
    std::vector<char*> argv, envp;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    for (auto& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
    int out[2] = {-1, -1}, err[2] = {-1, -1};
    if (pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0) {
        start_error_ = std::string("pipe: ") + std::strerror(errno);
        for (int fd : {out[0], out[1], err[0], err[1]})
            if (fd >= 0) close(fd);
        return;
    }
    const cpu_set_t on = cpu_set_of(cpus);
    const pid_t parent = getpid();
    const pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (getppid() != parent) _exit(127);
        sched_setaffinity(0, sizeof on, &on);
        const int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (null < 0 || dup2(null, 0) < 0 || dup2(out[1], 1) < 0 || dup2(err[1], 2) < 0) _exit(127);
        execve(argv[0], argv.data(), envp.data());
        _exit(127);
    }
    close(out[1]);
    close(err[1]);
    if (pid < 0) {
        start_error_ = std::string("fork: ") + std::strerror(errno);
        close(out[0]);
        close(err[0]);
        return;
    }
    pid_ = pid;
    fds_[0] = out[0];
    fds_[1] = err[0];
}

Child::~Child() {
    if (pid_ > 0 && !reaped_) {
        kill(pid_, SIGKILL);
        while (waitpid(pid_, &status_, 0) < 0 && errno == EINTR) {
        }
    }
    for (int fd : fds_)
        if (fd >= 0) close(fd);
}

bool Child::exited() {
    if (pid_ <= 0 || reaped_) return true;
    const pid_t w = waitpid(pid_, &status_, WNOHANG);
    reaped_ = w == pid_ || (w < 0 && errno != EINTR);
    return reaped_;
}

Finished Child::finish(double until, double grace_s) {
    Finished f;
    if (pid_ <= 0) {
        f.err = start_error_;
        return f;
    }
    pollfd fds[2] = {{fds_[0], POLLIN, 0}, {fds_[1], POLLIN, 0}};
    std::string* into[2] = {&f.out, &f.err};
    // Whether it was reaped before `by`.
    auto reaped_by = [&](double by) {
        while (!exited()) {
            if (now_s() >= by) return false;
            usleep(10000);
        }
        return true;
    };
    if (!(drain(fds, into, until) && reaped_by(until))) {
        f.timed_out = true;
        kill(pid_, SIGTERM);
        const double grace = now_s() + grace_s;
        if (!(drain(fds, into, grace) && reaped_by(grace))) {
            kill(pid_, SIGKILL);
            while (!reaped_ && waitpid(pid_, &status_, 0) < 0 && errno == EINTR) {
            }
            reaped_ = true;
        }
    }
    for (int k = 0; k < 2; ++k) {
        if (fds[k].fd >= 0) close(fds[k].fd);
        fds_[k] = -1;
    }
    f.status = status_;
    return f;
}

Finished run_bounded(std::vector<std::string> args, std::vector<std::string> env, double limit_s) {
    Child child(std::move(args), std::move(env));
    return child.finish(now_s() + limit_s);
}

std::string tail(const std::string& text, int lines) {
    size_t at = text.size();
    while (at > 0 && text[at - 1] == '\n') --at;
    const size_t end = at;
    for (int n = 0; n < lines && at > 0; ++n) {
        at = text.rfind('\n', at - 1);
        if (at == std::string::npos) {
            at = 0;
            break;
        }
    }
    return text.substr(at == 0 ? 0 : at + 1, end - (at == 0 ? 0 : at + 1));
}

std::string joined(const std::vector<std::string>& args) {
    std::string s;
    for (const auto& a : args) s += (s.empty() ? "" : " ") + a;
    return s;
}

int free_port() {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return -1;
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    int port = -1;
    if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
        getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0)
        port = ntohs(a.sin_port);
    close(fd);
    return port;
}

}  // namespace weft_bench
