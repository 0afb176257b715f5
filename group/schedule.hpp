// schedule.hpp — a collective as a list of steps, run without blocking.
//
// A schedule is built once when the collective starts (the control path) and
// then advanced from progress: sends and receives of one round are posted
// together on the communicator's collective context (tag = the collective's
// sequence number, so overlapping non-blocking collectives on one
// communicator never cross-match), a fence waits for them, and local steps
// (reduce, copy) run between rounds. Blocking collectives are the
// non-blocking ones plus a wait.
#pragma once

#include "group/engine.hpp"
#include "group/reduce.hpp"

#include <memory>
#include <vector>

namespace weft::group {

struct Step {
    enum Op : uint8_t { send, recv, fence, reduce, copy } op;
    uint32_t peer = 0;             // send/recv: rank in the communicator
    uint8_t* dst = nullptr;        // recv buffer, reduce/copy destination
    const uint8_t* src = nullptr;  // send buffer, reduce/copy source
    size_t bytes = 0;
};

struct Schedule {
    Engine* engine = nullptr;
    Comm* comm = nullptr;
    Request* owner = nullptr;  // the collective's request
    int32_t tag = 0;
    ReduceFn reduce = nullptr;  // acc = acc op src, over bytes / elem_size elements
    size_t elem_size = 1;
    std::vector<Step> steps;
    size_t pc = 0;
    std::vector<Request*> inflight;
    Status error = WEFT_OK;
    bool reported_wait = false;  // logged what a failed schedule still waits for

    Schedule() = default;
    Schedule(const Schedule&) = delete;
    Schedule& operator=(const Schedule&) = delete;
    ~Schedule();
    // Uninitialised scratch of at least n bytes, recycled by the engine
    // (no page faults and no zero-fill per large collective).
    uint8_t* scratch(size_t n);

    void add_send(uint32_t peer, const void* src, size_t bytes) {
        steps.push_back(Step{Step::send, peer, nullptr, static_cast<const uint8_t*>(src), bytes});
    }
    void add_recv(uint32_t peer, void* dst, size_t bytes) {
        steps.push_back(Step{Step::recv, peer, static_cast<uint8_t*>(dst), nullptr, bytes});
    }
    void add_fence() { steps.push_back(Step{Step::fence, 0, nullptr, nullptr, 0}); }
    void add_reduce(void* acc, const void* src, size_t bytes) {
        steps.push_back(Step{Step::reduce, 0, static_cast<uint8_t*>(acc), static_cast<const uint8_t*>(src), bytes});
    }
    void add_copy(void* dst, const void* src, size_t bytes) {
        steps.push_back(Step{Step::copy, 0, static_cast<uint8_t*>(dst), static_cast<const uint8_t*>(src), bytes});
    }

    // Runs steps until one must wait; true when the schedule is finished
    // (successfully or not: see error).
    bool advance();
    // A member failed: abandon the in-flight steps and finish with st.
    void fail(Status st);

private:
    std::unique_ptr<uint8_t[]> scratch_;
    size_t scratch_size_ = 0;
};

}  // namespace weft::group
