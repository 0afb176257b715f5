// pgroup.hpp — PMIx-style process groups (include/weft/group.h,
// docs/groups.md): construction by the collective, bootstrap and invite
// methods, destruct, leave, and the seed's fault-tolerance rules, run by
// the participants among themselves over active messages.
//
// Protocol (one operation = a construct or a destruct of one name):
//   - the *tracker* is the lowest (job, rank) participant this process does
//     not know to be gone: for a construct the lowest leader (every leader
//     knows them all; an added member learns them from the leader that
//     named it: ADDED; bootstrap leaders find each other first: HELLO to
//     the launch), for an invite the inviter, for a destruct the lowest
//     current member;
//   - each participant sends CONTRIB {nonce, role, leaders, its added
//     members, flags, order, info} to the tracker (the tracker's own goes
//     straight in), and again to a new tracker when the old one is gone;
//   - the tracker decides once every expected participant contributed or
//     is gone (dead, departed, left): abort / success / bad parameters,
//     and sends RESULT {status, context ID, members with their info, the
//     failed and the departed} to every contributor;
//   - WITHDRAW: a participant whose own deadline passed is taken out and
//     told (the others wait to their own deadlines); a cancel, or the
//     tracker's own deadline, decides for everyone; a leave counts the
//     leaver as departed. After a withdraw a participant waits a short
//     grace for the tracker's answer;
//   - a new tracker QUERYs the participants it has not heard from: one
//     still waiting contributes again, one that already has the outcome
//     sends it back (RESULT), and the new tracker hands that same outcome
//     to the rest. A decided outcome is never replaced, so the survivors of
//     a tracker that died mid-broadcast all get what some already got.
//   - invite method: the inviter tracks; if it (or a later leader) dies,
//     the acceptors VOTE among the invitees (nominate / abort / accepted;
//     the others answer pending or declined, or with the outcome they
//     hold), decide alike, and go on under the lowest nominee (SELECTED
//     tells the pending invitees).
// Two message latencies when nothing fails; the tracker sends N - 1
// results (docs/groups.md has the counts).
//
// Thread affinity: everything runs under the context's API lock; handlers
// only queue, the progress hook acts (as group/ft.hpp).
#pragma once

#include "group/engine.hpp"

#include <weft/group.h>

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace weft::group {

struct Proc {
    uint32_t job = 0, rank = 0;
    auto operator<=>(const Proc&) const = default;
};

// A constructed group as this process sees it.
struct PGroup {
    std::string name;
    std::vector<Proc> members;  // in the group's order
    std::vector<std::vector<uint8_t>> infos;
    uint64_t context_id = 0;  // 0: none assigned
    uint32_t flags = 0;
    uint64_t invite_nonce = 0;       // formed by the invite method: that invitation
    std::set<Proc> reported_failed;  // MEMBER_FAILED already raised for them
};

// One construct or destruct this process called.
struct PgOp {
    enum class Kind : uint8_t { construct = 1, destruct = 2 };
    Kind kind = Kind::construct;
    std::string name;
    uint64_t nonce = 0;
    bool leader = false;
    std::vector<Proc> leaders;      // sorted; an added member learns them (ADDED)
    std::vector<Proc> add_members;  // named by this leader
    std::vector<Proc> order;        // FINAL_ORDER, as given
    uint32_t flags = 0;
    std::vector<uint8_t> info;
    uint32_t bootstrap = 0;     // bootstrap method: the number of leaders (0: collective)
    bool inviter = false;       // invite method: this process leads
    bool joiner = false;        // invite method: this process accepted
    uint64_t invite_nonce = 0;  // a joiner: the invitation it answers
    // Invite method, leader re-selection (docs/groups.md): every invitee,
    // and the invitation's flags, from the INVITE.
    std::vector<Proc> invitees;
    uint32_t invite_flags = 0;
    bool late = false;            // a joiner that accepted after its leader died: waits for a selection
    bool leaderless = false;      // an acceptor whose leader died: voting on a new one
    uint32_t round = 0;           // leader failures seen
    std::set<Proc> lost_leaders;  // leaders that died (not failed invitees for a new leader)
    uint8_t vote = 0;             // this acceptor's vote in the round (Vote); 0: not cast yet
    std::map<std::pair<uint32_t, Proc>, uint8_t> votes;  // (round, voter) -> vote
    std::set<Proc> pending_voters;                       // invitees that answered "pending"
    bool discovering = false;                            // a bootstrap leader still finding the others
    Deadline deadline{0};
    Deadline grace{0};              // after a withdraw: how long to wait for the tracker's outcome
    uint32_t tracker = UINT32_MAX;  // the peer we contributed to
    Status withdraw = WEFT_OK;      // TIMEOUT / CANCELED / NOT_FOUND (left) once withdrawn
    bool done = false;
    Status status = WEFT_OK;
};

class ProcessGroups {
public:
    explicit ProcessGroups(Engine& e);
    ~ProcessGroups();
    ProcessGroups(const ProcessGroups&) = delete;
    ProcessGroups& operator=(const ProcessGroups&) = delete;
    Status init();
    static ProcessGroups* of(Runtime& rt);

    struct ConstructArgs {
        std::string name;
        std::vector<Proc> procs;  // leaders (empty: an added member)
        std::vector<Proc> add_members;
        std::vector<Proc> order;
        std::vector<std::string> expand;
        uint32_t flags = 0;
        uint32_t timeout_ms = 0;
        uint32_t bootstrap = 0;
        std::vector<uint8_t> info;
    };
    // Starts a construct; op is kept here until reap().
    Status start_construct(ConstructArgs a, PgOp*& op);
    Status start_destruct(const std::string& name, uint32_t timeout_ms, PgOp*& op);
    // Invite method (the leader; ConstructArgs::procs are the invitees).
    Status start_invite(ConstructArgs a, PgOp*& op);
    // An invitee's answer; op is null when it declined (nothing to wait for).
    Status join(const std::string& name, Proc leader, bool accept, std::vector<uint8_t> info, uint32_t timeout_ms,
                PgOp*& op);
    Status leave(const std::string& name);
    // After LEADER_FAILED: this acceptor nominates itself as the new
    // leader, or ends the construct for every participant.
    Status nominate(const std::string& name);
    Status abort_construct(const std::string& name);
    Status cancel(PgOp& op);
    // Waits for op (blocking calls), then reaps it.
    Status wait(PgOp& op);
    // The op's status once done; frees it.
    Status reap(PgOp& op);
    bool in_handler() const { return in_handler_ > 0; }
    // True on the thread running a group event handler: it already holds
    // the context's lock (MULTIPLE), so a call it makes must not take it.
    static bool on_handler_thread();

    // The group as a communicator (weft_group_comm): collective over its
    // members; needs a context ID and, today, members of this job only.
    Status make_comm(const std::string& name, Comm*& out);
    Engine& engine() { return eng_; }

    const PGroup* find(const std::string& name) const;
    PgOp* op_by_nonce(uint64_t nonce);  // a started op not reaped yet (C handles name ops by nonce)

    uint64_t add_handler(weft_group_event_fn fn, void* arg);
    bool remove_handler(uint64_t id);

    // Checkpoint and restart (group/snapshot.cpp). What a checkpoint
    // saves: the constructed groups and the counter of the context IDs
    // this process assigns as a tracker. Only with no operation of this
    // process in progress and none it tracks undecided (undecided_tracks);
    // the protocol's memory of finished operations (decided tracks,
    // destructs and joins that ended, notices of constructs nobody here
    // called) is not saved: it serves peers still inside an operation,
    // and at a checkpoint none is.
    const std::map<std::string, PGroup>& constructed() const { return groups_; }
    uint32_t next_context() const { return next_cid_; }
    size_t undecided_tracks() const {
        size_t n = 0;
        for (const auto& [key, t] : tracks_) n += !t.decided;
        return n;
    }
    // Restart, into a process that constructed no group: the saved groups
    // and counter.
    void restore(std::vector<PGroup> groups, uint32_t next_context);

    // Tests and weft-info: live state, to show nothing grows.
    size_t tracked() const { return tracks_.size(); }
    size_t ops() const { return ops_.size(); }
    size_t groups() const { return groups_.size(); }
    // Contributions this process holds as the tracker of a construct.
    size_t contributions(const std::string& name) const {
        auto it = tracks_.find({uint8_t(PgOp::Kind::construct), name});
        return it == tracks_.end() ? 0 : it->second.contribs.size();
    }

private:
    enum class Type : uint8_t {
        contrib = 1,
        added,
        result,
        withdraw,
        query,
        left,
        hello,
        bye,
        invite,
        decline,
        vote,
        selected
    };
    // A participant's answer in a leader re-selection round.
    enum Vote : uint8_t { vote_nominate = 1, vote_accepted, vote_abort, vote_declined, vote_pending };

    struct Contribution {
        uint32_t peer = 0;
        uint64_t nonce = 0;
        bool leader = false;
        std::vector<Proc> leaders, add_members, order;
        uint32_t flags = 0;
        std::vector<uint8_t> info;
        uint64_t invite_nonce = 0;  // a joiner's: the invitation it accepts
    };
    struct Outcome {
        Status status = WEFT_OK;
        uint64_t context_id = 0;
        uint32_t flags = 0;
        std::vector<Proc> members;
        std::vector<std::vector<uint8_t>> infos;
        std::vector<Proc> failed, departed;
    };
    // The tracker's view of one operation.
    struct Track {
        PgOp::Kind kind = PgOp::Kind::construct;
        std::string name;
        std::map<Proc, Contribution> contribs;
        std::map<Proc, std::pair<uint64_t, Status>> withdrawn;  // nonce, why
        std::set<Proc> departed;                                // left
        std::set<Proc> queried;
        std::optional<Outcome> decided;
        Deadline expires{0};  // a track nobody here called for is dropped then
        // Invite method: the leader's track.
        bool invite = false;
        uint64_t invite_nonce = 0;
        uint32_t flags = 0;
        std::vector<Proc> invitees;
        std::set<Proc> declined, invite_failed;
    };
    using TrackKey = std::pair<uint8_t, std::string>;

    struct Msg {
        uint32_t peer;
        std::vector<uint8_t> bytes;
    };

    static void on_msg(void* arg, uint32_t source_peer, const void* payload, size_t len);
    static uint32_t on_progress(void* arg);
    static void on_peer_gone(void* arg, uint32_t peer, bool departed);

    uint32_t pump();
    void handle(const Msg& m);
    bool gone(uint32_t peer) const;
    bool gone(Proc p) const { return gone(peer_of(p)); }
    uint32_t peer_of(Proc p) const;
    Proc self() const;
    Status check_procs(const std::vector<Proc>& v, const char* what, const char* fn) const;

    // A new operation of this process, kept in ops_ until reaped.
    PgOp& new_op(PgOp::Kind kind, const std::string& name, uint32_t timeout_ms);
    // Participant side.
    std::vector<Proc> participants_known(const PgOp& op) const;
    uint32_t tracker_for(const PgOp& op) const;
    void contribute(PgOp& op);
    // Bootstrap: HELLO {count} to every process of the launch (or, as a
    // reply, to one); then the leaders known so far, and on with the
    // collective method once there are `bootstrap` of them.
    void send_hello(const PgOp& op, uint32_t to, bool reply);
    void discover(PgOp& op);
    void on_hello(const std::string& name, Proc from, uint32_t peer, uint64_t nonce, uint32_t count, bool reply);
    void proceed_as_leader(PgOp& op);
    void withdraw(PgOp& op, Status why);
    void send_withdraw(PgOp& op);
    void advance(PgOp& op);
    void apply(PgOp& op, const Outcome& o);
    void finish(PgOp& op, Status st);
    // Leader re-selection (invite method).
    void lose_leader(PgOp& op);
    Status answer_selection(const std::string& name, uint8_t vote, const char* fn);
    void cast_votes();
    std::vector<uint8_t> vote_message(const std::string& name, uint64_t invite_nonce, uint32_t round, uint8_t vote,
                                      bool reply, uint64_t voter_nonce) const;
    void on_vote(const std::string& name, Proc from, uint32_t peer, uint64_t invite_nonce, uint32_t round, uint8_t vote,
                 bool reply, uint64_t voter_nonce);
    void try_select(PgOp& op);
    void on_selected(const std::string& name, uint64_t invite_nonce, bool has_leader, Proc leader, uint32_t round);
    void become_leader(PgOp& op, const std::set<Proc>& declined);
    void remember_join_end(uint64_t invite_nonce, Status st);
    PgOp* op_for(PgOp::Kind kind, const std::string& name);

    // Tracker side.
    Track& track(PgOp::Kind kind, const std::string& name);
    void take(Track& t, Proc from, Contribution c);
    void withdrawn_by(Track& t, Proc from, uint64_t nonce, Status why);
    void step(Track& t);
    void step_invite(Track& t);
    void decide(Track& t, Outcome o);
    void send_result(const Track& t, Proc to, uint64_t nonce, uint32_t peer);
    bool am_tracker(const Track& t) const;

    // Wire.
    void send(uint32_t peer, const std::vector<uint8_t>& bytes);
    std::vector<uint8_t> encode_contrib(const PgOp& op) const;
    std::vector<uint8_t> encode_result(PgOp::Kind kind, const std::string& name, uint64_t nonce, const Outcome& o,
                                       Type type = Type::result) const;
    bool is_self(uint32_t peer) const { return peer == rt_.rank(); }  // this job's ranks are peers 0..size-1
    // Events are queued, then delivered once no map of ours is being walked
    // (a handler may call back into weft).
    void raise(weft_group_event_t ev, const std::string& name, Proc p);
    void deliver_events();
    void notice_deaths();
    // LEFT naming leaver to g's other members; the same applied here.
    void tell_left(const PGroup& g, Proc leaver);
    void drop_leaver(const std::string& name, Proc leaver);

    Engine& eng_;
    Runtime& rt_;
    std::vector<Msg> inbox_;
    std::vector<std::unique_ptr<PgOp>> ops_;
    std::map<TrackKey, Track> tracks_;
    std::map<std::string, PGroup> groups_;
    // LEFT notices that overtook the outcome of our own construct of that
    // name (the leaver had its outcome first): applied once ours comes.
    std::map<std::string, std::set<Proc>> early_left_;
    // ADDED notices for names this process has not called construct for
    // yet (an added member that arrives late): name -> leaders.
    std::map<std::string, std::pair<std::vector<Proc>, Deadline>> added_;
    // Bootstrap HELLOs by name, kept a while for leaders that call later.
    struct Hello {
        Proc proc;
        uint64_t nonce;
        uint32_t count;
        Deadline expires;
    };
    std::map<std::string, std::vector<Hello>> hellos_;
    // Invitations received and not answered: name -> leader, its nonce.
    struct Invitation {
        Proc leader;        // a new one after a re-selection
        Proc first_leader;  // the inviter
        uint64_t nonce;
        uint32_t flags;
        uint32_t round;  // re-selections so far
        std::vector<Proc> invitees;
        Deadline expires;
    };
    std::map<std::string, Invitation> invitations_;
    // Destructs this process completed, for a new tracker's QUERY: name ->
    // status (bounded: the oldest go first).
    std::vector<std::pair<std::string, Status>> destructed_;
    // Invite-method constructs this process joined that did not form a
    // group (invitation nonce -> status), for a re-selection's votes.
    std::vector<std::pair<uint64_t, Status>> joins_ended_;
    std::vector<uint8_t> gone_;  // by peer: departed or failed (on_peer_gone)
    struct Handler {
        uint64_t id;
        weft_group_event_fn fn;
        void* arg;
    };
    std::vector<Handler> handlers_;
    struct Event {
        weft_group_event_t ev;
        std::string name;
        Proc proc;
    };
    std::vector<Event> events_;
    uint64_t next_handler_ = 1;
    uint32_t in_handler_ = 0;
    uint64_t next_nonce_;
    uint32_t next_cid_ = 1;
    uint32_t open_tracks_ = 0;  // undecided tracks at the last pump
    bool deaths_ = false;       // a peer went since the last pump
};

inline constexpr Runtime::LayerKey<ProcessGroups> pgroup_layer{"group.pgroup"};

}  // namespace weft::group
