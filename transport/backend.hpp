// backend.hpp — what a transport backend provides, and the window it serves.
//
// Control path (window creation, active-message send, progress) goes through
// the virtual Backend interface: these calls are rare or already amortise a
// message. The RMA/atomic hot path does not: each window carries a pointer to
// its backend's RmaOps table, chosen once when the window is created, so a
// put is one validated call through a fixed function pointer — no switch, no
// virtual lookup, no allocation (the same binding UCX uses for uct ifaces).
#pragma once

#include "transport/common.hpp"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace weft {
class Runtime;
}

struct weft_window;

namespace weft {

// What an origin needs to reach one rank's part of a window.
struct RemoteRegion {
    uint8_t* direct = nullptr;  // shm: the region mapped into this process
    uint64_t addr = 0;          // the region's address in the owner's process
    uint64_t size = 0;          // bytes the owner exposed
    void* rkey = nullptr;       // ucx: unpacked remote key
    uint32_t rkey32 = 0;        // verbs: the memory region's remote key
    int32_t pid = 0;            // shm user memory: owner pid (cross-memory attach)
};

// A buffer lent for one pull (see Backend::expose).
struct ExposedBuffer {
    uint64_t addr = 0;
    std::vector<uint8_t> key;  // opaque to the caller; travels to the puller
    void* handle = nullptr;    // the backend's registration
};

struct RmaOps {
    Status (*put)(weft_window* w, uint32_t rank, uint64_t off, const void* src, size_t len);
    Status (*get)(weft_window* w, uint32_t rank, uint64_t off, void* dst, size_t len);
    Status (*fetch_add)(weft_window* w, uint32_t rank, uint64_t off, uint64_t v, uint64_t* old);
    Status (*compare_swap)(weft_window* w, uint32_t rank, uint64_t off, uint64_t expected, uint64_t desired,
                           uint64_t* old);
    Status (*swap)(weft_window* w, uint32_t rank, uint64_t off, uint64_t v, uint64_t* old);
};

// One-sided access to 64-bit words of peers' state windows for the failure
// detector's own thread, on transport resources the application's path never
// touches (verbs: a second RC QP per peer on a CQ of its own). Observing a
// peer then needs neither the peer's CPU (a stopped process's NIC still
// answers) nor this process's application thread, and never races it. One
// thread uses a channel. Offsets are into the state window. Every call
// returns by `d`: TIMEOUT if the answer has not come (the peer's next call
// first waits for that late answer); PEER_FAILED once the channel to the
// peer broke, which the channel itself declared.
class ObserverChannel {
public:
    virtual ~ObserverChannel() = default;
    virtual Status read(uint32_t peer, uint64_t off, uint64_t& v, Deadline d) = 0;
    virtual Status compare_swap(uint32_t peer, uint64_t off, uint64_t expected, uint64_t desired, uint64_t& old,
                                Deadline d) = 0;
    virtual Status fetch_add(uint32_t peer, uint64_t off, uint64_t add, uint64_t& old, Deadline d) = 0;
    // Where peers' operations are served by this process's software (UCX's
    // emulation over tcp), the detector thread calls serve() at least every
    // millisecond; elsewhere (a NIC answers) never.
    virtual bool needs_serving() const { return false; }
    virtual void serve() {}
    // Waits, serving, for the answers still out (a read that timed out
    // leaves its answer to come later) until none is or `d` passes; returns
    // how many are left. Finalize calls it before its barrier, while every
    // peer still serves: freed with its answer still out, a request is one
    // UCX reports at exit ("was not returned to mpool ucp_requests").
    virtual size_t quiesce(Deadline d) {
        (void)d;
        return 0;
    }
};

// How an idle runtime thread (the drain thread, docs/drain.md) should look
// for work when nothing else wakes it.
enum class IdlePoll : uint8_t {
    woken,     // peers wake it through memory mapped here (a futex): a look only bounds the sleep
    frequent,  // peers' operations may wait for its progress: look often
    sparse,    // the NIC serves peers; a look is only a wake-up nobody asked for: look rarely
};

// What the runtime's own threads need to know about a backend, fixed for its
// life. Code chooses behaviour by these, never by the backend's name, so a
// new backend states its nature in one place (docs/transports.md).
struct InternalCaps {
    // Peers' puts and atomics on this process's memory complete only while
    // it calls progress(): software serves them (UCX's emulated atomics over
    // tcp; its endpoints also queue RMA behind active messages not yet taken
    // in). False where the CPU (mapped memory) or the NIC serves them.
    bool remote_ops_need_target_progress = false;
    // A peer's messages to this process wait on transport traffic that this
    // process sends only from progress() (verbs: returned receive credits;
    // UCX: its protocol's replies). False where a sender writes straight
    // into memory the receiver maps and nothing goes back (shm's rings).
    bool messages_need_target_progress = false;
    IdlePoll idle_poll = IdlePoll::frequent;
};

class Backend {
public:
    virtual ~Backend() = default;
    virtual const char* name() const = 0;
    virtual void query_caps(weft_caps_t& caps) const = 0;
    virtual InternalCaps internal_caps() const = 0;

    // Collective over the job. With `allocate`, the backend provides `size`
    // zeroed, 64-byte aligned bytes (w.local_base); otherwise it exposes
    // [base, base+size). Fills w.ops and w.remote.
    virtual Status window_create(weft_window& w, bool allocate, void* base, size_t size) = 0;
    // Local teardown (the caller has already synchronised the job).
    virtual void window_destroy(weft_window& w) = 0;
    virtual Status flush(weft_window& w, uint32_t rank) = 0;

    virtual size_t am_eager_limit() const = 0;
    virtual Status am_send(uint32_t peer, uint32_t id, const void* payload, size_t len) = 0;

    // Finalize, before its last barrier (every live peer of the job is still
    // there): sends active message `id` to each of `peers` (those not known
    // failed), and returns once what this process sent to them (messages,
    // puts) has completed at the peers or `d` passed. After the barrier peers exit as
    // they like, so nothing may be left in flight then. A peer that cannot
    // be reached here is not an error of finalize (another job's ranks
    // finalize on their own schedule; a failure is reported by the failure
    // path): backends log it at debug.
    // The default sends with am_send (shm: into the peer's ring; verbs: an
    // RC send, complete once the peer's NIC acknowledged it).
    virtual void depart(std::span<const uint32_t> peers, uint32_t id, const void* payload, size_t len, Deadline d) {
        (void)d;
        for (uint32_t p : peers) am_send(p, id, payload, len);
    }

    // Delivers arrived messages (through Runtime::deliver_am); never blocks.
    // Reentrant: a handler it runs may call back into the backend.
    virtual uint32_t progress() = 0;
    // Sleeps until something may have arrived or timeout_ns passed; may
    // return early. Called only after progress() found nothing.
    virtual void wait_for_event(uint64_t timeout_ns) = 0;
    // Wakes a wait_for_event on this process (thread-safe; the peer monitor
    // calls it when it declares a failure).
    virtual void wake() = 0;
    // Called once, on the application thread, when peer is declared failed.
    virtual void peer_failed(uint32_t peer) { (void)peer; }
    // The observer channel over the state window (made by this backend), or
    // null where the transport has none. Owned by the backend.
    virtual ObserverChannel* observer_channel(const weft_window& state_window) {
        (void)state_window;
        return nullptr;
    }

    // Zero-copy rendezvous for point-to-point messages: the sender exposes
    // its buffer, sends {addr, key} in a small message, and the receiver
    // pulls straight into the matched receive buffer. Backends that cannot
    // answer UNSUPPORTED and the caller sends the payload as an active
    // message instead (one more copy, same semantics).
    virtual Status expose(const void* buf, size_t len, ExposedBuffer& out) {
        (void)buf, (void)len, (void)out;
        return WEFT_ERR_UNSUPPORTED;
    }
    virtual void unexpose(ExposedBuffer& b) { (void)b; }
    // Whether a buffer exposed for `peer` may be pulled by it (expose works
    // for this backend): UCX answers false for a peer whose endpoint has
    // peer error handling, where a puller's death aborts the exposer
    // (UcxBackend::expose). Asked on the large-message path only.
    virtual bool zero_copy_to(uint32_t peer) const {
        (void)peer;
        return true;
    }
    // Blocking read of [addr, addr+len) that `peer` exposed with `key`.
    virtual Status pull(uint32_t peer, uint64_t addr, const uint8_t* key, size_t key_len, void* dst, size_t len) {
        (void)peer, (void)addr, (void)key, (void)key_len, (void)dst, (void)len;
        return WEFT_ERR_UNSUPPORTED;
    }
    // Blocking write of src into [addr, addr+len) that `peer` exposed with
    // `key`: the other half of a copy both sides share (group/coll_shm.cpp,
    // the two-member bcast).
    virtual Status push_into(uint32_t peer, uint64_t addr, const uint8_t* key, size_t key_len, const void* src,
                             size_t len) {
        (void)peer, (void)addr, (void)key, (void)key_len, (void)src, (void)len;
        return WEFT_ERR_UNSUPPORTED;
    }

    // Transparent checkpointing (weft_ckpt_release/_rebuild, docs/checkpoint.md).
    // The runtime calls these with weft held and nothing in transit (it
    // quiesced the job first), `windows` the live windows in creation order.
    // release: every fabric resource goes — peers' mappings, this process's
    // segment or registrations, endpoints, workers, devices — and each
    // window's local memory stays where it was, with its contents, as
    // private memory of this process; w.ops answers BUSY until the rebuild.
    // rebuild: collective over the job; the resources come back and each
    // window is reachable again with its memory at the same local address
    // (w.remote refilled, w.ops bound again). Between the two the backend
    // is called for nothing else. A backend that cannot says why here:
    virtual bool can_release(std::string& why) const {
        why = std::string(name()) + " cannot release its resources yet";
        return false;
    }
    // Quiescing before a release (Runtime::quiesce): returns once what this
    // process sent has arrived at its peers (not necessarily handled). A
    // backend whose sends land at once (shm's rings) has nothing to do.
    virtual Status complete_sends(Deadline d) {
        (void)d;
        return WEFT_OK;
    }
    virtual Status release(std::span<weft_window* const> windows) {
        (void)windows;
        return WEFT_ERR_UNSUPPORTED;
    }
    virtual Status rebuild(std::span<weft_window* const> windows) {
        (void)windows;
        return WEFT_ERR_UNSUPPORTED;
    }
};

// What a released window's operations answer (backends bind it at release).
extern const RmaOps released_ops;

// Constructs B(rt) and runs its init(); `out` is set only on success.
template <typename B>
Status make_backend(Runtime& rt, std::unique_ptr<Backend>& out) {
    auto b = std::make_unique<B>(rt);
    Status st = b->init();
    if (st != WEFT_OK) return st;
    out = std::move(b);
    return WEFT_OK;
}

Status create_shm_backend(Runtime& rt, std::unique_ptr<Backend>& out);
Status create_ucx_backend(Runtime& rt, std::unique_ptr<Backend>& out);  // UNSUPPORTED if not built
bool ucx_backend_built();
Status create_verbs_backend(Runtime& rt, std::unique_ptr<Backend>& out);  // UNSUPPORTED if not built
bool verbs_backend_built();

}  // namespace weft

// The C handle. Lives in the global namespace to match weft.h's typedef.
struct weft_window {
    static constexpr uint64_t live_magic = 0x57494e444f574c56ull;  // "WINDOWLV"
    static constexpr uint64_t dead_magic = 0x57494e444f57444eull;  // "WINDOWDN"

    uint64_t magic = live_magic;
    weft::Runtime* rt = nullptr;
    const weft::RmaOps* ops = nullptr;
    uint32_t nranks = 0;
    weft::RemoteRegion* remote = nullptr;  // [nranks], points into remote_storage
    uint8_t* local_base = nullptr;
    size_t local_size = 0;
    bool allocated = false;        // memory belongs to weft
    bool state = false;            // the pinned state window
    void* backend_data = nullptr;  // owned by the backend
    std::vector<weft::RemoteRegion> remote_storage;
    // Failed targets a flush(WEFT_RANK_ALL) already reported (docs/fault-tolerance.md:
    // a failure surfaces at the next synchronisation, once).
    std::vector<uint8_t> failure_reported;
    // By rank: failed and recognised by weft_window_validate (weft/ft.h);
    // operations on it are PROC_NULL. Looked at only once a target failed.
    std::vector<uint8_t> proc_null;
};
