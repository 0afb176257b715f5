// ucx_observer.hpp — the failure detector's own path over UCX
// (Backend::observer_channel): a second ucp worker on the weft context's ucp
// context, with an endpoint to every peer's detector worker, used and
// progressed only by the detector thread. Over a NIC (rc) the peer's NIC
// answers its gets and atomics; where UCX emulates them (tcp) the peer's
// detector thread serves them from its own worker, so in neither case does
// an observation wait for the peer's application thread — only a stopped or
// dead process stays silent.
//
// One operation per peer is in flight at a time; its operand and reply live
// in that peer's slot, which outlives the worker. A caller that gives up at
// its deadline leaves the request; the peer's next operation waits for it
// first. close() (any thread) only marks: serve() closes the endpoint on
// the detector thread (the worker is single-threaded). Endpoints are made
// only when the detector takes the channel (bind), not where it reads
// mapped windows itself.
#pragma once

#include "transport/backend.hpp"
#include "transport/runtime.hpp"

#include <ucp/api/ucp.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

namespace weft {

// Progresses `worker` until every endpoint close in `closing` finished or
// `d` passed; frees them all. Returns how many had not finished.
size_t finish_ep_closes(ucp_worker_h worker, std::vector<ucs_status_ptr_t>& closing, Deadline d);
// Starts a force-close of *ep (null after), its request joining `closing`.
void force_close_ep(ucp_ep_h& ep, std::vector<ucs_status_ptr_t>& closing);
// Completes the wire-up of every endpoint in `eps` (those not null): flushes
// them all and progresses `worker` until each flush finished or `d` passed.
// UCX connects lazily, at an endpoint's first use, with a handshake (REQ,
// REP, ACK) that needs both sides; run at init, while every peer is alive
// and progressing, no handshake is left to run when a peer dies later: UCX
// 1.13 aborts ("got REP message", ucp_request.c) when it discards an
// endpoint whose wire-up reply is still queued on a transport endpoint,
// which happens when the peer died mid-handshake (the assertion was removed
// in UCX 1.14: the reply only had to be freed). Returns PEER_FAILED or
// TIMEOUT naming the first peer (by index into eps) that did not complete.
Status wire_up(ucp_worker_h worker, const std::vector<ucp_ep_h>& eps, Deadline d, const char* who);
// The worker's address, for the start-up exchange.
Status worker_address(ucp_worker_h worker, std::vector<uint8_t>& out);
// An endpoint to the worker at `address`; with peer_err_mode, UCX reports
// its failure to cb(arg).
Status create_ep(ucp_worker_h worker, const uint8_t* address, bool peer_err_mode, ucp_err_handler_cb_t cb, void* arg,
                 ucp_ep_h& out);

class UcxObserver final : public ObserverChannel {
public:
    UcxObserver(Runtime& rt, ucp_context_h context) : rt_(rt), context_(context) {}
    ~UcxObserver() override;
    // The worker, and its address for the start-up exchange.
    // err_mode, by peer: its endpoint has UCX's peer error handling (as the
    // backend's endpoint to the same peer, UcxBackend::err_mode_to).
    Status create(uint32_t npeers, std::vector<uint8_t> err_mode, std::vector<uint8_t>& address);
    // Where `peer`'s detector worker is (from the exchange).
    void set_address(uint32_t peer, const uint8_t* address, size_t len) {
        addresses_[peer].assign(address, address + len);
    }
    // Endpoints to every peer's detector worker, and the state window: where
    // it is and its packed keys, by rank.
    Status bind(const weft_window& state_window, const std::vector<std::vector<uint8_t>>& packed_rkeys);
    bool bound() const { return bound_; }

    Status read(uint32_t peer, uint64_t off, uint64_t& v, Deadline d) override;
    Status compare_swap(uint32_t peer, uint64_t off, uint64_t expected, uint64_t desired, uint64_t& old,
                        Deadline d) override;
    Status fetch_add(uint32_t peer, uint64_t off, uint64_t add, uint64_t& old, Deadline d) override;
    void serve() override;
    size_t quiesce(Deadline d) override;
    bool needs_serving() const override { return true; }
    void close(uint32_t peer) {
        peers_[peer].close_wanted.store(true, std::memory_order_release);
        close_pending_.store(true, std::memory_order_release);
    }

private:
    struct alignas(64) Peer {
        ucp_ep_h ep = nullptr;
        ucp_rkey_h rkey = nullptr;
        uint64_t addr = 0;
        void* req = nullptr;  // in flight
        uint64_t operand = 0, reply = 0;
        std::atomic<bool> dead{false}, close_wanted{false};
        UcxObserver* self = nullptr;
        uint32_t index = 0;
        bool err_mode = false;  // force-closing at run time needs it on both sides
    };
    enum class Op { get, cswap, add };
    // a, b: the compare and swap values (cswap) or the addend (add).
    Status run(uint32_t peer, Op op, uint64_t off, uint64_t a, uint64_t b, uint64_t& out, Deadline d);
    bool settle(Peer& p);  // true once p has no request in flight
    void shut(Peer& p);
    [[gnu::cold]] void broke(Peer& p, const char* why);
    static void on_ep_error(void* arg, ucp_ep_h ep, ucs_status_t status);

    Runtime& rt_;
    ucp_context_h context_;
    ucp_worker_h worker_ = nullptr;
    std::unique_ptr<Peer[]> peers_;
    std::vector<std::vector<uint8_t>> addresses_;  // until bind
    uint32_t npeers_ = 0;
    bool bound_ = false;
    std::atomic<bool> close_pending_{false};
    std::vector<ucs_status_ptr_t> closing_;
};

}  // namespace weft
