// options.cpp — weft-run's command line.
#include "tools/weft-run/launcher.hpp"
#include "transport/registry.hpp"

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace weft::run {

namespace {

bool parse_number(const std::string& s, double& out) {
    char* end = nullptr;
    out = std::strtod(s.c_str(), &end);
    return !s.empty() && end && *end == '\0' && out >= 0;
}

bool parse_uint(const std::string& s, uint64_t& out) {
    if (s.empty() || s[0] == '-') return false;
    char* end = nullptr;
    out = std::strtoull(s.c_str(), &end, 10);
    return end && *end == '\0';
}

}  // namespace

void usage(std::FILE* out) {
    std::fprintf(out,
                 "weft-run: launch a weft job (one or more jobs of ranks) on this machine\n"
                 "usage: weft-run [options] -n N prog [args...] [: -n M prog2 [args...]]...\n"
                 "Forks N ranks of prog (bound to cores), serves their start-up exchange, forwards\n"
                 "signals, kills the rest when one fails, and exits with the first non-zero status\n"
                 "(128+N for a signal, 124 for --timeout, 2 for a bad command line).\n"
                 "options (before the first -n, or between -n N and the program):\n"
                 "  -n N                 ranks of the job that follows (each ':' starts a new job)\n"
                 "  --transport T        shm | ucx | verbs | auto (sets WEFT_TRANSPORT)\n"
                 "  --timeout SEC        kill every rank and exit 124 after SEC seconds\n"
                 "  --keep-survivors     do not kill the other ranks when one fails\n"
                 "  --no-bind            do not bind ranks to cores\n"
                 "  --hosts K            run the ranks on K simulated hosts (root: network, PID and\n"
                 "                       mount namespaces joined by a private bridge; ranks in blocks)\n"
                 "  --fault SPEC         inject a fault (repeatable):\n"
                 "                         kill:rank=R[:job=J]:after=SEC\n"
                 "                         stop:rank=R[:job=J]:after=SEC[:for=SEC]\n"
                 "                         kill:rank=R[:job=J]:at=NAME[:count=K]\n"
                 "                         stop:rank=R[:job=J]:at=NAME[:count=K]\n"
                 "                         delay:rank=R[:job=J]:at=NAME[:count=K][:for=SEC]\n"
                 "                                                       (sleeps there; default 0.5 s)\n"
                 "                         kill:host=H:after=SEC         (--hosts: a node loss)\n"
                 "                         stop:host=H:after=SEC[:for=SEC] (every rank of host H)\n"
                 "                         cut:host=H:after=SEC[:for=SEC]  (host H's link down)\n"
                 "  --drain-on SIG       on signal SIG (e.g. SIGUSR1), ask the job for a drain and\n"
                 "                       print its result (drain.h; needs the ranks' drain threads)\n"
                 "  --checkpoint-dir DIR the ranks' checkpoint directory (weft/ckpt.h: WEFT_CKPT_DIR)\n"
                 "  --checkpoint-on SIG  on signal SIG (e.g. SIGUSR2), ask the job for a checkpoint: the\n"
                 "                       ranks' next weft_ckpt_need says so (needs --checkpoint-dir)\n"
                 "  --restart DIR        restart the job from DIR's newest valid generation: the ranks'\n"
                 "                       weft_restart reads DIR, and finding nothing there is an error\n"
                 "  -v                   say what the launcher does\n"
                 "  -h, --help           print this and exit\n");
}

int parse_signal(const std::string& text) {
    static const std::pair<const char*, int> names[] = {{"USR1", SIGUSR1}, {"USR2", SIGUSR2}, {"HUP", SIGHUP},
                                                        {"INT", SIGINT},   {"TERM", SIGTERM}, {"QUIT", SIGQUIT}};
    std::string t = text.rfind("SIG", 0) == 0 ? text.substr(3) : text;
    for (auto [name, sig] : names)
        if (t == name) return sig;
    uint64_t n = 0;
    if (parse_uint(t, n) && n > 0 && n < 65) return static_cast<int>(n);
    return 0;
}

bool parse_fault(const std::string& text, FaultSpec& f, std::string& error) {
    f = FaultSpec{};
    std::vector<std::string> parts;
    size_t pos = 0;
    while (pos <= text.size()) {
        size_t c = text.find(':', pos);
        if (c == std::string::npos) c = text.size();
        parts.push_back(text.substr(pos, c - pos));
        pos = c + 1;
    }
    if (parts.empty() || (parts[0] != "kill" && parts[0] != "stop" && parts[0] != "cut" && parts[0] != "delay")) {
        error = "a fault starts with kill, stop, cut or delay";
        return false;
    }
    f.action = parts[0] == "kill"   ? FaultAction::kill
               : parts[0] == "stop" ? FaultAction::stop
               : parts[0] == "cut"  ? FaultAction::cut
                                    : FaultAction::delay;
    bool have_rank = false;
    for (size_t i = 1; i < parts.size(); ++i) {
        size_t eq = parts[i].find('=');
        if (eq == std::string::npos) {
            error = "expected key=value, got '" + parts[i] + "'";
            return false;
        }
        std::string k = parts[i].substr(0, eq), v = parts[i].substr(eq + 1);
        uint64_t u = 0;
        if (k == "rank" && parse_uint(v, u)) {
            f.rank = static_cast<uint32_t>(u);
            have_rank = true;
        } else if (k == "host" && parse_uint(v, u) && u < 4096) {
            f.host = static_cast<int32_t>(u);
        } else if (k == "job" && parse_uint(v, u)) {
            f.job = static_cast<uint32_t>(u);
        } else if (k == "after" && parse_number(v, f.after_s)) {
        } else if (k == "for" && parse_number(v, f.for_s)) {
        } else if (k == "at" && !v.empty() && v.find_first_of(";#@") == std::string::npos) {
            f.at = v;
        } else if (k == "count" && parse_uint(v, u) && u > 0) {
            f.count = u;
        } else {
            error = "bad fault field '" + parts[i] + "'";
            return false;
        }
    }
    if (have_rank == (f.host >= 0)) {
        error = "a fault needs exactly one of rank=R or host=H";
        return false;
    }
    if (f.action == FaultAction::cut && f.host < 0) {
        error = "cut goes with host=H";
        return false;
    }
    if (f.host >= 0 && f.after_s < 0) {
        error = "a host fault needs after=SEC";
        return false;
    }
    if ((f.after_s >= 0) == !f.at.empty()) {
        error = "a fault needs exactly one of after=SEC or at=NAME";
        return false;
    }
    if (f.action == FaultAction::delay && (f.at.empty() || f.host >= 0)) {
        error = "delay goes with rank=R and at=NAME";
        return false;
    }
    if (f.for_s >= 0 && f.action != FaultAction::delay && (f.action == FaultAction::kill || f.after_s < 0)) {
        error = "for=SEC goes with stop:...:after=SEC, cut:...:after=SEC or delay:...:at=NAME";
        return false;
    }
    return true;
}

bool parse_options(int argc, char** argv, Options& opt) {
    int i = 1;
    auto need = [&](const char* what) -> const char* {
        if (i + 1 >= argc) {
            std::fprintf(stderr, "weft-run: %s needs a value\n", what);
            return nullptr;
        }
        return argv[++i];
    };
    // One launcher option at argv[i] (advancing i past its value); false on
    // an error, which it reports.
    auto parse_one = [&]() -> bool {
        std::string a = argv[i];
        if (a == "--transport") {
            const char* v = need("--transport");
            if (!v) return false;
            // The names weft_init takes (transport/registry.hpp), checked
            // here so that a typo fails before any rank starts.
            if (std::strcmp(v, "auto") != 0 && !weft::find_backend(v)) {
                std::fprintf(stderr, "weft-run: --transport %s: not a backend (%s or auto)\n", v,
                             weft::backend_names().c_str());
                return false;
            }
            opt.transport = v;
        } else if (a == "--timeout") {
            const char* v = need("--timeout");
            if (!v || !parse_number(v, opt.timeout_s)) {
                std::fprintf(stderr, "weft-run: --timeout takes seconds\n");
                return false;
            }
        } else if (a == "--drain-on") {
            const char* v = need("--drain-on");
            if (!v) return false;
            opt.drain_signal = parse_signal(v);
            if (opt.drain_signal == 0 || opt.drain_signal == SIGKILL || opt.drain_signal == SIGSTOP ||
                opt.drain_signal == SIGCHLD) {
                std::fprintf(stderr, "weft-run: --drain-on: '%s' is not a signal weft-run can catch\n", v);
                return false;
            }
        } else if (a == "--checkpoint-on") {
            const char* v = need("--checkpoint-on");
            if (!v) return false;
            opt.checkpoint_signal = parse_signal(v);
            if (opt.checkpoint_signal == 0 || opt.checkpoint_signal == SIGKILL || opt.checkpoint_signal == SIGSTOP ||
                opt.checkpoint_signal == SIGCHLD) {
                std::fprintf(stderr, "weft-run: --checkpoint-on: '%s' is not a signal weft-run can catch\n", v);
                return false;
            }
        } else if (a == "--checkpoint-dir" || a == "--restart") {
            const char* v = need(a.c_str());
            if (!v) return false;
            if (!*v) {
                std::fprintf(stderr, "weft-run: %s takes a directory\n", a.c_str());
                return false;
            }
            if (!opt.checkpoint_dir.empty() && opt.checkpoint_dir != v) {
                std::fprintf(stderr, "weft-run: --checkpoint-dir and --restart name different directories\n");
                return false;
            }
            opt.checkpoint_dir = v;
            if (a == "--restart") opt.restart = true;
        } else if (a == "--hosts") {
            const char* v = need("--hosts");
            uint64_t k = 0;
            if (!v || !parse_uint(v, k) || k == 0 || k > 64) {
                std::fprintf(stderr, "weft-run: --hosts takes a host count from 1 to 64\n");
                return false;
            }
            opt.hosts = static_cast<uint32_t>(k);
        } else if (a == "--keep-survivors") {
            opt.keep_survivors = true;
        } else if (a == "--no-bind") {
            opt.bind = false;
        } else if (a == "--fault") {
            const char* v = need("--fault");
            if (!v) return false;
            FaultSpec f;
            std::string err;
            if (!parse_fault(v, f, err)) {
                std::fprintf(stderr, "weft-run: --fault %s: %s\n", v, err.c_str());
                return false;
            }
            opt.faults.push_back(f);
        } else if (a == "-v") {
            opt.verbose = true;
        } else if (a == "-h" || a == "--help") {
            opt.help = true;
        } else {
            std::fprintf(stderr, "weft-run: unknown option %s\n", argv[i]);
            usage(stderr);
            return false;
        }
        return true;
    };
    // Launcher options go before the first -n, or between -n N and the
    // program (`weft-run -n 2 --transport ucx prog`): whatever follows the
    // program belongs to the program.
    auto is_option = [&](const char* a) { return a[0] == '-' && std::strcmp(a, "-n") != 0; };
    for (; i < argc && std::strcmp(argv[i], "-n") != 0; ++i)
        if (!parse_one()) return false;
    if (opt.help) return true;
    while (i < argc) {
        if (std::strcmp(argv[i], "-n") != 0 || i + 1 >= argc) {
            std::fprintf(stderr, "weft-run: expected -n N, got '%s'\n", argv[i]);
            usage(stderr);
            return false;
        }
        uint64_t n = 0;
        if (!parse_uint(argv[i + 1], n) || n == 0 || n > 4096) {
            std::fprintf(stderr, "weft-run: -n takes a rank count from 1 to 4096\n");
            return false;
        }
        JobSpec job;
        job.size = static_cast<uint32_t>(n);
        i += 2;
        for (; i < argc && is_option(argv[i]); ++i)
            if (!parse_one()) return false;
        if (opt.help) return true;
        for (; i < argc && std::strcmp(argv[i], ":") != 0; ++i) job.argv.emplace_back(argv[i]);
        if (job.argv.empty()) {
            std::fprintf(stderr, "weft-run: job %zu has no program\n", opt.jobs.size());
            return false;
        }
        opt.jobs.push_back(std::move(job));
        if (i < argc) ++i;  // skip ':'
    }
    if (opt.checkpoint_signal && opt.checkpoint_dir.empty()) {
        std::fprintf(stderr, "weft-run: --checkpoint-on needs --checkpoint-dir (or --restart)\n");
        return false;
    }
    if (opt.checkpoint_signal && opt.checkpoint_signal == opt.drain_signal) {
        std::fprintf(stderr, "weft-run: --checkpoint-on and --drain-on name the same signal\n");
        return false;
    }
    if (opt.jobs.empty()) {
        std::fprintf(stderr, "weft-run: no job to run (-n N prog)\n");
        usage(stderr);
        return false;
    }
    for (const auto& f : opt.faults) {
        if (f.host >= 0) {
            if (static_cast<uint32_t>(f.host) >= opt.hosts) {
                std::fprintf(stderr, "weft-run: fault names host %d, but the launch has %u (--hosts)\n", f.host,
                             opt.hosts);
                return false;
            }
            continue;
        }
        if (f.job >= opt.jobs.size() || f.rank >= opt.jobs[f.job].size) {
            std::fprintf(stderr, "weft-run: fault names job %u rank %u, which the launch does not have\n", f.job,
                         f.rank);
            return false;
        }
    }
    return true;
}

}  // namespace weft::run
