// runtime.cpp — init/finalize, peers, failures, handlers, progress, windows.
#include "transport/runtime.hpp"
#include "transport/state_window_view.hpp"

#include "transport/registry.hpp"

#include <weft/state_window.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <chrono>
#include <iterator>
#include <thread>
#include <sys/prctl.h>
#include <unistd.h>

namespace weft {

namespace {

std::string host_identity() {
    char name[256] = {0};
    gethostname(name, sizeof name - 1);
    std::string id(name);
    std::ifstream boot("/proc/sys/kernel/random/boot_id");
    std::string b;
    if (boot && std::getline(boot, b)) id += "/" + b;
    return id;
}

}  // namespace

Runtime::~Runtime() {
    if (initialized_) {
        finalize();
        return;
    }
    // A failed init: windows registered before it failed go back to the
    // backend before the backend goes (UCX asserts in ucp_cleanup on memory
    // still mapped: a rank killed during start-up failed its peers' init).
    if (backend_)
        for (auto& w : windows_)
            if (w->magic == weft_window::live_magic) {
                backend_->window_destroy(*w);
                w->magic = weft_window::dead_magic;
            }
}

bool Runtime::all_same_host() const {
    for (const auto& p : peers_)
        if (!p.same_host) return false;
    return true;
}

Status Runtime::init(const std::function<Status()>& before_ready) {
    fault::init_from_env();
    timeout_ns_ = timeout_ns_from_env();
    hold_limit_ = env_u64("WEFT_AM_HOLD_BYTES", hold_limit_);
    // Let peers of the same user attach to our memory (cross-memory attach,
    // pidfd_getfd) even where Yama restricts ptrace to descendants.
    prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);

    // A bootstrap handed in (weft_init_with_bootstrap) wins over the environment's.
    Status st = bootstrap_ ? WEFT_OK : make_bootstrap(bootstrap_);
    if (st != WEFT_OK) return st;
    job_ = bootstrap_->job();
    rank_ = bootstrap_->rank();
    size_ = bootstrap_->size();
    log_set_identity(job_, rank_);
    WEFT_LOG(debug, "bootstrap %s: job %u rank %u of %u, universe %u", bootstrap_->name(), job_, rank_, size_,
             bootstrap_->universe_size());

    st = exchange_identities();
    if (st != WEFT_OK) return st;
    WEFT_FAULT_POINT("transport.init.exchanged");

    st = choose_backend();
    if (st != WEFT_OK) return st;
    bootstrap_->set_progress([this] { progress(); });
    // Own job's ranks are peers 0 .. size-1.
    bootstrap_->set_known_dead([this](uint32_t r) { return r < size_ && peer_failed(r); });
    st = create_state_window();
    if (st != WEFT_OK) return st;

    start_monitor();
    const std::string fence = env_string("WEFT_FT_FENCE", "kill");
    if (fence != "kill" && fence != "drop")
        WEFT_LOG(warn, "WEFT_FT_FENCE=%s: expected kill or drop; kill", fence.c_str());
    fence_kill_ = fence != "drop";
    if (before_ready) {
        st = before_ready();
        if (st != WEFT_OK) return st;
    }

    st = bootstrap_->barrier(op_deadline());
    if (st != WEFT_OK) return WEFT_FAIL(st, "init barrier failed");
    initialized_ = true;
    WEFT_FAULT_POINT("transport.init.done");
    return WEFT_OK;
}

void Runtime::start_monitor() {
    std::vector<std::pair<uint32_t, int32_t>> local;
    for (uint32_t p = 0; p < peers_.size(); ++p)
        if (p != rank_ && peers_[p].same_host) local.emplace_back(p, peers_[p].pid);
    // WEFT_PIDFD_MONITOR=0 leaves failure detection to the transport alone,
    // as for peers on other hosts (tests of the verbs QP-error path use it);
    // the pidfds are still opened, for fencing.
    const bool watch = env_u64("WEFT_PIDFD_MONITOR", 1) != 0;
    monitor_.start(
        local, [this](uint32_t p) { declare_failed(p, "process exited"); }, watch);
}

Status Runtime::exchange_identities(bool rebuilding) {
    std::string host = host_identity();
    std::vector<uint8_t> mine;
    wire::put_u32(mine, job_);
    wire::put_u32(mine, rank_);
    wire::put_u32(mine, static_cast<uint32_t>(getpid()));
    wire::put_u16(mine, static_cast<uint16_t>(host.size()));
    mine.insert(mine.end(), host.begin(), host.end());

    std::vector<std::vector<uint8_t>> all;
    Status st = bootstrap_->exchange(wire::Scope::universe, mine, all, op_deadline());
    if (st != WEFT_OK) return WEFT_FAIL(st, "identity exchange failed");

    uint32_t n = bootstrap_->universe_size();
    uint32_t base = bootstrap_->universe_index(job_, 0);
    if (rebuilding) {
        // The same processes, restored: only a pid may differ (a
        // checkpointer that restores under new pids), never who is where.
        for (uint32_t u = 0; u < n; ++u) {
            const auto& b = all[u];
            if (b.size() < 14 || b.size() != 14u + wire::get_u16(b.data() + 12))
                return WEFT_FAIL(WEFT_ERR_PROTOCOL, "identity record %u is corrupted", u);
            PeerInfo& info = peers_[universe_to_peer_[u]];
            const std::string h(reinterpret_cast<const char*>(b.data() + 14), b.size() - 14);
            if (wire::get_u32(b.data()) != info.job || wire::get_u32(b.data() + 4) != info.rank || h != info.host)
                return WEFT_FAIL(WEFT_ERR_PROTOCOL,
                                 "rebuild: universe index %u is job %u rank %u on %s, was job %u rank %u on %s", u,
                                 wire::get_u32(b.data()), wire::get_u32(b.data() + 4), h.c_str(), info.job, info.rank,
                                 info.host.c_str());
            info.pid = static_cast<int32_t>(wire::get_u32(b.data() + 8));
        }
        return WEFT_OK;
    }
    peers_.assign(n, PeerInfo{});
    universe_to_peer_.assign(n, 0);
    // Peer order: this job's ranks first (peer == rank), then the others in
    // universe order.
    uint32_t next_other = size_;
    for (uint32_t u = 0; u < n; ++u) {
        const auto& b = all[u];
        if (b.size() < 14 || b.size() != 14u + wire::get_u16(b.data() + 12))
            return WEFT_FAIL(WEFT_ERR_PROTOCOL, "identity record %u is corrupted", u);
        PeerInfo info;
        info.job = wire::get_u32(b.data());
        info.rank = wire::get_u32(b.data() + 4);
        info.pid = static_cast<int32_t>(wire::get_u32(b.data() + 8));
        info.host.assign(reinterpret_cast<const char*>(b.data() + 14), b.size() - 14);
        info.same_host = info.host == host;
        info.universe_index = u;
        if (info.job >= bootstrap_->job_sizes().size() || bootstrap_->universe_index(info.job, info.rank) != u)
            return WEFT_FAIL(WEFT_ERR_PROTOCOL, "identity record %u names job %u rank %u", u, info.job, info.rank);
        uint32_t p = (u >= base && u < base + size_) ? u - base : next_other++;
        peers_[p] = info;
        universe_to_peer_[u] = p;
    }
    failed_ = std::make_unique<std::atomic<uint8_t>[]>(n);
    for (uint32_t i = 0; i < n; ++i) failed_[i].store(0, std::memory_order_relaxed);
    failure_reported_.assign(n, 0);
    departed_.assign(n, 0);
    fenced_.assign(n, 0);
    return WEFT_OK;
}

Status Runtime::choose_backend() {
    const std::string want = env_string("WEFT_TRANSPORT", "auto");
    const bool one_host = all_same_host();
    // A device is a fact of each host, so auto may take verbs only where
    // every rank of the universe can: on several hosts each rank says
    // whether it would (auto with a viable device, or verbs asked for).
    // Every rank takes part whatever its WEFT_TRANSPORT (the conditions are
    // the universe's), so jobs of one launch that set it differently still
    // meet here, and all ranks decide from the same answers
    // (docs/transports.md).
    bool verbs_everywhere = false;
    if (!one_host && find_backend("verbs")->built) {
        std::string why;
        const bool mine = want == "verbs" || (want == "auto" && find_backend("verbs")->viable(why) == WEFT_OK);
        const std::vector<uint8_t> vote{static_cast<uint8_t>(mine)};
        std::vector<std::vector<uint8_t>> all;
        Status st = bootstrap_->exchange(wire::Scope::universe, vote, all, op_deadline());
        if (st != WEFT_OK) return WEFT_FAIL(st, "transport choice: exchange failed");
        verbs_everywhere =
            std::all_of(all.begin(), all.end(), [](const auto& v) { return v.size() == 1 && v[0] == 1; });
        WEFT_LOG(debug, "transport choice: verbs here: %s (%s); on every rank: %s", mine ? "yes" : "no", why.c_str(),
                 verbs_everywhere ? "yes" : "no");
    }
    const BackendEntry* b = want == "auto" ? auto_backend(one_host, verbs_everywhere) : find_backend(want);
    if (!b && want == "auto")
        return WEFT_FAIL(WEFT_ERR_UNSUPPORTED,
                         "WEFT_TRANSPORT=auto: the job spans several hosts, verbs cannot run on every rank and "
                         "UCX is not built");
    if (!b)
        return WEFT_FAIL(WEFT_ERR_UNKNOWN_TRANSPORT, "WEFT_TRANSPORT=%s: expected %s or auto", want.c_str(),
                         backend_names().c_str());
    if (!b->built)
        return WEFT_FAIL(WEFT_ERR_UNSUPPORTED, "WEFT_TRANSPORT=%s: not built (%s)", b->name, b->not_built_why);
    if (b->one_host_only && !one_host)
        return WEFT_FAIL(WEFT_ERR_UNSUPPORTED, "WEFT_TRANSPORT=%s but the job spans several hosts", b->name);
    if (b->probe_at_selection) {
        std::string why;
        Status st = b->viable(why);
        if (st != WEFT_OK)
            return WEFT_FAIL(st, "WEFT_TRANSPORT=%s cannot run on this host: %s", want.c_str(), why.c_str());
    }
    Status st = b->create(*this, backend_);
    if (st != WEFT_OK) return st;
    WEFT_LOG(debug, "transport %s bound (WEFT_TRANSPORT=%s)", backend_->name(), want.c_str());
    return WEFT_OK;
}

Status Runtime::create_state_window() {
    Status st = window_create(true, nullptr, WEFT_STATE_SIZE, state_window_);
    if (st != WEFT_OK) return WEFT_FAIL(st, "cannot create the pinned state window");
    state_window_->state = true;
    const StateWindowView sw(state_window_);
    sw.at(WEFT_STATE_VERSION_OFF).store(WEFT_STATE_LAYOUT_VERSION, std::memory_order_relaxed);
    sw.at(WEFT_STATE_OWNER_RANK_OFF).store(rank_, std::memory_order_relaxed);
    sw.at(WEFT_STATE_OWNER_PID_OFF).store(static_cast<uint64_t>(getpid()), std::memory_order_relaxed);
    sw.at(WEFT_STATE_MAGIC_OFF).store(WEFT_STATE_MAGIC, std::memory_order_release);
    return WEFT_OK;
}

Status Runtime::finalize() {
    if (!initialized_) return WEFT_ERR_NOT_INITIALIZED;
    if (released_) {
        // Finalized without a rebuild: no fabric, no launcher connection,
        // nothing to say to anyone; the local state goes.
        WEFT_LOG(info, "finalize: the context is released (weft_ckpt_release without a rebuild): local teardown only");
        report_held_at_finalize();
        for_each_layer([](LayerEntry& l) {
            if (l.hooks.on_teardown) l.hooks.on_teardown(l.self);
        });
        Backend& owner = parked_backend_ ? *parked_backend_ : *backend_;
        for (auto& w : windows_) {
            if (w->magic == weft_window::live_magic) {
                owner.window_destroy(*w);
                w->magic = weft_window::dead_magic;
            }
        }
        state_window_ = nullptr;
        backend_.reset();
        parked_backend_.reset();
        bootstrap_.reset();
        initialized_ = false;
        released_ = false;
        return WEFT_OK;
    }
    // Everything this rank still has to say goes out before the barrier,
    // while every live peer of the job is sure to be there: after it, peers
    // exit whenever they like, and a flush or send to one that has gone
    // fails (over UCX+tcp "Connection reset by remote peer").
    // Tell every live peer we are leaving, so our exit is not taken for a
    // failure (the pidfd monitor and the transport cannot tell them apart),
    // and complete it at the peers together with our puts.
    const uint8_t bye = 1;
    std::vector<uint32_t> live;
    for (uint32_t p = 0; p < peers_.size(); ++p)
        if (p != rank_ && !peer_failed(p)) live.push_back(p);
    backend_->depart(live, am_departing, &bye, sizeof bye, op_deadline());
    if (state_window_) backend_->flush(*state_window_, WEFT_RANK_ALL);
    // Peers may still be reading our windows: meet them once, but never wait
    // for a dead one (the launcher fails the exchange when a member died).
    // We keep progressing while we wait (their emulated reads need us).
    // After a known failure the barrier fails at once (the launcher fails
    // an exchange a member died in): an expected outcome, not an error.
    const bool failure_known = failures_declared_.load(std::memory_order_acquire) != 0;
    Status st = bootstrap_->barrier(op_deadline(), failure_known);
    if (st != WEFT_OK) WEFT_LOG(info, "finalize barrier: %s (continuing)", weft_strerror(st));
    bootstrap_->set_progress(nullptr);
    report_held_at_finalize();
    StateWindowView(state_window_).at(WEFT_STATE_FINALIZED_OFF).store(1, std::memory_order_release);
    monitor_.stop();
    for_each_layer([](LayerEntry& l) {
        if (l.hooks.on_teardown) l.hooks.on_teardown(l.self);
    });
    for (auto& w : windows_) {
        if (w->magic == weft_window::live_magic) {
            backend_->window_destroy(*w);
            w->magic = weft_window::dead_magic;
        }
    }
    state_window_ = nullptr;
    backend_.reset();
    bootstrap_.reset();
    initialized_ = false;
    return WEFT_OK;
}

Status Runtime::add_layer_entry(const void* key, const char* name, void* self, const LayerHooks& hooks) {
    // A progress thread (MULTIPLE) may be inside progress(), which reads
    // the entries under the API lock: change them only under it too.
    RuntimeLock lock(*this);
    if (layer_entry(key)) return WEFT_FAIL(WEFT_ERR_INVALID_ARG, "layer %s is registered twice", name);
    // A removed entry is reused only by its own key: another layer taking
    // it would run before layers registered after the removed one.
    uint32_t i = 0;
    const uint32_t n = layer_count_.load(std::memory_order_relaxed);
    while (i < n && layers_[i].key != key) ++i;
    if (i == max_layers) return WEFT_FAIL(WEFT_ERR_NO_MEMORY, "layer %s: more than %u layers", name, max_layers);
    LayerEntry& l = layers_[i];
    l.name = name;
    l.self = self;
    l.hooks = hooks;
    l.in_progress = false;
    l.key = key;
    l.on_declared.store(hooks.on_declared, std::memory_order_release);
    if (i == n) layer_count_.store(n + 1, std::memory_order_release);
    rebuild_progress_order();
    return WEFT_OK;
}

void Runtime::rebuild_progress_order() {
    uint32_t k = 0;
    const uint32_t n = layer_count_.load(std::memory_order_relaxed);
    for (uint32_t i = 0; i < n; ++i)
        if (layers_[i].hooks.on_progress) progress_order_[k++] = static_cast<uint8_t>(i);
    progress_count_.store(k, std::memory_order_release);
}

void Runtime::remove_layer_entry(const void* key) {
    RuntimeLock lock(*this);  // as add_layer_entry
    const uint32_t n = layer_count_.load(std::memory_order_relaxed);
    for (uint32_t i = 0; i < n; ++i) {
        LayerEntry& l = layers_[i];
        if (l.key != key) continue;
        // The entry keeps its key (and its place in the order); a thread
        // declaring a failure now sees no hook.
        l.on_declared.store(nullptr, std::memory_order_release);
        l.hooks = LayerHooks{};
        l.self = nullptr;
    }
    rebuild_progress_order();
}

void* Runtime::layer_entry(const void* key) const {
    const uint32_t n = layer_count_.load(std::memory_order_relaxed);
    for (uint32_t i = 0; i < n; ++i)
        if (layers_[i].key == key) return layers_[i].self;
    return nullptr;
}

void Runtime::declare_failed(uint32_t p, const char* why) {
    if (p >= peers_.size() || p == rank_) return;
    if (failed_[p].exchange(1, std::memory_order_acq_rel) != 0) return;
    WEFT_LOG(info, "peer %u (job %u rank %u pid %d) failed: %s", p, peers_[p].job, peers_[p].rank, peers_[p].pid, why);
    failures_declared_.fetch_add(1, std::memory_order_release);
    const uint32_t layers = layer_count_.load(std::memory_order_acquire);
    for (uint32_t i = 0; i < layers; ++i)
        if (auto h = layers_[i].on_declared.load(std::memory_order_acquire)) h(layers_[i].self, p);
    if (backend_) backend_->wake();
}

bool Runtime::departed(uint32_t p) const {
    // A finalizing rank says so with an active message (any backend) and in
    // its state window (readable here where it is mapped: shm).
    if (departed_[p]) return true;
    if (!state_window_ || p >= state_window_->nranks) return false;
    uint64_t* finalized = StateWindowView(state_window_).mapped_word(p, WEFT_STATE_FINALIZED_OFF);
    return finalized && std::atomic_ref<uint64_t>(*finalized).load(std::memory_order_acquire) == 1;
}

uint32_t Runtime::dispatch_failures() {
    failures_dispatched_ = failures_declared_.load(std::memory_order_acquire);
    uint32_t n = 0;
    // A peer's goodbye may still be in flight behind its exit notice.
    backend_->progress();
    for (uint32_t p = 0; p < peers_.size(); ++p) {
        if (failure_reported_[p] || !peer_failed(p)) continue;
        failure_reported_[p] = 1;
        if (departed(p)) {
            WEFT_LOG(debug, "peer %u finalized and exited: departed, not failed", p);
            for_each_layer([p](LayerEntry& l) {
                if (l.hooks.on_peer_gone) l.hooks.on_peer_gone(l.self, p, true);
            });
            continue;
        }
        ++n;
        // Fence it: whatever it sends from now on is dropped, even if it
        // was only stopped and resumes (its peers already act on its death).
        fenced_[p] = 1;
        ++fenced_count_;
        // A same-host peer could still write into memory we share with it:
        // make the declaration true (fail-stop) rather than trust it is dead.
        if (fence_kill_ && peers_[p].same_host && monitor_.kill(p))
            WEFT_LOG(debug, "peer %u SIGKILLed to fence it (declared failed, maybe only stopped)", p);
        backend_->peer_failed(p);
        for_each_layer([p](LayerEntry& l) {
            if (l.hooks.on_peer_gone) l.hooks.on_peer_gone(l.self, p, false);
        });
        if (failure_handler_) failure_handler_(failure_arg_, p);
        for (const EventHandler& h : event_handlers_)
            if (h.event == WEFT_EVENT_PROC_FAILED) h.fn(h.arg, WEFT_EVENT_PROC_FAILED, p);
    }
    return n;
}

Status Runtime::am_register(uint32_t id, weft_am_handler_t h, void* arg) {
    if (id >= WEFT_AM_MAX_HANDLERS)
        return WEFT_FAIL(WEFT_ERR_INVALID_ARG, "active-message id %u >= %u", id, WEFT_AM_MAX_HANDLERS);
    if (h && handlers_[id].fn) return WEFT_FAIL(WEFT_ERR_BUSY, "active-message id %u already has a handler", id);
    handlers_[id] = Handler{h, arg};
    if (h) {
        if (held_dropped_[id] != 0) {
            WEFT_LOG(error,
                     "active-message id %u: %llu message(s) arrived before this handler and were dropped: the "
                     "hold for early messages (WEFT_AM_HOLD_BYTES=%llu) was full",
                     id, static_cast<unsigned long long>(held_dropped_[id]),
                     static_cast<unsigned long long>(hold_limit_));
            held_dropped_[id] = 0;
        }
        // Delivered by the next progress(), as every handler runs (weft.h):
        // never from inside the registration call.
        if (held_per_id_[id] != 0) held_ready_ = true;
    }
    return WEFT_OK;
}

Status Runtime::am_register_internal(uint32_t id, weft_am_handler_t h, void* arg) {
    WEFT_ASSERT(id >= am_internal_first && id < am_internal_first + am_internal_count);
    handlers_[id] = Handler{h, arg};
    if (h && held_per_id_[id] != 0) held_ready_ = true;
    return WEFT_OK;
}

void Runtime::hold_am(uint32_t source_peer, uint32_t id, const void* payload, size_t len) {
    // A sender cannot know when the receiver registers (two jobs of one
    // launch share no barrier, and even one job's init barrier precedes the
    // application's registrations), so an early message is kept, not lost.
    const uint64_t cost = len + held_record_bytes;
    if (held_bytes_ + cost > hold_limit_) {
        if (held_dropped_[id]++ == 0)
            WEFT_LOG(error,
                     "dropped active message id %u (%zu bytes) from peer %u: no handler is registered and the hold "
                     "for early messages is full (%llu of WEFT_AM_HOLD_BYTES=%llu bytes); later drops for this id "
                     "are counted and reported when its handler is registered",
                     id, len, source_peer, static_cast<unsigned long long>(held_bytes_),
                     static_cast<unsigned long long>(hold_limit_));
        return;
    }
    const auto* p = static_cast<const uint8_t*>(payload);
    held_.push_back(HeldAm{source_peer, id, std::vector<uint8_t>(p, p + len)});
    held_bytes_ += cost;
    if (held_per_id_[id]++ == 0)
        WEFT_LOG(debug, "active message id %u from peer %u arrived before its handler: held", id, source_peer);
    // A handler for the id may exist already (messages queued behind older
    // held ones): let the next progress() deliver.
    if (handlers_[id].fn) held_ready_ = true;
}

uint32_t Runtime::deliver_held() {
    // A handler may progress (a send into a full ring), which comes back
    // here: the outer pass delivers whatever arrives meanwhile (it appends).
    if (delivering_held_) return 0;
    delivering_held_ = true;
    held_ready_ = false;
    uint32_t n = 0;
    for (size_t i = 0; i < held_.size();) {
        if (!handlers_[held_[i].id].fn) {
            ++i;
            continue;
        }
        HeldAm m = std::move(held_[i]);
        held_.erase(held_.begin() + static_cast<std::ptrdiff_t>(i));
        --held_per_id_[m.id];
        held_bytes_ -= m.payload.size() + held_record_bytes;
        if (fenced_[m.source]) {
            // As for a message still queued in a backend when the fence
            // came (deliver_am): a fenced peer is dead to this job.
            ++fenced_drops_;
            WEFT_LOG(debug, "held active message id %u from peer %u dropped: the peer was fenced", m.id, m.source);
            continue;
        }
        const Handler& h = handlers_[m.id];
        h.fn(h.arg, m.source, m.payload.data(), m.payload.size());
        ++n;
    }
    delivering_held_ = false;
    return n;
}

void Runtime::report_held_at_finalize() {
    if (!held_.empty()) {
        const HeldAm& first = held_.front();
        WEFT_LOG(error,
                 "finalize: %zu active message(s) (%llu bytes) never delivered: no handler was registered for their "
                 "id (the first: id %u from peer %u)",
                 held_.size(), static_cast<unsigned long long>(held_bytes_), first.id, first.source);
    }
    for (uint32_t id = 0; id < am_id_count; ++id)
        if (held_dropped_[id] != 0)
            WEFT_LOG(error,
                     "finalize: %llu active message(s) for id %u were dropped: the hold for early messages "
                     "(WEFT_AM_HOLD_BYTES=%llu) was full and no handler was ever registered",
                     static_cast<unsigned long long>(held_dropped_[id]), id,
                     static_cast<unsigned long long>(hold_limit_));
    held_.clear();
    held_bytes_ = 0;
    std::fill(std::begin(held_per_id_), std::end(held_per_id_), 0u);
    std::fill(std::begin(held_dropped_), std::end(held_dropped_), 0ull);
    held_ready_ = false;
}

void Runtime::deliver_am(uint32_t source_peer, uint32_t id, const void* payload, size_t len) {
    if (id == am_departing) {
        if (source_peer < departed_.size()) departed_[source_peer] = 1;
        return;
    }
    if (__builtin_expect(fenced_[source_peer] != 0, 0)) {
        // A declared-failed process that still runs (a SIGSTOPped one
        // resumed, or a false suspicion): it is dead to this job.
        if (fenced_drops_++ == 0)
            WEFT_LOG(info, "dropping active messages from peer %u: it was declared failed (fenced)", source_peer);
        return;
    }
    if (__builtin_expect(id >= am_id_count, 0)) {
        // Never lose a message silently: say who sent what.
        WEFT_LOG(error, "dropped active message id %u (%zu bytes) from peer %u: no such id", id, len, source_peer);
        return;
    }
    // No handler yet, or older messages for this id still held: keep it,
    // in order (see am_register).
    if (__builtin_expect(!handlers_[id].fn || held_per_id_[id] != 0, 0)) {
        hold_am(source_peer, id, payload, len);
        return;
    }
    handlers_[id].fn(handlers_[id].arg, source_peer, payload, len);
}

uint32_t Runtime::progress() {
    // Early messages whose handler has come go before anything new.
    uint32_t n = __builtin_expect(held_ready_, 0) ? deliver_held() : 0;
    const uint32_t arrived = backend_->progress();
    arrivals_ += arrived;
    n += arrived;
    if (__builtin_expect(failures_declared_.load(std::memory_order_relaxed) != failures_dispatched_, 0))
        n += dispatch_failures();
    // A hook may send, and a send may progress (a full ring): never nest.
    // Only the layers with a hook (progress_order_); a hook that removes a
    // layer leaves its entry's hook null, looked at before the call.
    const uint32_t hooks = progress_count_.load(std::memory_order_relaxed);
    for (uint32_t k = 0; k < hooks; ++k) {
        LayerEntry& l = layers_[progress_order_[k]];
        if (__builtin_expect(!l.hooks.on_progress || l.in_progress, 0)) continue;
        l.in_progress = true;
        n += l.hooks.on_progress(l.self);
        l.in_progress = false;
    }
    return n;
}

Status Runtime::wait(uint64_t timeout_ns) {
    Deadline d = Deadline::after_ns(timeout_ns);
    Backoff backoff;
    for (;;) {
        if (progress() > 0) return WEFT_OK;
        uint64_t rem = d.remaining_ns();
        if (rem == 0) return WEFT_ERR_TIMEOUT;
        if (backoff.should_block())
            backend_->wait_for_event(rem < 1000000 ? rem : 1000000);
        else
            backoff.pause();
    }
}

Status Runtime::window_create(bool allocate, void* base, size_t size, weft_window*& out) {
    auto w = std::make_unique<weft_window>();
    w->rt = this;
    w->nranks = size_;
    w->allocated = allocate;
    Status st = backend_->window_create(*w, allocate, base, size);
    if (st != WEFT_OK) return st;
    w->remote = w->remote_storage.data();
    out = w.get();
    windows_.push_back(std::move(w));
    return WEFT_OK;
}

Status Runtime::window_free(weft_window* w) {
    if (w->state) return WEFT_FAIL(WEFT_ERR_INVALID_ARG, "the state window is owned by the context");
    Status st = backend_->flush(*w, WEFT_RANK_ALL);
    Status bst = bootstrap_->barrier(op_deadline());
    backend_->window_destroy(*w);
    w->magic = weft_window::dead_magic;  // keep the shell: later calls get NOT_INITIALIZED
    if (st != WEFT_OK) return st;
    if (bst != WEFT_OK) return WEFT_FAIL(WEFT_ERR_PEER_FAILED, "window free: a peer did not reach the barrier");
    return WEFT_OK;
}

// ------------------------------------------------ transparent checkpointing
namespace {
Status released_op(const char* what) {
    return WEFT_FAIL(WEFT_ERR_BUSY, "%s on a window of a released context (weft_ckpt_release without a rebuild)", what);
}
}  // namespace

const RmaOps released_ops{
    [](weft_window*, uint32_t, uint64_t, const void*, size_t) { return released_op("put"); },
    [](weft_window*, uint32_t, uint64_t, void*, size_t) { return released_op("get"); },
    [](weft_window*, uint32_t, uint64_t, uint64_t, uint64_t*) { return released_op("fetch-add"); },
    [](weft_window*, uint32_t, uint64_t, uint64_t, uint64_t, uint64_t*) { return released_op("compare-swap"); },
    [](weft_window*, uint32_t, uint64_t, uint64_t, uint64_t*) { return released_op("swap"); },
};

// What a context has for a backend once abandon() parked the real one:
// every operation fails (and says why, once), nothing arrives.
class AbandonedBackend final : public Backend {
public:
    explicit AbandonedBackend(const char* was) : was_(was) {}
    const char* name() const override { return "abandoned"; }
    void query_caps(weft_caps_t& c) const override {
        c = weft_caps_t{};
        c.transport = "abandoned";
    }
    InternalCaps internal_caps() const override { return {}; }
    Status window_create(weft_window&, bool, void*, size_t) override { return fail("window creation"); }
    void window_destroy(weft_window&) override {}
    Status flush(weft_window&, uint32_t) override { return fail("flush"); }
    size_t am_eager_limit() const override { return 0; }
    Status am_send(uint32_t, uint32_t, const void*, size_t) override { return fail("a message"); }
    uint32_t progress() override { return 0; }
    void wait_for_event(uint64_t timeout_ns) override {
        std::this_thread::sleep_for(std::chrono::nanoseconds(std::min<uint64_t>(timeout_ns, 1000000)));
    }
    void wake() override {}

private:
    Status fail(const char* what) {
        if (!said_) {
            said_ = true;
            return WEFT_FAIL(WEFT_ERR_TRANSPORT,
                             "%s on a context whose %s transport did not come back from weft_ckpt_release (only "
                             "weft_finalize is left)",
                             what, was_.c_str());
        }
        return WEFT_ERR_TRANSPORT;
    }
    std::string was_;
    bool said_ = false;
};

void Runtime::abandon() {
    for (weft_window* w : live_windows()) w->ops = &released_ops;
    monitor_.stop();
    bootstrap_->set_progress(nullptr);
    bootstrap_->release();
    if (!parked_backend_) {
        parked_backend_ = std::move(backend_);
        backend_ = std::make_unique<AbandonedBackend>(parked_backend_->name());
    }
    released_ = true;
    WEFT_LOG(error, "the %s transport is abandoned: every operation of this context fails from now on",
             parked_backend_->name());
}

std::vector<weft_window*> Runtime::live_windows() const {
    std::vector<weft_window*> live;
    for (const auto& w : windows_)
        if (w->magic == weft_window::live_magic) live.push_back(w.get());
    return live;
}

bool Runtime::can_release(std::string& why) const {
    if (bootstrap_->job_sizes().size() != 1) {
        why = "the launch has several jobs (a release is collective over one job)";
        return false;
    }
    return bootstrap_->can_release(why) && backend_->can_release(why);
}

// Rounds until one in which nothing arrived anywhere: each rank completes
// what it wrote (windows flushed), takes in and handles whatever has
// arrived (a handler may send: its message is taken in next round), then
// all-gathers how much arrived since its last contribution (what arrives
// while the all-gather waits counts for the next round). A round of zeros
// everywhere: every message sent before it was taken in, and nothing was
// sent after, so nothing is in transit. This holds where a message sent is
// in the receiver's memory once complete_sends returns (at once for shm's
// rings; UCX flushes its worker).
Status Runtime::quiesce() {
    const Deadline d = op_deadline();
    uint64_t mark = arrivals_;
    for (uint32_t round = 1;; ++round) {
        for (weft_window* w : live_windows())
            if (Status st = backend_->flush(*w, WEFT_RANK_ALL); st != WEFT_OK)
                return WEFT_FAIL(st, "release: a window flush failed");
        if (Status st = backend_->complete_sends(d); st != WEFT_OK)
            return WEFT_FAIL(st, "release: what this rank sent did not complete");
        while (progress() > 0 && !d.passed()) {
        }
        const uint64_t seen = arrivals_ - mark;
        mark += seen;
        std::vector<uint8_t> mine;
        wire::put_u32(mine, static_cast<uint32_t>(std::min<uint64_t>(seen, UINT32_MAX)));
        std::vector<std::vector<uint8_t>> all;
        if (Status st = bootstrap_->exchange(wire::Scope::job, mine, all, d); st != WEFT_OK)
            return WEFT_FAIL(st, "release: the job could not quiesce");
        uint64_t total = 0;
        for (const auto& b : all) total += b.size() == 4 ? wire::get_u32(b.data()) : 1;
        if (total == 0) {
            WEFT_LOG(debug, "release: quiet after %u round(s)", round);
            return WEFT_OK;
        }
        if (d.passed()) return WEFT_FAIL(WEFT_ERR_TIMEOUT, "release: the job did not quiesce (%u rounds)", round);
    }
}

Status Runtime::release() {
    if (released_) return WEFT_FAIL(WEFT_ERR_BUSY, "weft_ckpt_release: the context is released already");
    std::string why;
    if (!can_release(why)) return WEFT_FAIL(WEFT_ERR_UNSUPPORTED, "weft_ckpt_release: %s", why.c_str());
    const uint64_t t0 = now_ns();
    if (Status st = quiesce(); st != WEFT_OK) return st;
    const uint64_t t_quiet = now_ns();
    for_each_layer([](LayerEntry& l) {
        if (l.hooks.on_release) l.hooks.on_release(l.self);
    });
    monitor_.stop();
    // Nobody's resources go before every rank's threads stopped using
    // them: a detector reading a peer through its channel would take the
    // peer's release for its death.
    if (Status st = bootstrap_->barrier(op_deadline()); st != WEFT_OK) {
        for_each_layer([](LayerEntry& l) {
            if (l.hooks.on_rebuild) l.hooks.on_rebuild(l.self);
        });
        start_monitor();
        return WEFT_FAIL(st, "release: the barrier before letting go failed");
    }
    bootstrap_->set_progress(nullptr);
    const uint64_t t_threads = now_ns();
    const std::vector<weft_window*> live = live_windows();
    Status st = backend_->release(live);
    bootstrap_->release();
    WEFT_LOG(debug, "release: quiesce %.3f ms, threads %.3f ms, backend and bootstrap %.3f ms", (t_quiet - t0) / 1e6,
             (t_threads - t_quiet) / 1e6, (now_ns() - t_threads) / 1e6);
    // Whatever the backend managed, its resources are in no state to be
    // used: only a rebuild (or finalize) comes next.
    released_ = true;
    if (st != WEFT_OK)
        return WEFT_FAIL(st, "weft_ckpt_release: the %s backend could not let go of everything", backend_->name());
    WEFT_LOG(debug, "released: %zu window(s) kept in private memory, no fabric resource held", live.size());
    return WEFT_OK;
}

Status Runtime::rebuild() {
    if (!released_) return WEFT_FAIL(WEFT_ERR_INVALID_ARG, "weft_ckpt_rebuild: the context is not released");
    const Deadline d = op_deadline();
    const uint64_t t0 = now_ns();
    if (Status st = bootstrap_->reconnect(d); st != WEFT_OK)
        return WEFT_FAIL(st, "weft_ckpt_rebuild: the launcher connection did not come back");
    if (Status st = exchange_identities(true); st != WEFT_OK) return st;
    const uint64_t t_connected = now_ns();
    if (Status st = backend_->rebuild(live_windows()); st != WEFT_OK)
        return WEFT_FAIL(st, "weft_ckpt_rebuild: the %s backend did not come back", backend_->name());
    const uint64_t t_backend = now_ns();
    bootstrap_->set_progress([this] { progress(); });
    start_monitor();
    released_ = false;
    // Every rank's transport is back before any detector looks at a peer.
    if (Status st = bootstrap_->barrier(op_deadline()); st != WEFT_OK)
        return WEFT_FAIL(st, "weft_ckpt_rebuild: the closing barrier failed");
    for_each_layer([](LayerEntry& l) {
        if (l.hooks.on_rebuild) l.hooks.on_rebuild(l.self);
    });
    WEFT_LOG(debug, "rebuild: launcher and identities %.3f ms, backend %.3f ms, threads and barrier %.3f ms",
             (t_connected - t0) / 1e6, (t_backend - t_connected) / 1e6, (now_ns() - t_backend) / 1e6);
    return WEFT_OK;
}

}  // namespace weft
