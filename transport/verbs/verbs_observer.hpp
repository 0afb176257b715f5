// verbs_observer.hpp — the failure detector's own path to peers' state
// windows over verbs (Backend::observer_channel): one small RC QP per peer
// on a CQ of its own, created and connected with the application's QPs at
// init and used only by the detector thread. A SIGSTOPped or busy process's
// NIC still answers its RDMA reads, so its heartbeat is observed without its
// CPU; a dead one's QP errors out (retry exceeded) and is declared.
//
// One operation per peer is in flight at a time: its result lands in that
// peer's word of a registered buffer. A caller that gives up at its deadline
// leaves the operation posted; the peer's next operation waits for it first.
#pragma once

#include "transport/backend.hpp"
#include "transport/runtime.hpp"

#include <infiniband/verbs.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

namespace weft::verbs {

class VerbsObserver final : public ObserverChannel {
public:
    explicit VerbsObserver(Runtime& rt) : rt_(rt) {}
    ~VerbsObserver() override;
    // Creates the CQ, the result buffer and a QP (in INIT) per peer.
    Status create(ibv_context* ctx, ibv_pd* pd, uint8_t port, uint32_t npeers);
    ibv_qp* qp(uint32_t peer) const { return qps_[peer]; }
    // The state window's remote addresses and keys (after it exists).
    void bind(const weft_window& state_window);

    Status read(uint32_t peer, uint64_t off, uint64_t& v, Deadline d) override;
    Status compare_swap(uint32_t peer, uint64_t off, uint64_t expected, uint64_t desired, uint64_t& old,
                        Deadline d) override;
    Status fetch_add(uint32_t peer, uint64_t off, uint64_t add, uint64_t& old, Deadline d) override;

private:
    Status run(uint32_t peer, ibv_send_wr& wr, uint64_t& out, Deadline d);
    Status atomic(ibv_wr_opcode op, uint32_t peer, uint64_t off, uint64_t compare_add, uint64_t swap, uint64_t& old,
                  Deadline d);
    // Takes every completion there is.
    void reap();
    [[gnu::cold]] void broke(uint32_t peer, const char* why);

public:
    // Moves the QP to the peer into ERR (fencing: a declared peer's
    // observer can no longer read or update our window through it).
    void close(uint32_t peer);

private:
    Runtime& rt_;
    ibv_cq* cq_ = nullptr;
    std::vector<ibv_qp*> qps_;
    uint64_t* results_ = nullptr;  // one word per peer, registered
    ibv_mr* results_mr_ = nullptr;
    std::vector<uint8_t> busy_;
    std::unique_ptr<std::atomic<bool>[]> dead_;  // close() may come from the application thread
    std::vector<uint64_t> addr_;                 // state window of each peer
    std::vector<uint32_t> rkey_;
};

}  // namespace weft::verbs
