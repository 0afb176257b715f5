// child.hpp — the baseline programs --compare runs (mpirun, perftest's
// server and client) as child processes that are always bounded in time and
// ended by their pid: started with stdin /dev/null, stdout and stderr
// captured, on the CPUs asked for, and with PR_SET_PDEATHSIG so that a
// weft-bench killed by weft-run --timeout takes them along.
#pragma once

#include <string>
#include <sys/types.h>
#include <vector>

namespace weft_bench {

// CLOCK_MONOTONIC in seconds: every bound here is a point on it.
double now_s();

struct Finished {
    int status = -1;  // waitpid's
    bool timed_out = false;
    std::string out, err;
    bool exited_ok() const;  // exited by itself, status 0
};

// One child. Control path only; not thread-safe. Never left behind: the
// destructor ends one still running (SIGKILL) and reaps it.
class Child {
public:
    // args[0] is a path. `cpus`: a CPU list ("3", "0,2-3") the child runs
    // on; "" = every CPU, so it never inherits the single core weft-run
    // bound rank 0 to (the kernel drops the CPUs this machine lacks).
    Child(std::vector<std::string> args, std::vector<std::string> env, const std::string& cpus = "");
    ~Child();
    Child(const Child&) = delete;
    Child& operator=(const Child&) = delete;

    bool started() const { return pid_ > 0; }
    const std::string& start_error() const { return start_error_; }
    // Whether it has exited (and is reaped), without waiting.
    bool exited();
    // Reads its output until it has exited, at most until `until` (now_s()).
    // Past it, SIGTERM to the child, then SIGKILL if it has not exited
    // `grace_s` later; its pipes are read meanwhile: a closed pipe would kill
    // mpirun by SIGPIPE before it ended its ranks. Once only.
    Finished finish(double until, double grace_s = 10);

private:
    pid_t pid_ = -1;
    int fds_[2] = {-1, -1};  // stdout's and stderr's read ends
    bool reaped_ = false;
    int status_ = -1;
    std::string start_error_;
};

// Runs args for at most limit_s (Child::finish's ending past it).
Finished run_bounded(std::vector<std::string> args, std::vector<std::string> env, double limit_s);

// The last `lines` lines of a child's output, for a failure's message.
std::string tail(const std::string& text, int lines);
// args joined by spaces: the command a failure's message shows.
std::string joined(const std::vector<std::string>& args);

// A TCP port nobody listens on now, from the kernel (bind to port 0): other
// jobs on this machine may run the same baselines. -1 on failure.
int free_port();

}  // namespace weft_bench
