// runtime.hpp — one process's weft state: bootstrap, peers, the bound
// backend, active-message handlers, failure bookkeeping, the state window.
//
// Thread affinity: everything here runs on the application thread except
// declare_failed(), which the peer monitor thread also calls.
#pragma once

#include "transport/backend.hpp"
#include "transport/bootstrap/bootstrap.hpp"
#include "transport/common.hpp"
#include "transport/entry_gate.hpp"
#include "transport/peer_monitor.hpp"

#include <atomic>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace weft {

struct PeerInfo {
    uint32_t job = 0;
    uint32_t rank = 0;
    uint32_t universe_index = 0;
    int32_t pid = 0;
    std::string host;  // hostname + boot id: equal means same kernel
    bool same_host = false;
};

class Runtime {
public:
    Runtime() = default;
    Runtime(const Runtime&) = delete;
    Runtime& operator=(const Runtime&) = delete;
    ~Runtime();

    // before_ready runs after the transport is up and before the job-wide
    // barrier that ends init: layers above register their message handlers
    // there, so that no peer's first message can arrive before them.
    Status init(const std::function<Status()>& before_ready = {});
    Status finalize();

    uint32_t job() const { return job_; }
    uint32_t rank() const { return rank_; }
    uint32_t size() const { return size_; }
    uint32_t universe_size() const { return static_cast<uint32_t>(peers_.size()); }
    const PeerInfo& peer(uint32_t p) const { return peers_[p]; }
    const std::vector<PeerInfo>& peers() const { return peers_; }
    // Peer index of the process at universe index u.
    uint32_t peer_of_universe(uint32_t u) const { return universe_to_peer_[u]; }
    uint32_t self_universe() const { return peers_[rank_].universe_index; }
    Bootstrap& bootstrap() { return *bootstrap_; }
    // Before init: use this bootstrap instead of the environment's.
    void preset_bootstrap(std::unique_ptr<Bootstrap> b) { bootstrap_ = std::move(b); }
    Backend& backend() { return *backend_; }
    weft_window* state_window() { return state_window_; }
    uint64_t timeout_ns() const { return timeout_ns_; }
    Deadline op_deadline() const { return Deadline::after_ns(timeout_ns_); }
    bool all_same_host() const;

    // ----------------------------------------------------------- failures
    bool peer_failed(uint32_t p) const { return failed_[p].load(std::memory_order_acquire) != 0; }
    // Thread-safe, idempotent. The handler runs later, from progress().
    void declare_failed(uint32_t p, const char* why);
    void set_failure_handler(weft_peer_failure_handler_t h, void* arg) {
        failure_handler_ = h;
        failure_arg_ = arg;
    }
    // weft_event_register / _deregister (under the API lock).
    uint64_t event_register(weft_event_t event, weft_event_handler_t fn, void* arg) {
        event_handlers_.push_back(EventHandler{next_event_id_, event, fn, arg});
        return next_event_id_++;
    }
    bool event_deregister(uint64_t id) {
        return std::erase_if(event_handlers_, [&](const EventHandler& h) { return h.id == id; }) != 0;
    }

    // ------------------------------------------------- the layers above
    // A layer above (group's engine, its fault tolerance, the drain, ...)
    // registers its state and its hooks here; the transport calls them and
    // knows nothing else of the layer. The rules, for every hook:
    //   on_progress  application thread, at the end of every progress(), in
    //                registration order; never nested inside itself (a hook
    //                that sends may progress: it is skipped while it runs).
    //                Returns the work it did.
    //   on_peer_gone application thread (inside progress), once per peer
    //                that is gone, before the user's failure handler:
    //                departed = it finalized and exited (not a failure: the
    //                user's handler does not run), else it failed.
    //   on_declared  the thread that declares a failure (the pidfd monitor,
    //                a detector thread, the application): thread-safe and
    //                non-blocking; it must not call into the runtime.
    //   on_teardown  finalize, after its last barrier and before the
    //                windows go (a detector stops beating into them there).
    //   on_release   release(), on the thread holding weft, once the job is
    //                quiet and before the backend lets go: a layer stops
    //                what would touch the fabric by itself (a thread).
    //   on_rebuild   rebuild(), once the backend is back: it starts again.
    // Any hook may be null. A layer registers once per key, during init
    // (on the application thread), and removes itself before its state
    // goes; the entries are kept in a fixed array so on_declared can run
    // concurrently with a removal (it sees the hook or null, never a torn
    // entry).
    struct LayerHooks {
        uint32_t (*on_progress)(void* self) = nullptr;
        void (*on_peer_gone)(void* self, uint32_t peer, bool departed) = nullptr;
        void (*on_declared)(void* self, uint32_t peer) = nullptr;
        void (*on_teardown)(void* self) = nullptr;
        void (*on_release)(void* self) = nullptr;
        void (*on_rebuild)(void* self) = nullptr;
    };
    // Names a layer's state, and gives it back typed: each layer defines
    // one `inline constexpr LayerKey<ItsState> key{"name"}`.
    template <typename State>
    struct LayerKey {
        const char* name;
    };
    template <typename State>
    Status add_layer(const LayerKey<State>& key, State* self, const LayerHooks& hooks) {
        return add_layer_entry(&key, key.name, self, hooks);
    }
    template <typename State>
    void remove_layer(const LayerKey<State>& key) {
        remove_layer_entry(&key);
    }
    // The state registered under key, or null.
    template <typename State>
    State* layer(const LayerKey<State>& key) const {
        return static_cast<State*>(layer_entry(&key));
    }
    // Fencing: true once a failure of p (not a departure) was dispatched;
    // from then on p's active messages are dropped (deliver_am).
    bool peer_fenced(uint32_t p) const { return p < fenced_.size() && fenced_[p]; }
    uint32_t fenced_count() const { return fenced_count_; }

    // Thread level. With MULTIPLE every C entry point takes api_mutex();
    // blocking calls release it while they wait (see group/).
    void set_multi_threaded(bool on) { multi_threaded_ = on; }
    bool multi_threaded() const { return multi_threaded_; }
    std::mutex& api_mutex() { return api_mutex_; }

    // ----------------------------------------------------- active messages
    // A message for an id without a handler is held (copied, in arrival
    // order) until a handler for that id is registered, then delivered
    // from the next progress() before any later message for that id. The
    // hold is bounded by WEFT_AM_HOLD_BYTES (payload plus a small record
    // per message); past it a message is dropped with an error naming it.
    // Messages still held at finalize are reported as errors.
    Status am_register(uint32_t id, weft_am_handler_t h, void* arg);
    // Ids for weft's own layers, past the user's range.
    static constexpr uint32_t am_internal_first = WEFT_AM_MAX_HANDLERS + 1;
    static constexpr uint32_t am_internal_count = 15;
    Status am_register_internal(uint32_t id, weft_am_handler_t h, void* arg);
    // Called by backends for every arrived message, in arrival order.
    void deliver_am(uint32_t source_peer, uint32_t id, const void* payload, size_t len);
    // Bytes held for ids without a handler (tests, weft-info).
    uint64_t am_held_bytes() const { return held_bytes_; }

    // Progress: backend arrivals, then failure notices.
    uint32_t progress();
    Status wait(uint64_t timeout_ns);

    // ------------------------------------------- transparent checkpointing
    // weft_ckpt_release/_rebuild (docs/checkpoint.md), run by the thread
    // that holds weft at a drain's quiescent point (ckpt/), on every rank.
    // can_release: whether this context can (the same answer on every
    // rank; why says what stops it). release: collective; the job is
    // quiesced (everything sent has arrived and been handled, on every
    // rank), the layers stop what would touch the fabric (on_release), the
    // pidfd monitor stops, the backend lets go of every fabric resource and
    // the bootstrap of its connection; a failure before that changes
    // nothing. rebuild: collective; the connection, the peers' pids, the
    // backend with every window at its old address, the monitor, the
    // layers (on_rebuild), then a barrier.
    bool can_release(std::string& why) const;
    Status release();
    Status rebuild();
    // Any thread: released, or abandoned.
    bool released() const { return released_.load(std::memory_order_acquire); }
    // After a failed release or rebuild: the backend is parked (kept, with
    // whatever it still holds, until finalize) and a stand-in that fails
    // every operation takes its place, so that the job's threads get errors
    // instead of waiting for a fabric that will not come back. Only
    // finalize (local) is left.
    void abandon();

    // ------------------------------------------------------------ windows
    Status window_create(bool allocate, void* base, size_t size, weft_window*& out);
    Status window_free(weft_window* w);
    // After finalize: hands over the (dead) window shells, so stale handles
    // can still be recognised once the Runtime is gone.
    std::vector<std::unique_ptr<weft_window>> take_window_shells() { return std::move(windows_); }

private:
    // rebuilding: the peers are the same processes, maybe with new pids.
    Status exchange_identities(bool rebuilding = false);
    Status quiesce();
    void start_monitor();
    std::vector<weft_window*> live_windows() const;
    Status choose_backend();
    Status create_state_window();
    uint32_t dispatch_failures();
    bool departed(uint32_t p) const;
    [[gnu::cold]] void hold_am(uint32_t source_peer, uint32_t id, const void* payload, size_t len);
    [[gnu::cold]] uint32_t deliver_held();
    void report_held_at_finalize();

    std::unique_ptr<Bootstrap> bootstrap_;
    std::unique_ptr<Backend> backend_;
    PeerMonitor monitor_;
    uint32_t job_ = 0, rank_ = 0, size_ = 1;
    uint64_t timeout_ns_ = 30ull * 1000000000ull;
    std::vector<PeerInfo> peers_;
    std::vector<uint32_t> universe_to_peer_;
    std::unique_ptr<std::atomic<uint8_t>[]> failed_;
    std::vector<uint8_t> failure_reported_;
    std::atomic<uint64_t> failures_declared_{0};
    uint64_t failures_dispatched_ = 0;
    weft_peer_failure_handler_t failure_handler_ = nullptr;
    void* failure_arg_ = nullptr;
    struct EventHandler {
        uint64_t id;
        weft_event_t event;
        weft_event_handler_t fn;
        void* arg;
    };
    std::vector<EventHandler> event_handlers_;
    uint64_t next_event_id_ = 1;

    struct Handler {
        weft_am_handler_t fn = nullptr;
        void* arg = nullptr;
    };
    static constexpr uint32_t am_id_count = WEFT_AM_MAX_HANDLERS + 1 + am_internal_count;
    Handler handlers_[am_id_count];
    // Early messages (see am_register). held_per_id_ makes a message that
    // arrives while older ones for its id are held queue behind them.
    struct HeldAm {
        uint32_t source;
        uint32_t id;
        std::vector<uint8_t> payload;
    };
    static constexpr uint64_t held_record_bytes = sizeof(HeldAm);
    std::deque<HeldAm> held_;
    uint32_t held_per_id_[am_id_count] = {};
    uint64_t held_dropped_[am_id_count] = {};  // past the bound, since the id's last registration
    uint64_t held_bytes_ = 0;
    uint64_t hold_limit_ = 64ull << 20;  // WEFT_AM_HOLD_BYTES
    bool held_ready_ = false;            // a handler came for an id with held messages
    bool delivering_held_ = false;       // deliver_held is on the stack (handlers may progress)
    // The layers above, in registration order (see LayerHooks).
    struct LayerEntry {
        const void* key = nullptr;  // null: a free entry
        const char* name = nullptr;
        void* self = nullptr;
        LayerHooks hooks;
        std::atomic<void (*)(void*, uint32_t)> on_declared{nullptr};  // read by any thread
        bool in_progress = false;
    };
    static constexpr uint32_t max_layers = 8;
    LayerEntry layers_[max_layers];
    std::atomic<uint32_t> layer_count_{0};
    // The entries with an on_progress hook, in registration order: what
    // progress() walks on every call (every poll of every wait), so it does
    // not step over the layers that have none. Rebuilt under the API lock
    // by add/remove (progress() reads it under the same lock).
    uint8_t progress_order_[max_layers] = {};
    std::atomic<uint32_t> progress_count_{0};
    void rebuild_progress_order();
    Status add_layer_entry(const void* key, const char* name, void* self, const LayerHooks& hooks);
    void remove_layer_entry(const void* key);
    void* layer_entry(const void* key) const;
    template <typename Fn>
    void for_each_layer(Fn fn) {
        const uint32_t n = layer_count_.load(std::memory_order_relaxed);
        for (uint32_t i = 0; i < n; ++i)
            if (layers_[i].self) fn(layers_[i]);
    }
    std::vector<uint8_t> fenced_;  // application thread only
    uint64_t fenced_drops_ = 0;
    uint32_t fenced_count_ = 0;
    bool fence_kill_ = true;  // WEFT_FT_FENCE=kill: SIGKILL same-host peers declared failed
    bool multi_threaded_ = false;
    std::mutex api_mutex_;
    // Internal active messages use ids past the user's range.
    static constexpr uint32_t am_departing = WEFT_AM_MAX_HANDLERS;  // "I finalized"
    std::vector<uint8_t> departed_;                                 // set by am_departing
    weft_window* state_window_ = nullptr;
    std::vector<std::unique_ptr<weft_window>> windows_;  // live and tombstoned
    bool initialized_ = false;
    std::atomic<bool> released_{false};        // release() done, rebuild() not yet (or abandon())
    std::unique_ptr<Backend> parked_backend_;  // abandon()
    uint64_t arrivals_ = 0;                    // what backend progress delivered, ever (quiesce() counts it)
};

// Every C entry point holds one for its whole call: it passes the entry
// gate (a drain keeps threads out; see entry_gate.hpp), then takes the
// context's lock when the context is MULTIPLE (a SERIALIZED context pays one
// predictable branch). Always inlined: it wraps every RMA entry and every
// weft_progress, where an out-of-line call through the PLT cost a third of
// what UCX spends on the operation itself (bench/RESULTS.md, issue 14).
class RuntimeLock {
public:
    [[gnu::always_inline]] explicit RuntimeLock(Runtime& rt) {
        gate::enter();
        // The drain thread calls in while it holds weft (gate and lock).
        if (__builtin_expect(rt.multi_threaded(), 0)) lock_slow(rt);
    }
    [[gnu::always_inline]] ~RuntimeLock() {
        if (__builtin_expect(locked_ != nullptr, 0)) locked_->unlock();
        gate::leave();
    }
    RuntimeLock(const RuntimeLock&) = delete;
    RuntimeLock& operator=(const RuntimeLock&) = delete;

private:
    [[gnu::cold, gnu::noinline]] void lock_slow(Runtime& rt) {
        if (gate::owned_by_me()) return;
        rt.api_mutex().lock();
        locked_ = &rt.api_mutex();
    }
    std::mutex* locked_ = nullptr;  // the API lock, held until the entry returns
};

// Stepping out of weft while waiting. Thread rules: held only by a thread
// inside weft — an application thread in an entry (RuntimeLock), with the
// API lock when the context is MULTIPLE, or the drain thread holding weft
// (WeftHold) — and only across a wait that touches no weft state (a backoff,
// a sleep). For its lifetime it releases the API lock (MULTIPLE only), so
// other threads and the drain get in; then it either leaves the entry gate
// at whatever depth (leave_gate: a drain may close the gate meanwhile, and
// coming back waits at the door until it opens) or only lets a drain that
// is closing the gate right now run past before the wait (let_drain_pass:
// the thread stays counted inside). On destruction it comes back in at the
// same depth, then relocks: the gate before the lock, the order the drain
// takes them, so the two never wait on each other. For the drain thread
// (the gate's owner) the gate steps are no-ops and only the lock moves.
class StepOut {
public:
    enum Gate : bool { let_drain_pass, leave_gate };
    StepOut(Runtime& rt, Gate g) : rt_(rt) {
        if (rt_.multi_threaded()) {
            rt_.api_mutex().unlock();
            locked_ = true;
        }
        if (g == leave_gate) {
            depth_ = gate::step_out();
            left_ = true;
        } else {
            gate::yield_if_closing();
        }
    }
    ~StepOut() {
        if (left_) gate::step_in(depth_);
        if (locked_) rt_.api_mutex().lock();
    }
    StepOut(const StepOut&) = delete;
    StepOut& operator=(const StepOut&) = delete;

private:
    Runtime& rt_;
    uint32_t depth_ = 0;
    bool left_ = false;
    bool locked_ = false;  // the API lock was ours: taken back on the way in
};

// The whole of weft for one thread — the drain's: the entry gate closed (no
// other thread inside, arrivals wait at the door) and, when the context is
// MULTIPLE, the API lock. `wait` closes the gate once every thread has left;
// `if_free` only if none is inside now (held() says whether it did).
// Released in reverse: the lock, then the gate opens.
class WeftHold {
public:
    enum Mode : bool { wait, if_free };
    explicit WeftHold(Runtime& rt, Mode m = wait) : rt_(rt) {
        if (m == wait)
            gate::close();
        else if (!gate::try_close())
            return;
        held_ = true;
        if (rt_.multi_threaded()) {
            rt_.api_mutex().lock();
            locked_ = true;
        }
    }
    ~WeftHold() {
        if (!held_) return;
        if (locked_) rt_.api_mutex().unlock();
        gate::open();
    }
    bool held() const { return held_; }
    WeftHold(const WeftHold&) = delete;
    WeftHold& operator=(const WeftHold&) = delete;

private:
    Runtime& rt_;
    bool held_ = false;
    bool locked_ = false;
};

}  // namespace weft

// The C context handle: a tombstone-able shell around the Runtime. It is
// made, brought up and torn down by context/ (the one folder that knows
// every layer); a layer finds its own state through the Runtime
// (Runtime::layer), never through the handle.
struct weft_context {
    static constexpr uint64_t live_magic = 0x57454654434c5645ull;
    static constexpr uint64_t dead_magic = 0x5745465443444541ull;
    uint64_t magic = live_magic;
    weft::Runtime* rt = nullptr;
};

namespace weft {
// The Runtime of a live context handle, or null (null, finalized or not a
// context). Every C entry that takes a context starts here.
inline Runtime* runtime_of(const weft_context* ctx) {
    if (__builtin_expect(!ctx || ctx->magic != weft_context::live_magic, 0)) return nullptr;
    return ctx->rt;
}
}  // namespace weft
