// common.hpp — small pieces every transport file uses: status, logging,
// time and deadlines, environment parsing, and the one backoff every wait
// of weft pauses with.
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
[[gnu::cold, gnu::format(printf, 4, 5)]] void log_at(LogLevel level, const char* file, int line, const char* fmt, ...);
// Set once the rank is known so log lines say who wrote them.
void log_set_identity(uint32_t job, uint32_t rank);

#define WEFT_LOG(level, ...)                                                                    \
    do {                                                                                        \
        if (static_cast<int>(::weft::LogLevel::level) <= static_cast<int>(::weft::log_level())) \
            ::weft::log_at(::weft::LogLevel::level, __FILE__, __LINE__, __VA_ARGS__);           \
    } while (0)

// The statuses that are expected outcomes, not errors: part of a protocol a
// correct program runs (weft/ft.h: a revoked communicator, an any-source
// receive pending on an unrecognised failure), answered by recovering and
// calling again, and possibly returned on every call of a polling loop.
// The one list; README "Logging" gives the rule.
constexpr bool expected_outcome(Status st) { return st == WEFT_ERR_PEER_FAILED_PENDING || st == WEFT_ERR_REVOKED; }
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
#define WEFT_ASSERT(cond)                                                                      \
    do {                                                                                       \
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
    // For a wait whose bound is not a time of its own (it names its bound
    // in an "Ends:" comment), e.g. the entry gate's, bounded by the drain's.
    static constexpr Deadline never() { return Deadline{UINT64_MAX}; }
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

// One rung of a backoff ladder: what a pause does, and for how many pauses.
struct BackoffRung {
    enum class Kind : uint8_t { spin, yield, sleep };
    Kind kind = Kind::spin;
    uint32_t pauses = 0;       // pauses on this rung; 0: the last rung (for good), or a timed one
    uint64_t for_ns = 0;       // a yield rung timed from its first pause; reset() does not restart that clock
    uint32_t sleep_us = 0;     // sleep: the first sleep
    uint32_t max_us = 0;       // sleep: the longest
    uint32_t grow_every = 0;   // sleep: pauses between two growth steps (0: flat)
    uint32_t grow_add_us = 0;  // sleep: a growth step adds this much (0: doubles)

    // The k-th sleep (from 0) of a sleep rung, in microseconds.
    constexpr uint32_t sleep_at(uint32_t k) const {
        uint64_t steps = grow_every ? k / grow_every : 0, us = sleep_us;
        if (grow_add_us)
            us += steps * grow_add_us;
        else
            for (; steps > 0 && us < max_us; --steps) us *= 2;
        return static_cast<uint32_t>(us < max_us ? us : max_us);
    }
};
constexpr BackoffRung spin_rung(uint32_t n) { return {BackoffRung::Kind::spin, n}; }
constexpr BackoffRung yield_rung(uint32_t n) { return {BackoffRung::Kind::yield, n}; }
constexpr BackoffRung yield_for_rung(uint64_t ns) { return {BackoffRung::Kind::yield, 0, ns}; }
constexpr BackoffRung sleep_rung(uint32_t us, uint32_t n = 0) { return {BackoffRung::Kind::sleep, n, 0, us, us}; }
constexpr BackoffRung sleep_doubling_rung(uint32_t us, uint32_t every, uint32_t max_us) {
    return {BackoffRung::Kind::sleep, 0, 0, us, max_us, every, 0};
}
constexpr BackoffRung sleep_adding_rung(uint32_t us, uint32_t add_us, uint32_t max_us) {
    return {BackoffRung::Kind::sleep, 0, 0, us, max_us, 1, add_us};
}

// A named ladder: its rungs in order, the last one for good.
struct BackoffProfile {
    const char* name;
    BackoffRung rungs[4];
    uint32_t n;
};

// Every wait in weft pauses through a Backoff: spin (cpu_relax), yield,
// sleep, each for as long as its profile says. With more ranks than cores
// a pure spin would burn the peer's scheduler quantum (4 ms here); a pure
// sleep would cost tens of microseconds per wait. The profiles, the only
// ladders weft has (each keeps the constants its waits had):
//
//   transport (default)  128 spins, 64 yields, then sleeps of 20 us doubling
//                        each time to 1 ms. Waits that poll the transport
//                        for a peer: Engine::progress_until, Runtime::wait,
//                        the backends and the bootstrap. should_block() says
//                        when one with a kernel wait (futex, event fd)
//                        should block there instead.
//   nic_completion       yields for 2 ms from the wait's first pause, then
//                        as transport (a completion resets to the spins,
//                        not the 2 ms). Verbs: the answer comes from the
//                        NIC, so busy polling steals no peer's cycles.
//   collective_partner   16 spins, yields for 200 us, then sleeps of 20 us
//                        doubling to 1 ms. Flag collectives (group/flags.cpp):
//                        the partner is inside the same collective.
//   drain_round          yields for 200 us, 4 sleeps of 20 us, then 40 us
//                        doubling every 8 sleeps to 1 ms. The drain thread
//                        between its rounds (docs/drain.md): it must not take
//                        the core a computing rank needs to reach its target
//                        (a yield gives the core to it; the sleeps, once a
//                        drain lasts, keep the drain off it), but a drain
//                        whose ranks are all there ends in tens of us: its
//                        phases each wait a few rounds for the others, and
//                        a sleep there cost 20-70 us a time (issue 14).
//   drain_parked         15 yields, 48 sleeps of 20 us, then 200 us. An
//                        application thread held at its clock target while
//                        a drain runs (Drain::commit).
//   gate_door            63 yields, then 50 us sleeps. The entry gate: a
//                        thread at the closed door, a closer waiting for the
//                        threads inside (transport/entry_gate.cpp).
//   progress_thread      16 yields, then sleeps of 17 us growing by 1 us
//                        each to 1 ms. The idle WEFT_PROGRESS_THREAD.
//
// Each Backoff is bounded by a Deadline: pause() returns false, without
// pausing, once it passed, and a sleep ends at it. The deadline is looked at
// only by pauses that yield or sleep (a spin costs less than a clock read):
// a wait that spins looks at its deadline itself. Waits bounded otherwise
// pass Deadline::never() and say what bounds them.
class Backoff {
public:
    static constexpr uint32_t spin_steps = 128;  // the transport profile's rungs
    static constexpr uint32_t yield_steps = 64;
    static constexpr BackoffProfile transport{
        "transport", {spin_rung(spin_steps), yield_rung(yield_steps), sleep_doubling_rung(20, 1, 1000)}, 3};
    static constexpr BackoffProfile nic_completion{
        "nic_completion",
        {yield_for_rung(2000000), spin_rung(spin_steps), yield_rung(yield_steps), sleep_doubling_rung(20, 1, 1000)},
        4};
    static constexpr BackoffProfile collective_partner{
        "collective_partner", {spin_rung(16), yield_for_rung(200000), sleep_doubling_rung(20, 1, 1000)}, 3};
    static constexpr BackoffProfile drain_round{
        "drain_round", {yield_for_rung(200000), sleep_rung(20, 4), sleep_doubling_rung(40, 8, 1000)}, 3};
    static constexpr BackoffProfile drain_parked{
        "drain_parked", {yield_rung(15), sleep_rung(20, 48), sleep_rung(200)}, 3};
    static constexpr BackoffProfile gate_door{"gate_door", {yield_rung(63), sleep_rung(50)}, 2};
    static constexpr BackoffProfile progress_thread{
        "progress_thread", {yield_rung(16), sleep_adding_rung(17, 1, 1000)}, 2};

    explicit Backoff(const BackoffProfile& profile = transport, Deadline deadline = Deadline::never())
        : profile_(&profile), deadline_(deadline) {}
    // Pauses once and escalates one step; false once the deadline passed.
    bool pause();
    // Back to the first rung (work arrived); a timed rung keeps its clock.
    void reset() { rung_ = on_rung_ = 0; }
    // True once the next pause sleeps: a caller with a kernel wait
    // primitive (futex) should block instead.
    bool should_block() const { return profile_->rungs[rung_].kind == BackoffRung::Kind::sleep; }
    const Deadline& deadline() const { return deadline_; }

private:
    void count();

    const BackoffProfile* profile_;
    Deadline deadline_;
    uint32_t rung_ = 0, on_rung_ = 0;
    uint64_t timed_since_ = 0;  // first pause on the timed rung (0: not yet)
};

// mremap(2) itself, moving len bytes of whole pages from `from` to `to`
// (replacing what is there); returns `to`, or MAP_FAILED. Not through
// mremap(): UCX's memory hooks (libucm, loaded with weft) replace it and
// drop MREMAP_FIXED's address.
void* move_pages(void* from, size_t len, void* to);

// Named fault points: WEFT_FAULT_POINT("transport.init.exchanged") makes
// this process SIGKILL (or SIGSTOP) itself when weft-run armed that point
// for this rank (--fault kill:rank=R:at=NAME[:count=K]). Unarmed cost: one
// relaxed load.
namespace fault {
extern std::atomic<bool> armed;
void hit(const char* name);
void init_from_env();
}  // namespace fault
#define WEFT_FAULT_POINT(name)                                                                                   \
    do {                                                                                                         \
        if (__builtin_expect(::weft::fault::armed.load(std::memory_order_relaxed), 0)) ::weft::fault::hit(name); \
    } while (0)

}  // namespace weft
