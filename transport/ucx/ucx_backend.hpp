// ucx_backend.hpp — the UCX (ucp) backend.
//
// One ucp context (RMA | AMO64 | AM | WAKEUP) and one worker per weft
// context; an endpoint to every process of the universe, created at init
// from worker addresses exchanged over the bootstrap. Windows are ucp memory
// regions whose packed rkeys travel over the bootstrap; put/get/atomics are
// ucp_*_nbx calls on the owner's endpoint, completed by polling the returned
// request. Active messages share one UCX AM id; the weft handler id and the
// sender's universe index ride in the AM user header.
//
// Two UCX rules shape the code:
//  * ucp_worker_progress must not run inside a UCX callback, and a weft
//    handler may send (which progresses). So the AM callback only queues the
//    arrival (transport/arrivals.hpp); progress() dispatches the queue after
//    ucp_worker_progress has returned.
//  * A request we stop waiting for (timeout, dead peer) may still complete
//    later and write its reply buffer. Buffers UCX may still touch therefore
//    never live on the stack: they sit in backend-owned slots, and an
//    abandoned slot is retired (kept alive until the worker is destroyed)
//    rather than reused.
//
// Control path (ucx_backend.cpp): context, worker and endpoints, windows,
// active messages, progress, errors. Datapath (ucx_datapath.cpp): put, get
// and atomics through the window's RmaOps table, and the wait for a request
// they may need.
#pragma once

#include "transport/arrivals.hpp"
#include "transport/backend.hpp"
#include "transport/runtime.hpp"
#include "transport/ucx/ucx_observer.hpp"

#include <ucp/api/ucp.h>

#include <memory>
#include <vector>

namespace weft::ucx {

// Every weft active message uses this UCX AM id.
constexpr unsigned weft_am_id = 0x77;
// Payloads up to this size go eagerly (UCP_AM_SEND_FLAG_EAGER, copied by the
// receiver); larger ones by rendezvous (UCP_AM_SEND_FLAG_RNDV, pulled into a
// receiver buffer). 8 KiB is about one shm FIFO element / one tcp bcopy.
constexpr size_t eager_limit = 8192;
// Allocated windows are at least this big in UCX so that a zero-byte window
// still has an aligned, valid base.
constexpr size_t min_alloc = 64;

// The AM user header.
struct AmHeader {
    uint32_t id;            // weft handler id
    uint32_t src_universe;  // sender's universe index (peer indices differ per job)
};
static_assert(sizeof(AmHeader) == 8);

// Buffers UCX reads or writes until a request completes (see the file
// comment). One cache line so a retired slot never shares one with its
// successor.
struct alignas(64) Slot {
    uint64_t operand = 0;  // atomics: the value (CSWAP: the compare value)
    uint64_t reply = 0;    // atomics: CSWAP's swap value in, previous value out
    AmHeader header{};     // am_send: the user header
};

class UcxBackend;

struct Endpoint {
    ucp_ep_h ep = nullptr;
    UcxBackend* backend = nullptr;
    uint32_t peer = 0;
    bool dead = false;      // failed: operations fail fast, no flush
    bool err_mode = false;  // UCX peer error handling (UcxBackend::err_mode_to)
    bool dirty = false;     // a put was issued since the last flush
};

struct WindowData {
    UcxBackend* backend = nullptr;
    ucp_mem_h memh = nullptr;
    size_t map_len = 0;  // what ucp_mem_map mapped (an allocated window: at least min_alloc)
    bool owned = false;  // an allocated window whose memory weft mapped itself (no shm: see window_create)
    // The state window's packed keys by rank, kept until the observer
    // channel is bound (its endpoints need them too).
    std::vector<std::vector<uint8_t>> packed_rkeys;
};

// A rendezvous message's pull into `buf` (the arrivals queue's per-message
// state; reset when its record is recycled).
struct RndvPull {
    void* desc = nullptr;  // until handed to ucp_am_recv_data_nbx
    void* req = nullptr;   // the receive request while in progress
    uint8_t* buf = nullptr;
    size_t len = 0;
    bool done = false;
    ucs_status_t status = UCS_OK;
};
using Arrival = Arrivals<RndvPull>::Record;

// ----------------------------------------------------------------- backend
class UcxBackend final : public Backend {
public:
    explicit UcxBackend(Runtime& rt) : rt_(rt) {}
    ~UcxBackend() override;
    Status init();

    const char* name() const override { return "ucx"; }
    InternalCaps internal_caps() const override { return {true, true, IdlePoll::frequent}; }
    void query_caps(weft_caps_t& c) const override {
        const bool local = rt_.all_same_host();
        c.transport = "ucx";
        // Over shm UCX's atomics on ucp_mem_map(ALLOCATE) memory are CPU
        // atomics on the mapped segment; over tcp they are AM-emulated.
        c.atomics = shm_possible_ && local ? WEFT_ATOMICS_CPU : WEFT_ATOMICS_EMULATED;
        c.atomics_registered = WEFT_ATOMICS_EMULATED;
        c.atomic_scope = WEFT_ATOMIC_SCOPE_GLOBAL;
        c.ordered_puts = 0;
        c.peer_failure_immediate = local ? 1 : 0;  // weft's pidfd monitor
        c.am_eager_limit = eager_limit;
        c.am_max_size = WEFT_AM_MAX_SIZE;
    }
    Status window_create(weft_window& w, bool allocate, void* base, size_t size) override;
    void window_destroy(weft_window& w) override;
    Status flush(weft_window& w, uint32_t rank) override;
    size_t am_eager_limit() const override { return eager_limit; }
    Status am_send(uint32_t peer, uint32_t id, const void* payload, size_t len) override;
    void depart(std::span<const uint32_t> peers, uint32_t id, const void* payload, size_t len, Deadline d) override;
    uint32_t progress() override;
    void wait_for_event(uint64_t timeout_ns) override;
    void wake() override { ucp_worker_signal(worker_); }
    void peer_failed(uint32_t peer) override {
        kill_endpoint(peer);
        if (observer_ && peer < rt_.size()) observer_->close(peer);
    }
    ObserverChannel* observer_channel(const weft_window& state_window) override;
    // Transparent checkpointing (backend.hpp). Allocated windows keep their
    // address: UCX maps them again there (UCP_MEM_MAP_FIXED).
    bool can_release(std::string&) const override { return true; }
    Status complete_sends(Deadline d) override;
    Status release(std::span<weft_window* const> windows) override;
    Status rebuild(std::span<weft_window* const> windows) override;
    Status expose(const void* buf, size_t len, ExposedBuffer& out) override;
    bool zero_copy_to(uint32_t peer) const override { return !eps_[peer].err_mode; }
    void unexpose(ExposedBuffer& b) override;
    Status pull(uint32_t peer, uint64_t addr, const uint8_t* key, size_t key_len, void* dst, size_t len) override;

    // ------------------------------------------------------- datapath
    // (ucx_datapath.cpp; called through the window's RmaOps table). Each
    // returns once the operation's local buffers are complete (put: src
    // reusable; get/atomics: result in place).
    Status put(const RemoteRegion& r, uint32_t rank, uint64_t off, const void* src, size_t len);
    Status get(const RemoteRegion& r, uint32_t rank, uint64_t off, void* dst, size_t len);
    // CSWAP: operand = compare value, reply = swap value in / old value out
    // (ucp.h's atomic table: Result=Y; if (X==Y) Y=Z with X=buffer,
    // Z=reply_buffer).
    Status atomic(ucp_atomic_op_t op, const RemoteRegion& r, uint32_t rank, uint64_t off, uint64_t operand,
                  uint64_t reply_in, uint64_t* old);

private:
    static ucs_status_t on_am(void* arg, const void* header, size_t header_length, void* data, size_t length,
                              const ucp_am_recv_param_t* param);
    static void on_ep_error(void* arg, ucp_ep_h ep, ucs_status_t status);

    // Waits for a request; frees it (or abandons it) in every case. Polls
    // spin_polls times first, then wait_long: the deadline, the backoff and
    // the failed-peer handling.
    [[gnu::noinline]] Status complete(ucs_status_ptr_t req, uint32_t peer, const char* what);
    [[gnu::noinline]] Status wait_long(ucs_status_ptr_t req, uint32_t peer, const char* what);
    // Over tcp an answer takes ~10 µs and a poll about 0.3 µs; 256 polls
    // cover the typical emulated atomic or get, and stay far below a
    // scheduler quantum when the peer shares our core (oversubscribed).
    static constexpr uint32_t spin_polls = 256;
    [[gnu::cold]] Status dead_endpoint(uint32_t peer, const char* what) {
        return WEFT_FAIL(WEFT_ERR_PEER_FAILED, "ucx %s: peer %u has failed", what, peer);
    }
    [[gnu::cold]] void abandon(void* req);
    void start_rndv();
    uint32_t dispatch();
    Status unpack_window(weft_window& w, const std::vector<std::vector<uint8_t>>& all, bool allocate, void* base);
    // Packs the window's key (when mapped), all-gathers every rank's record
    // over the job and unpacks them into w (window_create, rebuild). kind:
    // 0 allocated, 1 registered, 2 this rank failed (every rank fails).
    Status publish_window(weft_window& w, WindowData* data, uint8_t kind, uint8_t* local, bool allocate);
    // Everything init made, in the order UCX needs it gone (the destructor,
    // release); the members are left as before init.
    void teardown();

    Runtime& rt_;
    ucp_context_h context_ = nullptr;
    ucp_worker_h worker_ = nullptr;
    int efd_ = -1;
    bool shm_possible_ = true;
    bool peer_err_mode_ = false;  // every endpoint has peer error handling (no shm anywhere)
    // Whether the endpoint to p has UCX's peer error handling: where shm
    // is excluded, and to a peer on another host, which shm cannot reach
    // anyway (UCX then reports a reset connection at once: a lost node is
    // known from the transport, not one heartbeat period later). Never to
    // a peer on this host while shm may be used: with it UCX would leave
    // out its shared-memory transports. Equal on both sides of a pair, as
    // a force-close needs (ucp.h).
    bool err_mode_to(uint32_t p) const { return !shm_possible_ || !rt_.peer(p).same_host; }
    bool closing_ = false;                  // destructor: endpoint errors are our own force-close
    std::vector<ucs_status_ptr_t> killed_;  // force-closes in progress, finished by the destructor
    void kill_endpoint(uint32_t peer);
    void force_close(Endpoint& e);
    std::vector<Endpoint> eps_;  // by peer index; never resized after init (callback args)
    Slot* slot_ = nullptr;
    std::vector<Slot*> retired_;                // slots of abandoned requests, freed after the worker
    Arrivals<RndvPull> arrivals_{eager_limit};  // queued for progress(); FIFO per source
    std::vector<ucs_status_ptr_t> flush_reqs_;
    // depart(): its message's header and payload, which UCX may read until
    // its requests complete (they are abandoned at the deadline), so they
    // live as long as the backend.
    AmHeader depart_header_{};
    std::vector<uint8_t> depart_payload_;
    std::unique_ptr<UcxObserver> observer_;  // the failure detector's worker
};

}  // namespace weft::ucx
