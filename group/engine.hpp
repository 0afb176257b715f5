// engine.hpp — communicators, MPI-style matching and collective schedules.
//
// One Engine per context, created by weft_init right after the transport.
// It owns every communicator, every request, and the matching queues.
//
// Messages travel as the transport's active messages: a 48-byte header
// (context, source, tag, length, protocol) followed by the payload (eager)
// or by the sender's exposed buffer {addr, key} (rendezvous: the receiver
// pulls straight into the matched receive buffer, then answers FIN). Per
// sender the transport delivers in order, and every arrival is matched in
// arrival order, which is MPI's non-overtaking rule.
//
// Each communicator has three contexts: point-to-point (its ID), collective
// (ID | coll_bit, internal traffic of collectives, tag = collective sequence
// number) and creation (ID | create_bit, create_from_ranks' handshake).
//
// Reentrancy: a handler can run inside any transport send (a full ring
// drains our own), so no code here holds a reference into a queue across a
// send or progress call. Handlers only match and queue; pulls and control
// replies (ACK/FIN) run from the progress hook, which never nests.
//
// Thread affinity: every method runs under the context's API lock when the
// context is MULTIPLE (group/api.cpp takes it), else on the one thread that
// uses the context.
#pragma once

#include <weft/comm.h>
#include <weft/state_window.h>

#include "transport/runtime.hpp"
#include "transport/state_window_view.hpp"

#include <atomic>
#include <deque>
#include <memory>
#include <unordered_map>
#include <vector>

namespace weft::group {

static_assert(WEFT_STATE_CLOCK_SEQ == 0 && WEFT_STATE_CLOCK_FINISHED == 16, "Comm::clock indexes seq as [0], finished as [2]");

constexpr uint64_t coll_bit = 1ull << 63;
constexpr uint64_t create_bit = 1ull << 62;
constexpr uint32_t no_slot = UINT32_MAX;  // a communicator without a clock slot (all were taken)
constexpr size_t flag_max_bytes = 256;     // largest allreduce on the flag path (flags.cpp)

class Engine;
struct Comm;

struct Request;
struct Schedule;

// A message that arrived before its receive was posted.
struct Unexpected {
    int32_t src = 0;   // rank in the communicator
    int32_t tag = 0;
    uint32_t kind = 0; // MsgKind
    uint32_t source_peer = 0;
    uint64_t len = 0;
    uint64_t cookie = 0;
    uint64_t addr = 0;            // rendezvous: where the sender exposed it
    std::vector<uint8_t> data;    // eager: the payload; rendezvous: the key
};

// Posted receives and unexpected messages of one context.
struct MatchQueue {
    std::deque<Request*> posted;
    std::deque<Unexpected> unexpected;
};

// A Collective-Clock target word (state_window.h): bits 52..63 the drain
// attempt that wrote it, bits 40..51 the slot's use (its owner counts the
// times it took the slot, 1..4095, and tells the members with the slot),
// bits 0..39 the clock value. A member whose release barrier has not
// finished may still push a freed communicator's clock at a peer whose
// barrier has, and whose slot now serves another communicator: the use
// differs, so the compare-swap refuses it.
constexpr uint64_t clock_value_bits = 40;
constexpr uint64_t clock_use_bits = 12;

struct Comm {
    Engine* engine = nullptr;
    uint64_t id = 0;
    uint32_t rank = 0;
    uint32_t size = 0;
    std::vector<uint32_t> members;  // comm rank -> job rank
    std::vector<uint32_t> slots;    // comm rank -> its clock slot
    std::vector<uint16_t> slot_uses;  // comm rank -> the use of that slot (clock_use_bits)
    uint32_t slot = 0;              // ours
    uint64_t* clock = nullptr;      // our clock record in the state window (seq, +1 target, +2 finished); null without a slot
    uint32_t coll_seq = 0;          // next collective's number (internal tag)
    uint64_t flag_epoch = 0;        // blocking collectives on the flag path so far
    uint64_t flag_allreduces = 0;   // of which allreduces (their inbox parity)
    uint32_t refs = 0;              // live requests naming it
    bool freeing = false;           // user freed it; the release barrier runs
    bool slots_known = true;        // every member's clock slot is known (create_from_ranks: after its first collective)
    bool world = false;
    bool revoked = false;           // weft_comm_revoke (group/ft.cpp)
    Comm* survivors = nullptr;      // G non-empty: collectives run over this (group/ft)
    const uint8_t* recognised = nullptr;  // by rank: failure cleared (group/ft), PROC_NULL for point-to-point; null: none
    weft_comm* handle = nullptr;
    MatchQueue p2p, coll, create;

    int32_t rank_of_job(uint32_t job_rank) const;
};

enum class ReqKind : uint8_t { send, recv, coll };

struct Request {
    static constexpr uint64_t live_magic = 0x5745465452455131ull;  // "WEFTREQ1"
    static constexpr uint64_t dead_magic = 0x5745465452455130ull;
    uint64_t magic = dead_magic;
    ReqKind kind = ReqKind::send;
    bool done = false;
    bool user = false;      // handed to the application (else internal)
    bool matched = false;   // recv: a message was matched to it
    bool detached = false;  // nobody will wait: released when it finishes
    bool sync = false;      // send: synchronous (completes when the receive starts)
    bool blocking = false;  // recv: a thread blocks on it inside weft (the drain's blocking mode)
    bool dummy = false;     // recv: released by a drain with no message (retry after it)
    Comm* comm = nullptr;
    MatchQueue* queue = nullptr;  // recv: where it is posted
    // recv
    uint8_t* buf = nullptr;
    size_t cap = 0;
    int32_t src = 0, tag = 0;
    // send: waiting for ACK (ssend) or FIN (rendezvous) of `cookie`
    uint32_t dest_peer = 0;
    uint64_t cookie = 0;
    ExposedBuffer exposed;
    bool exposed_live = false;
    // coll
    std::unique_ptr<Schedule> sched;
    // An allgather over a communicator's survivors (group/ft): the blocks
    // arrive in scratch and go to their ranks' places when it is finished.
    struct BlockScatter {
        std::vector<uint8_t> scratch;
        uint8_t* out = nullptr;
        size_t bytes = 0;
        std::vector<uint32_t> place;  // block j of scratch -> its rank in the user's communicator
    };
    std::unique_ptr<BlockScatter> scatter;
    weft_msg_status_t status{};
};

// A request handed to the application as its C handle: from now on it is
// the user's to test, wait on or free (group/api.cpp, group/ft_api.cpp).
inline weft_request_t handle_of(Request* r) {
    r->user = true;
    return reinterpret_cast<weft_request_t>(r);
}

class Engine {
public:
    explicit Engine(Runtime& rt);
    ~Engine();
    // Before the transport finalizes: sends owed replies, unexposes buffers.
    void shutdown();
    Engine(const Engine&) = delete;
    Engine& operator=(const Engine&) = delete;
    Status init();

    Runtime& rt() { return rt_; }
    Comm& world() { return *world_; }

    // ------------------------------------------------- communicators
    Status dup(Comm& parent, Comm*& out);
    Status split(Comm& parent, int32_t color, int32_t key, Comm*& out);
    Status create_from_ranks(Comm& parent, const uint32_t* ranks, uint32_t n, int32_t tag, Comm*& out);
    // create_from_ranks in steps that never block (weft_comm_ishrink): start
    // it, then advance it from progress until it says it is done (`status`,
    // and `comm` on success); abandon it at a deadline. It must not move
    // once started (requests write into it).
    struct Creation {
        Comm* parent = nullptr;
        std::vector<uint32_t> ranks;  // of the parent; the first names the ID
        int32_t tag = 0;
        uint64_t id = 0;
        std::vector<Request*> id_sends;
        Request* id_recv = nullptr;
        Comm* comm = nullptr;
        uint64_t my_word = 0;
        std::vector<uint64_t> words;  // every member's slot_word
        Request* slot_exchange = nullptr;
        Deadline slot_wait{0};  // set when our slot is still coming back (a freed communicator's)
        bool done = false;
        Status status = WEFT_OK;
    };
    Status creation_start(Comm& parent, const uint32_t* ranks, uint32_t n, int32_t tag, Creation& k);
    bool creation_advance(Creation& k);
    void creation_abandon(Creation& k);
    Status free_comm(Comm& c);

    // ------------------------------------------------- point-to-point
    // ctx_bits selects the context (0, coll_bit or create_bit).
    Status isend(Comm& c, uint64_t ctx_bits, const void* buf, size_t bytes, uint32_t dest, int32_t tag,
                 bool sync, Request*& out);
    Status irecv(Comm& c, uint64_t ctx_bits, void* buf, size_t cap, int32_t src, int32_t tag, Request*& out);
    // Finds (does not consume) the first matching unexpected message.
    bool iprobe(Comm& c, int32_t src, int32_t tag, weft_msg_status_t& st);
    Status cancel(Request& r);
    // Gives up on a request whose wait timed out: a send stops waiting for
    // its reply (its buffer is no longer exposed), a receive is unposted.
    void abandon(Request& r, Status why);
    // Drops every unmatched rendezvous announcement with `tag` (WEFT_ANY_TAG:
    // all) in q, their receives will never be posted, and answers each
    // sender REFUSED with `why`: its send completes with that error, never OK.
    void refuse_rendezvous(MatchQueue& q, int32_t tag, Status why);
    bool has_failed_member(const Comm& c) const;
    // Revoke (group/ft.cpp): fails c's posted receives, sends awaiting a
    // reply and active collectives with WEFT_ERR_REVOKED.
    void revoke_pending(Comm& c);
    const std::vector<std::unique_ptr<Comm>>& comms() const { return comms_; }
    // A request that is already complete with st (PROC_NULL operations).
    Request* completed_request(Comm& c, ReqKind k, const weft_msg_status_t& st);
    void complete_request(Request& r, Status st);  // group/ft.cpp's non-blocking agreement

    // ------------------------------------------------- collectives
    // The tag of a collective's messages on the collective context: its
    // kind in bits 27..30 and the communicator's collective count below, so
    // no collective matches another kind's traffic. weft_comm_free's release
    // barrier has a tag that no count reaches (kind release, count 0, not
    // counted): members free a communicator once, whatever collectives each
    // ran or abandoned before (a member that revoked instead of joining a
    // collective has a count lower than the others').
    enum class CollKind : uint32_t { barrier = 1, bcast, reduce, allreduce, allgather, release };
    static int32_t coll_tag(Comm& c, CollKind k) {
        constexpr uint32_t count_bits = 27;
        const uint32_t count = k == CollKind::release ? 0 : c.coll_seq++ & ((1u << count_bits) - 1);
        return static_cast<int32_t>((uint32_t(k) << count_bits) | count);
    }
    // release: weft_comm_free's barrier (coll_tag's CollKind::release).
    Status barrier_start(Comm& c, Request*& out, bool release = false);
    Status bcast_start(Comm& c, void* buf, size_t bytes, uint32_t root, Request*& out);
    Status reduce_start(Comm& c, const void* sendbuf, void* recvbuf, size_t count, weft_datatype_t type,
                        weft_op_t op, uint32_t root, bool all, Request*& out);
    Status allgather_start(Comm& c, const void* sendbuf, size_t bytes, void* recvbuf, Request*& out);
    // Blocking forms over one-sided writes into pinned flags (flags.cpp),
    // when flags_usable says so (the same answer on every member).
    bool flags_usable(const Comm& c, size_t bytes) const;
    Status barrier_flags(Comm& c);
    Status allreduce_flags(Comm& c, const void* sendbuf, void* recvbuf, size_t count, weft_datatype_t type,
                           weft_op_t op);

    // ------------------------------------------------- requests
    // Progresses until r is done or the deadline passes (TIMEOUT).
    Status wait(Request& r, Deadline d);
    // Copies out the status and returns the request to the pool.
    Status finish(Request& r, weft_msg_status_t* status);
    // One step of progress: transport, replies, pulls, schedules.
    uint32_t poll() { return rt_.progress(); }
    // Waits between polls: spin, yield, then sleep; with MULTIPLE, lets
    // other threads in while it does.
    void pause(Backoff& b);
    // Polls, pausing when idle, until done() holds; false if the deadline
    // passed first. A clock read costs as much as a poll: it looks at the
    // clock every 32nd idle spin.
    template <typename Done>
    bool progress_until(Done done, Deadline d) {
        Backoff backoff;
        for (uint32_t spins = 0; !done(); ++spins) {
            if (poll() > 0) {
                backoff.reset();
                continue;
            }
            if (done()) break;
            if ((spins & 31) == 31 && d.passed()) return false;
            pause(backoff);
        }
        return true;
    }
    bool live(const Request* r) const { return r && r->magic == Request::live_magic; }

    // Collective Clock of c in the pinned state window (drain/ reads it).
    // Inline: every collective pays them (bench/clock_bench.cpp).
    void commit_begin(Comm& c) {
        if (!c.clock) return;
        if (__builtin_expect(drain_active_.load(std::memory_order_relaxed) != 0, 0)) return drain_hooks_.commit(drain_hooks_.arg, c);
        // Optimistic: count it, then look again. The drain sets
        // drain_active and then forces a fence on every thread
        // (membarrier) before it reads our seq, so either it sees this
        // increment or we see its flag below — then we take the increment
        // back and let the drain decide. Its reads of seq may glimpse the
        // transient value: that only looks like "inside a collective",
        // which never ends a drain.
        std::atomic_ref<uint64_t> seq(c.clock[0]);
        const uint64_t s = seq.load(std::memory_order_relaxed);
        seq.store(s + 1, std::memory_order_release);
        gate::fence_after_entry();
        if (__builtin_expect(drain_active_.load(std::memory_order_relaxed) != 0, 0)) {
            seq.store(s, std::memory_order_release);
            drain_hooks_.commit(drain_hooks_.arg, c);
        }
    }
    void commit_finish(Comm& c) {
        if (!c.clock) return;
        std::atomic_ref<uint64_t> finished(c.clock[2]);
        finished.store(finished.load(std::memory_order_relaxed) + 1, std::memory_order_release);
    }

    // The wire header of every point-to-point message (engine.cpp).
    enum MsgKind : uint32_t { eager = 0, eager_sync = 1, rts = 2, rts_sync = 3 };
    static bool is_rts(uint32_t k) { return k == rts || k == rts_sync; }
    struct MsgHeader;
    // Replies to a send: FIN (rendezvous pulled) or ACK (synchronous send
    // matched) complete it; DRAINED (a drain pulled it into the receiver's
    // buffer) frees its buffer, and a synchronous send then waits for ACK;
    // REFUSED (the receiver dropped it unreceived: revoked, its collective
    // failed, it finalized, its pull failed, its receive gave up) completes
    // it with the error the reply carries: a send reports OK only when its
    // data reached a receive or weft's buffer.
    enum ReplyKind : uint32_t { done_reply = 0, drained = 1, refused = 2 };
    struct WireReply {
        uint64_t cookie;
        uint32_t kind;
        int32_t status;  // refused: why (a weft_status_t)
    };

    // ------------------------------------------------- drain (drain/)
    // While `active` is nonzero, commit_begin calls `commit` instead of
    // counting by itself: the drain decides whether this collective may
    // start (and raises targets); `commit` increments seq before returning.
    struct DrainHooks {
        void* arg = nullptr;
        void (*commit)(void* arg, Comm& c) = nullptr;
    };
    void set_drain_hooks(DrainHooks h) { drain_hooks_ = h; }
    // Called with a communicator's context ID when it is released (its
    // free's barrier and every request on it done): layers drop their
    // per-communicator state (group/ft).
    void set_release_hook(void (*fn)(void* arg, uint64_t comm_id), void* arg) {
        release_hook_ = fn;
        release_hook_arg_ = arg;
    }
    // Called with a communicator as soon as it exists here (before its
    // creation returns to anyone): layers apply what they learned of it
    // before it existed (group/ft: a revoke notice that came early).
    void set_create_hook(void (*fn)(void* arg, Comm& c), void* arg) {
        create_hook_ = fn;
        create_hook_arg_ = arg;
    }
    std::atomic<uint64_t>& drain_active() { return drain_active_; }
    // The clock records of every live communicator with a slot: where each
    // member keeps it.
    struct ClockRecord {
        uint32_t slot;
        std::vector<uint16_t> uses;     // their slots' uses
        std::vector<uint32_t> members;  // job ranks
        std::vector<uint32_t> slots;    // their slots
    };
    std::vector<ClockRecord> clock_records() const;
    // How often this rank took the slot (its target's use field).
    uint16_t slot_use(uint32_t slot) const { return slot < slot_uses_.size() ? slot_uses_[slot] : 0; }
    // Pulls every unmatched rendezvous message into weft's buffer (its
    // unexpected entry becomes an eager one) and answers DRAINED. Returns
    // how many it pulled; `bytes` adds their size.
    uint64_t drain_rendezvous(uint64_t& bytes);
    // Work that must finish before no message is in transit: pulls and
    // replies not yet done, rendezvous sends still exposed.
    uint64_t pending_transfers() const;
    // An external stack's point-to-point messages (drain.h's hooks): they
    // join this rank's counters, which the drain sums.
    void count_external(uint64_t sent, uint64_t arrived) {
        for (auto [off, n] : {std::pair{uint64_t(WEFT_STATE_P2P_SENT_OFF), sent}, std::pair{uint64_t(WEFT_STATE_P2P_RECEIVED_OFF), arrived}}) {
            std::atomic_ref<uint64_t> w(*state_word(off));
            w.store(w.load(std::memory_order_relaxed) + n, std::memory_order_release);
        }
    }
    // The drain's blocking mode: blocking receives wait inside weft and a
    // drain releases them with a dummy completion once nothing is in
    // transit (they receive again after the drain).
    bool drain_blocking() const { return drain_blocking_; }
    void set_drain_blocking(bool on) { drain_blocking_ = on; }
    uint64_t blocked_receives() const;
    uint64_t release_blocked_receives();
    // Messages and bytes in weft's buffer (unexpected queues).
    void buffered(uint64_t& messages, uint64_t& bytes) const;
    // This rank's word of the state window (comm.cpp, ft.cpp and the
    // counters here use it): the view's, for std::atomic_ref.
    uint64_t* state_word(uint64_t off) { return StateWindowView(rt_.state_window()).word(off); }

    // Schedules' scratch memory, recycled.
    struct Scratch {
        std::unique_ptr<uint8_t[]> buf;
        size_t size = 0;
    };
    Scratch take_scratch(size_t n);
    void give_scratch(Scratch s);

private:
    friend struct Schedule;

    Request* new_request(ReqKind k, Comm* c);
    void release(Request* r);
    void complete(Request& r, Status st);
    MatchQueue* queue_for(uint64_t context);
    void register_comm(Comm* c);
    void unregister_comm(Comm* c);
    Status make_comm(uint64_t id, std::vector<uint32_t> members, std::vector<uint32_t> slots,
                     std::vector<uint16_t> slot_uses, uint32_t my_slot,
                     Comm*& out);
    bool take_slot(uint32_t& slot);
    void give_back_slot(uint32_t slot);
    bool slot_coming() const;
    bool wait_for_slot(uint32_t& slot, Deadline d);
    void assign_slot(Comm& c, uint32_t slot);
    Status apply_slot_words(Comm& c, const std::vector<uint64_t>& words);
    void discard_comm(Comm& c);
    void reset_clock(uint32_t slot);
    // A slot and its use in one word, as the members exchange them.
    static uint64_t slot_word(uint32_t slot, uint16_t use) { return slot | (uint64_t(use) << 32); }
    void maybe_release_comm(Comm* c);
    uint64_t next_context_counter() { return next_ctx_counter_++; }
    Status run_blocking(Request* r);

    // Arrivals (from the transport's handler) and their protocol.
    static void on_msg(void* arg, uint32_t source_peer, const void* payload, size_t len);
    static void on_reply(void* arg, uint32_t source_peer, const void* payload, size_t len);
    static uint32_t on_progress(void* arg);
    static void on_peer_gone(void* arg, uint32_t peer, bool departed);
    void arrived(uint32_t source_peer, const MsgHeader& h, const uint8_t* body, size_t body_len);
    void deliver_eager(Request& r, const Unexpected& u, const uint8_t* data, size_t len);
    void start_pull(Request& r, const Unexpected& u);
    Status do_pull(Request& r, const Unexpected& u);
    void queue_reply(uint32_t peer, uint64_t cookie, ReplyKind kind = done_reply, Status why = WEFT_OK);
    void queue_refusal(uint32_t peer, uint64_t cookie, Status why) { queue_reply(peer, cookie, refused, why); }
    uint32_t flush_deferred();
    uint32_t advance_schedules();
    void count_p2p(Comm& c, uint64_t ctx_bits, bool sent);
    void bump(uint64_t off);
    Status create_flag_window();
    Status signal(const Comm& c, uint32_t to, uint64_t flag_off, const void* data, size_t bytes, uint64_t epoch);
    Status await(const Comm& c, uint64_t flag_off, uint64_t epoch);
    void rest(Backoff& b);
    void clear_flags(uint32_t slot);

    Runtime& rt_;
    Comm* world_ = nullptr;
    std::vector<std::unique_ptr<Comm>> comms_;
    struct Context {
        Comm* comm;
        MatchQueue* queue;
    };
    std::unordered_map<uint64_t, Context> contexts_;
    // Messages for contexts this rank has not created yet.
    std::unordered_map<uint64_t, std::unique_ptr<MatchQueue>> early_;
    // Scratch buffers of finished schedules, largest kept (declared before
    // requests_: schedules give theirs back while requests_ is destroyed).
    std::vector<Scratch> scratch_pool_;
    std::vector<std::unique_ptr<Request>> requests_;
    std::vector<Request*> free_requests_;
    std::unordered_map<uint64_t, Request*> awaiting_reply_;  // cookie -> send
    uint64_t next_cookie_ = 1;
    uint64_t next_ctx_counter_ = 1;  // 0 is the world's
    struct PendingPull {
        Request* r;
        Unexpected u;
    };
    std::deque<PendingPull> pulls_;
    struct Reply {
        uint32_t peer;
        uint64_t cookie;
        ReplyKind kind;
        Status why;
    };
    std::vector<Reply> replies_;
    std::vector<Request*> active_colls_;
    std::vector<uint8_t> slot_used_;
    bool shutting_down_ = false;  // shutdown(): rendezvous announcements are refused on arrival
    std::vector<uint16_t> slot_uses_;  // how often each slot was taken (mod 4095, never 0)
    weft_window* flag_win_ = nullptr;  // owned by the Runtime (freed at finalize)
    bool ordered_puts_ = false;
    size_t eager_limit_ = 0;
    bool zero_copy_ = true;
    std::atomic<uint64_t> drain_active_{0};
    DrainHooks drain_hooks_;
    bool drain_blocking_ = false;
    void (*release_hook_)(void* arg, uint64_t comm_id) = nullptr;
    void* release_hook_arg_ = nullptr;
    void (*create_hook_)(void* arg, Comm& c) = nullptr;
    void* create_hook_arg_ = nullptr;
};

// The engine's entry in its Runtime's layers (hooks: progress, peer gone).
inline constexpr Runtime::LayerKey<Engine> engine_layer{"group.engine"};

}  // namespace weft::group

// The C handle of a communicator: a shell that outlives the communicator,
// so a stale handle reads a dead magic (WEFT_ERR_NOT_INITIALIZED).
struct weft_comm {
    static constexpr uint64_t live_magic = 0x5745465443304d4dull;
    static constexpr uint64_t dead_magic = 0x5745465443444d4dull;
    uint64_t magic = live_magic;
    weft::group::Engine* engine = nullptr;
    weft::group::Comm* comm = nullptr;
    // null: WEFT_ERRORS_RETURN. Written under the registry mutex; atomic so
    // that a failed call can see "no handler" without it (group/errhandler.cpp).
    std::atomic<weft_errhandler*> errhandler{nullptr};
};
