// launcher.hpp — weft-run: fork the ranks of one or more jobs on this
// machine, serve their bootstrap exchanges, inject faults, forward signals.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace weft::run {

struct JobSpec {
    uint32_t size = 0;
    std::vector<std::string> argv;
};

// kill/stop a rank, or with host=H (under --hosts) a whole host: kill is a
// node loss (its PID 1 is killed, and with it every process of the host),
// stop stops every rank of the host (a hung node), cut takes its link down
// (and up again after for=SEC).
// delay slows the rank down at a fault point: the thread that reaches it
// sleeps for=SEC (default 0.5).
enum class FaultAction { kill, stop, cut, delay };

struct FaultSpec {
    FaultAction action = FaultAction::kill;
    uint32_t job = 0;
    uint32_t rank = 0;
    int32_t host = -1;    // >= 0: a host fault
    double after_s = -1;  // timed: signal after this many seconds
    double for_s = -1;    // stop: SIGCONT after this many seconds; cut: link up again; delay: its length
    std::string at;       // fault point name (the rank signals itself)
    uint64_t count = 1;
};

struct Options {
    std::vector<JobSpec> jobs;
    std::vector<FaultSpec> faults;
    std::string transport;  // exported as WEFT_TRANSPORT when set
    uint32_t hosts = 0;     // --hosts K: simulated hosts (hosts.hpp); 0: none
    double timeout_s = 0;   // 0: none
    bool keep_survivors = false;
    bool bind = true;
    bool verbose = false;
    int drain_signal = 0;        // --drain-on: this signal asks the job for a drain
    int checkpoint_signal = 0;   // --checkpoint-on: this signal asks the job for a checkpoint
    std::string checkpoint_dir;  // --checkpoint-dir / --restart: exported as WEFT_CKPT_DIR (absolute)
    bool restart = false;        // --restart: the job restarts from checkpoint_dir (WEFT_CKPT_RESTART=1)
    bool help = false;           // -h / --help: print usage() to stdout, run nothing
};

// Parses argv; on error prints a message (and the usage) to stderr and
// returns false. -h / --help sets opt.help and returns true.
bool parse_options(int argc, char** argv, Options& opt);
// weft-run's usage text: to stdout for --help, to stderr after an error.
void usage(std::FILE* out);
bool parse_fault(const std::string& text, FaultSpec& f, std::string& error);
// "SIGUSR1", "USR1" or a number; 0 if it is none of these.
int parse_signal(const std::string& text);

// Runs the launch; returns the process exit status for weft-run.
int run(const Options& opt);

}  // namespace weft::run
