// transparent.hpp — hooks for transparent checkpointers (DMTCP, CRIU):
// weft_ckpt_release and weft_ckpt_rebuild (weft/ckpt.h, docs/checkpoint.md).
//
// A release is a held drain: every rank asks the drain to hold its next
// quiescent point (Drain::set_hold), rank 0 asks for the drain, and at that
// point each rank's drain thread, holding weft, quiesces the transport and
// lets go of every fabric resource (Runtime::release), tells the caller,
// and waits — still holding weft, so no application thread gets in — until
// weft_ckpt_rebuild asks it to make them again (Runtime::rebuild) or the
// context is finalized. Then the drain ends and the job resumes.
//
// Thread affinity: release and rebuild from any application thread, one
// at a time per rank; held() on the drain thread; stop() from finalize.
#pragma once

#include "transport/runtime.hpp"

#include <weft/weft.h>

#include <condition_variable>
#include <mutex>

namespace weft::ckpt {

class Transparent {
public:
    explicit Transparent(Runtime& rt) : rt_(rt) {}
    ~Transparent() { stop(); }
    Transparent(const Transparent&) = delete;
    Transparent& operator=(const Transparent&) = delete;

    Status release(weft_context_t ctx);
    Status rebuild();
    // Finalize: a held point still waiting for its rebuild ends without
    // one (the Runtime stays released and finalizes locally).
    void stop();

private:
    enum class State {
        running,     // nothing held
        asked,       // release asked: waiting for the held point
        released,    // held, resources gone: waiting for rebuild or stop
        rebuilding,  // rebuild asked, the drain thread at it
        broken,      // a release or rebuild failed: the runtime is abandoned, only finalize is left
    };
    static void held(void* self);
    void run_held();

    Runtime& rt_;
    std::mutex mu_;
    std::condition_variable cv_;
    State state_ = State::running;
    bool in_held_ = false;      // the drain thread is inside run_held()
    bool stopping_ = false;     // finalize
    Status outcome_ = WEFT_OK;  // of the last release or rebuild step
};

}  // namespace weft::ckpt
