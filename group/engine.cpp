// engine.cpp — the owner of the parts: bringing them up and down in order,
// the group layer's Runtime hooks, and waiting.
#include "group/engine.hpp"

#include "group/schedule.hpp"

#include <algorithm>
#include <array>
#include <atomic>

namespace weft::group {

Engine::Engine(Runtime& rt) : rt_(rt), registry_(*this), coll_(*this), p2p_(*this), drain_(*this) {}

namespace {
// The process's engines by slot: a request handle's first half.
std::array<std::atomic<Engine*>, Engine::max_engines> engines{};
}  // namespace

Request Engine::invalid_request;

Engine::~Engine() {
    rt_.remove_layer(engine_layer);
    if (slot_ < max_engines) engines[slot_].store(nullptr, std::memory_order_release);
}

Engine* Engine::in_slot(uint32_t slot) {
    return slot < max_engines ? engines[slot].load(std::memory_order_acquire) : nullptr;
}

Request* Engine::request_of(weft_request_t handle) {
    const auto v = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(handle));
    if (!v) return nullptr;
    const uint32_t low = static_cast<uint32_t>(v);
    const uint64_t high = v >> 32;
    Engine* e = low && high ? in_slot(static_cast<uint32_t>(high - 1)) : nullptr;
    Request* r = e ? e->p2p_.pool().at(low - 1) : nullptr;
    return r ? r : &invalid_request;
}

void Engine::shutdown() {
    // Released (weft_ckpt_release, never rebuilt): there is no fabric to
    // finish anything over, and the peers are in the same state.
    if (rt_.released()) return;
    // The frees the program asked for finish first (bounded by the
    // operation timeout). Their release barriers need this rank's
    // messages, and after a failure the transport's finalize barrier no
    // longer holds a rank back (the launcher fails it at once): a rank
    // leaving with a release barrier still open would leave its peers'
    // barriers to fail on a rank that only departed.
    auto freeing = [&] {
        return std::any_of(registry_.comms().begin(), registry_.comms().end(),
                           [](const auto& c) { return c->freeing; });
    };
    if (freeing()) {
        // Waiting steps out of weft between polls (pause): in a MULTIPLE
        // context that releases the API lock and takes it back, so hold it
        // here as an entry point would (weft_finalize itself does not).
        RuntimeLock lock(rt_);
        if (!progress_until([&] { return !freeing(); }, rt_.op_deadline()))
            WEFT_LOG(warn, "finalizing: a freed communicator's release barrier did not complete");
    }
    p2p_.shutdown();
}

Status Engine::init() {
    // The lowest free slot: a restarted program that makes its contexts
    // in the same order gets the same slots, so its saved handles hold.
    for (uint32_t s = 0; s < max_engines && slot_ == max_engines; ++s) {
        Engine* none = nullptr;
        if (engines[s].compare_exchange_strong(none, this, std::memory_order_acq_rel)) slot_ = s;
    }
    if (slot_ == max_engines)
        return WEFT_FAIL(WEFT_ERR_BUSY, "more than %u contexts are alive in this process", max_engines);
    p2p_.pool().set_engine_slot(slot_);
    p2p_.init();
    registry_.init();
    Status fst = coll_.init();
    if (fst != WEFT_OK) return fst;
    p2p_.register_handlers();
    Status lst = rt_.add_layer(engine_layer, this, {.on_progress = on_progress, .on_peer_gone = on_peer_gone});
    if (lst != WEFT_OK) return lst;
    if (Status st = registry_.make_world()) return st;
    // The world's handle first (comm_handle.hpp): the same place in a
    // restarted process that makes its contexts in the same order.
    return guarded([&] {
        make_comm_shell(*this, world(), /*world=*/true);
        return WEFT_OK;
    });
}

void Engine::pause(Backoff& b) {
    if (!rt_.multi_threaded()) {
        if (gate::closing())
            gate::yield_if_closing();  // a drain runs weft meanwhile
        else if (b.should_block())
            rt_.backend().wait_for_event(200000);  // 0.2 ms: a failure or message wakes it
        else
            b.pause();
        return;
    }
    // Let other threads in while we wait, and a drain past us.
    StepOut out(rt_, StepOut::let_drain_pass);
    b.pause();
}

Status Engine::wait(Request& r, Deadline d) {
    return progress_until([&] { return r.done; }, d) ? WEFT_OK : WEFT_ERR_TIMEOUT;
}

uint32_t Engine::on_progress(void* arg) {
    auto* self = static_cast<Engine*>(arg);
    // Most polls find nothing queued: two inline checks instead of two
    // calls (a poll's cost is a message's latency; bench/RESULTS.md).
    if (self->p2p_.nothing_deferred() && self->coll_.no_schedules()) return 0;
    uint32_t n = self->p2p_.flush_deferred();
    n += self->coll_.advance_schedules();
    return n;
}

void Engine::on_peer_gone(void* arg, uint32_t peer, bool departed) {
    auto* self = static_cast<Engine*>(arg);
    self->p2p_.peer_gone(peer, departed);
    if (departed) return;
    // Collectives over a communicator that contains it fail now, on every
    // survivor (each sees the failure itself), rather than at a timeout.
    self->coll_.fail_with_member(peer, WEFT_ERR_PEER_FAILED);
}

}  // namespace weft::group
