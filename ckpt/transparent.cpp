// transparent.cpp — weft_ckpt_release / weft_ckpt_rebuild (transparent.hpp).
#include "ckpt/transparent.hpp"

#include "drain/drain.hpp"

#include <weft/comm.h>
#include <weft/drain.h>

#include <chrono>

namespace weft::ckpt {

Status Transparent::release(weft_context_t ctx) {
    {
        std::lock_guard<std::mutex> g(mu_);
        if (state_ != State::running)
            return WEFT_FAIL(WEFT_ERR_BUSY, "weft_ckpt_release: the context is released already (or being released)");
    }
    drain::Drain* drain = rt_.layer(drain::drain_layer);
    if (!drain) return WEFT_FAIL(WEFT_ERR_UNSUPPORTED, "weft_ckpt_release: the drain thread is off (WEFT_DRAIN=0)");
    {
        // The same answer on every rank: nobody goes on alone.
        RuntimeLock lock(rt_);
        std::string why;
        if (!rt_.can_release(why)) return WEFT_FAIL(WEFT_ERR_UNSUPPORTED, "weft_ckpt_release: %s", why.c_str());
    }
    weft_comm_t world = nullptr;
    if (Status st = weft_comm_world(ctx, &world)) return st;
    // Every rank is here; from now on this thread stays out of weft (it
    // only asks for drains, which takes no entry, and waits below), so the
    // held point finds it waiting and it sees the release. A rank still
    // inside a collective when its drain held would wait at the closed
    // gate and never return to call the rebuild.
    if (Status st = weft_barrier(world)) return st;
    const uint64_t started = drain->started();
    {
        std::lock_guard<std::mutex> g(mu_);
        state_ = State::asked;
        outcome_ = WEFT_OK;
    }
    drain->set_hold(held, this);
    auto withdraw = [&](Status st) {
        drain->set_hold(nullptr, nullptr);
        std::lock_guard<std::mutex> g(mu_);
        state_ = State::running;
        return st;
    };
    // Every rank asks (the requests join): a drain whose quiescent point
    // came before every rank had asked to hold holds nowhere, and then
    // each asks again. Ends: the held point comes (released, or its
    // release failed), or a drain fails (its own bounds end it), or twice
    // the drain's timeout passes.
    const Deadline d = Deadline::after_ns(2 * env_u64("WEFT_DRAIN_TIMEOUT_MS", 60000) * 1000000ull);
    uint64_t asked = 0;
    std::unique_lock<std::mutex> lk(mu_);
    for (;;) {
        if (asked == 0 || drain->finished(asked)) {
            lk.unlock();
            if (Status st = drain->request(asked)) return withdraw(st);
            lk.lock();
        }
        if (cv_.wait_for(lk, std::chrono::milliseconds(10), [&] { return state_ != State::asked; })) break;
        const Status failed = drain->failed_since(started);
        if (state_ != State::asked) break;
        if (failed != WEFT_OK || d.passed()) {
            lk.unlock();
            return withdraw(failed != WEFT_OK
                                ? WEFT_FAIL(failed, "weft_ckpt_release: the drain failed; nothing was let go")
                                : WEFT_FAIL(WEFT_ERR_TIMEOUT, "weft_ckpt_release: no drain held its quiescent point"));
        }
    }
    return state_ == State::released ? WEFT_OK : outcome_;
}

void Transparent::held(void* self) { static_cast<Transparent*>(self)->run_held(); }

// The drain thread, holding weft at the quiescent point of every rank.
void Transparent::run_held() {
    std::unique_lock<std::mutex> lk(mu_);
    in_held_ = true;
    lk.unlock();
    const uint64_t t0 = now_ns();
    Status st = rt_.release();
    lk.lock();
    outcome_ = st;
    if (!rt_.released()) {
        // Nothing was let go (the job could not quiesce): the job resumes.
        state_ = State::running;
        in_held_ = false;
        cv_.notify_all();
        return;
    }
    WEFT_LOG(debug, "released in %.3f ms: %s", (now_ns() - t0) / 1e6, weft_strerror(st));
    if (st != WEFT_OK) {
        // Half let go: nothing can be trusted to come back.
        rt_.abandon();
        state_ = State::broken;
        in_held_ = false;
        cv_.notify_all();
        return;
    }
    state_ = State::released;
    cv_.notify_all();
    // A test kills a rank here: its peers' rebuild must fail, not hang.
    lk.unlock();
    WEFT_FAULT_POINT("ckpt.released");
    lk.lock();
    // Ends: weft_ckpt_rebuild or finalize (stop), both the application's
    // to call; a process image may be taken meanwhile, for as long as it
    // takes, so no deadline here (the caller's own deadlines start again
    // once it resumes).
    cv_.wait(lk, [&] { return stopping_ || state_ == State::rebuilding; });
    if (!stopping_) {
        lk.unlock();
        const uint64_t t1 = now_ns();
        st = rt_.rebuild();
        lk.lock();
        outcome_ = st;
        WEFT_LOG(debug, "rebuilt in %.3f ms: %s", (now_ns() - t1) / 1e6, weft_strerror(st));
        if (st == WEFT_OK) {
            state_ = State::running;
        } else {
            // The fabric is half made: the job's threads get errors from
            // now on, and finalize tears down locally.
            rt_.abandon();
            state_ = State::broken;
        }
    }
    in_held_ = false;
    cv_.notify_all();
}

Status Transparent::rebuild() {
    std::unique_lock<std::mutex> lk(mu_);
    if (state_ == State::broken)
        return WEFT_FAIL(WEFT_ERR_BUSY,
                         "weft_ckpt_rebuild: an earlier release or rebuild failed (%s); only weft_finalize is left",
                         weft_strerror(outcome_));
    if (state_ != State::released)
        return WEFT_FAIL(WEFT_ERR_INVALID_ARG, "weft_ckpt_rebuild: the context is not released");
    state_ = State::rebuilding;
    cv_.notify_all();
    // Ends: the drain thread's rebuild is bounded by the operation timeout
    // at each of its steps.
    cv_.wait(lk, [&] { return state_ != State::rebuilding; });
    return state_ == State::running ? WEFT_OK : outcome_;
}

void Transparent::stop() {
    std::unique_lock<std::mutex> lk(mu_);
    stopping_ = true;
    cv_.notify_all();
    // Ends: run_held returns once it sees stopping_ (or its rebuild ends).
    cv_.wait(lk, [&] { return !in_held_; });
}

}  // namespace weft::ckpt
