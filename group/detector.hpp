// detector.hpp — the failure detector: heartbeats in the pinned state
// window, observed one-sidedly, and failure notices pushed through the
// failure bitmap (docs/fault-tolerance.md).
//
// Sources of a declaration (all end in Runtime::declare_failed):
//   - the transport and the pidfd PeerMonitor (immediate, not here);
//   - a heartbeat that did not move for WEFT_FT_TIMEOUT_MS of the
//     *observer's own running time* (hung or stopped processes);
//   - a notice: a peer set the failed rank's bit in our failure bitmap and
//     bumped our notice word.
// Every rank that learns a failure, from any source, sets the bit at its
// log2(N) "finger" peers (rank + 2^i, skipping dead ones) — a flood over a
// circulant graph of diameter ⌈log2 N⌉ with log2 N disjoint-ish paths, so
// a notice reaches every survivor in O(log N) steps even when relays die.
//
// Threads: one detector thread per context. It always beats (a CPU store
// to our own heartbeat word: an owner-store word). When every peer's state
// window is mapped here (shm, UCX over shm) it also observes and
// propagates with CPU atomics on the mapped windows, so a rank that
// computes without calling weft still detects and relays. Otherwise (UCX
// over tcp, verbs) the transport is not thread-safe, and observation and
// propagation run on the application thread from the progress hook with
// the transport's one-sided operations — unless those are software
// emulated (UCX over tcp), where a busy peer would look dead: heartbeats
// are then not observed at all (logged), and failures come from the
// transport's own errors only.
#pragma once

#include "transport/runtime.hpp"
#include "transport/state_window_view.hpp"

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace weft::group {

struct DetectorConfig {
    uint64_t period_ns = 100'000'000;     // WEFT_FT_PERIOD_MS: one beat and one observation per period
    uint64_t timeout_ns = 1'000'000'000;  // WEFT_FT_TIMEOUT_MS: silence before a declaration
    uint32_t watch = 3;                   // WEFT_FT_WATCH: live successors each rank observes
    static DetectorConfig from_env();
};

class Detector {
public:
    explicit Detector(Runtime& rt);
    ~Detector();
    Detector(const Detector&) = delete;
    Detector& operator=(const Detector&) = delete;

    // Inside Runtime::init (before its last barrier): the thread starts
    // beating, so every peer beats before anyone observes.
    Status attach();
    // After init: observation and propagation begin.
    void start();
    // Stops the thread (idempotent). Runs from finalize's teardown hook,
    // before the state window is unmapped, and from destroy.
    void stop();
    // Finalize, before its barrier (every peer still serves then): no more
    // observations, and the channel's answers still out are waited for, at
    // most one heartbeat timeout. The thread goes on beating, serving and
    // relaying until stop().
    void quiesce();
    // Transparent checkpointing (Runtime's on_release/on_rebuild): pause
    // leaves the thread asleep, touching neither windows nor the channel,
    // until resume, which takes the rebuilt backend's channel and forgets
    // the silence it did not observe.
    void pause();
    void resume();

    const DetectorConfig& config() const { return cfg_; }
    // thread: the detector thread reads mapped windows with CPU atomics;
    // channel: the thread uses the transport's observer channel (verbs);
    // progress: the application thread, through the transport's one-sided
    // operations; beat_only: nobody observes here.
    enum class Mode { thread, channel, progress, beat_only };
    Mode mode() const { return mode_; }
    // Application thread: the progress-hook part (progress mode only).
    uint32_t on_progress();

private:
    void run();
    void tick(uint64_t now, bool observe);
    void observe(uint64_t credited_ns);
    void absorb_notices();
    void propagate();
    enum class Read { value, no_answer, failed };
    Read read_word(uint32_t p, uint64_t off, uint64_t& v);
    bool threaded() const { return mode_ == Mode::thread || mode_ == Mode::channel; }
    void push_bit(uint32_t target, uint32_t failed);
    static void on_declared(void* arg, uint32_t peer);

    Runtime& rt_;
    DetectorConfig cfg_;
    Mode mode_ = Mode::beat_only;
    weft_window* sw_ = nullptr;
    StateWindowView view_;  // of sw_: thread mode reads and changes peers' words through it
    // Mode::channel: the transport's; Mode::progress: window_channel_,
    // the state window's own one-sided operations seen as a channel.
    ObserverChannel* channel_ = nullptr;
    std::unique_ptr<ObserverChannel> window_channel_;
    uint64_t channel_wait_ns_ = 0;  // longest wait for one answer (transport channels)
    uint32_t n_ = 0, me_ = 0;
    std::thread thread_;
    std::mutex mu_;  // the thread's sleep, and tick() against on_progress
    std::condition_variable cv_;
    bool stop_ = false, observing_ = false, relay_on_stop_ = false;
    bool quiesce_wanted_ = false, quiesced_ = false;  // quiesce()'s request to the thread, and its answer
    bool paused_ = false;                             // pause() .. resume()
    std::atomic<bool> kick_{false};
    // Observation state per peer (under mu_).
    struct Obs {
        bool watching = false;
        uint64_t last = 0;       // heartbeat seen
        uint64_t silent_ns = 0;  // observer running time since it last moved
    };
    std::vector<Obs> obs_;
    std::vector<uint8_t> pushed_;  // failures already relayed to our fingers
    uint64_t notices_seen_ = 0;
    uint64_t last_tick_ = 0, next_observe_ = 0;
};

// The detector's entry in its Runtime's layers (hook: a failure declared,
// on the declaring thread).
inline constexpr Runtime::LayerKey<Detector> detector_layer{"group.detector"};

}  // namespace weft::group
