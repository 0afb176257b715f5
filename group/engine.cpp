// engine.cpp — the owner of the parts: bringing them up and down in order,
// the group layer's Runtime hooks, and waiting.
#include "group/engine.hpp"

#include "group/schedule.hpp"

namespace weft::group {

Engine::Engine(Runtime& rt) : rt_(rt), registry_(*this), coll_(*this), p2p_(*this), drain_(*this) {}

Engine::~Engine() { rt_.remove_layer(engine_layer); }

void Engine::shutdown() { p2p_.shutdown(); }

Status Engine::init() {
    p2p_.init();
    registry_.init();
    Status fst = coll_.init();
    if (fst != WEFT_OK) return fst;
    p2p_.register_handlers();
    Status lst = rt_.add_layer(engine_layer, this, {.on_progress = on_progress, .on_peer_gone = on_peer_gone});
    if (lst != WEFT_OK) return lst;
    return registry_.make_world();
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
