// engine.hpp — one context's communicators, point-to-point and collectives:
// the owner of the parts and of waiting.
//
// One Engine per context, created by group::attach right after the
// transport. It composes four parts, each with its own header:
//   Registry    (registry.hpp)   communicators: IDs, clock slots, creation, free
//   P2p         (p2p.hpp)        requests, matching, eager/ssend/rendezvous
//   Collectives (coll.hpp)       schedules and flag collectives
//   DrainPort   (drain_port.hpp) all that drain/ uses of group
// and the BufferPool (buffer_pool.hpp) that holds unexpected messages,
// and it is the group layer's Runtime hooks (progress, peer gone) and the
// place every blocking call waits (progress_until, pause). The parts are
// members, not pointers: a call from one part to another is a direct,
// inlinable call through the Engine, with no dispatch.
//
// Thread affinity: every method runs under the context's API lock when the
// context is MULTIPLE (group/api.cpp takes it), else on the one thread that
// uses the context.
#pragma once

#include "group/coll.hpp"
#include "group/comm.hpp"
#include "group/drain_port.hpp"
#include "group/p2p.hpp"
#include "group/registry.hpp"

namespace weft::group {

class Engine {
public:
    explicit Engine(Runtime& rt);
    ~Engine();
    Engine(const Engine&) = delete;
    Engine& operator=(const Engine&) = delete;
    Status init();
    // Before the transport finalizes: sends owed replies, unexposes buffers.
    void shutdown();

    Runtime& rt() { return rt_; }
    BufferPool& buffers() { return buffers_; }
    Registry& registry() { return registry_; }
    P2p& p2p() { return p2p_; }
    Collectives& coll() { return coll_; }
    DrainPort& drain_port() { return drain_; }
    Comm& world() { return registry_.world(); }
    // This engine's place among the process's engines (one per context),
    // which its requests' C handles carry (p2p.hpp, handle_of).
    uint32_t slot() const { return slot_; }
    static constexpr uint32_t max_engines = 64;
    // The engine in `slot`, or null; the request a C handle names, or
    // null for a NULL handle, or &invalid_request for a handle that names
    // no request (never a live one).
    static Engine* in_slot(uint32_t slot);
    static Request* request_of(weft_request_t handle);
    static Request invalid_request;

    // ------------------------------------------------- waiting
    // Progresses until r is done or the deadline passes (TIMEOUT).
    Status wait(Request& r, Deadline d);
    // One step of progress: transport, replies, pulls, schedules.
    uint32_t poll() { return rt_.progress(); }
    // Waits between polls: spin, yield, then sleep; with MULTIPLE, lets
    // other threads in while it does.
    void pause(Backoff& b);
    // Polls, pausing when idle, until done() holds; false if the deadline
    // passed first. A clock read costs as much as a poll: it looks at the
    // clock every 32nd idle spin. `profile`: how to pause (transport/
    // common.hpp); a wait whose peers are inside the same operation uses
    // collective_partner.
    template <typename Done>
    bool progress_until(Done done, Deadline d, const BackoffProfile& profile = Backoff::transport) {
        Backoff backoff(profile);
        for (uint32_t spins = 0; !done(); ++spins) {
            if (poll() > 0) {
                backoff.reset();
                continue;
            }
            if (done()) break;
            // An abandoned transport (weft_ckpt_release that did not come
            // back) ends every wait as its deadline would.
            if ((spins & 31) == 31 && (d.passed() || rt_.released())) return false;
            pause(backoff);
        }
        return true;
    }

    // Revoke (group/ft.cpp): takes c out of the Collective Clock and fails
    // its posted receives, sends awaiting a reply and active collectives
    // with WEFT_ERR_REVOKED.
    void revoke_pending(Comm& c);

private:
    static uint32_t on_progress(void* arg);
    static void on_peer_gone(void* arg, uint32_t peer, bool departed);

    Runtime& rt_;
    uint32_t slot_ = max_engines;  // none until init
    // Declared in dependency order of their destruction: the buffer pool
    // last (unexpected messages in any queue hold its blocks), then the
    // registry's communicators, the collectives' scratch pool after the
    // request pool (a schedule gives its scratch back when its request goes).
    BufferPool buffers_;
    Registry registry_;
    Collectives coll_;
    P2p p2p_;
    DrainPort drain_;
};

// The engine's entry in its Runtime's layers (hooks: progress, peer gone).
inline constexpr Runtime::LayerKey<Engine> engine_layer{"group.engine"};

}  // namespace weft::group
