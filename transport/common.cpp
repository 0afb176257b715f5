// common.cpp — logging, environment, backoff, status texts, fault points.
#include "transport/common.hpp"

#include <cerrno>
#include <chrono>
#include <cstdarg>
#include <cstdlib>
#include <cstring>
#include <csignal>
#include <thread>
#include <sched.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

namespace weft {

namespace {
std::atomic<int> g_level{-1};
uint32_t g_job = UINT32_MAX;
uint32_t g_rank = UINT32_MAX;

int parse_level() {
    const char* v = std::getenv("WEFT_LOG");
    if (!v || !*v) return static_cast<int>(LogLevel::warn);
    std::string_view s(v);
    if (s == "error") return 0;
    if (s == "warn") return 1;
    if (s == "info") return 2;
    if (s == "debug") return 3;
    std::fprintf(stderr, "weft: WEFT_LOG=%s is not error|warn|info|debug; using warn\n", v);
    return 1;
}
const char* level_name(LogLevel l) {
    switch (l) {
        case LogLevel::error:
            return "ERROR";
        case LogLevel::warn:
            return "WARN";
        case LogLevel::info:
            return "INFO";
        case LogLevel::debug:
            return "DEBUG";
    }
    return "?";
}
}  // namespace

LogLevel log_level() {
    int l = g_level.load(std::memory_order_relaxed);
    if (__builtin_expect(l < 0, 0)) {
        l = parse_level();
        g_level.store(l, std::memory_order_relaxed);
    }
    return static_cast<LogLevel>(l);
}

void log_set_identity(uint32_t job, uint32_t rank) {
    g_job = job;
    g_rank = rank;
}

void log_at(LogLevel level, const char* file, int line, const char* fmt, ...) {
    if (static_cast<int>(level) > static_cast<int>(log_level())) return;
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    const char* base = std::strrchr(file, '/');
    base = base ? base + 1 : file;
    char who[48];
    if (g_rank == UINT32_MAX)
        std::snprintf(who, sizeof who, "pid %d", static_cast<int>(getpid()));
    else
        std::snprintf(who, sizeof who, "%u.%u", g_job, g_rank);
    std::fprintf(stderr, "weft[%s] %s %s:%d: %s\n", who, level_name(level), base, line, msg);
}

Status log_failure(Status st, const char* file, int line, const char* fmt, ...) {
    const LogLevel level = failure_level(st);
    if (static_cast<int>(level) > static_cast<int>(log_level())) return st;
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    log_at(level, file, line, "%s", msg);
    return st;
}

void invariant_failed(const char* file, int line, const char* what) {
    std::fprintf(stderr, "weft: invariant violated at %s:%d: %s\n", file, line, what);
    std::abort();
}

std::string env_string(const char* name, std::string_view fallback) {
    const char* v = std::getenv(name);
    if (!v || !*v) return std::string(fallback);
    return std::string(v);
}

uint64_t env_u64(const char* name, uint64_t fallback) {
    const char* v = std::getenv(name);
    if (!v || !*v) return fallback;
    char* end = nullptr;
    errno = 0;
    if (*v < '0' || *v > '9') {  // strtoull would accept "-1" as ULLONG_MAX
        WEFT_LOG(warn, "%s=%s is not a number; using %llu", name, v, static_cast<unsigned long long>(fallback));
        return fallback;
    }
    unsigned long long x = std::strtoull(v, &end, 0);
    if (errno != 0 || end == v || *end != '\0') {
        WEFT_LOG(warn, "%s=%s is not a number; using %llu", name, v, static_cast<unsigned long long>(fallback));
        return fallback;
    }
    return x;
}

uint64_t timeout_ns_from_env() {
    constexpr uint64_t max_ms = 24ull * 24 * 3600 * 1000;  // < INT_MAX ms
    uint64_t ms = env_u64("WEFT_TIMEOUT_MS", 30000);
    if (ms > max_ms) ms = max_ms;
    return ms * 1000000ull;
}

bool Backoff::pause() {
    // Ends: a rung is left after its pauses or its time; the last is for good.
    for (;;) {
        const BackoffRung& r = profile_->rungs[rung_];
        if (r.kind == BackoffRung::Kind::spin) {
            cpu_relax();
            count();
            return true;
        }
        const bool timed = r.for_ns != 0, bounded = deadline_.at_ns != UINT64_MAX;
        const uint64_t now = timed || bounded ? now_ns() : 0;
        if (bounded && now >= deadline_.at_ns) return false;
        if (timed) {
            if (!timed_since_) timed_since_ = now;
            if (now - timed_since_ >= r.for_ns && rung_ + 1 < profile_->n) {
                ++rung_;
                on_rung_ = 0;
                continue;
            }
            sched_yield();
            return true;
        }
        if (r.kind == BackoffRung::Kind::yield) {
            sched_yield();
        } else {
            uint64_t ns = uint64_t(r.sleep_at(on_rung_)) * 1000;
            if (bounded && ns > deadline_.at_ns - now) ns = deadline_.at_ns - now;
            timespec ts{static_cast<time_t>(ns / 1000000000ull), static_cast<long>(ns % 1000000000ull)};
            nanosleep(&ts, nullptr);
        }
        count();
        return true;
    }
}

void Backoff::count() {
    if (on_rung_ < UINT32_MAX) ++on_rung_;
    const BackoffRung& r = profile_->rungs[rung_];
    if (r.pauses && on_rung_ >= r.pauses && rung_ + 1 < profile_->n) {
        ++rung_;
        on_rung_ = 0;
    }
}

// The ladders the profiles replaced, sleep for sleep (common.hpp).
static_assert(Backoff::transport.rungs[2].sleep_at(0) == 20 && Backoff::transport.rungs[2].sleep_at(5) == 640 &&
              Backoff::transport.rungs[2].sleep_at(6) == 1000 && Backoff::transport.rungs[2].sleep_at(999) == 1000);
static_assert(Backoff::drain_round.rungs[2].sleep_at(7) == 40 && Backoff::drain_round.rungs[2].sleep_at(8) == 80 &&
              Backoff::drain_round.rungs[2].sleep_at(39) == 640 && Backoff::drain_round.rungs[2].sleep_at(40) == 1000);
static_assert(Backoff::drain_parked.rungs[1].sleep_at(47) == 20 && Backoff::drain_parked.rungs[2].sleep_at(9) == 200);
static_assert(Backoff::progress_thread.rungs[1].sleep_at(0) == 17 &&
              Backoff::progress_thread.rungs[1].sleep_at(982) == 999 &&
              Backoff::progress_thread.rungs[1].sleep_at(983) == 1000 &&
              Backoff::progress_thread.rungs[1].sleep_at(5000) == 1000);

namespace fault {
std::atomic<bool> armed{false};
namespace {
struct Point {
    char name[128];
    uint64_t count;  // fire on the count-th hit
    uint64_t hits;
    int signal;         // 0: a delay
    uint64_t delay_ms;  // delay: how long the thread that reaches it sleeps
};
Point g_points[16];
int g_npoints = 0;
}  // namespace

// WEFT_FAULT_POINTS="kill@name#count;stop@name#count;delayMS@name#count"
// (set by weft-run for the chosen rank only). A delay puts the thread that
// reaches the point to sleep for MS milliseconds: a rank slowed down at an
// exact place (a descheduled thread, on demand), to test a race.
void init_from_env() {
    g_npoints = 0;
    armed.store(false, std::memory_order_relaxed);
    const char* v = std::getenv("WEFT_FAULT_POINTS");
    if (!v || !*v) return;
    std::string spec(v);
    size_t pos = 0;
    while (pos < spec.size() && g_npoints < 16) {
        size_t end = spec.find(';', pos);
        if (end == std::string::npos) end = spec.size();
        std::string item = spec.substr(pos, end - pos);
        pos = end + 1;
        size_t at = item.find('@');
        if (at == std::string::npos) continue;
        std::string action = item.substr(0, at);
        std::string rest = item.substr(at + 1);
        uint64_t count = 1;
        size_t hash = rest.find('#');
        if (hash != std::string::npos) {
            count = std::strtoull(rest.c_str() + hash + 1, nullptr, 10);
            if (count == 0) count = 1;
            rest.resize(hash);
        }
        Point& p = g_points[g_npoints];
        std::snprintf(p.name, sizeof p.name, "%s", rest.c_str());
        p.count = count;
        p.hits = 0;
        p.signal = action == "stop" ? SIGSTOP : action.rfind("delay", 0) == 0 ? 0 : SIGKILL;
        p.delay_ms = p.signal ? 0 : std::strtoull(action.c_str() + 5, nullptr, 10);
        ++g_npoints;
    }
    armed.store(g_npoints > 0, std::memory_order_relaxed);
}

void hit(const char* name) {
    for (int i = 0; i < g_npoints; ++i) {
        Point& p = g_points[i];
        if (std::strcmp(p.name, name) != 0) continue;
        if (++p.hits == p.count) {
            if (!p.signal) {
                WEFT_LOG(info, "fault point %s reached (hit %llu): sleeping %llu ms", name,
                         static_cast<unsigned long long>(p.hits), static_cast<unsigned long long>(p.delay_ms));
                std::this_thread::sleep_for(std::chrono::milliseconds(p.delay_ms));
                continue;
            }
            WEFT_LOG(info, "fault point %s reached (hit %llu): raising %s", name,
                     static_cast<unsigned long long>(p.hits), p.signal == SIGKILL ? "SIGKILL" : "SIGSTOP");
            raise(p.signal);
        }
    }
}
}  // namespace fault

void* move_pages(void* from, size_t len, void* to) {
    const long r = syscall(SYS_mremap, from, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, to);
    return r == reinterpret_cast<long>(to) ? to : MAP_FAILED;
}
}  // namespace weft

extern "C" const char* weft_strerror(weft_status_t status) {
    switch (status) {
        case WEFT_OK:
            return "success";
        case WEFT_ERR_INVALID_ARG:
            return "invalid argument";
        case WEFT_ERR_NOT_INITIALIZED:
            return "context not initialized or already finalized";
        case WEFT_ERR_INVALID_RANK:
            return "invalid rank or peer";
        case WEFT_ERR_OUT_OF_RANGE:
            return "remote address outside the registered region";
        case WEFT_ERR_UNALIGNED:
            return "atomic operand not 8-byte aligned";
        case WEFT_ERR_MSG_SIZE:
            return "message length zero or above the maximum";
        case WEFT_ERR_UNSUPPORTED:
            return "operation not supported by this transport";
        case WEFT_ERR_NO_MEMORY:
            return "out of memory";
        case WEFT_ERR_PEER_FAILED:
            return "peer process failed";
        case WEFT_ERR_TIMEOUT:
            return "timed out";
        case WEFT_ERR_TRANSPORT:
            return "transport error";
        case WEFT_ERR_BOOTSTRAP:
            return "bootstrap (launcher or PMIx) error";
        case WEFT_ERR_PROTOCOL:
            return "corrupted or truncated message";
        case WEFT_ERR_UNKNOWN_TRANSPORT:
            return "unknown transport name";
        case WEFT_ERR_BUSY:
            return "resource busy";
        case WEFT_ERR_NOT_FOUND:
            return "not found";
        case WEFT_ERR_TRUNCATE:
            return "message truncated: longer than the receive buffer";
        case WEFT_ERR_REVOKED:
            return "communicator revoked";
        case WEFT_ERR_PEER_FAILED_PENDING:
            return "a member failed and its failure is not recognised yet (any-source receive)";
        case WEFT_ERR_NOT_A_MEMBER:
            return "the caller is not a participant of the operation";
        case WEFT_ERR_CONSTRUCT_ABORT:
            return "group construct aborted: a participant was lost";
        case WEFT_ERR_CANCELED:
            return "operation cancelled";
        case WEFT_ERR_WOULD_BLOCK:
            return "a blocking call from an event handler";
        case WEFT_ERR_BAD_PARAM:
            return "the participants' arguments disagree";
        case WEFT_ERR_CORRUPT:
            return "a checkpoint image or manifest failed verification";
        case WEFT_ERR_IO:
            return "a file system operation failed";
    }
    return "unknown status code";
}
