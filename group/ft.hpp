// ft.hpp — fault tolerance above the detector: per-communicator failed
// sets (L and G: docs/fault-tolerance.md), the fault-tolerant agreement that validate_global,
// agree and shrink run, and revoke (docs/fault-tolerance.md).
//
// Agreement protocol (one instance per (communicator, sequence number); all
// members run the same sequence of validate_global/agree/shrink):
//   - the coordinator is the lowest member this rank does not know failed;
//     a participant sends CONTRIB {its value, what it accepted so far} to
//     its coordinator, and again to each new one when the old is declared;
//   - a new coordinator QUERYs the members it has no contribution from (a
//     member that already decided answers with the decision);
//   - with every live member's contribution the coordinator PROPOSEs: a
//     decision it was told of, else the accepted value of the highest
//     ballot (coordinator rank), else the combination (AND of flags, OR of
//     failed bitmaps, with its own view of failures);
//   - participants accept and ACK; with every live member's ACK the
//     coordinator sends COMMIT. Nobody returns before the COMMIT, and a
//     COMMIT is only sent once every live member accepted the value, so a
//     coordinator dying mid-broadcast cannot split the outcome: the next
//     coordinator finds the value accepted at every survivor.
// Messages from a declared-failed process are dropped (fencing), so a
// stopped coordinator that resumes cannot interfere.
// Every message names what its sender's instance is for (AgreeFor). Members
// that call different operations at the same sequence number (an erroneous
// program, e.g. one member recovering while another goes on) would decide
// one value for different questions; the coordinator decides "mismatch"
// (an empty value) instead, and each call in it fails with BAD_PARAM.
//
// Thread affinity: everything runs under the context's API lock (or on its
// one thread); handlers only queue, the state machine runs from the FT
// progress hook, so a rank that already returned still answers.
#pragma once

#include "group/detector.hpp"
#include "group/engine.hpp"

#include <algorithm>
#include <array>
#include <map>
#include <atomic>
#include <deque>
#include <memory>
#include <unordered_map>
#include <vector>

namespace weft::group {

// A C handle for a communicator the engine built from `parent`, whose error
// handler it starts with (group/api.cpp).
weft_comm_t new_comm_handle(Engine& e, Comm* c, weft_comm_t parent);

// Failed sets of one communicator. L and G grow only; each is kept as the
// order in which ranks were added, so a thread's view is a prefix length.
// Shared so that threads' cursors (ft_api.cpp) can tell, through a weak
// reference, when the communicator is gone.
struct FtComm : std::enable_shared_from_this<FtComm> {
    // Unique in the process, keys threads' cursors; atomic because another
    // context's thread may read it while pruning its cursors.
    std::atomic<uint64_t> serial{0};
    uint32_t size = 0;
    std::vector<uint8_t> in_l, in_g;  // by communicator rank
    // The seed's per-connection state: UP (not in L), DOWN (in L), CLEARED
    // (in L and recognised: validate_clear, or in G). PROC_NULL semantics
    // apply to CLEARED members only.
    std::vector<uint8_t> cleared;
    std::vector<uint32_t> l_order, g_order;
    uint64_t next_seq = 0;     // next agreement instance
    size_t survivors_for = 0;  // |G| the survivors' communicator was built for
    bool revoked = false;
};

// What an agreement instance decides (its sender's, on the wire).
enum class AgreeFor : uint8_t { unknown = 0, agree = 1, validate = 2, shrink = 3, built = 4 };
const char* agree_for_name(AgreeFor k);

class Ft {
public:
    Ft(Engine& e, Detector& d);
    ~Ft();
    Ft(const Ft&) = delete;
    Ft& operator=(const Ft&) = delete;
    Status init();

    static Ft* of(Engine& e);  // the Ft of a context's engine (registry)
    Engine& engine() { return eng_; }
    Detector& detector() { return det_; }

    FtComm& state(Comm& c);
    bool revoked(const Comm& c) const;
    // Adds to L the members the detector declared failed. Returns |L| and
    // how many this call added.
    void update_local(Comm& c, uint32_t& num_failed, uint32_t& num_new);
    // Marks r's failure cleared: point-to-point with it is PROC_NULL.
    void clear(Comm& c, FtComm& f, uint32_t r);
    // Runs one agreement instance over c. value: word 0 a flag (ANDed),
    // then ceil(size/64) words of failed-rank bitmap (ORed). BAD_PARAM when
    // members called different operations here (`what` is this one's).
    Status agree(Comm& c, std::vector<uint64_t>& value, AgreeFor what);
    // Non-blocking agree: the request completes (from progress) when the
    // instance decides; *flag is written then, and the status is agree's.
    Status iagree(Comm& c, int* flag, Request*& out);
    // Non-blocking shrink: the request completes (from progress) when the
    // survivors hold the new communicator, whose handle is written to *out
    // then; its status is shrink's.
    Status ishrink(Comm& c, weft_comm_t* out, Request*& req);
    // Marks c revoked here and floods the notice to every member.
    void revoke(Comm& c);

    // For tests and benchmarks: the communicators with failed sets and the
    // agreement instances kept here.
    size_t tracked_comms() const { return comms_.size(); }
    // The calling thread's FAILED_NEW cursors, of all contexts (tests).
    static size_t thread_cursors();
    size_t tracked_instances() const { return instances_.size(); }

private:
    struct Contrib {
        bool present = false, committed = false, has_acc = false;
        AgreeFor kind = AgreeFor::unknown;
        uint32_t acc_ballot = 0;
        std::vector<uint64_t> value, acc;
    };
    struct Instance {
        uint64_t comm_id = 0, seq = 0;
        Comm* comm = nullptr;  // set once this rank entered (only open instances use it)
        uint32_t me = 0;       // our rank in it: late messages need it after the comm is gone
        bool entered = false, decided = false;
        // Ours once entered; before, that of the commit that decided it.
        AgreeFor kind = AgreeFor::unknown;
        bool mismatch_reported = false;
        std::vector<uint64_t> mine, decision;  // decision empty: a mismatch
        // participant
        int64_t coord = -1;  // whom our contribution went to
        bool has_acc = false;
        uint32_t acc_ballot = 0;
        std::vector<uint64_t> acc;
        // coordinator
        std::vector<Contrib> contribs;
        std::vector<uint8_t> queried, acked;
        bool proposed = false;
        std::vector<uint64_t> proposal;
    };
    struct Msg {
        uint32_t from_peer;
        std::vector<uint8_t> bytes;
    };
    // split_abort: the sender's split `seq` of communicator `comm_id`
    // failed (Registry::set_split_failed_hook).
    enum Type : uint32_t {
        contrib = 1,
        query = 2,
        propose = 3,
        ack = 4,
        commit = 5,
        revoke_notice = 6,
        split_abort = 7
    };

    static void on_msg(void* arg, uint32_t source_peer, const void* payload, size_t len);
    static void on_release(void* arg, uint64_t comm_id);
    static void on_split_failed(void* arg, const Comm& parent, uint64_t seq);
    static void on_creation_failed(void* arg, const Comm& c);
    static uint32_t on_progress(void* arg);
    uint32_t pump();
    void handle(const Msg& m);
    void step(Instance& in);
    int32_t coordinator(const Comm& c) const;
    bool member_failed(const Comm& c, uint32_t r) const;
    void send(uint32_t peer, Type t, const Instance& in, uint32_t ballot, uint32_t from_rank, bool committed,
              const std::vector<uint64_t>* value, const std::vector<uint64_t>* acc);
    void send(uint32_t peer, Type t, uint64_t comm_id, uint64_t seq, AgreeFor kind, uint32_t ballot, uint32_t from_rank,
              bool committed, const std::vector<uint64_t>* value, const std::vector<uint64_t>* acc);
    void decide(Instance& in, const std::vector<uint64_t>& v);
    // Logs that job rank `peer` (UINT32_MAX: the members that decided the
    // instance) called `theirs` where this rank called in.kind (once per
    // instance).
    void report_mismatch(Instance& in, uint32_t peer, AgreeFor theirs);
    uint64_t enter(Comm& c, const std::vector<uint64_t>& value, AgreeFor what);
    Instance& instance(uint64_t comm_id, uint64_t seq);

    Engine& eng_;
    Runtime& rt_;
    Detector& det_;
    std::unordered_map<uint64_t, std::shared_ptr<FtComm>> comms_;  // by context ID
    std::map<std::pair<uint64_t, uint64_t>, Instance> instances_;
    std::vector<Msg> inbox_;
    // Revoke notices for communicators not created here yet (a member
    // revoked right after creating it), applied when this rank creates it;
    // oldest dropped past the bound (a creation that failed here).
    static constexpr size_t max_early_revokes = 256;
    std::deque<uint64_t> early_revokes_;
    static void on_create(void* arg, Comm& c);
    // The last communicators released here: a late duplicate for one of
    // them is dropped rather than kept as a bare instance (older ones, far
    // rarer, still make one).
    static constexpr uint64_t no_comm = ~0ull;  // no context ID is all ones (rank 2^32-1's 2^32-1st)
    std::array<uint64_t, 64> released_ = [] {
        std::array<uint64_t, 64> a;
        a.fill(no_comm);
        return a;
    }();
    size_t released_next_ = 0;
    bool recently_released(uint64_t id) const {
        return std::find(released_.begin(), released_.end(), id) != released_.end();
    }
    uint32_t open_ = 0;  // instances entered here and not decided
    struct PendingAgree {
        uint64_t comm_id, seq;
        Comm* comm;
        Request* req;
        int* flag;
    };
    std::vector<PendingAgree> iagrees_;
    uint32_t finish_iagrees();
    // weft_comm_ishrink's steps, as weft_comm_shrink takes them: agree on
    // the failed, build the survivors' communicator, agree that every
    // survivor built it (else again).
    struct PendingShrink {
        enum class Stage { agree_failed, build, agree_built } stage = Stage::agree_failed;
        Comm* comm = nullptr;
        uint64_t comm_id = 0;
        uint64_t seq = 0;  // the agreement instance of this stage
        Request* req = nullptr;
        weft_comm_t* out = nullptr;
        std::unique_ptr<Registry::Creation> build;
        Deadline deadline{};
    };
    std::vector<std::unique_ptr<PendingShrink>> ishrinks_;
    uint32_t advance_ishrinks();
    bool advance_ishrink(PendingShrink& s);  // true: its request is complete
};

// agree's outcome from its decided value: the flag, and PEER_FAILED when
// the agreed failed set holds a member not in G (uniform everywhere);
// BAD_PARAM for a mismatch (an empty value).
Status agree_outcome(const FtComm& f, const Comm& c, const std::vector<uint64_t>& v, int* flag);
std::vector<uint64_t> agree_value(const FtComm& f, uint32_t size, uint64_t flag);
// Whether an agreed value names communicator rank r failed.
inline bool failed_in(const std::vector<uint64_t>& v, uint32_t r) { return (v[1 + r / 64] >> (r % 64)) & 1; }
// The members an agreed value leaves, ascending (this rank always: whether
// it was named is the caller's question).
std::vector<uint32_t> survivors_of(const Comm& c, const std::vector<uint64_t>& v);
// Ft's entry in its Runtime's layers (hook: progress, after the engine's).
inline constexpr Runtime::LayerKey<Ft> ft_layer{"group.ft"};

// The tag of shrink's communicator build at this point of f's agreements:
// below ANY_TAG, so it never meets a user's, and each attempt its own.
inline int32_t shrink_tag(const FtComm& f) { return -2 - static_cast<int32_t>(f.next_seq & 0xffffff); }

}  // namespace weft::group
