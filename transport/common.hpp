// common.hpp — small pieces every transport file uses: status, logging,
// time and deadlines, environment parsing, and the spin-then-block backoff.
#pragma once

#include <weft/weft.h>

#include <atomic>
#include <exception>
#include <new>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <time.h>

namespace weft {

using Status = weft_status_t;

// ------------------------------------------------------------------ logging
enum class LogLevel : int { error = 0, warn = 1, info = 2, debug = 3 };

LogLevel log_level();
// printf-style; prefixed with "weft[job.rank] LEVEL file:line". Cold path.
[[gnu::cold, gnu::format(printf, 4, 5)]] void log_at(LogLevel level, const char* file, int line,
                                                     const char* fmt, ...);
// Set once the rank is known so log lines say who wrote them.
void log_set_identity(uint32_t job, uint32_t rank);

#define WEFT_LOG(level, ...)                                                          \
    do {                                                                              \
        if (static_cast<int>(::weft::LogLevel::level) <=                              \
            static_cast<int>(::weft::log_level()))                                    \
            ::weft::log_at(::weft::LogLevel::level, __FILE__, __LINE__, __VA_ARGS__); \
    } while (0)

// The statuses that are expected outcomes, not errors: part of a protocol a
// correct program runs (weft/ft.h: a revoked communicator, an any-source
// receive pending on an unrecognised failure), answered by recovering and
// calling again, and possibly returned on every call of a polling loop.
// The one list; README "Logging" gives the rule.
constexpr bool expected_outcome(Status st) {
    return st == WEFT_ERR_PEER_FAILED_PENDING || st == WEFT_ERR_REVOKED;
}
// The level a failed call's line is logged at: debug for an expected
// outcome, error for the rest (bad input, real failures).
constexpr LogLevel failure_level(Status st) { return expected_outcome(st) ? LogLevel::debug : LogLevel::error; }

// Logs a failure at failure_level(st) and returns st. Cold path.
[[gnu::cold, gnu::format(printf, 4, 5)]] Status log_failure(Status st, const char* file, int line, const char* fmt,
                                                            ...);

// Log where an error is decided and return it (UCX's rule), at the level of
// its status (failure_level). The message is the caller's.
#define WEFT_FAIL(status, ...) ::weft::log_failure((status), __FILE__, __LINE__, __VA_ARGS__)

// Invariant violation: a bug in weft, not a fabric error. Aborts.
[[noreturn, gnu::cold]] void invariant_failed(const char* file, int line, const char* what);
#define WEFT_ASSERT(cond) \
    do {                  \
        if (__builtin_expect(!(cond), 0)) ::weft::invariant_failed(__FILE__, __LINE__, #cond); \
    } while (0)

// Runs f (returning a Status) and turns any C++ exception into a status:
// every C entry point goes through it, so none crosses into C.
template <typename F>
Status guarded(F&& f) noexcept {
    try {
        return f();
    } catch (const std::bad_alloc&) {
        return WEFT_FAIL(WEFT_ERR_NO_MEMORY, "out of memory");
    } catch (const std::exception& e) {
        return WEFT_FAIL(WEFT_ERR_TRANSPORT, "internal error: %s", e.what());
    } catch (...) {
        return WEFT_FAIL(WEFT_ERR_TRANSPORT, "internal error: unknown exception");
    }
}

// ------------------------------------------------------------------- time
inline uint64_t now_ns() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

struct Deadline {
    uint64_t at_ns;
    static Deadline after_ns(uint64_t ns) { return Deadline{now_ns() + ns}; }
    bool passed() const { return now_ns() >= at_ns; }
    uint64_t remaining_ns() const {
        uint64_t n = now_ns();
        return n >= at_ns ? 0 : at_ns - n;
    }
};

// ------------------------------------------------------------ environment
// Values of WEFT_* variables, parsed once. Bad values are logged and the
// default kept.
std::string env_string(const char* name, std::string_view fallback);
uint64_t env_u64(const char* name, uint64_t fallback);
// WEFT_TIMEOUT_MS in ns (default 30 s), clamped to 24 days so that no
// conversion downstream (ns, poll's int milliseconds) can overflow.
uint64_t timeout_ns_from_env();

// ------------------------------------------------------------------ waiting
inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    asm volatile("yield" ::: "memory");
#endif
}

// Spin, then yield, then sleep. With more ranks than cores a pure spin would
// burn the peer's scheduler quantum (4 ms here); a pure sleep would cost
// tens of microseconds per wait. Each call to pause() escalates one step.
class Backoff {
public:
    void pause();
    void reset() { step_ = 0; }
    // True once the backoff has reached the sleeping stage, where a caller
    // with a kernel wait primitive (futex) should block instead.
    bool should_block() const { return step_ >= spin_steps + yield_steps; }

    static constexpr uint32_t spin_steps = 128;
    static constexpr uint32_t yield_steps = 64;

private:
    uint32_t step_ = 0;
};

// Named fault points: WEFT_FAULT_POINT("transport.init.exchanged") makes
// this process SIGKILL (or SIGSTOP) itself when weft-run armed that point
// for this rank (--fault kill:rank=R:at=NAME[:count=K]). Unarmed cost: one
// relaxed load.
namespace fault {
extern std::atomic<bool> armed;
void hit(const char* name);
void init_from_env();
}  // namespace fault
#define WEFT_FAULT_POINT(name)                                                   \
    do {                                                                         \
        if (__builtin_expect(::weft::fault::armed.load(std::memory_order_relaxed), 0)) \
            ::weft::fault::hit(name);                                            \
    } while (0)

}  // namespace weft
