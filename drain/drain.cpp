// drain.cpp — MANA's drain without a coordinator (docs/drain.md).
//
// Each rank's drain thread runs the same protocol; what the ranks share
// lives in their pinned state windows:
//   - a request: the drain number, compare-swap-maxed into every rank's
//     EPOCH word by whoever asks;
//   - per communicator clock {seq, finished} (owner-store, read one-sidedly)
//     and target (raised by compare-swap max, tagged with the attempt so a
//     raise of an abandoned attempt reads as zero);
//   - per rank: the phase it obeys, its unfinished transfers, its counters;
//   - on rank 0, one decision word per attempt, settled by compare-swap:
//     the first drain thread to see convergence (or its attempt's deadline)
//     decides for everyone.
//
// Termination is a stable property observed by double collect: two
// successive snapshots of every rank's words that are equal and satisfy
// the condition. The words only grow (seq, finished, targets within an
// attempt, counters), so equal snapshots mean the condition held at one
// instant between them; once every rank is at its targets with no
// collective open, nobody can start one (they wait) and nobody can raise
// (a raiser is below some target until its raise has landed everywhere,
// itself last), so it still holds.
#include "drain/drain.hpp"

#include "transport/entry_gate.hpp"

#include <weft/state_window.h>

#include <linux/futex.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace weft::drain {

namespace {

using group::Comm;

// Target words (group/comm.hpp): attempt | the slot's use | value.
constexpr uint64_t value_bits = group::clock_value_bits;
constexpr uint64_t value_mask = (1ull << value_bits) - 1;
constexpr uint64_t use_mask = (1ull << group::clock_use_bits) - 1;
constexpr uint64_t attempt_shift = value_bits + group::clock_use_bits;
constexpr uint64_t attempt_mask = (1ull << (64 - attempt_shift)) - 1;

uint64_t tagged(uint64_t attempt, uint64_t use, uint64_t v) {
    return ((attempt & attempt_mask) << attempt_shift) | ((use & use_mask) << value_bits) | (v & value_mask);
}
uint64_t attempt_of(uint64_t word) { return word >> attempt_shift; }
uint64_t use_of(uint64_t word) { return (word >> value_bits) & use_mask; }
// A target word's value for this attempt: raises of other attempts count 0.
// Every live slot's target is rewritten at the start of every attempt, so
// the attempt field's wrap-around cannot revive an old raise.
uint64_t target_of(uint64_t word, uint64_t attempt) {
    return attempt_of(word) == (attempt & attempt_mask) ? word & value_mask : 0;
}

uint64_t clock_off(uint32_t slot, uint64_t field) { return WEFT_STATE_CLOCK_OFF(slot, field); }
uint64_t status_off(uint64_t field) { return WEFT_STATE_DRAIN_STATUS_OFF + field; }
// Words of the status line from its start up to and including `field`:
// one read gets them all.
constexpr size_t status_words_through(uint64_t field) { return field / 8 + 1; }
constexpr uint32_t tree_from_ranks = 64;  // WEFT_DRAIN_OBSERVE=auto: the tree observer from this job size

// The low half of a 64-bit word as a futex: shared (not PRIVATE), so a
// process that maps the same shm segment can wake us.
uint32_t* futex_word(uint64_t* w) { return reinterpret_cast<uint32_t*>(w); }
void futex_wait(uint64_t* w, uint32_t expected, uint64_t timeout_ns) {
    timespec ts{static_cast<time_t>(timeout_ns / 1000000000ull), static_cast<long>(timeout_ns % 1000000000ull)};
    syscall(SYS_futex, futex_word(w), FUTEX_WAIT, expected, &ts, nullptr, 0);
}
void futex_wake(uint64_t* w) { syscall(SYS_futex, futex_word(w), FUTEX_WAKE, INT32_MAX, nullptr, nullptr, 0); }

}  // namespace

Drain::Drain(Runtime& rt, group::DrainPort& port) : rt_(rt), port_(port), win_(rt.state_window()), sw_(win_) {
    direct_ = sw_.all_mapped();
    const InternalCaps caps = rt_.backend().internal_caps();
    // Off shared memory, a peer's operations on us may wait for our
    // progress: emulated atomics (UCX over tcp) move only then, a UCX
    // endpoint queues everything behind an active message we have not
    // taken in, and verbs senders wait for the credits we return. The drain
    // thread progresses when the application is not in weft to do it.
    needs_progress_ = caps.remote_ops_need_target_progress || caps.messages_need_target_progress;
    // Reads cost a round N one-sided reads per drain thread; the tree
    // ceil(log2 N) writes and as many waits for partners. Below 64 ranks
    // the reads are cheaper even on a fabric (a few µs); above, the tree.
    const std::string observe = env_string("WEFT_DRAIN_OBSERVE", "auto");
    if (observe != "auto" && observe != "reads" && observe != "tree")
        WEFT_LOG(warn, "WEFT_DRAIN_OBSERVE=%s: expected auto, reads or tree; auto", observe.c_str());
    by_tree_ = observe == "tree" || (observe != "reads" && rt_.size() >= tree_from_ranks);
    attempt_ns_ = env_u64("WEFT_DRAIN_ATTEMPT_MS", 5000) * 1000000ull;
    free_run_ns_ = env_u64("WEFT_DRAIN_FREE_RUN_MS", 100) * 1000000ull;
    timeout_ns_ = env_u64("WEFT_DRAIN_TIMEOUT_MS", 60000) * 1000000ull;
    // Off shm nothing wakes an idle drain thread: it looks for a request
    // every idle_ns_, and progresses the transport for an application that
    // is not in weft. Over UCX peers' operations can wait for that progress
    // (queued behind an active message, or emulated atomics): 1 ms. Over
    // verbs the NIC serves them, and each look is only a wake-up the
    // application did not ask for (OS noise: on 2 soft-RoCE vCPUs, looks
    // every 1 ms cost the fetch-add benchmark 10% of its mean) while a
    // drain is rare and takes milliseconds anyway: 10 ms.
    const uint64_t idle_us = caps.idle_poll == IdlePoll::sparse ? 10000 : 1000;
    idle_ns_ = std::max<uint64_t>(env_u64("WEFT_DRAIN_IDLE_US", idle_us), 10) * 1000ull;
    // weft-run --drain-on SIG: an eventfd it writes when the signal comes,
    // and a pipe for the report (both inherited).
    trigger_fd_ = std::getenv("WEFT_DRAIN_FD") ? static_cast<int>(env_u64("WEFT_DRAIN_FD", 0)) : -1;
    report_fd_ = std::getenv("WEFT_DRAIN_REPORT_FD") ? static_cast<int>(env_u64("WEFT_DRAIN_REPORT_FD", 0)) : -1;
    port_.set_hooks(group::DrainPort::Hooks{this, on_commit, on_slots_learned});
    const std::string mode = env_string("WEFT_DRAIN_MODE", "polling");
    blocking_ = mode == "blocking";
    if (!blocking_ && mode != "polling")
        WEFT_LOG(warn, "WEFT_DRAIN_MODE=%s: expected polling or blocking; polling", mode.c_str());
    if (blocking_) {
        // A blocked receive and the drain thread share the engine: the
        // context's lock keeps them apart.
        rt_.set_multi_threaded(true);
        port_.set_blocking(true);
    }
}

Drain::~Drain() {
    stop();
    port_.set_hooks({});
}

void Drain::start() {
    thread_ = std::thread([this] { run(); });
}

void Drain::stop() {
    stop_.store(true, std::memory_order_release);
    if (thread_.joinable()) thread_.join();
}

void Drain::set_callback(weft_drain_quiescent_fn fn, void* arg) {
    std::lock_guard<std::mutex> g(mutex_);
    callback_ = fn;
    callback_arg_ = arg;
}

void Drain::set_hold(void (*fn)(void*), void* arg) {
    std::lock_guard<std::mutex> g(mutex_);
    hold_fn_ = fn;
    hold_arg_ = arg;
}

bool Drain::all_hold(uint64_t number) {
    // Every HOLD word was written before its rank's QUIESCENT word, which
    // the barrier saw reach `number` on every rank: read after it, it is
    // that drain's (no rank can write the next drain's before this one
    // ended everywhere).
    for (uint32_t r = 0; r < rt_.size(); ++r)
        if (load_remote(r, status_off(WEFT_STATE_DRAIN_HOLD)) != number) return false;
    return true;
}

void Drain::set_hooks(const weft_drain_hooks_t& h) {
    std::lock_guard<std::mutex> g(mutex_);
    hooks_ = h;
    stack_progress_.store(h.progress != nullptr, std::memory_order_relaxed);
}

weft_drain_hooks_t Drain::hooks() {
    std::lock_guard<std::mutex> g(mutex_);
    return hooks_;
}

uint32_t Drain::progress_all() {
    const uint32_t n = port_.poll();
    const weft_drain_hooks_t h = hooks();
    if (h.progress) h.progress(h.arg);
    return n;
}

// ------------------------------------------------------------ one-sided
void Drain::publish(uint64_t field, uint64_t v) { sw_.at(status_off(field)).store(v, std::memory_order_release); }

uint64_t Drain::load_remote(uint32_t r, uint64_t off) {
    uint64_t v = 0;
    read_remote(r, off, &v, 1);
    return v;
}

bool Drain::read_gone(uint32_t r, uint64_t* dst, size_t words) {
    if (r == rt_.rank() || !rt_.peer_failed(r)) return false;
    // A failed member's words are not its state any more (a mapped segment
    // outlives its process; elsewhere the read would fail and log every
    // round): it matches nothing, and must_end() ends the drain.
    std::memset(dst, 0xff, words * 8);
    return true;
}

void Drain::read_failed(uint32_t r, Status st, uint64_t* dst, size_t words) {
    if (st == WEFT_OK) return;
    WEFT_LOG(warn, "drain: reading rank %u's state window failed: %s", r, weft_strerror(st));
    std::memset(dst, 0xff, words * 8);  // matches nothing: no decision on it
}

// Ours, or a peer's mapped here (direct_).
uint64_t Drain::load_mapped(uint32_t r, uint64_t off) {
    return std::atomic_ref<uint64_t>(*(r == rt_.rank() ? sw_.word(off) : sw_.mapped_word(r, off)))
        .load(std::memory_order_acquire);
}

void Drain::read_remote(uint32_t r, uint64_t off, uint64_t* dst, size_t words) {
    if (read_gone(r, dst, words)) return;
    count_op(r);
    if (r == rt_.rank() || direct_) {
        for (size_t i = 0; i < words; ++i) dst[i] = load_mapped(r, off + 8 * i);
        return;
    }
    // Through the transport: only while we hold it.
    read_failed(r, sw_.get(r, off, dst, words), dst, words);
}

void Drain::read_remote(uint32_t r, std::initializer_list<uint64_t> offs, uint64_t* dst) {
    if (read_gone(r, dst, offs.size())) return;
    count_op(r);
    if (r == rt_.rank() || direct_) {
        for (uint64_t off : offs) *dst++ = load_mapped(r, off);
        return;
    }
    read_failed(r, sw_.get(r, offs, dst), dst, offs.size());
}

// Compare-swap `want` into rank r's word at off until it is there or
// `enough(old)` says the word already holds at least as much.
template <typename Enough>
Status Drain::cas_raise(uint32_t r, uint64_t off, uint64_t want, Enough enough, uint64_t expect, uint64_t* ops) {
    if (r != rt_.rank() && rt_.peer_failed(r)) return WEFT_ERR_PEER_FAILED;  // nobody reads it any more
    // Ends: each pass either settles (our value is in, the word holds
    // enough, or the operation failed, bounded by WEFT_TIMEOUT_MS) or saw
    // another writer's raise land in between; the words only grow toward a
    // bound the raisers share, so the retries are as many as competing raises.
    for (;;) {
        uint64_t old = 0;
        count_op(r, ops);
        Status st = win_->ops->compare_swap(win_, r, off, expect, want, &old);
        if (st != WEFT_OK || old == expect || enough(old)) return st;
        expect = old;
    }
}

void Drain::cas_max_target(uint32_t r, uint32_t slot, uint64_t use, uint64_t attempt, uint64_t value, uint64_t* ops) {
    // Stops at a word of another communicator (the slot was reused there)
    // or one that already holds as much for this attempt.
    const auto enough = [&](uint64_t old) {
        return use_of(old) != use || (attempt_of(old) == (attempt & attempt_mask) && (old & value_mask) >= value);
    };
    Status st = cas_raise(r, clock_off(slot, WEFT_STATE_CLOCK_TARGET), tagged(attempt, use, value), enough,
                          tagged(0, use, 0), ops);
    if (st == WEFT_ERR_PEER_FAILED && rt_.peer_failed(r)) return;  // must_end() says so
    if (st != WEFT_OK) WEFT_LOG(warn, "drain: raising a target at rank %u failed: %s", r, weft_strerror(st));
}

// The word after the decision on rank 0: a failed member's rank + 1, put
// there by whoever settles member_failed (any failed member will do: a
// failure is permanent), so that a rank whose own detector has not heard
// of it yet can still name it.
constexpr uint64_t failure_hint_off = WEFT_STATE_DRAIN_DECISION_OFF + 8;

uint64_t Drain::decision() {
    // Unreadable (rank 0 failed, or the read failed): nothing decided. Every
    // survivor then ends on its own view (must_end), which is all there is.
    const uint64_t dec = load_remote(0, WEFT_STATE_DRAIN_DECISION_OFF);
    return dec == UINT64_MAX ? 0 : dec;
}

uint32_t Drain::reported_failure() {
    const uint64_t v = load_remote(0, failure_hint_off);
    return v == 0 || v == UINT64_MAX || v > rt_.size() ? UINT32_MAX : static_cast<uint32_t>(v - 1);
}

void Drain::decide(uint64_t attempt, Code from, Code to) {
    if (rt_.peer_failed(0) && rt_.rank() != 0) return;  // no decision word: each ends on its own view
    // Once per phase at most, whatever N: counted apart from the rounds.
    uint64_t* const round_ops = ops_;
    ops_ = &prof_.settle_ops;
    // `from` undecided: whatever older attempt's outcome the word holds.
    uint64_t expect = from == undecided ? decision() : (attempt << 4) | from;
    if (from == undecided && (expect >> 4) >= attempt) {  // already decided
        ops_ = round_ops;
        return;
    }
    if (to == member_failed && failed_rank_ != UINT32_MAX) {
        // Before the decision, so that whoever reads the decision finds it.
        const uint64_t hint = uint64_t(failed_rank_) + 1;
        count_op(0);
        Status st = win_->ops->put(win_, 0, failure_hint_off, &hint, sizeof hint);
        if (st == WEFT_OK && !direct_) st = rt_.backend().flush(*win_, 0);
        if (st != WEFT_OK)
            WEFT_LOG(debug, "drain: naming rank %u at rank 0 failed: %s", failed_rank_, weft_strerror(st));
    }
    uint64_t old = 0;
    count_op(0);
    win_->ops->compare_swap(win_, 0, WEFT_STATE_DRAIN_DECISION_OFF, expect, (attempt << 4) | to, &old);
    ops_ = round_ops;
}

Drain::Code Drain::settle(uint64_t attempt, Code from, Code to) {
    const bool hold_here = !direct_ && !held_;
    if (hold_here) hold();
    decide(attempt, from, to);
    const uint64_t dec = decision();
    if (hold_here) unhold();
    if ((dec >> 4) == attempt && (dec & 15) != undecided) return Code(dec & 15);
    return to;
}

Drain::Code Drain::final_for(uint64_t dec, uint64_t attempt, bool p2p) {
    if ((dec >> 4) != attempt) return undecided;
    const Code c = Code(dec & 15);
    if (ends_unquiet(c)) return c;
    if (p2p) return c == p2p_done ? c : undecided;
    return c == coll_done || c == retry ? c : undecided;
}

uint32_t Drain::failed_member() const {
    for (uint32_t r = 0; r < rt_.size(); ++r)
        if (r != rt_.rank() && rt_.peer_failed(r)) return r;
    return UINT32_MAX;
}

Drain::Code Drain::must_end() {
    // A member that failed (or finalized and left) will never publish its
    // phase, counters or quiescent word: the drain cannot reach a quiescent
    // point, so it ends now rather than at its deadline.
    const uint32_t f = failed_member();
    if (f != UINT32_MAX) {
        if (failed_rank_ == UINT32_MAX) failed_rank_ = f;
        return member_failed;
    }
    if (stop_.load(std::memory_order_acquire)) return stopped;
    if (port_.comms_across_jobs() != 0) return refused;
    if (deadline_.passed()) return failed;
    return undecided;
}

// ----------------------------------------------------------- holding weft
void Drain::hold() { held_.emplace(rt_); }

void Drain::unhold() { held_.reset(); }

// -------------------------------------------------------------- request
Status Drain::request(uint64_t& number) {
    if (rt_.released())
        return WEFT_FAIL(WEFT_ERR_TRANSPORT,
                         "weft_drain_request: the context's transport was let go "
                         "(weft_ckpt_release) and did not come back");
    // Any thread, no entry needed: the drain thread does the one-sided
    // part (it holds weft while it does).
    const uint64_t pending = sw_.at(WEFT_STATE_EPOCH_OFF).load(std::memory_order_acquire);
    const uint64_t started = started_.load(std::memory_order_acquire);
    number = std::max(pending > started ? pending : started + 1, uint64_t(1));
    uint64_t cur = asked_.load();
    while (cur < number && !asked_.compare_exchange_weak(cur, number)) {
    }
    std::lock_guard<std::mutex> held_point(request_mu_);
    if (direct_ && !holding_) {
        // Every drain thread may be asleep on the futex of its EPOCH word:
        // change each word (a CPU compare-swap max is allowed on shm, where
        // atomics are CPU atomics and every window is mapped here), then
        // wake its thread. Changing the word, not just waking, is what
        // closes the window between a thread's last look and its sleep.
        // The asking thread does it itself: handing it to our drain thread
        // cost a wake-up and a closing of the gate before any other rank
        // heard (issue 14: a third of a drain at 8 ranks).
        // Ours last: the thread a wake-up makes runnable may take this core
        // at once (wake-up preemption), and the others would wait for it.
        const uint32_t n = rt_.size(), me = rt_.rank();
        for (uint32_t i = 1; i <= n; ++i) {
            const uint32_t r = (me + i) % n;
            if (r != me && rt_.peer_failed(r)) continue;
            uint64_t* word = r == me ? sw_.word(WEFT_STATE_EPOCH_OFF) : sw_.mapped_word(r, WEFT_STATE_EPOCH_OFF);
            std::atomic_ref<uint64_t> epoch(*word);
            uint64_t e = epoch.load();
            while (e < number && !epoch.compare_exchange_weak(e, number)) {
            }
            futex_wake(word);
        }
        uint64_t d = delivered_.load();
        while (d < number && !delivered_.compare_exchange_weak(d, number)) {
        }
    }
    WEFT_LOG(debug, "drain %llu requested", static_cast<unsigned long long>(number));
    return WEFT_OK;
}

void Drain::send_request(uint64_t number) {
    for (uint32_t r = 0; r < rt_.size(); ++r) {
        // A failed member takes no part: the drain ends at once for it
        // (must_end), not a reason to log an error per request.
        if (r != rt_.rank() && rt_.peer_failed(r)) continue;
        Status st = cas_raise(
            r, WEFT_STATE_EPOCH_OFF, number, [&](uint64_t old) { return old >= number; }, 0,
            nullptr);  // before the drain: not in its profile
        if (st != WEFT_OK) WEFT_LOG(error, "drain request: rank %u unreachable: %s", r, weft_strerror(st));
        if (direct_ && r != rt_.rank()) futex_wake(sw_.mapped_word(r, WEFT_STATE_EPOCH_OFF));
    }
}

Status Drain::wait(uint64_t number, uint64_t timeout_ms, weft_drain_result_t& out) {
    std::unique_lock<std::mutex> g(mutex_);
    auto ready = [&] { return results_.count(number) != 0 || stop_.load(); };
    if (timeout_ms == 0)
        done_cv_.wait(g, ready);
    else if (!done_cv_.wait_for(g, std::chrono::milliseconds(timeout_ms), ready))
        return WEFT_FAIL(WEFT_ERR_TIMEOUT, "drain %llu did not finish in %llu ms",
                         static_cast<unsigned long long>(number), static_cast<unsigned long long>(timeout_ms));
    auto it = results_.find(number);
    if (it == results_.end())
        return WEFT_FAIL(WEFT_ERR_NOT_INITIALIZED, "drain %llu: weft is finalizing",
                         static_cast<unsigned long long>(number));
    out = it->second;
    return out.status;
}

bool Drain::finished(uint64_t number) {
    std::lock_guard<std::mutex> g(mutex_);
    return results_.count(number) != 0;
}

Status Drain::failed_since(uint64_t after) {
    std::lock_guard<std::mutex> g(mutex_);
    for (auto it = results_.upper_bound(after); it != results_.end(); ++it)
        if (it->second.status != WEFT_OK) return it->second.status;
    return WEFT_OK;
}

Status Drain::profile(uint64_t number, weft_drain_profile_t& out) {
    std::lock_guard<std::mutex> g(mutex_);
    auto it = profiles_.find(number);
    if (it == profiles_.end())
        return WEFT_FAIL(WEFT_ERR_NOT_FOUND, "drain %llu: no profile here (not finished, or older than the last 64)",
                         static_cast<unsigned long long>(number));
    out = it->second;
    return WEFT_OK;
}

// ------------------------------------------------------------ the thread
void Drain::run() {
    // A sleep between rounds (Backoff::drain_round) ends up to the timer
    // slack late, 50 us by default: more than the sleep itself. This
    // thread's timers only, and it sleeps rarely.
    prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
    // The thread's life: ends when stop() (weft_finalize) sets stop_; each
    // pass is bounded (a drain by its deadlines, an idle look by idle_ns_).
    while (!stop_.load(std::memory_order_acquire)) {
        const uint64_t asked = asked_.load();
        if (asked > sent_request_ && asked > delivered_.load()) {
            hold();
            send_request(asked);
            unhold();
            sent_request_ = asked;
        }
        const uint64_t req = sw_.at(WEFT_STATE_EPOCH_OFF).load(std::memory_order_acquire);
        // Released and never rebuilt (abandoned): no fabric to drain over.
        if (req > completed_ && !rt_.released()) {
            run_drain(completed_ + 1);
            continue;
        }
        serve_trigger();
        // Emulated atomics (UCX over tcp) move only while we progress: serve
        // peers' requests when the application is not in weft to do it.
        if (needs_progress_) {
            if (WeftHold h(rt_, WeftHold::if_free); h.held()) port_.poll();
        }
    }
}

void Drain::serve_trigger() {
    if (trigger_fd_ < 0) {
        // On shm a request wakes us at once (the asker wakes the futex on
        // our EPOCH word); elsewhere we look now and then.
        uint64_t* epoch = sw_.word(WEFT_STATE_EPOCH_OFF);
        const uint64_t seen = std::atomic_ref<uint64_t>(*epoch).load(std::memory_order_acquire);
        if (seen > completed_ || asked_.load() > std::max(sent_request_, delivered_.load())) return;
        if (direct_)
            futex_wait(epoch, static_cast<uint32_t>(seen), std::max<uint64_t>(idle_ns_, 50000000ull));
        else
            std::this_thread::sleep_for(std::chrono::nanoseconds(idle_ns_));
        return;
    }
    pollfd p{trigger_fd_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(std::max<uint64_t>(idle_ns_ / 1000000, 1))) <= 0) return;
    uint64_t v = 0;
    if (::read(trigger_fd_, &v, sizeof v) != static_cast<ssize_t>(sizeof v)) return;  // another rank took it
    uint64_t n = 0;
    if (request(n) == WEFT_OK) report_next_ = true;
}

void Drain::run_drain(uint64_t number) {
    started_.store(number, std::memory_order_release);
    weft_drain_result_t res{};
    res.drain = number;
    const uint64_t t0 = now_ns();
    const uint64_t raises0 = raises_.load();
    prof_ = weft_drain_profile_t{};
    prof_.drain = number;
    prof_.started_ns = t0;
    // One bound for the whole drain, every attempt included: a member that
    // never takes part (dead, stopped, its detector silent) must not keep
    // the job retrying forever. Failures end it sooner (must_end).
    deadline_ = Deadline::after_ns(timeout_ns_);
    failed_rank_ = UINT32_MAX;
    Code code = retry;
    uint64_t attempt = 0;
    const char* where = "collective";  // the phase it ended in, for the log
    // Ends: every attempt is bounded (its own deadline, the drain's,
    // must_end), and a retry comes only before the drain's deadline.
    while (code == retry) {
        attempt = ++attempts_total_;
        ++res.attempts;
        // A member already known failed (a drain after a failure, or one
        // seen during the free run): end before closing anything. Settled in
        // the decision word too, for survivors whose detector is slower.
        code = must_end();
        if (ends_unquiet(code)) code = settle(attempt, undecided, code);
        if (code == undecided) code = collective_attempt(attempt, res);
        if (code != retry) break;
        log_unconverged(attempt);
        WEFT_LOG(info, "drain %llu: attempt %u did not converge; free run, then again",
                 static_cast<unsigned long long>(number), res.attempts);
        // Free run: nobody waits at a collective; a new attempt recomputes
        // every target (the old attempt's raises read as zero).
        phase_.store(0, std::memory_order_release);
        port_.drain_active().store(0, std::memory_order_release);
        const Deadline free_run = Deadline::after_ns(free_run_ns_);
        while (!free_run.passed() && must_end() == undecided) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    res.collective_ns = now_ns() - t0;
    if (code == coll_done) {
        prof_.collective_ns = t0 + res.collective_ns;
        where = "point-to-point";
        code = p2p_phase(attempt, res);
        if (code == p2p_done) prof_.p2p_ns = now_ns();
    } else {
        hold();  // resume below opens the gate, as after the point-to-point phase
    }
    if (code == p2p_done) {
        where = "quiescent barrier";
        code = quiescent_barrier(number, res);
    }
    if (code == member_failed && failed_rank_ == UINT32_MAX) {
        // Settled by a survivor that knew before we did: it named the member.
        failed_rank_ = failed_member();
        if (failed_rank_ == UINT32_MAX) failed_rank_ = reported_failure();
    }
    res.status = code == p2p_done        ? WEFT_OK
                 : code == member_failed ? WEFT_ERR_PEER_FAILED
                 : code == refused       ? WEFT_ERR_UNSUPPORTED
                                         : WEFT_ERR_TIMEOUT;
    res.failed_rank = code == member_failed ? failed_rank_ : UINT32_MAX;
    if (code == stopped) {
        WEFT_LOG(warn, "drain %llu abandoned: the context is finalizing", static_cast<unsigned long long>(number));
    } else if (code == member_failed) {
        std::string all;
        for (uint32_t r = 0; r < rt_.size(); ++r)
            if (r != rt_.rank() && rt_.peer_failed(r)) all += (all.empty() ? "" : ", ") + std::to_string(r);
        WEFT_LOG(error, "drain %llu ended without a quiescent point: rank %u failed%s%s%s; the job resumes",
                 static_cast<unsigned long long>(number), failed_rank_,
                 all.empty() ? "" : " (failed here: ", all.c_str(), all.empty() ? "" : ")");
    } else if (code == refused) {
        WEFT_LOG(error,
                 "drain %llu refused: a rank of this job is in a communicator with members of another job "
                 "(a drain spans one job: free it first); the job resumes",
                 static_cast<unsigned long long>(number));
    } else if (code == failed) {
        WEFT_LOG(error, "drain %llu gave up after %llu ms (WEFT_DRAIN_TIMEOUT_MS) in its %s phase; the job resumes",
                 static_cast<unsigned long long>(number), static_cast<unsigned long long>(timeout_ns_ / 1000000),
                 where);
        if (std::strcmp(where, "collective") == 0) log_unconverged(attempt);
    }
    if (code != p2p_done) {
        // A rank that gave up must not read as still taking part in this
        // attempt (a resumed peer would otherwise wait for it to converge).
        publish(WEFT_STATE_DRAIN_PHASE, 0);
    }
    // Resume: counters and clocks stay (they only grow; the next drain
    // compares sums and recomputes targets under a new attempt tag), owed
    // synchronous-send ACKs go when the application receives the buffered
    // message (docs/drain.md), and threads may enter again.
    phase_.store(0, std::memory_order_release);
    port_.drain_active().store(0, std::memory_order_release);
    unhold();
    prof_.resumed_ns = now_ns();
    ops_ = nullptr;
    completed_ = number;
    res.raises = raises_.load() - raises0;
    res.total_ns = prof_.resumed_ns - t0;
    if (report_next_ && report_fd_ >= 0) {
        char line[256];
        const int n =
            std::snprintf(line, sizeof line,
                          "drain %llu: %s in %.3f ms (collective %.3f ms), %u attempt(s), %llu rounds, "
                          "%llu message(s) buffered job-wide\n",
                          static_cast<unsigned long long>(number), weft_strerror(res.status), res.total_ns / 1e6,
                          res.collective_ns / 1e6, res.attempts, static_cast<unsigned long long>(res.rounds),
                          static_cast<unsigned long long>(res.job_buffered_messages));
        if (n > 0 && ::write(report_fd_, line, static_cast<size_t>(std::min<int>(n, sizeof line - 1))) < 0)
            WEFT_LOG(warn, "drain: report not written");
        report_next_ = false;
    }
    {
        std::lock_guard<std::mutex> g(mutex_);
        results_[number] = res;
        while (results_.size() > 64) results_.erase(results_.begin());
        profiles_[number] = prof_;
        while (profiles_.size() > 64) profiles_.erase(profiles_.begin());
    }
    done_cv_.notify_all();
    WEFT_LOG(debug, "drain %llu: %s in %.3f ms", static_cast<unsigned long long>(number), weft_strerror(res.status),
             res.total_ns / 1e6);
}

// ---------------------------------------------------- the collective phase
Drain::Code Drain::collective_attempt(uint64_t attempt, weft_drain_result_t& res) {
    phase_.store(phase_collective, std::memory_order_release);
    port_.drain_active().store(attempt, std::memory_order_release);
    // commit_begin counted optimistically before looking at drain_active:
    // after a fence on every thread every such count is visible to us, or
    // its thread sees drain_active and takes it back
    // (group/drain_port.hpp). Closing the gate (hold) runs that fence
    // (gate::close: heavy_fence after the store that closes it, which comes
    // after ours): a second membarrier here only cost time.
    hold();
    ops_ = &prof_.target_ops;
    // Targets: every member pushes its seq into every member's target (a
    // compare-swap max), itself last; the target becomes the maximum.
    for (const auto& rec : port_.clock_records()) {
        const uint64_t mine = sw_.at(clock_off(rec.slot, WEFT_STATE_CLOCK_SEQ)).load();
        for (size_t i = 0; i < rec.members.size(); ++i)
            if (rec.members[i] != rt_.rank())
                cas_max_target(rec.members[i], rec.slots[i], rec.uses[i], attempt, mine, ops_);
        cas_max_target(rt_.rank(), rec.slot, port_.slot_use(rec.slot), attempt, mine, ops_);
    }
    publish(WEFT_STATE_DRAIN_PHASE, (attempt << 4) | phase_collective);
    unhold();
    prof_.clock_ns = now_ns();
    ops_ = &prof_.clock_ops;
    // A test kills a rank here: it dies while the others observe it.
    WEFT_FAULT_POINT("drain.collective.attempt");
    const Deadline deadline = Deadline::after_ns(attempt_ns_);
    return by_tree_ ? observe_by_tree(attempt, res, deadline) : observe_by_reads(attempt, res, deadline);
}

// An external stack's collective open at a peer may wait for this rank's
// progress though nothing is open here (an MPI moves a collective's messages
// only inside its calls: docs/drain.md). Progress it, but only when no
// application thread is inside (one that is progresses the stack itself,
// and may stay inside a blocking call), and only for that moment, so a
// thread stepping back in is not kept out round after round.
void Drain::progress_stack() {
    if (!stack_progress_.load(std::memory_order_relaxed)) return;
    if (WeftHold h(rt_, WeftHold::if_free); h.held()) progress_all();
}

bool Drain::progress_if_open() {
    // A collective open here (say, an ibarrier nobody waits for) moves
    // only if someone progresses: we do, holding weft for a moment.
    bool open_here = false;
    const uint64_t hi = sw_.at(status_off(WEFT_STATE_DRAIN_SLOTS_HI)).load();
    for (uint32_t s = 0; s < hi && !open_here; ++s)
        open_here = sw_.at(clock_off(s, WEFT_STATE_CLOCK_SEQ)).load(std::memory_order_acquire) !=
                    sw_.at(clock_off(s, WEFT_STATE_CLOCK_FINISHED)).load(std::memory_order_acquire);
    return open_here;
}

// Every drain thread reads every rank's clock records each round (one read
// per rank) and applies the double collect itself.
Drain::Code Drain::observe_by_reads(uint64_t attempt, weft_drain_result_t& res, const Deadline& deadline) {
    std::vector<uint64_t> prev, cur;
    Backoff idle(Backoff::drain_round, deadline_);
    // Ends: when the attempt is settled (by anyone: convergence, the
    // attempt's deadline, a failure), when we fell behind, or on must_end
    // (a failed member, the drain's deadline, finalize).
    for (uint64_t round_start = now_ns();; round_start = now_ns()) {
        ++res.rounds;
        ++prof_.clock_rounds;
        if (const Code why = must_end(); why != undecided)
            return why == stopped ? why : settle(attempt, undecided, why);
        const bool must_hold = progress_if_open() || !direct_ || needs_progress_;
        if (must_hold) {
            hold();
            progress_all();
        } else {
            progress_stack();
        }
        // The decision read needs nothing the snapshot read: the round's
        // depth is the snapshot's deepest chain (or 1, at rank 0 alone).
        const uint32_t depth = snapshot_clocks(cur);
        prof_.clock_depth = std::max<uint64_t>(prof_.clock_depth, std::max<uint32_t>(depth, rt_.rank() != 0));
        const uint64_t dec = decision();
        if (must_hold) unhold();
        if (const Code c = final_for(dec, attempt, false); c != undecided) return c;
        if ((dec >> 4) > attempt) {
            // We fell behind (descheduled through a whole attempt): follow.
            attempts_total_ = dec >> 4;
            return retry;
        }
        if (cur == prev && clocks_converged(cur, attempt, rt_.size())) {
            if (must_hold) hold();
            decide(attempt, undecided, coll_done);
            if (must_hold) unhold();
            idle.reset();
            res.round_work_ns += now_ns() - round_start;
            continue;
        }
        if (deadline.passed()) {
            if (must_hold) hold();
            decide(attempt, undecided, retry);
            if (must_hold) unhold();
        }
        if (cur != prev) idle.reset();
        prev.swap(cur);
        res.round_work_ns += now_ns() - round_start;
        idle.pause();
    }
}

uint32_t Drain::snapshot_clocks(std::vector<uint64_t>& out) {
    out.clear();
    uint32_t depth = 0;
    for (uint32_t r = 0; r < rt_.size(); ++r) depth = std::max(depth, snapshot_rank(r, out));
    return depth;
}

uint32_t Drain::snapshot_rank(uint32_t r, std::vector<uint64_t>& out) {
    const uint32_t chained = r == rt_.rank() ? 0 : 1;  // each read below is one operation on r
    uint64_t lines[WEFT_STATE_COMM_SLOTS * WEFT_STATE_LINE / 8];
    {
        uint64_t status[status_words_through(WEFT_STATE_DRAIN_SLOTS_HI)];
        read_remote(r, status_off(0), status, status_words_through(WEFT_STATE_DRAIN_SLOTS_HI));
        const uint64_t hi = std::min<uint64_t>(status[WEFT_STATE_DRAIN_SLOTS_HI / 8], WEFT_STATE_COMM_SLOTS);
        out.push_back(status[WEFT_STATE_DRAIN_PHASE / 8]);
        out.push_back(hi);
        if (!hi) {
            out.push_back(UINT64_MAX);
            return chained;
        }
        read_remote(r, clock_off(0, 0), lines, hi * WEFT_STATE_LINE / 8);
        for (uint64_t s = 0; s < hi; ++s) {
            const uint64_t* rec = lines + s * WEFT_STATE_LINE / 8;
            if (rec[WEFT_STATE_CLOCK_CONTEXT / 8] == 0) continue;
            out.push_back(rec[WEFT_STATE_CLOCK_SEQ / 8]);
            out.push_back(rec[WEFT_STATE_CLOCK_TARGET / 8]);
            out.push_back(rec[WEFT_STATE_CLOCK_FINISHED / 8]);
        }
        out.push_back(UINT64_MAX);  // end of this rank
    }
    return 2 * chained;  // the lines' read needed hi from the status read
}

bool Drain::clocks_converged(const std::vector<uint64_t>& s, uint64_t attempt, uint32_t ranks) const {
    const uint64_t want_phase = (attempt << 4) | phase_collective;
    size_t i = 0;
    for (uint32_t r = 0; r < ranks; ++r) {
        if (i + 2 > s.size() || s[i] != want_phase) return false;
        i += 2;
        while (i < s.size() && s[i] != UINT64_MAX) {
            const uint64_t seq = s[i], target = s[i + 1], finished = s[i + 2];
            // At its target, and not inside a collective.
            if (seq != finished || (seq & value_mask) != target_of(target, attempt)) return false;
            i += 3;
        }
        ++i;
    }
    return true;
}

// Each drain thread looks only at its own rank's words, and the ranks
// combine "changed since my last look" (OR) and "converged" (AND) by
// dissemination through one-sided writes into each other's inboxes:
// ceil(log2 N) steps a round. Sound for the same reason as the double
// collect: a rank's look in round r follows its completion of round r-1,
// which follows every rank's look in round r-1; so "nobody changed and
// everyone converged" means the condition held at the instant the last
// round r-1 look was taken. Every thread computes the same outcome in the
// same round, so all stop together.
Drain::Code Drain::observe_by_tree(uint64_t attempt, weft_drain_result_t& res, const Deadline& deadline) {
    const uint32_t n = rt_.size(), me = rt_.rank();
    std::vector<uint64_t> prev, cur;
    // Ends: as observe_by_reads. Every wait for a partner below also looks
    // at the decision and must_end, so a dead partner ends it too.
    for (uint64_t round = 1, round_start = now_ns();; ++round, round_start = now_ns()) {
        ++res.rounds;
        ++prof_.clock_rounds;
        if (const Code why = must_end(); why != undecided)
            return why == stopped ? why : settle(attempt, undecided, why);
        // Time spent waiting for partners is a pause, as between the reads
        // observer's rounds: round_work_ns counts only this thread's work.
        uint64_t waited = 0;
        const bool must_hold = progress_if_open() || !direct_ || needs_progress_;
        if (must_hold) {
            hold();
            progress_all();
            unhold();
        } else {
            progress_stack();
        }
        cur.clear();
        snapshot_rank(me, cur);
        bool changed = cur != prev, converged = clocks_converged(cur, attempt, 1);
        prev.swap(cur);
        // A word: the round's tag, the hops of the longest chain of writes
        // that fed what it carries (the round's depth, counted rather than
        // assumed: drain.h), changed, converged.
        const uint64_t tag = tree_tag(attempt, round);
        uint64_t hops = 0;
        for (uint32_t k = 0; (1u << k) < n; ++k) {
            const uint64_t word = (tag << tree_tag_shift) | (hops << 2) | (changed ? 2 : 0) | (converged ? 1 : 0);
            const uint32_t partner = (me + (1u << k)) % n;
            if (!direct_) hold();
            // A failed partner is never written (must_end ends the wait below).
            if (!rt_.peer_failed(partner)) count_op(partner);
            Status st = rt_.peer_failed(partner)
                            ? WEFT_ERR_PEER_FAILED
                            : win_->ops->put(win_, partner, inbox_off(k, round), &word, sizeof word);
            if (st == WEFT_OK && !direct_) st = rt_.backend().flush(*win_, partner);
            if (!direct_) unhold();
            if (st != WEFT_OK && !rt_.peer_failed(partner))
                WEFT_LOG(warn, "drain: a write to rank %u failed: %s", partner, weft_strerror(st));
            // Wait for our partner's word of this round and step. Ends: the
            // word comes, or one look in 16 finds the attempt settled or
            // must_end. The looks count on their own: a counter shared with
            // the pauses (two steps a pass) never hit a multiple of 16, so a
            // dead partner hung this wait for good.
            std::atomic_ref<uint64_t> inbox(*sw_.word(inbox_off(k, round)));
            Backoff idle(Backoff::drain_round, deadline_);
            uint32_t looks = 0;
            const uint64_t wait_start = now_ns();
            for (uint64_t w = inbox.load(std::memory_order_acquire); (w >> tree_tag_shift) != tag;
                 w = inbox.load(std::memory_order_acquire)) {
                if ((++looks & 15) == 0) {
                    if (!direct_ || needs_progress_) {
                        hold();
                        progress_all();
                        unhold();
                    } else {
                        progress_stack();
                    }
                    // Polls depend on timing: counted apart from the round's operations.
                    ops_ = &prof_.clock_polls;
                    const uint64_t dec = !direct_ ? (hold(), decision()) : decision();
                    ops_ = &prof_.clock_ops;
                    if (!direct_) unhold();
                    if ((dec >> 4) >= attempt && (dec & 15) == retry) {
                        if ((dec >> 4) > attempt) attempts_total_ = dec >> 4;
                        return retry;
                    }
                    if (const Code c = final_for(dec, attempt, false); ends_unquiet(c)) return c;
                    if (const Code why = must_end(); why != undecided)
                        return why == stopped ? why : settle(attempt, undecided, why);
                    if (deadline.passed()) {
                        if (!direct_) hold();
                        decide(attempt, undecided, retry);
                        if (!direct_) unhold();
                    }
                }
                idle.pause();
            }
            waited += now_ns() - wait_start;
            const uint64_t w = inbox.load(std::memory_order_acquire);
            changed = changed || (w & 2);
            converged = converged && (w & 1);
            hops = std::max(hops, ((w >> 2) & tree_hops_mask) + 1);
        }
        prof_.clock_depth = std::max(prof_.clock_depth, hops);
        res.round_work_ns += now_ns() - round_start - waited;
        if (!changed && converged) {
            if (!direct_) hold();
            decide(attempt, undecided, coll_done);
            if (!direct_) unhold();
            return coll_done;
        }
        if (deadline.passed()) {
            if (!direct_) hold();
            decide(attempt, undecided, retry);
            if (!direct_) unhold();
        }
        Backoff(Backoff::drain_round, deadline_).pause();  // its first rung: a yield between rounds
    }
}

// -------------------------------------------- the point-to-point phase
Drain::Code Drain::p2p_phase(uint64_t attempt, weft_drain_result_t& res) {
    phase_.store(phase_p2p, std::memory_order_release);
    hold();  // until resume: no application thread enters weft now
    prof_.gate_closed_ns = now_ns();
    ops_ = &prof_.p2p_ops;
    // The blocked count goes out before the phase word: a peer that sees us
    // in this phase must not read the count a previous drain left (zero after
    // a release), or it may release its own receives without anyone seeing
    // that every rank was blocked. Held, the count can only fall.
    publish(WEFT_STATE_DRAIN_BLOCKED, port_.blocked_receives());
    // So does the pending count, for the same reason: seen here with the
    // count a previous drain left (zero), a rank whose rendezvous send was
    // just drained by its receiver looks idle while the receiver's DRAINED
    // reply is still on its way to it (replies are counted nowhere else),
    // and the others could end the drain before it lands: the sender would
    // resume still exposing its buffer (found by a checkpoint's save).
    {
        const weft_drain_hooks_t h = hooks();
        publish(WEFT_STATE_DRAIN_PENDING, port_.pending_transfers() + (h.buffer ? h.buffer(h.arg) : 0));
    }
    publish(WEFT_STATE_DRAIN_PHASE, (attempt << 4) | phase_p2p);
    // A test kills a rank here: it dies holding its own weft, with the
    // others waiting for its counters.
    WEFT_FAULT_POINT("drain.p2p.phase");
    const uint64_t want_phase = (attempt << 4) | phase_p2p;
    std::vector<uint64_t> prev, cur;
    Backoff idle(Backoff::drain_round, deadline_);
    // Ends: when the attempt is settled (drained, or given up by anyone) or
    // on must_end: a failed member, the drain's deadline (which bounds this
    // phase: messages that cannot arrive), finalize.
    for (uint64_t round_start = now_ns();; round_start = now_ns()) {
        ++res.rounds;
        ++prof_.p2p_rounds;
        if (const Code why = must_end(); why != undecided)
            return why == stopped ? why : settle(attempt, coll_done, why);
        uint32_t moved = 0;
        for (int k = 0; k < 4; ++k) moved += progress_all();
        uint64_t bytes = 0;
        res.pulled += port_.drain_rendezvous(bytes);
        moved += progress_all();
        // An external stack takes in what arrived for it and says what of
        // its own is still moving.
        const weft_drain_hooks_t h = hooks();
        const uint64_t external = h.buffer ? h.buffer(h.arg) : 0;
        // A test slows a rank down here: it has pulled and answered, and
        // its peers still read the count it published before.
        WEFT_FAULT_POINT("drain.p2p.round");
        publish(WEFT_STATE_DRAIN_PENDING, port_.pending_transfers() + external);
        publish(WEFT_STATE_DRAIN_BLOCKED, port_.blocked_receives());
        cur.clear();
        uint64_t sent = 0, received = 0;
        bool all_here = true, all_idle = true, all_blocked = true, none_blocked = true;
        for (uint32_t r = 0; r < rt_.size(); ++r) {
            uint64_t st[status_words_through(WEFT_STATE_DRAIN_BLOCKED)], counters[2];
            read_remote(r, status_off(0), st, status_words_through(WEFT_STATE_DRAIN_BLOCKED));
            read_remote(r, {WEFT_STATE_P2P_SENT_OFF, WEFT_STATE_P2P_RECEIVED_OFF}, counters);
            const uint64_t phase = st[WEFT_STATE_DRAIN_PHASE / 8], pending = st[WEFT_STATE_DRAIN_PENDING / 8];
            const uint64_t s_r = counters[0], rcv = counters[1], blocked = st[WEFT_STATE_DRAIN_BLOCKED / 8];
            cur.insert(cur.end(), {phase, pending, s_r, rcv, blocked});
            sent += s_r;
            received += rcv;
            all_here = all_here && phase == want_phase;
            all_idle = all_idle && pending == 0;
            all_blocked = all_blocked && blocked != 0;
            none_blocked = none_blocked && blocked == 0;
        }
        if (const Code c = final_for(decision(), attempt, true); c != undecided) return c;
        const bool drained = cur == prev && all_here && all_idle && sent == received;
        if (drained && blocking_ && port_.blocked_receives()) {
            // Nothing is in transit, so nothing can complete our blocked
            // receives before the job resumes: release them (MANA's dummy
            // message, delivered locally: weft owns the request) and wait
            // until their threads are out.
            if (all_blocked) {
                res.deadlock = 1;
                WEFT_LOG(
                    error,
                    "drain %llu: every rank is blocked in a receive with nothing in transit: the job is deadlocked",
                    static_cast<unsigned long long>(started_.load()));
            }
            res.dummies += port_.release_blocked_receives();
            publish(WEFT_STATE_DRAIN_BLOCKED, 0);
            {
                StepOut out(rt_, StepOut::leave_gate);  // the gate stays ours: they leave, nobody enters
                gate::wait_until_empty();
            }
            prev.clear();
            continue;
        }
        if (drained && none_blocked) decide(attempt, coll_done, p2p_done);
        if (cur != prev || moved) idle.reset();
        prev.swap(cur);
        res.round_work_ns += now_ns() - round_start;
        idle.pause();
    }
}

Drain::Code Drain::quiescent_barrier(uint64_t number, weft_drain_result_t& res) {
    port_.buffered(res.buffered_messages, res.buffered_bytes);
    publish(WEFT_STATE_DRAIN_BUFFERED, res.buffered_messages);
    weft_drain_quiescent_fn fn;
    void* arg;
    bool hold_asked;
    {
        std::lock_guard<std::mutex> g(mutex_);
        fn = callback_;
        arg = callback_arg_;
        hold_asked = hold_fn_ != nullptr;
    }
    if (fn) fn(arg, &res);
    publish(WEFT_STATE_DRAIN_HOLD, hold_asked ? number : 0);
    // A test kills a rank here: its callback ran, but it never says so.
    WEFT_FAULT_POINT("drain.quiescent.barrier");
    publish(WEFT_STATE_DRAIN_QUIESCENT, number);
    prof_.quiescent_ns = now_ns();
    ops_ = &prof_.barrier_ops;
    // Nobody resumes before every rank's callback returned (a checkpoint:
    // every image is written before any new message can be sent). The
    // callbacks are the application's and may take long (an image to
    // write), so the wait gets its own WEFT_DRAIN_TIMEOUT_MS from here
    // rather than what is left of the drain's.
    deadline_ = Deadline::after_ns(timeout_ns_);
    Backoff idle(Backoff::drain_round, deadline_);
    // Ends: every rank said it is done; or must_end: a member failed
    // before saying so (it never will), the deadline (a member stopped or
    // stuck in its callback), finalize. There is no decision here: each
    // rank ends on what it sees. A member that fails after saying it was
    // done leaves OK with those that saw every word before its failure was
    // known, PEER_FAILED with the others (a failed member's words are not
    // read: read_remote).
    for (;;) {
        ++prof_.barrier_rounds;
        bool all = true;
        uint64_t buffered = 0;
        for (uint32_t r = 0; r < rt_.size() && all; ++r) {
            uint64_t st[status_words_through(WEFT_STATE_DRAIN_BUFFERED)];
            read_remote(r, status_off(0), st, status_words_through(WEFT_STATE_DRAIN_BUFFERED));
            all = st[WEFT_STATE_DRAIN_QUIESCENT / 8] >= number && st[WEFT_STATE_DRAIN_QUIESCENT / 8] != UINT64_MAX;
            buffered += st[WEFT_STATE_DRAIN_BUFFERED / 8];
        }
        if (all) {
            prof_.barrier_ns = now_ns();
            res.job_buffered_messages = buffered;
            if (hold_asked && all_hold(number)) run_hold(number);
            return p2p_done;
        }
        if (const Code why = must_end(); why != undecided) return why;
        if (needs_progress_) port_.poll();
        idle.pause();
    }
}

void Drain::run_hold(uint64_t number) {
    void (*fn)(void*);
    void* arg;
    {
        std::lock_guard<std::mutex> g(mutex_);
        fn = hold_fn_;
        arg = hold_arg_;
        hold_fn_ = nullptr;  // served: a later drain is an ordinary one
    }
    WEFT_LOG(debug, "drain %llu: every rank holds its quiescent point", static_cast<unsigned long long>(number));
    {
        std::lock_guard<std::mutex> g(request_mu_);
        holding_ = true;
    }
    // Withdrawn meanwhile (a failed release on this rank): every rank
    // still holds, and the others' work finds this one gone and fails.
    if (fn) fn(arg);
    std::lock_guard<std::mutex> g(request_mu_);
    holding_ = false;
}

// Why an attempt did not converge, as far as this rank can tell: its
// clocks below or above their targets, or inside a collective.
void Drain::log_unconverged(uint64_t attempt) {
    const uint64_t hi = sw_.at(status_off(WEFT_STATE_DRAIN_SLOTS_HI)).load();
    for (uint32_t s = 0; s < hi; ++s) {
        const uint64_t context = sw_.at(clock_off(s, WEFT_STATE_CLOCK_CONTEXT)).load();
        if (context == 0) continue;
        const uint64_t seq = sw_.at(clock_off(s, WEFT_STATE_CLOCK_SEQ)).load();
        const uint64_t fin = sw_.at(clock_off(s, WEFT_STATE_CLOCK_FINISHED)).load();
        const uint64_t target = target_of(sw_.at(clock_off(s, WEFT_STATE_CLOCK_TARGET)).load(), attempt);
        if (seq == fin && (seq & value_mask) == target) continue;
        WEFT_LOG(info, "drain attempt %llu: slot %u (context %llu) at %llu, finished %llu, target %llu",
                 static_cast<unsigned long long>(attempt), s, static_cast<unsigned long long>(context),
                 static_cast<unsigned long long>(seq), static_cast<unsigned long long>(fin),
                 static_cast<unsigned long long>(target));
    }
}

// --------------------------------------------------- commit_begin's slow path
void Drain::on_commit(void* arg, Comm& c) { static_cast<Drain*>(arg)->commit(c); }
void Drain::on_slots_learned(void* arg, Comm& c) { static_cast<Drain*>(arg)->slots_learned(c); }

// c's clock moved (its first collective, the slot exchange) without the
// targets of an attempt that pushed them before c's slots were known: raise
// them to where it is, on every member (each member does it, so the
// highest wins), or the attempt waits for a target that never comes.
void Drain::slots_learned(Comm& c) {
    const uint64_t attempt = port_.drain_active().load(std::memory_order_acquire);
    if (attempt == 0 || phase_.load(std::memory_order_acquire) != phase_collective) return;
    const uint64_t seq = sw_.at(clock_off(c.slot, WEFT_STATE_CLOCK_SEQ)).load(std::memory_order_acquire);
    const uint64_t target = sw_.at(clock_off(c.slot, WEFT_STATE_CLOCK_TARGET)).load(std::memory_order_acquire);
    if ((seq & value_mask) > target_of(target, attempt)) raise(c, seq, attempt);
}

bool Drain::all_at_target(uint64_t attempt) {
    const uint64_t hi = sw_.at(status_off(WEFT_STATE_DRAIN_SLOTS_HI)).load();
    for (uint32_t s = 0; s < hi; ++s) {
        if (sw_.at(clock_off(s, WEFT_STATE_CLOCK_CONTEXT)).load() == 0) continue;
        const uint64_t seq = sw_.at(clock_off(s, WEFT_STATE_CLOCK_SEQ)).load();
        const uint64_t target = sw_.at(clock_off(s, WEFT_STATE_CLOCK_TARGET)).load(std::memory_order_acquire);
        if ((seq & value_mask) < target_of(target, attempt)) return false;
    }
    return true;
}

void Drain::raise(Comm& c, uint64_t value, uint64_t attempt) {
    raises_.fetch_add(1, std::memory_order_relaxed);
    publish(WEFT_STATE_DRAIN_RAISES, raises_.load(std::memory_order_relaxed));
    // Every other member first, ourselves last: until our own target is
    // raised we are past it, so nobody can see us converged while a
    // member's target is still the old one.
    for (uint32_t i = 0; i < c.size; ++i)
        if (i != c.rank) cas_max_target(c.members[i], c.slots[i], c.slot_uses[i], attempt, value, nullptr);
    cas_max_target(rt_.rank(), c.slot, port_.slot_use(c.slot), attempt, value, nullptr);
}

void Drain::commit(Comm& c) {
    std::atomic_ref<uint64_t> seq(*sw_.word(clock_off(c.slot, WEFT_STATE_CLOCK_SEQ)));
    // Ends: the drain thread clears drain_active between attempts and when
    // the drain ends, and every drain ends within its bounds (run_drain:
    // WEFT_DRAIN_TIMEOUT_MS, or at once when a member fails); a raise above
    // our seq ends it sooner. That is the bound: Deadline::never() here.
    Backoff parked(Backoff::drain_parked);
    while (c.slots_known) {
        const uint64_t attempt = port_.drain_active().load(std::memory_order_acquire);
        if (attempt == 0) break;  // no drain, or a free run between attempts
        if (phase_.load(std::memory_order_acquire) == phase_collective && !all_at_target(attempt)) {
            // Below a target somewhere: run on. Passing this one raises it,
            // and the raise lands everywhere before the collective starts.
            const uint64_t next = seq.load(std::memory_order_relaxed) + 1;
            seq.store(next, std::memory_order_release);
            const uint64_t target = sw_.at(clock_off(c.slot, WEFT_STATE_CLOCK_TARGET)).load(std::memory_order_acquire);
            if ((next & value_mask) > target_of(target, attempt)) raise(c, next, attempt);
            return;
        }
        // At every target (or the collectives are drained): wait here,
        // outside weft, until the drain ends or a raise puts us below one.
        StepOut out(rt_, StepOut::leave_gate);
        parked.pause();
    }
    seq.store(seq.load(std::memory_order_relaxed) + 1, std::memory_order_release);
}

}  // namespace weft::drain
