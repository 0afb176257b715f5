// p2p.hpp — point-to-point: the request pool, the matching queues of every
// context, and the eager / synchronous / rendezvous protocols with their
// replies and pulls (docs/communicators.md, "Point-to-point").
//
// Messages travel as the transport's active messages: a 48-byte header
// (context, source, tag, length, protocol) followed by the payload (eager)
// or by the sender's exposed buffer {addr, key} (rendezvous: the receiver
// pulls straight into the matched receive buffer, then answers FIN). Per
// sender the transport delivers in order, and every arrival is matched in
// arrival order, which is MPI's non-overtaking rule.
//
// Reentrancy: a handler can run inside any transport send (a full ring
// drains our own), so no code here holds a reference into a queue across a
// send or progress call. Handlers only match and queue; pulls and control
// replies (ACK/FIN) run from progress (flush_deferred), which never nests.
//
// Every request, collectives' included, comes from this pool: a request is
// point-to-point's unit of completion, and a schedule is a request whose
// steps are point-to-point requests (group/coll.hpp).
//
// Thread affinity: the Engine's (the API lock when MULTIPLE).
#pragma once

#include "group/comm.hpp"

#include <array>
#include <atomic>
#include <memory>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace weft::group {

struct Schedule;

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
    // send: waiting for ACK (ssend) or FIN (rendezvous) of `cookie`, which
    // names this request by its place in the pool and its use of that place
    // (P2p::arm), so a reply finds it with one index and a stale reply (to
    // an earlier use) finds nothing; 0: no reply awaited.
    uint32_t dest_peer = 0;
    uint64_t cookie = 0;
    uint32_t index = 0;       // its place in the pool, for good
    uint64_t handle = 0;      // its C handle (handle_of): its engine's slot and its index
    uint32_t generation = 0;  // the times it was armed for a reply
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
// The handle names the request by its engine's slot (Engine::slot) and its
// place in the pool, never by address: a restarted program's saved handles
// name the requests a restart re-creates at the same places (weft/ckpt.h),
// and a handle that names nothing is refused, not dereferenced.
inline weft_request_t handle_of(Request* r) {
    r->user = true;
    return reinterpret_cast<weft_request_t>(static_cast<uintptr_t>(r->handle));
}
inline uint64_t handle_value(uint32_t engine_slot, uint32_t index) {
    return uint64_t(engine_slot + 1) << 32 | (uint64_t(index) + 1);
}

// Every request of one engine, in chunks that never move: a request's
// index names it for good. `at` reads without the engine's lock (a handle
// is checked before the API lock is taken): a chunk is published before
// the count that covers it.
class RequestPool {
public:
    static constexpr uint32_t chunk_bits = 10;
    static constexpr uint32_t chunk_size = 1u << chunk_bits;
    static constexpr uint32_t max_chunks = 16384;  // 16 Mi requests
    RequestPool() = default;
    RequestPool(const RequestPool&) = delete;
    RequestPool& operator=(const RequestPool&) = delete;
    ~RequestPool();
    // The slot its requests' handles carry (Engine::init, before any request).
    void set_engine_slot(uint32_t slot) { engine_slot_ = slot; }
    // The request at index, or null if there is none (yet).
    Request* at(uint64_t index) const {
        if (index >= created_.load(std::memory_order_acquire)) return nullptr;
        return chunks_[index >> chunk_bits].load(std::memory_order_relaxed) + (index & (chunk_size - 1));
    }
    uint32_t created() const { return created_.load(std::memory_order_relaxed); }
    // A free request (the lowest index first after a chunk is added).
    Request* take();
    // The request at `index` if it is free (a restart re-creating a saved
    // request at its place), else null.
    Request* take_at(uint32_t index);
    void give_back(Request* r) { free_.push_back(r); }
    template <typename F>
    void for_each(F f) const {
        const uint32_t n = created();
        for (uint32_t i = 0; i < n; ++i) f(*at(i));
    }

private:
    bool grow();
    std::array<std::atomic<Request*>, max_chunks> chunks_{};
    std::atomic<uint32_t> created_{0};
    std::vector<Request*> free_;
    uint32_t engine_slot_ = 0;
};

class P2p {
public:
    explicit P2p(Engine& eng);
    P2p(const P2p&) = delete;
    P2p& operator=(const P2p&) = delete;
    // Measures the backend (eager limit, zero copy).
    void init();
    // From here on peers' messages are matched (Engine::init, once the flag
    // window exists).
    void register_handlers();
    // Before the transport finalizes: refuses rendezvous announcements
    // nobody received, sends owed replies, unexposes buffers.
    void shutdown();

    // ------------------------------------------------- requests
    Request* new_request(ReqKind k, Comm* c);
    // A restart re-creating a saved request at its place (snapshot.cpp):
    // the request at `index`, made as new_request makes one, or null if
    // that place is taken.
    Request* adopt(uint32_t index, ReqKind k, Comm* c);
    // Contexts that received messages before this rank created them.
    size_t early_contexts() const { return early_.size(); }
    void complete(Request& r, Status st);
    // Copies out the status and returns the request to the pool.
    Status finish(Request& r, weft_msg_status_t* status);
    bool live(const Request* r) const { return r && r->magic == Request::live_magic; }
    RequestPool& pool() { return pool_; }
    const RequestPool& pool() const { return pool_; }
    // A request that is already complete with st (PROC_NULL operations).
    Request* completed_request(Comm& c, ReqKind k, const weft_msg_status_t& st);

    // ------------------------------------------------- operations
    // ctx_bits selects the context (0, coll_bit or create_bit).
    Status isend(Comm& c, uint64_t ctx_bits, const void* buf, size_t bytes, uint32_t dest, int32_t tag, bool sync,
                 Request*& out);
    Status irecv(Comm& c, uint64_t ctx_bits, void* buf, size_t cap, int32_t src, int32_t tag, Request*& out);
    // A blocking standard-mode send on the point-to-point context that goes
    // eagerly (fits_send_now): the message is in the transport when it
    // returns OK, so no request is made, waited for and released.
    static constexpr size_t stack_eager = 8192;  // eager messages built on the stack up to this size
    bool fits_send_now(size_t bytes) const { return bytes <= eager_limit_ && bytes <= stack_eager; }
    Status send_now(Comm& c, const void* buf, size_t bytes, uint32_t dest, int32_t tag);
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

    // ------------------------------------------------- the registry's calls
    // A communicator's three contexts start (adopting what arrived early)
    // or end matching here.
    void register_queues(Comm* c);
    void unregister_queues(Comm* c);

    // ------------------------------------------------- the engine's calls
    // Pulls and replies owed (from progress, which never nests).
    uint32_t flush_deferred();
    // Nothing for flush_deferred to do: the progress hook's inline check.
    bool nothing_deferred() const { return pulls_.empty() && replies_.empty(); }
    // A peer failed (receives naming it and sends awaiting its reply fail)
    // or departed (sends awaiting its reply fail).
    void peer_gone(uint32_t peer, bool departed);
    // Revoke (group/ft.cpp): fails c's posted receives and the sends
    // awaiting a reply that no pull can still be reading.
    void revoke_pending(Comm& c);
    // What an operation on c answers when c was revoked after the API
    // checked it (another thread — the drain's — took the notice in before
    // this one took weft): the operation is not started.
    [[gnu::cold]] static Status revoked_since_entry(const Comm& c, const char* what);

    // The wire header of every point-to-point message (p2p.cpp).
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

private:
    // The drain port reads the queues, pulls, replies and pending sends, and
    // turns rendezvous announcements into buffered messages (drain_port.cpp).
    friend class DrainPort;

    void release(Request* r);
    void prepare(Request* r, ReqKind k, Comm* c);
    // Gives a send its cookie: from now on a reply may complete it.
    void arm(Request& r);
    // The send a reply's cookie names and waits for it, or null.
    Request* awaiting(uint64_t cookie);
    // Calls f(Request&) for every send still waiting for its reply (the
    // failure, revoke and drain paths: a scan of the pool). f may complete
    // the request, never release it.
    template <typename F>
    void for_each_awaiting(F f) const {
        pool_.for_each([&](Request& r) {
            if (r.magic == Request::live_magic && r.kind == ReqKind::send && r.cookie && !r.done) f(r);
        });
    }
    MatchQueue* queue_for(uint64_t context);
    static void on_msg(void* arg, uint32_t source_peer, const void* payload, size_t len);
    static void on_reply(void* arg, uint32_t source_peer, const void* payload, size_t len);
    void arrived(uint32_t source_peer, const MsgHeader& h, const uint8_t* body, size_t body_len);
    void deliver_eager(Request& r, const Unexpected& u, const uint8_t* data, size_t len);
    void start_pull(Request& r, Unexpected&& u);
    Status do_pull(Request& r, const Unexpected& u);
    void queue_reply(uint32_t peer, uint64_t cookie, ReplyKind kind = done_reply, Status why = WEFT_OK);
    void queue_refusal(uint32_t peer, uint64_t cookie, Status why) { queue_reply(peer, cookie, refused, why); }
    // Whether a message to or from peer on a context with ctx_bits counts in
    // the job's point-to-point sums that the drain compares.
    bool in_drain_sums(uint32_t peer, uint64_t ctx_bits) const;
    void count_p2p(Comm& c, uint32_t peer, uint64_t ctx_bits, bool sent);
    void bump(uint64_t off);

    Engine& eng_;
    Runtime& rt_;
    struct Context {
        Comm* comm;
        MatchQueue* queue;
    };
    std::unordered_map<uint64_t, Context> contexts_;
    // Messages for contexts this rank has not created yet.
    std::unordered_map<uint64_t, std::unique_ptr<MatchQueue>> early_;
    // Communicators freed while revoked (their release completes at once,
    // so a member's rendezvous may still be on its way): a late RTS is
    // refused, not kept as early traffic for a communicator that will
    // never come, which would leave its sender waiting for an answer.
    std::unordered_set<uint64_t> revoked_gone_;
    RequestPool pool_;
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
    bool shutting_down_ = false;  // shutdown(): rendezvous announcements are refused on arrival
    size_t eager_limit_ = 0;
    bool zero_copy_ = true;
};

}  // namespace weft::group
