// verbs_backend.hpp — the verbs (rdma-core) backend: one RC queue pair per
// peer (self included: the loopback QP), one CQ, windows as memory regions;
// plus the failure detector's own small QP per peer (verbs_observer.hpp).
//
// Control path (verbs_backend.cpp): device and QP bring-up, windows, active
// messages, progress, errors. Datapath (this header and verbs_datapath.cpp):
// put/get/atomics posted straight to the peer's QP and completed by polling
// the CQ in user space — no allocation, lock, syscall (rxe's doorbell aside)
// or virtual call per operation.
//
// Resources per peer, sized at init and never grown:
//   * send queue: sq_depth WRs. Only every signal_every-th WR (and every WR
//     someone waits for) asks for a completion: a signalled completion on an
//     RC QP retires every earlier WR of that QP, which is all the origin
//     needs to know (verbs trap: an all-unsignalled SQ fills up and never
//     drains — hence the "nudge", a signalled 8-byte write, when a waiter
//     finds nothing signalled in flight).
//   * staging ring: puts too big to inline and all gets go through a
//     registered bounce buffer, so the caller's buffer needs no
//     registration and is reusable on return. Ring space is reclaimed as
//     completions retire WRs.
//   * receive slots: recv_slots pre-posted buffers of recv_slot_size for
//     eager active messages. The sender holds one credit per slot; the
//     receiver returns credits by RDMA-writing a cumulative "freed" counter
//     into the sender's control region (no receive consumed, no RNR ever).
//   * control words (PeerCtrl): credits and rendezvous completions written by
//     the peer, the atomic result buffer, source words for our own writes.
//
// Transparent checkpointing (weft_ckpt_release/_rebuild): the release
// deregisters the windows (their memory is weft's or the program's and
// stays) and tears everything else down, device context included; the
// rebuild is init() again and every window registered where it was.
//
// Failures: any work completion with an error status (retry exceeded from a
// dead peer, remote access error, ...) moves that QP to ERR and declares the
// peer failed (Runtime::declare_failed) — the immediate source of the
// failure detector. Waits give up when the peer is declared failed by
// anyone, or at the context deadline.
#pragma once

#include "transport/arrivals.hpp"
#include "transport/backend.hpp"
#include "transport/runtime.hpp"
#include "transport/verbs/verbs_cm.hpp"
#include "transport/verbs/verbs_device.hpp"
#include "transport/verbs/verbs_observer.hpp"

#include <infiniband/verbs.h>

#include <atomic>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

namespace weft::verbs {

constexpr uint32_t sq_depth = 256;                 // send WRs per QP
constexpr uint32_t sq_data_limit = sq_depth - 4;   // data WRs; the rest is for credits, FIN, nudge
constexpr uint32_t signal_every = 64;              // selective signalling interval
constexpr uint32_t recv_slots = 32;                // pre-posted receives per peer = AM credits
constexpr uint32_t credit_batch = recv_slots / 4;  // credits returned in batches of this
constexpr size_t recv_slot_size = 8192;            // = the eager limit
constexpr size_t stage_size = 256 * 1024;          // staging ring per QP
constexpr size_t stage_chunk = 32 * 1024;          // largest staged WR
constexpr size_t rndv_chunk = 64u << 20;           // largest rendezvous read WR
constexpr uint32_t requested_inline = 128;
constexpr int wc_batch = 32;
constexpr uint32_t spin_polls = 4096;  // CQ polls before a wait reads the clock
static_assert(signal_every * 2 <= sq_data_limit, "a full SQ always holds a signalled WR");
static_assert(stage_chunk * 4 <= stage_size, "get batches 4 chunks per round");
static_assert(credit_batch >= 1 && credit_batch < recv_slots);
static_assert((sq_depth & (sq_depth - 1)) == 0);

// wr_id: bit 63 = receive, bits 32..62 = peer, bits 0..31 = sequence number
// (send: the WR's 1-based count on its QP) or receive slot.
constexpr uint64_t wr_recv_bit = 1ull << 63;
inline uint64_t make_wr_id(bool recv, uint32_t peer, uint32_t low) {
    return (recv ? wr_recv_bit : 0) | (uint64_t(peer) << 32) | low;
}

// Immediate data of an active-message send: the weft handler id and a kind.
enum class AmKind : uint32_t { eager = 0, rts = 1 };
inline uint32_t make_imm(uint32_t id, AmKind k) { return id | (static_cast<uint32_t>(k) << 8); }

// A rendezvous request: the receiver pulls [addr, addr+len) with RDMA reads.
struct RtsMsg {
    uint64_t addr;
    uint64_t len;
    uint64_t seq;  // the sender's rendezvous count; echoed as the FIN
    uint32_t rkey;
    uint32_t pad;
};

// One per universe peer, in the registered control region (REMOTE_WRITE).
struct alignas(64) PeerCtrl {
    uint64_t freed;          // written by the peer: how many of our messages it consumed
    uint64_t rndv_done;      // written by the peer: how many of our rendezvous it pulled
    uint64_t atomic_result;  // NIC-written reply of our atomics to the peer
    uint64_t freed_src;      // source words of our writes to the peer
    uint64_t rndv_src;
};
static_assert(sizeof(PeerCtrl) == 64);

struct Conn {
    ibv_qp* qp = nullptr;
    uint32_t peer = 0;
    bool dead = false;   // QP in error or peer failed: fail fast, no waiting
    bool dirty = false;  // something posted since the last flush
    bool in_service = false;
    uint64_t posted = 0;         // data+control WRs posted
    uint64_t completed = 0;      // WRs known retired
    uint64_t last_signaled = 0;  // seq of the newest signalled WR
    // Staging ring (monotonic byte counters).
    uint8_t* stage = nullptr;
    uint64_t stage_head = 0, stage_tail = 0;
    uint64_t stage_end[sq_depth] = {};  // stage_head after WR seq (index seq % sq_depth)
    // Peer's control slot for us.
    uint64_t remote_ctrl = 0;
    uint32_t remote_ctrl_rkey = 0;
    PeerCtrl* ctrl = nullptr;  // our slot for this peer
    // Active messages.
    uint8_t* recv = nullptr;  // [recv_slots * recv_slot_size]
    uint64_t am_sent = 0, rndv_sent = 0;
    uint64_t freed = 0, freed_returned = 0;       // receive slots consumed / reported
    uint64_t rndv_pulled = 0, rndv_returned = 0;  // rendezvous completed / reported
    uint32_t rndv_reading = 0;                    // rendezvous reads in flight

    uint32_t inflight() const { return static_cast<uint32_t>(posted - completed); }
    // Unsignalled WRs in flight and nothing signalled behind them: no
    // completion will ever come unless we ask for one (nudge).
    bool unsignalled_tail() const { return posted > completed && last_signaled <= completed; }
};

// A rendezvous message's pull (the arrivals queue's per-message state):
// into rbuf, registered as mr while the reads run.
struct RndvPull {
    RtsMsg rts{};
    std::unique_ptr<uint8_t[]> rbuf;
    ibv_mr* mr = nullptr;
    uint64_t read_seq = 0;
    bool done = false, failed = false;
};
using Arrival = Arrivals<RndvPull>::Record;

struct WindowData;
struct ConnRecord;

class VerbsBackend final : public Backend {
public:
    explicit VerbsBackend(Runtime& rt) : rt_(rt) {}
    ~VerbsBackend() override;
    Status init();

    const char* name() const override { return "verbs"; }
    InternalCaps internal_caps() const override {
        return {.messages_need_target_progress = true, .idle_poll = IdlePoll::sparse};
    }
    void query_caps(weft_caps_t& c) const override;
    Status window_create(weft_window& w, bool allocate, void* base, size_t size) override;
    void window_destroy(weft_window& w) override;
    Status flush(weft_window& w, uint32_t rank) override;
    size_t am_eager_limit() const override { return recv_slot_size; }
    Status am_send(uint32_t peer, uint32_t id, const void* payload, size_t len) override;
    uint32_t progress() override;
    void wait_for_event(uint64_t timeout_ns) override;
    void wake() override;
    void peer_failed(uint32_t peer) override;
    ObserverChannel* observer_channel(const weft_window& state_window) override;
    bool can_release(std::string& why) const override;
    Status complete_sends(Deadline d) override;
    Status release(std::span<weft_window* const> windows) override;
    Status rebuild(std::span<weft_window* const> windows) override;

    // ------------------------------------------------------- datapath
    // (verbs_datapath.cpp; called through the window's RmaOps table)
    Status put(const RemoteRegion& r, uint32_t rank, uint64_t off, const void* src, size_t len);
    Status get(const RemoteRegion& r, uint32_t rank, uint64_t off, void* dst, size_t len);
    Status atomic(ibv_wr_opcode op, const RemoteRegion& r, uint32_t rank, uint64_t off, uint64_t add_or_cmp,
                  uint64_t swap, uint64_t* old);
    bool atomics_available() const { return dev_.attr.atomic_cap != IBV_ATOMIC_NONE; }
    // A device without atomics: what every atomic returns (the window's
    // table binds it instead of atomic()).
    [[gnu::cold]] Status no_atomics(const RemoteRegion& r, uint32_t rank, uint64_t off);

private:
    // ------------------------------------------------- posting (inline)
    // Room for one more WR with `limit` outstanding at most.
    Status room(Conn& c, uint32_t limit, const char* what) {
        if (__builtin_expect(c.inflight() < limit, 1)) return WEFT_OK;
        return wait_room(c, limit, what);
    }
    // Posts wr (one WR, its sge already set) on c; signals it when asked or
    // when the interval says so. The caller made room.
    Status post(Conn& c, ibv_send_wr& wr, bool signal) {
        const uint64_t seq = c.posted + 1;
        signal = signal || (seq % signal_every) == 0;
        wr.wr_id = make_wr_id(false, c.peer, static_cast<uint32_t>(seq));
        wr.next = nullptr;
        if (signal) wr.send_flags |= IBV_SEND_SIGNALED;
        ibv_send_wr* bad = nullptr;
        const int rc = ibv_post_send(c.qp, &wr, &bad);
        if (__builtin_expect(rc != 0, 0)) return post_failed(c, rc);
        c.posted = seq;
        if (signal) c.last_signaled = seq;
        c.stage_end[seq % sq_depth] = c.stage_head;
        return WEFT_OK;
    }
    // Reserves len (≤ stage_chunk) contiguous staging bytes on c; may wait
    // for completions to free space.
    Status stage_reserve(Conn& c, size_t len, uint8_t*& out) {
        uint64_t pos = c.stage_head % stage_size;
        const uint64_t skip = pos + len > stage_size ? stage_size - pos : 0;
        if (__builtin_expect(c.stage_head + skip + len - c.stage_tail > stage_size, 0)) {
            Status st = wait_stage(c, skip + len);
            if (st != WEFT_OK) return st;
        }
        c.stage_head += skip;
        out = c.stage + (c.stage_head % stage_size);
        c.stage_head += len;
        return WEFT_OK;
    }
    // Polls until c has retired WR seq.
    Status wait_done(Conn& c, uint64_t seq, const char* what) {
        if (c.completed >= seq) return WEFT_OK;
        return wait_seq(c, seq, what);
    }

    [[gnu::noinline]] Status wait_room(Conn& c, uint32_t limit, const char* what);
    [[gnu::noinline]] Status wait_stage(Conn& c, uint64_t need);
    [[gnu::noinline]] Status wait_seq(Conn& c, uint64_t seq, const char* what);
    template <typename Done>
    Status wait_until(Conn& c, const char* what, Done done);
    [[gnu::cold]] Status post_failed(Conn& c, int rc);
    [[gnu::cold]] Status dead_conn(const Conn& c, const char* what);
    [[gnu::cold]] void mark_dead(Conn& c);
    void nudge(Conn& c);

    // ---------------------------------------------------- completions
    uint32_t poll();
    void on_completion(const ibv_wc& wc);
    [[gnu::cold]] void on_error(Conn& c, const ibv_wc& wc);
    void on_recv(Conn& c, uint32_t slot, const ibv_wc& wc);
    Status post_recv(Conn& c, uint32_t slot);
    void repost(Conn& c, uint32_t slot);
    void want_service(Conn& c);
    void service();
    Status write_ctrl_word(Conn& c, uint64_t* src, uint64_t value, size_t field_off);
    void deliver(uint32_t source, uint32_t id, const void* data, size_t len);
    void start_rndv();
    void check_rndv(Conn& c);
    uint32_t dispatch();
    Status send_eager(Conn& c, uint32_t imm, const void* payload, size_t len);
    Status use_record(Conn& c, const ConnRecord& r);
    Status bring_up(ibv_qp* qp, uint32_t peer, const uint8_t* remote, uint32_t remote_qpn);
    // Registers [local, local+size) for w (unless mine already failed) and
    // exchanges every rank's record over the job; on success w's remote
    // regions and ops are set (window_create, rebuild).
    Status publish_window(weft_window& w, WindowData& data, uint8_t* local, size_t size, bool allocate, Status mine);
    // Every fabric resource goes and the members are as before init(),
    // except the wake eventfd, which other threads may write at any time
    // (the destructor, release).
    void teardown();

    Runtime& rt_;
    ConnectMode mode_ = ConnectMode::exchange;
    Device dev_;
    ibv_pd* pd_ = nullptr;
    ibv_comp_channel* channel_ = nullptr;
    ibv_cq* cq_ = nullptr;
    unsigned unacked_events_ = 0;
    int wake_fd_ = -1;
    uint32_t max_inline_ = 0;
    uint32_t psn_ = 0;
    bool closing_ = false;

    // Registered buffers: control words (peers write them) and local-only
    // receive + staging memory.
    uint8_t* ctrl_mem_ = nullptr;
    ibv_mr* ctrl_mr_ = nullptr;
    uint8_t* local_mem_ = nullptr;
    size_t local_len_ = 0;
    ibv_mr* local_mr_ = nullptr;

    std::unique_ptr<Conn[]> conns_;            // by peer index, universe_size of them
    std::unique_ptr<VerbsObserver> observer_;  // the failure detector's QPs
    std::unique_ptr<CmConnector> cm_;          // WEFT_VERBS_CONNECT=rdma_cm only
    uint32_t nconns_ = 0;

    // CQ entries taken but not yet handled: pollers share this cursor so a
    // nested poll (from a handler's send) continues in order.
    ibv_wc wcs_[wc_batch];
    int wc_pos_ = 0, wc_count_ = 0;

    Arrivals<RndvPull> arrivals_{recv_slot_size};  // queued for progress(); FIFO per source
    std::vector<uint32_t> service_;                // conns owing credits / FINs
    bool direct_ok_ = false;                       // progress() may run handlers from the receive slot
    uint32_t depth_ = 0;                           // handlers running
    uint32_t delivered_ = 0;
};

// Polls until done() holds, the peer fails, or the context deadline passes.
template <typename Done>
Status VerbsBackend::wait_until(Conn& c, const char* what, Done done) {
    // The answer usually comes within microseconds: first poll the CQ alone
    // (no clock read, no system call — perftest's loop) a bounded number of
    // times, and only then set up the deadline, nudging and yielding.
    if (!c.unsignalled_tail()) {
        for (uint32_t i = 0; i < spin_polls; ++i) {
            poll();
            if (done()) return WEFT_OK;
            if (c.dead) break;
        }
    }
    const Deadline d = rt_.op_deadline();
    // Backoff::nic_completion: the answer comes from the NIC, not from a
    // peer's CPU, so polling steals no cycles from whoever must answer: poll
    // busily (yielding, for soft-RoCE's kernel threads and co-located ranks)
    // for 2 ms before the sleeps, which would add tens of microseconds to
    // every operation.
    Backoff backoff(Backoff::nic_completion, d);
    for (;;) {
        const uint32_t n = poll();
        if (done()) return WEFT_OK;
        if (c.dead || rt_.peer_failed(c.peer)) return dead_conn(c, what);
        if (c.unsignalled_tail()) nudge(c);
        if (d.passed()) {
            char why[128];
            std::snprintf(why, sizeof why, "verbs %s: no completion within %llu ms", what,
                          static_cast<unsigned long long>(rt_.timeout_ns() / 1000000));
            // A QP that stops completing cannot be trusted again.
            mark_dead(c);
            rt_.declare_failed(c.peer, why);
            return WEFT_FAIL(WEFT_ERR_TIMEOUT, "%s (peer %u)", why, c.peer);
        }
        if (n > 0)
            backoff.reset();
        else
            backoff.pause();  // past the deadline it returns at once: d.passed() above ends the wait
    }
}

struct WindowData {
    VerbsBackend* backend = nullptr;
    ibv_mr* mr = nullptr;
    uint8_t* owned = nullptr;  // weft-allocated memory
};

}  // namespace weft::verbs
