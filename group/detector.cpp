// detector.cpp — heartbeats, observation of the next live successors,
// failure notices through the bitmap, propagation (detector.hpp).
#include "group/detector.hpp"

#include <weft/state_window.h>

#include <algorithm>
#include <atomic>
#include <cstdio>

namespace weft::group {

namespace {
constexpr uint64_t ms = 1'000'000;

// Progress mode's channel: the state window's own one-sided operations, on
// the application thread. They wait as long as the transport makes them;
// every failure reads as PEER_FAILED (the transport reports it itself).
class WindowChannel final : public ObserverChannel {
public:
    explicit WindowChannel(weft_window* w) : w_(w) {}
    Status read(uint32_t p, uint64_t off, uint64_t& v, Deadline) override {
        return ok(w_->ops->get(w_, p, off, &v, sizeof v));
    }
    Status compare_swap(uint32_t p, uint64_t off, uint64_t expected, uint64_t desired, uint64_t& old,
                        Deadline) override {
        return ok(w_->ops->compare_swap(w_, p, off, expected, desired, &old));
    }
    Status fetch_add(uint32_t p, uint64_t off, uint64_t add, uint64_t& old, Deadline) override {
        return ok(w_->ops->fetch_add(w_, p, off, add, &old));
    }

private:
    static Status ok(Status st) { return st == WEFT_OK ? WEFT_OK : WEFT_ERR_PEER_FAILED; }
    weft_window* w_;
};
}  // namespace

DetectorConfig DetectorConfig::from_env() {
    DetectorConfig c;
    // 100 ms / 1 s: a beat costs one store and an observation a few remote
    // reads, so 10 per second is free; 1 s is 250 scheduler quanta, far
    // beyond what 2x oversubscription delays a sleeping thread's wake-up,
    // yet 3-10x faster than Open MPI / PRRTE's defaults.
    c.period_ns = std::max<uint64_t>(1, env_u64("WEFT_FT_PERIOD_MS", 100)) * ms;
    c.timeout_ns = env_u64("WEFT_FT_TIMEOUT_MS", 1000) * ms;  // 0: no heartbeat observation
    c.watch = static_cast<uint32_t>(std::max<uint64_t>(1, env_u64("WEFT_FT_WATCH", 3)));
    if (c.timeout_ns && c.timeout_ns < 2 * c.period_ns) {
        WEFT_LOG(warn, "WEFT_FT_TIMEOUT_MS below two periods; using %llu ms",
                 static_cast<unsigned long long>(2 * c.period_ns / ms));
        c.timeout_ns = 2 * c.period_ns;
    }
    return c;
}

Detector::Detector(Runtime& rt) : rt_(rt), cfg_(DetectorConfig::from_env()) {}

Detector::~Detector() { stop(); }

Status Detector::attach() {
    sw_ = rt_.state_window();
    view_ = StateWindowView(sw_);
    n_ = rt_.size();
    me_ = rt_.rank();
    obs_.assign(n_, Obs{});
    pushed_.assign(n_, 0);
    weft_caps_t caps{};
    rt_.backend().query_caps(caps);
    const bool mapped = view_.all_mapped();
    // WEFT_FT_DETECTOR=progress forces the transport path where the thread
    // could observe (tests run the verbs code path on shm and UCX that way).
    // WEFT_FT_DETECTOR=channel forces the observer channel where windows
    // are mapped (tests run UCX's channel on shm that way).
    const std::string forced = env_string("WEFT_FT_DETECTOR", "auto");
    const bool force_progress = forced == "progress", force_channel = forced == "channel";
    if (forced != "auto" && !force_progress && !force_channel)
        WEFT_LOG(warn, "WEFT_FT_DETECTOR=%s: expected auto, channel or progress; auto", forced.c_str());
    if (mapped && !force_progress && !force_channel && caps.atomics == WEFT_ATOMICS_CPU &&
        caps.atomic_scope == WEFT_ATOMIC_SCOPE_GLOBAL) {
        mode_ = Mode::thread;
    } else if (force_progress && caps.atomics != WEFT_ATOMICS_EMULATED && caps.atomics != WEFT_ATOMICS_NONE) {
        mode_ = Mode::progress;
        window_channel_ = std::make_unique<WindowChannel>(sw_);
        channel_ = window_channel_.get();
    } else if ((channel_ = rt_.backend().observer_channel(*sw_)) != nullptr) {
        // Its own QPs, answered by the peers' NICs: the thread observes and
        // relays without the application thread or the peers' CPUs. A wait
        // for one answer is bounded so that one slow peer cannot stall the
        // observation of the others for long.
        mode_ = Mode::channel;
        channel_wait_ns_ = std::max<uint64_t>(cfg_.period_ns / 4, ms);
    } else {
        // Emulated atomics (and gets) move only when the target
        // progresses; a rank computing for a second would be declared dead.
        // UCX over a NIC (rc/ud) has no observer channel yet; its progress
        // path is opt-in (WEFT_FT_DETECTOR=progress): blocking reads of a
        // dead peer would stall the application's progress for the
        // transport's whole retry time.
        mode_ = Mode::beat_only;
        WEFT_LOG(info,
                 "failure detector: heartbeats are not observed over %s (%s); failures come from the transport, "
                 "the pidfd monitor and the launcher",
                 caps.transport,
                 caps.atomics == WEFT_ATOMICS_EMULATED ? "emulated one-sided operations"
                                                       : "set WEFT_FT_DETECTOR=progress to observe them");
    }
    if (n_ > WEFT_STATE_FAILURE_WORDS * 64) {
        WEFT_LOG(warn, "failure detector: %u ranks exceed the %u-rank failure bitmap; no propagation", n_,
                 WEFT_STATE_FAILURE_WORDS * 64);
    }
    notices_seen_ = view_.at(WEFT_STATE_FAILURE_NOTICES_OFF).load(std::memory_order_acquire);
    Status lst = rt_.add_layer(detector_layer, this, {.on_declared = on_declared});
    if (lst != WEFT_OK) return lst;
    thread_ = std::thread([this] { run(); });
    return WEFT_OK;
}

void Detector::start() {
    std::lock_guard<std::mutex> g(mu_);
    observing_ = true;
    last_tick_ = now_ns();
    next_observe_ = last_tick_ + cfg_.period_ns;
    WEFT_LOG(debug, "failure detector: mode %d, period %llu ms, timeout %llu ms, watching %u successors",
             static_cast<int>(mode_), static_cast<unsigned long long>(cfg_.period_ns / ms),
             static_cast<unsigned long long>(cfg_.timeout_ns / ms), cfg_.watch);
}

void Detector::stop() {
    // No more wake-ups from declaring threads (the pidfd monitor may still
    // run when init failed half-way).
    rt_.remove_layer(detector_layer);
    {
        std::lock_guard<std::mutex> g(mu_);
        if (stop_) return;
        stop_ = true;
        relay_on_stop_ = observing_ && !paused_;  // paused: released, no window to relay into
        observing_ = false;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
}

void Detector::quiesce() {
    std::unique_lock<std::mutex> lk(mu_);
    if (stop_ || quiesced_ || mode_ != Mode::channel || !thread_.joinable()) {
        quiesced_ = true;
        return;
    }
    quiesce_wanted_ = true;
    kick_ = true;
    cv_.notify_all();
    // The thread answers within one poll (1 ms when it serves) plus its
    // wait for the answers; the bound is only against a thread that died.
    const auto limit = std::chrono::nanoseconds(cfg_.timeout_ns + 1000 * ms);
    if (!cv_.wait_for(lk, limit, [&] { return quiesced_; }))
        WEFT_LOG(warn, "failure detector: its thread did not quiesce within %llu ms",
                 static_cast<unsigned long long>(limit.count() / ms));
}

void Detector::pause() {
    quiesce();
    std::lock_guard<std::mutex> g(mu_);
    // The thread holds mu_ except while it sleeps: from here it is asleep
    // or waiting for the lock, and wakes to find itself paused.
    paused_ = true;
}

void Detector::resume() {
    {
        std::lock_guard<std::mutex> g(mu_);
        if (mode_ == Mode::channel) channel_ = rt_.backend().observer_channel(*sw_);
        for (Obs& o : obs_) o.silent_ns = 0;
        last_tick_ = now_ns();
        next_observe_ = last_tick_ + cfg_.period_ns;
        quiesced_ = false;
        paused_ = false;
    }
    cv_.notify_all();
}

void Detector::on_declared(void* arg, uint32_t) {
    // Any thread (the pidfd monitor, ours, the application's): wake the
    // detector thread to relay at once. notify without the lock: the
    // declaring thread may be ours, inside tick(); a lost wake-up costs at
    // most one poll interval.
    auto* self = static_cast<Detector*>(arg);
    self->kick_ = true;
    self->cv_.notify_one();
}

void Detector::run() {
    // Notices are checked every poll (a local load); beats and observations
    // once per period. 1–10 ms keeps relaying fast without stealing an
    // oversubscribed core (a few µs of work per wake-up).
    // A channel whose peers' operations we serve ourselves (UCX emulation)
    // is served every millisecond.
    const bool serving = mode_ == Mode::channel && channel_->needs_serving();
    const uint64_t poll_ns = serving ? 1 * ms : std::clamp<uint64_t>(cfg_.period_ns / 10, 1 * ms, 10 * ms);
    uint64_t beat = 0, next_beat = 0;
    std::unique_lock<std::mutex> lk(mu_);
    while (!stop_) {
        if (paused_) {
            // Ends: resume() or stop() (finalize) clears it.
            cv_.wait(lk, [&] { return stop_ || !paused_; });
            continue;
        }
        const uint64_t now = now_ns();
        if (now >= next_beat) {
            // Owner-store word: only we write it, peers read it.
            view_.at(WEFT_STATE_HEARTBEAT_OFF).store(++beat, std::memory_order_release);
            next_beat = now + cfg_.period_ns;
        }
        // Cleared before the tick: a declaration during it kicks again.
        kick_ = false;
        if (serving) channel_->serve();
        if (quiesce_wanted_) {
            quiesce_wanted_ = false;
            if (const size_t left =
                    channel_->quiesce(Deadline::after_ns(std::max<uint64_t>(cfg_.timeout_ns, 100 * ms))))
                WEFT_LOG(debug, "failure detector: %zu answer(s) still out at finalize", left);
            quiesced_ = true;
            cv_.notify_all();
        }
        const bool observe_now = now >= next_observe_ && !quiesced_;
        if (threaded() && observing_) tick(now, observe_now);
        cv_.wait_for(lk, std::chrono::nanoseconds(poll_ns), [&] { return stop_ || kick_.load(); });
    }
    // Finalizing: relay what we know before the window goes, so a rank
    // that learned a failure and then left still passed it on.
    if (threaded() && relay_on_stop_) {
        absorb_notices();
        propagate();
    }
}

uint32_t Detector::on_progress() {
    if (mode_ != Mode::progress) return 0;
    std::unique_lock<std::mutex> lk(mu_, std::try_to_lock);
    if (!lk.owns_lock() || !observing_ || paused_) return 0;
    const uint64_t now = now_ns();
    tick(now, now >= next_observe_);
    return 0;
}

void Detector::tick(uint64_t now, bool do_observe) {
    absorb_notices();
    propagate();
    if (!do_observe || cfg_.timeout_ns == 0) return;
    // Credit silence only for time this observer itself ran: after a gap
    // (we were descheduled, stopped, or the machine is oversubscribed)
    // count at most two periods, so our own delays never turn into a
    // peer's suspicion.
    const uint64_t credited = std::min(now - last_tick_, 2 * cfg_.period_ns);
    last_tick_ = now;
    next_observe_ = now + cfg_.period_ns;
    observe(credited);
    propagate();  // what we just declared goes out now, not a poll later
}

Detector::Read Detector::read_word(uint32_t p, uint64_t off, uint64_t& v) {
    if (mode_ == Mode::thread) {
        v = std::atomic_ref<uint64_t>(*view_.mapped_word(p, off)).load(std::memory_order_acquire);
        return Read::value;
    }
    const Status st = channel_->read(p, off, v, Deadline::after_ns(channel_wait_ns_));
    return st == WEFT_OK ? Read::value : st == WEFT_ERR_TIMEOUT ? Read::no_answer : Read::failed;
}

void Detector::observe(uint64_t credited) {
    // The next `watch` live successors: k adjacent failures are all seen by
    // the live rank before them within one timeout, and a declared one is
    // skipped at once, so the next successor joins the watch immediately.
    std::vector<uint8_t> watched(n_, 0);
    uint32_t taken = 0;
    for (uint32_t d = 1; d < n_ && taken < cfg_.watch; ++d) {
        const uint32_t p = (me_ + d) % n_;
        if (rt_.peer_failed(p)) continue;
        watched[p] = 1;
        ++taken;
    }
    for (uint32_t p = 0; p < n_; ++p) {
        Obs& o = obs_[p];
        if (!watched[p]) {
            o.watching = false;
            continue;
        }
        uint64_t hb = 0;
        const Read got = read_word(p, WEFT_STATE_HEARTBEAT_OFF, hb);
        if (got == Read::failed) continue;  // the transport reports that itself
        // An unanswered read (channel mode) is silence too: a peer whose NIC
        // stops answering is heard no more than one whose beat stopped.
        if (!o.watching || (got == Read::value && hb != o.last)) {
            o = Obs{true, got == Read::value ? hb : o.last, 0};
            continue;
        }
        o.silent_ns += credited;
        if (o.silent_ns < cfg_.timeout_ns) continue;
        uint64_t fin = 0;
        if (read_word(p, WEFT_STATE_FINALIZED_OFF, fin) == Read::value && fin == 1) {
            o.silent_ns = 0;  // it finalized: departed, not failed
            continue;
        }
        char why[96];
        std::snprintf(why, sizeof why, "no heartbeat for %llu ms of observer time (timeout %llu ms)",
                      static_cast<unsigned long long>(o.silent_ns / ms),
                      static_cast<unsigned long long>(cfg_.timeout_ns / ms));
        rt_.declare_failed(p, why);
        o.watching = false;
    }
}

void Detector::absorb_notices() {
    const uint64_t v = view_.at(WEFT_STATE_FAILURE_NOTICES_OFF).load(std::memory_order_acquire);
    if (v == notices_seen_) return;
    notices_seen_ = v;
    const uint32_t words = std::min<uint32_t>((n_ + 63) / 64, WEFT_STATE_FAILURE_WORDS);
    for (uint32_t w = 0; w < words; ++w) {
        uint64_t bits = view_.at(WEFT_STATE_FAILURE_BITMAP_OFF + 8ull * w).load(std::memory_order_acquire);
        while (bits) {
            const uint32_t p = w * 64 + static_cast<uint32_t>(__builtin_ctzll(bits));
            bits &= bits - 1;
            if (p >= n_) break;
            if (p == me_) {
                if (!pushed_[me_]) {
                    pushed_[me_] = 1;
                    WEFT_LOG(error,
                             "this process was declared failed by its peers (it was stopped or too slow): "
                             "they drop its messages from now on");
                }
                continue;
            }
            if (!rt_.peer_failed(p)) rt_.declare_failed(p, "failure notice from a peer");
        }
    }
}

void Detector::push_bit(uint32_t target, uint32_t failed) {
    const uint64_t off = WEFT_STATE_FAILURE_BITMAP_OFF + 8ull * (failed / 64);
    const uint64_t bit = 1ull << (failed % 64);
    bool newly = false;
    if (mode_ == Mode::thread) {
        newly = !(std::atomic_ref<uint64_t>(*view_.mapped_word(target, off)).fetch_or(bit, std::memory_order_acq_rel) &
                  bit);
        if (newly)
            std::atomic_ref<uint64_t>(*view_.mapped_word(target, WEFT_STATE_FAILURE_NOTICES_OFF))
                .fetch_add(1, std::memory_order_release);
        return;
    }
    // Fetch-or by compare-swap: the transports have no remote fetch-or.
    uint64_t expected = 0;
    for (int i = 0; i < 64; ++i) {
        uint64_t old = 0;
        if (channel_->compare_swap(target, off, expected, expected | bit, old, Deadline::after_ns(channel_wait_ns_)) !=
            WEFT_OK)
            return;
        if (old == expected) {
            newly = true;
            break;
        }
        if (old & bit) break;
        expected = old;
    }
    if (newly) {
        uint64_t old = 0;
        channel_->fetch_add(target, WEFT_STATE_FAILURE_NOTICES_OFF, 1, old, Deadline::after_ns(channel_wait_ns_));
    }
}

void Detector::propagate() {
    if (n_ > WEFT_STATE_FAILURE_WORDS * 64) return;
    for (uint32_t f = 0; f < n_; ++f) {
        if (f == me_ || pushed_[f] || !rt_.peer_failed(f)) continue;
        pushed_[f] = 1;
        // Fingers me + 2^i, each moved on to the next live rank: every
        // survivor is at most ⌈log2 N⌉ relays from any learner, and a dead
        // relay is bypassed by the other paths.
        uint32_t last = me_;
        for (uint32_t step = 1; step < n_; step <<= 1) {
            uint32_t t = (me_ + step) % n_;
            uint32_t tries = 0;
            while ((rt_.peer_failed(t) || t == me_) && tries++ < n_) t = (t + 1) % n_;
            if (tries >= n_ || t == last) continue;
            last = t;
            push_bit(t, f);
        }
    }
}

}  // namespace weft::group
