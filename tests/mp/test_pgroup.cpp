// Process groups (weft/group.h) under weft-run: the collective method with
// added members, destruct, leave, timeouts, cancel, bad input, and the
// fault-tolerance rules with real deaths (GroupFault.*, each its own ctest
// entry with the --fault it needs). docs/groups.md maps each rule of seed
// 000 to the test here that proves it.
#include "mp_main.hpp"

#include "group/pgroup.hpp"
#include "transport/backend.hpp"
#include "transport/runtime.hpp"

#include <weft/comm.h>
#include <weft/drain.h>
#include <weft/ft.h>
#include <weft/group.h>
#include <weft/version.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

using namespace mp;

namespace {

uint32_t job() {
    uint32_t j = 0;
    EXPECT_EQ(weft_job_id(ctx, &j), WEFT_OK);
    return j;
}

weft_proc_t proc(uint32_t r) { return weft_proc_t{job(), r}; }

std::vector<weft_proc_t> all_procs() {
    std::vector<weft_proc_t> v;
    for (uint32_t r = 0; r < size; ++r) v.push_back(proc(r));
    return v;
}

std::vector<uint8_t> info_of(uint32_t r) {
    std::vector<uint8_t> b(64);
    for (size_t i = 0; i < b.size(); ++i) b[i] = uint8_t(r * 31 + i);
    return b;
}

std::vector<weft_proc_t> members(const char* name) {
    size_t n = 0;
    EXPECT_EQ(weft_group_members(ctx, name, nullptr, 0, &n), WEFT_OK);
    std::vector<weft_proc_t> v(n);
    EXPECT_EQ(weft_group_members(ctx, name, v.data(), v.size(), &n), WEFT_OK);
    return v;
}

std::vector<uint32_t> ranks_of(const std::vector<weft_proc_t>& v) {
    std::vector<uint32_t> r;
    for (const auto& p : v) r.push_back(p.rank);
    return r;
}

// This process's rank in comm.
uint32_t hr(weft_comm_t comm) {
    uint32_t r = 0;
    EXPECT_EQ(weft_comm_rank(comm, &r), WEFT_OK);
    return r;
}

// Constructs group `name` over procs with a context ID, its members in
// `order`, and makes it a communicator.
void group_comm_in_order(const char* name, const std::vector<weft_proc_t>& procs, const std::vector<weft_proc_t>& order,
                         weft_comm_t& out) {
    weft_group_options_t o{};
    o.flags = WEFT_GROUP_ASSIGN_CONTEXT_ID;
    o.final_order = order.data();
    o.n_final_order = order.size();
    ASSERT_EQ(weft_group_construct(ctx, name, procs.data(), procs.size(), &o), WEFT_OK);
    ASSERT_EQ(weft_group_comm(ctx, name, &out), WEFT_OK);
}

// The same 64-bit value on every member of comm?
bool same_on(weft_comm_t comm, uint64_t v) {
    uint32_t n = 0;
    EXPECT_EQ(weft_comm_size(comm, &n), WEFT_OK);
    std::vector<uint64_t> all(n);
    EXPECT_EQ(weft_allgather(comm, &v, 1, WEFT_UINT64, all.data()), WEFT_OK);
    return std::all_of(all.begin(), all.end(), [&](uint64_t x) { return x == v; });
}

// The same 64-bit value on every rank of the world?
bool same_everywhere(uint64_t v) {
    weft_comm_t w = nullptr;
    EXPECT_EQ(weft_comm_world(ctx, &w), WEFT_OK);
    std::vector<uint64_t> all(size);
    EXPECT_EQ(weft_allgather(w, &v, 1, WEFT_UINT64, all.data()), WEFT_OK);
    return std::all_of(all.begin(), all.end(), [&](uint64_t x) { return x == v; });
}

struct Events {
    std::vector<std::pair<weft_group_event_t, weft_proc_t>> seen;
    std::string name;
    weft_status_t blocking_from_handler = WEFT_OK;
    bool try_blocking = false;
    // Invite method: how this process answers an invitation from its
    // handler (-1: it does not), and what the answer started.
    int answer = -1;
    weft_status_t join_status = WEFT_ERR_NOT_FOUND, blocking_join = WEFT_OK;
    weft_group_op_t join_op = nullptr;
    weft_proc_t inviter{};
    // Leader re-selection: what this process answers LEADER_FAILED with
    // (0 nothing, 'n' nominate itself, 'a' abort) and the call's status.
    char on_leader_failed = 0;
    weft_status_t reselect_status = WEFT_ERR_NOT_FOUND;
    bool saw(weft_group_event_t ev) const {
        for (const auto& [e, p] : seen)
            if (e == ev) return true;
        return false;
    }
};
void on_event(void* arg, weft_group_event_t ev, const char* name, weft_proc_t p) {
    auto* e = static_cast<Events*>(arg);
    e->seen.push_back({ev, p});
    e->name = name;
    if (e->try_blocking) e->blocking_from_handler = weft_group_construct(ctx, "from-handler", nullptr, 0, nullptr);
    if (ev == WEFT_GROUP_EVENT_INVITED) e->inviter = p;
    if (ev == WEFT_GROUP_EVENT_LEADER_FAILED && e->on_leader_failed == 'n')
        e->reselect_status = weft_group_nominate(ctx, name);
    // The second round: nominate when the leader that failed is the first
    // nominee (rank 1).
    if (ev == WEFT_GROUP_EVENT_LEADER_FAILED && e->on_leader_failed == '2' && p.rank == 1)
        e->reselect_status = weft_group_nominate(ctx, name);
    if (ev == WEFT_GROUP_EVENT_LEADER_FAILED && e->on_leader_failed == 'a')
        e->reselect_status = weft_group_abort(ctx, name);
    if (ev == WEFT_GROUP_EVENT_INVITED && e->answer >= 0) {
        e->blocking_join = weft_group_join(ctx, name, p, 1, nullptr);  // must not block here
        e->join_status = weft_group_join_nb(ctx, name, p, e->answer, nullptr, &e->join_op);
    }
}

// Waits for the invitation to name, and answers it unless the handler
// already did (an invitation can arrive while this rank is still inside
// the barrier before the test sets its answer). False: none came.
bool answer_invitation(Events& e, const char* name, int accept) {
    if (!progress_until([&] { return e.saw(WEFT_GROUP_EVENT_INVITED); })) return false;
    if (e.join_status == WEFT_ERR_NOT_FOUND)
        e.join_status = weft_group_join_nb(ctx, name, e.inviter, accept, nullptr, &e.join_op);
    return true;
}

class Groups : public ::testing::Test {
protected:
    void SetUp() override {
        ASSERT_EQ(weft_group_event_register(ctx, on_event, &ev_, &handler_), WEFT_OK);
        barrier();
    }
    void TearDown() override { EXPECT_EQ(weft_group_event_deregister(ctx, handler_), WEFT_OK); }
    Events ev_;
    uint64_t handler_ = 0;
};

// The invitees' handlers accept from inside the handler (join_nb), set up
// before the barrier after which the leader invites.
class Invites : public Groups {
protected:
    void SetUp() override {
        ev_.answer = rank == 0 ? -1 : 1;
        Groups::SetUp();
    }
};

weft::group::ProcessGroups& pgroups() { return *weft::group::ProcessGroups::of(*weft::runtime_of(ctx)); }

}  // namespace

// Seed 6.5.3.1: every leader names every leader, in its own order; all get
// the same membership, the same context ID and every member's info.
TEST_F(Groups, CollectiveInAnyOrderGivesOneMembershipAndContextId) {
    auto procs = all_procs();
    std::rotate(procs.begin(), procs.begin() + rank, procs.end());  // a different order on each rank
    if (rank % 2) std::reverse(procs.begin(), procs.end());
    const auto info = info_of(rank);
    weft_group_options_t o{};
    o.flags = WEFT_GROUP_ASSIGN_CONTEXT_ID;
    o.info = info.data();
    o.info_len = info.size();
    ASSERT_EQ(weft_group_construct(ctx, "all", procs.data(), procs.size(), &o), WEFT_OK);
    uint32_t n = 0;
    ASSERT_EQ(weft_group_size(ctx, "all", &n), WEFT_OK);
    EXPECT_EQ(n, size);
    const auto m = members("all");
    for (uint32_t r = 0; r < size; ++r) EXPECT_EQ(m[r].rank, r) << "members in (job, rank) order";
    uint64_t cid = 0;
    ASSERT_EQ(weft_group_context_id(ctx, "all", &cid), WEFT_OK);
    EXPECT_NE(cid, 0u);
    EXPECT_TRUE(same_everywhere(cid)) << "one context ID everywhere";
    for (uint32_t r = 0; r < size; ++r) {
        const void* p = nullptr;
        size_t len = 0;
        ASSERT_EQ(weft_group_info(ctx, "all", r, &p, &len), WEFT_OK);
        ASSERT_EQ(len, 64u);
        EXPECT_EQ(std::memcmp(p, info_of(r).data(), len), 0) << "member " << r << "'s info";
    }
    ASSERT_EQ(weft_group_destruct(ctx, "all", 0), WEFT_OK);
    EXPECT_EQ(weft_group_size(ctx, "all", &n), WEFT_ERR_NOT_FOUND);
    // A destructed group's name can be constructed again, with a new ID.
    ASSERT_EQ(weft_group_construct(ctx, "all", procs.data(), procs.size(), &o), WEFT_OK);
    uint64_t cid2 = 0;
    ASSERT_EQ(weft_group_context_id(ctx, "all", &cid2), WEFT_OK);
    EXPECT_NE(cid2, cid);
    EXPECT_TRUE(same_everywhere(cid2));
    ASSERT_EQ(weft_group_destruct(ctx, "all", 0), WEFT_OK);
}

// The seed's caller verification: not a participant -> NOT_A_MEMBER at
// once; a group without ASSIGN_CONTEXT_ID has none.
TEST_F(Groups, NonParticipantGetsNotAMemberAtOnce) {
    const weft_proc_t zero = proc(0);
    if (rank == 0) {
        ASSERT_EQ(weft_group_construct(ctx, "solo", &zero, 1, nullptr), WEFT_OK);
        uint64_t cid = 1;
        EXPECT_EQ(weft_group_context_id(ctx, "solo", &cid), WEFT_ERR_NOT_FOUND);
        EXPECT_EQ(members("solo").size(), 1u);
        EXPECT_EQ(weft_group_destruct(ctx, "solo", 0), WEFT_OK);
    } else {
        const uint64_t t0 = now_ns();
        EXPECT_EQ(weft_group_construct(ctx, "solo", &zero, 1, nullptr), WEFT_ERR_NOT_A_MEMBER);
        EXPECT_EQ(pgroups().ops(), 0u) << "nothing started";
        std::fprintf(stderr, "[pgroup] NOT_A_MEMBER after %.1f us\n", double(now_ns() - t0) / 1e3);
    }
}

// Seed: added members call with procs = NULL, may call before any leader
// ("follower first"), and the construct completes only once they all did,
// with their info in the result.
TEST_F(Groups, AddedMembersCallFirstAndAreIncluded) {
    // n ranks take part: n/2 leaders (named in reverse order), each adding
    // one member; n is even (at 3 ranks the third would be a follower that
    // no leader added, and would wait out its timeout).
    const uint32_t n = std::min<uint32_t>(size, 4) / 2 * 2, nleaders = n / 2;
    std::vector<weft_proc_t> leaders;
    for (uint32_t r = nleaders; r-- > 0;) leaders.push_back(proc(r));
    const auto info = info_of(rank);
    weft_group_options_t o{};
    o.info = info.data();
    o.info_len = info.size();
    weft_proc_t added = proc(rank + nleaders);
    if (rank < nleaders) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the members are first
        o.add_members = &added;
        o.n_add_members = 1;
        o.flags = WEFT_GROUP_ASSIGN_CONTEXT_ID;
        ASSERT_EQ(weft_group_construct(ctx, "added", leaders.data(), leaders.size(), &o), WEFT_OK);
    } else if (rank < n) {
        ASSERT_EQ(weft_group_construct(ctx, "added", nullptr, 0, &o), WEFT_OK);
    }
    uint64_t cid = 0;
    if (rank < n) {
        std::vector<uint32_t> expected(n);
        for (uint32_t r = 0; r < n; ++r) expected[r] = r;
        EXPECT_EQ(ranks_of(members("added")), expected);
        const void* p = nullptr;
        size_t len = 0;
        ASSERT_EQ(weft_group_info(ctx, "added", n - 1, &p, &len), WEFT_OK);
        ASSERT_EQ(len, 64u);
        EXPECT_EQ(std::memcmp(p, info_of(n - 1).data(), len), 0) << "an added member's info";
        ASSERT_EQ(weft_group_context_id(ctx, "added", &cid), WEFT_OK);
    }
    const uint64_t mine = rank < n ? cid : 0;
    weft_comm_t w = nullptr;
    ASSERT_EQ(weft_comm_world(ctx, &w), WEFT_OK);
    std::vector<uint64_t> all(size);
    ASSERT_EQ(weft_allgather(w, &mine, 1, WEFT_UINT64, all.data()), WEFT_OK);
    for (uint32_t r = 0; r < n; ++r) EXPECT_EQ(all[r], all[0]);
    if (rank < n) {
        ASSERT_EQ(weft_group_destruct(ctx, "added", 0), WEFT_OK);
    }
}

// Seed 6.5.3.2, bootstrap: two leaders (rank 0 and the last) pass only
// themselves and the count, find each other by the name, and each adds
// members (who call first, with NULL). As OpenPMIx's group_bootstrap.c.
TEST_F(Groups, BootstrapLeadersFindEachOther) {
    const uint32_t last = size - 1;
    weft_group_options_t o{};
    o.bootstrap_leaders = 2;
    o.flags = WEFT_GROUP_ASSIGN_CONTEXT_ID;
    std::vector<weft_proc_t> added;
    for (uint32_t r = 1; r < last; ++r)
        if ((r % 2 == 1) == (rank == 0)) added.push_back(proc(r));
    if (rank == 0 || rank == last) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the added members are first
        o.add_members = added.data();
        o.n_add_members = added.size();
        const weft_proc_t me = proc(rank);
        ASSERT_EQ(weft_group_construct(ctx, "boot", &me, 1, &o), WEFT_OK);
    } else {
        ASSERT_EQ(weft_group_construct(ctx, "boot", nullptr, 0, nullptr), WEFT_OK);
    }
    EXPECT_EQ(members("boot").size(), size);
    uint64_t cid = 0;
    ASSERT_EQ(weft_group_context_id(ctx, "boot", &cid), WEFT_OK);
    EXPECT_TRUE(same_everywhere(cid));
    ASSERT_EQ(weft_group_destruct(ctx, "boot", 0), WEFT_OK);
    // Again, the same name and leaders: the first construct's HELLOs are spent.
    if (rank == 0 || rank == last) {
        const weft_proc_t me = proc(rank);
        o = {};
        o.bootstrap_leaders = 2;
        ASSERT_EQ(weft_group_construct(ctx, "boot", &me, 1, &o), WEFT_OK);
        EXPECT_EQ(members("boot").size(), 2u);
        ASSERT_EQ(weft_group_destruct(ctx, "boot", 0), WEFT_OK);
    }
}

// Bootstrap leaders that disagree on the count: BAD_PARAM on each, no hang.
// A leader passing more than itself is refused at once.
TEST_F(Groups, BootstrapCountsThatDisagreeAreBadParam) {
    const weft_proc_t me = proc(rank);
    weft_group_options_t o{};
    if (rank < 2) {
        o.bootstrap_leaders = rank == 0 ? 2 : 3;
        EXPECT_EQ(weft_group_construct(ctx, "counts", &me, 1, &o), WEFT_ERR_BAD_PARAM);
    }
    o.bootstrap_leaders = 2;
    const weft_proc_t two[2] = {proc(0), proc(size - 1)};
    EXPECT_EQ(weft_group_construct(ctx, "counts", two, 2, &o), WEFT_ERR_INVALID_ARG);
    EXPECT_EQ(weft_group_construct(ctx, "counts", nullptr, 0, &o), WEFT_ERR_INVALID_ARG);
}

// Seed 6.5.3.3, invite: rank 0 invites everyone; each invitee's handler
// accepts with join_nb (a blocking join there is WOULD_BLOCK); every member
// gets CONSTRUCT_COMPLETE with the membership and context ID.
TEST_F(Invites, InviteAcceptedByAll) {
    std::vector<weft_proc_t> others;
    for (uint32_t r = 1; r < size; ++r) others.push_back(proc(r));
    weft_group_options_t o{};
    o.flags = WEFT_GROUP_ASSIGN_CONTEXT_ID;
    if (rank == 0) {
        ASSERT_EQ(weft_group_invite(ctx, "invited", others.data(), others.size(), &o), WEFT_OK);
    } else {
        ASSERT_TRUE(progress_until([&] { return ev_.join_status != WEFT_ERR_NOT_FOUND; })) << "no invitation";
        EXPECT_EQ(ev_.blocking_join, WEFT_ERR_WOULD_BLOCK);
        ASSERT_EQ(ev_.join_status, WEFT_OK);
        EXPECT_EQ(weft_group_op_wait(&ev_.join_op), WEFT_OK);
    }
    ASSERT_TRUE(progress_until([&] { return ev_.saw(WEFT_GROUP_EVENT_CONSTRUCT_COMPLETE); })) << "no COMPLETE";
    EXPECT_EQ(members("invited").size(), size);
    uint64_t cid = 0;
    ASSERT_EQ(weft_group_context_id(ctx, "invited", &cid), WEFT_OK);
    EXPECT_TRUE(same_everywhere(cid));
    EXPECT_EQ(weft_group_destruct(ctx, "invited", 0), WEFT_OK);
}

// A decline: all-or-nothing aborts (INVITE_FAILED to the leader, ABORT to
// every acceptor); with OPTIONAL the group forms without the decliner.
TEST_F(Groups, InviteDeclinedWithAndWithoutOptional) {
    std::vector<weft_proc_t> others;
    for (uint32_t r = 1; r < size; ++r) others.push_back(proc(r));
    const uint32_t decliner = size - 1;
    for (int optional = 0; optional < 2; ++optional) {
        const char* name = optional ? "decline-optional" : "decline-all";
        weft_group_options_t o{};
        o.flags = optional ? WEFT_GROUP_OPTIONAL : 0;
        if (rank == 0) {
            EXPECT_EQ(weft_group_invite(ctx, name, others.data(), others.size(), &o),
                      optional ? WEFT_OK : WEFT_ERR_CONSTRUCT_ABORT);
            ASSERT_TRUE(ev_.saw(WEFT_GROUP_EVENT_INVITE_FAILED));
            EXPECT_EQ(ev_.seen.front().second.rank, decliner);
        } else {
            ASSERT_TRUE(answer_invitation(ev_, name, rank == decliner ? 0 : 1)) << "no invitation";
            ASSERT_EQ(ev_.join_status, WEFT_OK);
            if (rank == decliner) {
                EXPECT_EQ(ev_.join_op, nullptr) << "a decline leaves nothing to wait for";
            } else {
                EXPECT_EQ(weft_group_op_wait(&ev_.join_op), optional ? WEFT_OK : WEFT_ERR_CONSTRUCT_ABORT);
                EXPECT_TRUE(ev_.saw(optional ? WEFT_GROUP_EVENT_CONSTRUCT_COMPLETE : WEFT_GROUP_EVENT_CONSTRUCT_ABORT));
            }
        }
        if (optional && rank != decliner) {
            EXPECT_EQ(members(name).size(), size - 1u);
            EXPECT_EQ(weft_group_destruct(ctx, name, 0), WEFT_OK);
        }
        // Before the barrier: the next invitation may come while we are in it.
        ev_.seen.clear();
        ev_.join_status = WEFT_ERR_NOT_FOUND;
        barrier();
    }
}

// A silent invitee: the leader's timeout fails it (INVITE_FAILED); with
// OPTIONAL the rest form the group. Its acceptance afterwards is ignored:
// the late join ends TIMEOUT and the group does not grow.
TEST_F(Groups, SilentInviteeAndALateAccept) {
    std::vector<weft_proc_t> others;
    for (uint32_t r = 1; r < size; ++r) others.push_back(proc(r));
    const uint32_t silent = size - 1;
    weft_group_options_t o{};
    o.flags = WEFT_GROUP_OPTIONAL;
    o.timeout_ms = 300;
    if (rank == 0) {
        ASSERT_EQ(weft_group_invite(ctx, "silent", others.data(), others.size(), &o), WEFT_OK);
        ASSERT_TRUE(ev_.saw(WEFT_GROUP_EVENT_INVITE_FAILED));
    } else if (rank != silent) {
        ASSERT_TRUE(answer_invitation(ev_, "silent", 1)) << "no invitation";
        EXPECT_EQ(weft_group_op_wait(&ev_.join_op), WEFT_OK);
    } else {
        ASSERT_TRUE(progress_until([&] { return ev_.saw(WEFT_GROUP_EVENT_INVITED); })) << "no invitation";
    }
    barrier();  // the leader has its outcome
    if (rank == silent) {
        EXPECT_EQ(weft_group_join(ctx, "silent", proc(0), 1, nullptr), WEFT_ERR_TIMEOUT) << "a late accept";
    } else {
        EXPECT_EQ(members("silent").size(), size - 1u);
    }
    barrier();
    if (rank != silent) {
        EXPECT_EQ(members("silent").size(), size - 1u) << "the late accept changed nothing";
        EXPECT_EQ(weft_group_destruct(ctx, "silent", 0), WEFT_OK);
    }
}

// FINAL_ORDER gives the membership's order; one that omits a member is
// BAD_PARAM on every participant, as is a leader naming other leaders.
TEST_F(Groups, FinalOrderAndDisagreementsAreBadParam) {
    auto procs = all_procs();
    std::vector<weft_proc_t> order(procs.rbegin(), procs.rend());
    weft_group_options_t o{};
    o.final_order = order.data();
    o.n_final_order = order.size();
    ASSERT_EQ(weft_group_construct(ctx, "ordered", procs.data(), procs.size(), &o), WEFT_OK);
    const auto m = ranks_of(members("ordered"));
    for (uint32_t i = 0; i < size; ++i) EXPECT_EQ(m[i], size - 1 - i);
    ASSERT_EQ(weft_group_destruct(ctx, "ordered", 0), WEFT_OK);

    o.n_final_order = order.size() - 1;  // omits rank 0
    EXPECT_EQ(weft_group_construct(ctx, "omits", procs.data(), procs.size(), &o), WEFT_ERR_BAD_PARAM);

    // The last rank names only itself and rank 0; the others name everyone.
    std::vector<weft_proc_t> mine = procs;
    if (rank == size - 1) mine = {proc(0), proc(rank)};
    const weft_status_t st = weft_group_construct(ctx, "disagree", mine.data(), mine.size(), nullptr);
    EXPECT_EQ(st, size > 2 ? WEFT_ERR_BAD_PARAM : WEFT_OK) << "at 2 ranks the last rank names everyone too";
    if (st == WEFT_OK) {
        EXPECT_EQ(weft_group_destruct(ctx, "disagree", 0), WEFT_OK);
    }
}

// Seed 6.5.3.6.4: a live participant that never calls -> TIMEOUT on every
// caller, bounded by the caller's timeout.
TEST_F(Groups, ParticipantThatNeverCallsTimesEveryCallerOut) {
    auto procs = all_procs();
    weft_group_options_t o{};
    o.timeout_ms = 300;
    const uint32_t late = size - 1;
    if (rank != late) {
        const uint64_t t0 = now_ns();
        EXPECT_EQ(weft_group_construct(ctx, "late", procs.data(), procs.size(), &o), WEFT_ERR_TIMEOUT);
        const double ms = double(now_ns() - t0) / 1e6;
        EXPECT_GE(ms, 250.0) << "not before the timeout";
        std::fprintf(stderr, "[pgroup] rank %u: TIMEOUT after %.0f ms (timeout 300 ms)\n", rank, ms);
    }
    barrier();
    // Everyone calls now: the timed-out attempt leaves nothing behind.
    o.timeout_ms = 0;
    ASSERT_EQ(weft_group_construct(ctx, "late", procs.data(), procs.size(), &o), WEFT_OK);
    ASSERT_EQ(weft_group_destruct(ctx, "late", 0), WEFT_OK);
}

// Cancel of an in-flight construct: CANCELED on every participant; after
// completion it changes nothing.
TEST_F(Groups, CancelEndsTheConstructEverywhere) {
    auto procs = all_procs();
    const uint32_t absent = size - 1;  // keeps it in flight
    weft_group_op_t op = nullptr;
    if (rank != absent) {
        ASSERT_EQ(weft_group_construct_nb(ctx, "cancelled", procs.data(), procs.size(), nullptr, &op), WEFT_OK);
    }
    if (rank == 0) {
        // A cancel ends the construct for every participant whose call
        // reached the tracker (rank 0) first; wait until all have.
        ASSERT_TRUE(progress_until([&] { return pgroups().contributions("cancelled") == size - 1; }))
            << "the tracker holds " << pgroups().contributions("cancelled") << " contributions";
        ASSERT_EQ(weft_group_op_cancel(op), WEFT_OK);
    }
    if (rank != absent) {
        EXPECT_EQ(weft_group_op_wait(&op), WEFT_ERR_CANCELED);
        EXPECT_EQ(op, nullptr);
    }
    barrier();
    ASSERT_EQ(weft_group_construct_nb(ctx, "cancelled", procs.data(), procs.size(), nullptr, &op), WEFT_OK);
    ASSERT_TRUE(progress_until([&] { return pgroups().find("cancelled") != nullptr; })) << "no group";
    EXPECT_EQ(weft_group_op_cancel(op), WEFT_OK) << "after completion: no effect";
    EXPECT_EQ(weft_group_op_wait(&op), WEFT_OK);
    EXPECT_EQ(members("cancelled").size(), size);
    ASSERT_EQ(weft_group_destruct(ctx, "cancelled", 0), WEFT_OK);
}

// Seed 6.5.3.5: leave is local; the others get LEFT and drop the leaver;
// the leaver's later destruct or leave is NOT_FOUND; a blocking group call
// from the event handler is WOULD_BLOCK.
TEST_F(Groups, LeaveIsLocalAndTheOthersDropTheLeaver) {
    auto procs = all_procs();
    ev_.try_blocking = true;  // the LEFT may come while our construct still runs
    ASSERT_EQ(weft_group_construct(ctx, "leave", procs.data(), procs.size(), nullptr), WEFT_OK);
    const uint32_t leaver = size - 1;
    if (rank == leaver) {
        ASSERT_EQ(weft_group_leave(ctx, "leave"), WEFT_OK);
        EXPECT_EQ(weft_group_destruct(ctx, "leave", 0), WEFT_ERR_NOT_FOUND);
        EXPECT_EQ(weft_group_leave(ctx, "leave"), WEFT_ERR_NOT_FOUND);
    } else {
        ASSERT_TRUE(progress_until([&] { return !ev_.seen.empty(); }, 10.0)) << "no LEFT event";
        EXPECT_EQ(ev_.seen[0].first, WEFT_GROUP_EVENT_LEFT);
        EXPECT_EQ(ev_.seen[0].second.rank, leaver);
        EXPECT_EQ(ev_.name, "leave");
        EXPECT_EQ(ev_.blocking_from_handler, WEFT_ERR_WOULD_BLOCK);
        uint32_t n = 0;
        ASSERT_EQ(weft_group_size(ctx, "leave", &n), WEFT_OK);
        EXPECT_EQ(n, size - 1);
        EXPECT_EQ(weft_group_destruct(ctx, "leave", 0), WEFT_OK);
    }
}

// A leave during an in-flight construct: the construct completes on the
// others without the leaver, whose own construct ends CANCELED.
TEST_F(Groups, LeaveDuringConstructCompletesOnTheOthers) {
    auto procs = all_procs();
    const uint32_t leaver = size - 1;
    if (rank == leaver) {
        weft_group_op_t op = nullptr;
        ASSERT_EQ(weft_group_construct_nb(ctx, "leaving", procs.data(), procs.size(), nullptr, &op), WEFT_OK);
        ASSERT_EQ(weft_group_leave(ctx, "leaving"), WEFT_OK);
        EXPECT_EQ(weft_group_op_wait(&op), WEFT_ERR_CANCELED);
        uint32_t n = 0;
        EXPECT_EQ(weft_group_size(ctx, "leaving", &n), WEFT_ERR_NOT_FOUND);
    } else {
        std::this_thread::sleep_for(std::chrono::milliseconds(30));
        ASSERT_EQ(weft_group_construct(ctx, "leaving", procs.data(), procs.size(), nullptr), WEFT_OK);
        // Whether the tracker heard of the leave before or after the group
        // formed, the others get LEFT and lose the leaver.
        ASSERT_TRUE(progress_until([&] { return !ev_.seen.empty(); }, 10.0)) << "no LEFT event";
        EXPECT_EQ(ev_.seen[0].first, WEFT_GROUP_EVENT_LEFT);
        EXPECT_EQ(ev_.seen[0].second.rank, leaver);
        auto m = ranks_of(members("leaving"));
        EXPECT_EQ(m.size(), size - 1u);
        EXPECT_EQ(std::count(m.begin(), m.end(), leaver), 0);
        EXPECT_EQ(weft_group_destruct(ctx, "leaving", 0), WEFT_OK);
    }
}

// Two groups with overlapping members built at once, started in opposite
// orders on alternate ranks.
TEST_F(Groups, TwoOverlappingConstructsAtOnce) {
    auto procs = all_procs();
    std::vector<weft_proc_t> low(procs.begin(), procs.begin() + (size + 1) / 2 + (size > 2 ? 1 : 0));
    const bool in_low = rank < low.size();
    weft_group_op_t a = nullptr, b = nullptr;
    weft_group_options_t o{};
    o.flags = WEFT_GROUP_ASSIGN_CONTEXT_ID;
    if (rank % 2) {
        if (in_low) {
            ASSERT_EQ(weft_group_construct_nb(ctx, "low", low.data(), low.size(), &o, &b), WEFT_OK);
        }
        ASSERT_EQ(weft_group_construct_nb(ctx, "every", procs.data(), procs.size(), &o, &a), WEFT_OK);
    } else {
        ASSERT_EQ(weft_group_construct_nb(ctx, "every", procs.data(), procs.size(), &o, &a), WEFT_OK);
        if (in_low) {
            ASSERT_EQ(weft_group_construct_nb(ctx, "low", low.data(), low.size(), &o, &b), WEFT_OK);
        }
    }
    EXPECT_EQ(weft_group_op_wait(&a), WEFT_OK);
    if (in_low) {
        EXPECT_EQ(weft_group_op_wait(&b), WEFT_OK);
    }
    uint64_t ca = 0, cb = 0;
    ASSERT_EQ(weft_group_context_id(ctx, "every", &ca), WEFT_OK);
    if (in_low) {
        ASSERT_EQ(weft_group_context_id(ctx, "low", &cb), WEFT_OK);
        EXPECT_NE(ca, cb);
        EXPECT_EQ(members("low").size(), low.size());
    }
    EXPECT_TRUE(same_everywhere(ca));
    EXPECT_EQ(weft_group_destruct(ctx, "every", 0), WEFT_OK);
    if (in_low) {
        EXPECT_EQ(weft_group_destruct(ctx, "low", 0), WEFT_OK);
    }
}

// A group's members can expand a group ID in procs (the seed's expansion).
TEST_F(Groups, GroupNamesInProcsAreExpanded) {
    auto procs = all_procs();
    ASSERT_EQ(weft_group_construct(ctx, "base", procs.data(), procs.size(), nullptr), WEFT_OK);
    const char* base = "base";
    weft_group_options_t o{};
    o.expand_groups = &base;
    o.n_expand_groups = 1;
    ASSERT_EQ(weft_group_construct(ctx, "expanded", nullptr, 0, &o), WEFT_ERR_INVALID_ARG)
        << "an added member cannot expand";
    const weft_proc_t me = proc(rank);
    ASSERT_EQ(weft_group_construct(ctx, "expanded", &me, 1, &o), WEFT_OK);
    EXPECT_EQ(members("expanded").size(), size);
    EXPECT_EQ(weft_group_destruct(ctx, "expanded", 0), WEFT_OK);
    EXPECT_EQ(weft_group_destruct(ctx, "base", 0), WEFT_OK);
}

// 100 construct/destruct cycles leave no operation behind and at most the
// last construct and destruct outcome of the name (kept a few seconds for
// late resends and a new tracker's queries).
// Item 4: a group with a context ID is a communicator: its ranks in the
// group's order (here the reverse of the job's), its context ID the
// group's; point-to-point, a collective, agreement and a drain that buffers
// a message in flight on it.
TEST_F(Groups, GroupWithContextIdIsACommunicator) {
    auto procs = all_procs();
    std::vector<weft_proc_t> order(procs.rbegin(), procs.rend());
    weft_comm_t gc = nullptr;
    ASSERT_NO_FATAL_FAILURE(group_comm_in_order("as-comm", procs, order, gc));
    uint32_t crank = 0, csize = 0;
    uint64_t cid = 0, gid = 0;
    ASSERT_EQ(weft_comm_rank(gc, &crank), WEFT_OK);
    ASSERT_EQ(weft_comm_size(gc, &csize), WEFT_OK);
    EXPECT_EQ(csize, size);
    EXPECT_EQ(crank, size - 1 - rank) << "ranks in the group's order";
    ASSERT_EQ(weft_comm_context_id(gc, &cid), WEFT_OK);
    ASSERT_EQ(weft_group_context_id(ctx, "as-comm", &gid), WEFT_OK);
    EXPECT_EQ(cid, gid);
    weft_comm_t again = nullptr;
    EXPECT_EQ(weft_group_comm(ctx, "as-comm", &again), WEFT_ERR_BUSY) << "one communicator per group";

    // A message in flight on it while the job drains: buffered, then received.
    const uint32_t to = (crank + 1) % csize, from = (crank + csize - 1) % csize;
    const uint64_t out = 1000 + crank;
    uint64_t in = 0;
    weft_request_t send = nullptr;
    ASSERT_EQ(weft_isend(gc, &out, 1, WEFT_UINT64, to, 7, &send), WEFT_OK);
    // One rank asks, every rank waits for that drain (a drain each would
    // leave a rank waiting in a second drain that the others, already in
    // the next collective, need it to leave).
    uint64_t number = 0;
    if (rank == 0) {
        ASSERT_EQ(weft_drain_request(ctx, &number), WEFT_OK);
    }
    weft_comm_t w = nullptr;
    ASSERT_EQ(weft_comm_world(ctx, &w), WEFT_OK);
    ASSERT_EQ(weft_bcast(w, &number, 1, WEFT_UINT64, 0), WEFT_OK);
    weft_drain_result_t res{};
    EXPECT_EQ(weft_drain_wait(ctx, number, 120000, &res), WEFT_OK);
    weft_msg_status_t ms{};
    ASSERT_EQ(weft_recv(gc, &in, 1, WEFT_UINT64, int32_t(from), 7, &ms), WEFT_OK);
    EXPECT_EQ(in, 1000 + from);
    EXPECT_EQ(weft_request_wait(&send, nullptr), WEFT_OK);

    const uint64_t mine = crank;
    uint64_t sum = 0;
    ASSERT_EQ(weft_allreduce(gc, &mine, &sum, 1, WEFT_UINT64, WEFT_OP_SUM), WEFT_OK);
    EXPECT_EQ(sum, uint64_t(size) * (size - 1) / 2);
    int flag = 1;
    EXPECT_EQ(weft_comm_agree(gc, &flag), WEFT_OK);
    EXPECT_EQ(weft_comm_free(&gc), WEFT_OK);
    EXPECT_EQ(weft_group_destruct(ctx, "as-comm", 0), WEFT_OK);

    // No context ID, or no such group: NOT_FOUND.
    ASSERT_EQ(weft_group_construct(ctx, "no-id", procs.data(), procs.size(), nullptr), WEFT_OK);
    EXPECT_EQ(weft_group_comm(ctx, "no-id", &gc), WEFT_ERR_NOT_FOUND);
    EXPECT_EQ(weft_group_comm(ctx, "never-built", &gc), WEFT_ERR_NOT_FOUND);
    EXPECT_EQ(weft_group_comm(ctx, "no-id", nullptr), WEFT_ERR_INVALID_ARG);
    EXPECT_EQ(weft_group_destruct(ctx, "no-id", 0), WEFT_OK);
}

TEST_F(Groups, HundredCyclesLeaveNothingBehind) {
    auto procs = all_procs();
    weft_group_options_t o{};
    o.flags = WEFT_GROUP_ASSIGN_CONTEXT_ID;
    const auto info = info_of(rank);
    o.info = info.data();
    o.info_len = info.size();
    const size_t tracked_before = pgroups().tracked();
    const uint64_t t0 = now_ns();
    for (int i = 0; i < 100; ++i) {
        ASSERT_EQ(weft_group_construct(ctx, "cycle", procs.data(), procs.size(), &o), WEFT_OK) << "cycle " << i;
        ASSERT_EQ(weft_group_destruct(ctx, "cycle", 0), WEFT_OK) << "cycle " << i;
    }
    std::fprintf(stderr, "[pgroup] rank %u: construct+destruct %.1f us per cycle at %u ranks\n", rank,
                 double(now_ns() - t0) / 1e3 / 100, size);
    EXPECT_EQ(pgroups().ops(), 0u);
    EXPECT_LE(pgroups().tracked(), tracked_before + 2) << "one construct and one destruct outcome kept for the name";
}

// Corrupted and truncated group messages (the group layer's internal id)
// are dropped with an error line; the receiver keeps working.
TEST_F(Groups, CorruptedMessagesAreDroppedAndNothingBreaks) {
    if (rank == 0) {
        weft::Runtime& rt = *weft::runtime_of(ctx);
        const uint32_t id = weft::Runtime::am_internal_first + 3;  // group/pgroup.cpp's
        const uint8_t garbage[] = {0xff, 0x01, 0x02, 0x03};
        const uint8_t truncated[] = {1, 1, 5, 0, 0, 0, 'a', 'b'};  // a CONTRIB cut inside its name
        const uint8_t bad_kind[] = {1, 9, 1, 0, 0, 0, 'x', 0, 0, 0, 0, 0, 0, 0, 0};
        for (uint32_t peer = 1; peer < size; ++peer) {
            EXPECT_EQ(rt.backend().am_send(peer, id, garbage, sizeof garbage), WEFT_OK);
            EXPECT_EQ(rt.backend().am_send(peer, id, truncated, sizeof truncated), WEFT_OK);
            EXPECT_EQ(rt.backend().am_send(peer, id, bad_kind, sizeof bad_kind), WEFT_OK);
        }
    }
    auto procs = all_procs();
    ASSERT_EQ(weft_group_construct(ctx, "after-garbage", procs.data(), procs.size(), nullptr), WEFT_OK);
    EXPECT_EQ(members("after-garbage").size(), size);
    EXPECT_EQ(weft_group_destruct(ctx, "after-garbage", 0), WEFT_OK);
}

TEST_F(Groups, BadInputIsRefusedClearly) {
    const weft_proc_t me = proc(rank);
    EXPECT_EQ(weft_group_construct(nullptr, "x", &me, 1, nullptr), WEFT_ERR_NOT_INITIALIZED);
    EXPECT_EQ(weft_group_construct(ctx, nullptr, &me, 1, nullptr), WEFT_ERR_INVALID_ARG);
    EXPECT_EQ(weft_group_construct(ctx, "", &me, 1, nullptr), WEFT_ERR_INVALID_ARG);
    const std::string long_name(WEFT_GROUP_NAME_MAX, 'n');
    EXPECT_EQ(weft_group_construct(ctx, long_name.c_str(), &me, 1, nullptr), WEFT_ERR_INVALID_ARG);
    const weft_proc_t dup[2] = {me, me};
    EXPECT_EQ(weft_group_construct(ctx, "x", dup, 2, nullptr), WEFT_ERR_INVALID_ARG);
    const weft_proc_t unknown_rank = proc(size);
    EXPECT_EQ(weft_group_construct(ctx, "x", &unknown_rank, 1, nullptr), WEFT_ERR_INVALID_RANK);
    const weft_proc_t unknown_job{1000, 0};
    EXPECT_EQ(weft_group_construct(ctx, "x", &unknown_job, 1, nullptr), WEFT_ERR_INVALID_RANK);
    EXPECT_EQ(weft_group_construct(ctx, "x", nullptr, 3, nullptr), WEFT_ERR_INVALID_ARG);
    weft_group_options_t o{};
    o.info_len = 8;
    EXPECT_EQ(weft_group_construct(ctx, "x", &me, 1, &o), WEFT_ERR_INVALID_ARG);
    o = {};
    o.flags = 1u << 20;
    EXPECT_EQ(weft_group_construct(ctx, "x", &me, 1, &o), WEFT_ERR_INVALID_ARG);
    o = {};
    o.info_len = WEFT_GROUP_INFO_MAX + 1;
    o.info = &o;
    EXPECT_EQ(weft_group_construct(ctx, "x", &me, 1, &o), WEFT_ERR_INVALID_ARG);
    o = {};
    o.add_members = &me;
    o.n_add_members = 1;
    EXPECT_EQ(weft_group_construct(ctx, "x", &me, 1, &o), WEFT_ERR_INVALID_ARG) << "leader and added member";
    const char* nope = "no-such-group";
    o = {};
    o.expand_groups = &nope;
    o.n_expand_groups = 1;
    EXPECT_EQ(weft_group_construct(ctx, "x", &me, 1, &o), WEFT_ERR_NOT_FOUND);
    EXPECT_EQ(weft_group_destruct(ctx, "never-built", 0), WEFT_ERR_NOT_FOUND);
    EXPECT_EQ(weft_group_leave(ctx, "never-built"), WEFT_ERR_NOT_FOUND);
    uint32_t n = 0;
    EXPECT_EQ(weft_group_size(ctx, "never-built", &n), WEFT_ERR_NOT_FOUND);
    EXPECT_EQ(weft_group_size(ctx, "never-built", nullptr), WEFT_ERR_INVALID_ARG);
    EXPECT_EQ(weft_group_op_wait(nullptr), WEFT_ERR_INVALID_ARG);
    weft_group_op_t none = nullptr;
    EXPECT_EQ(weft_group_op_wait(&none), WEFT_ERR_INVALID_ARG);
    EXPECT_EQ(weft_group_op_cancel(nullptr), WEFT_ERR_INVALID_ARG);
    EXPECT_EQ(weft_group_event_deregister(ctx, 987654), WEFT_ERR_NOT_FOUND);
    // A group of one: BUSY while it exists, an index past its size refused.
    ASSERT_EQ(weft_group_construct(ctx, "mine", &me, 1, nullptr), WEFT_OK);
    EXPECT_EQ(weft_group_construct(ctx, "mine", &me, 1, nullptr), WEFT_ERR_BUSY);
    const void* p = nullptr;
    size_t len = 0;
    EXPECT_EQ(weft_group_info(ctx, "mine", 1, &p, &len), WEFT_ERR_INVALID_RANK);
    EXPECT_EQ(weft_group_info(ctx, "mine", 0, &p, &len), WEFT_OK);
    EXPECT_EQ(len, 0u);
    EXPECT_EQ(weft_group_destruct(ctx, "mine", 0), WEFT_OK);
    int present = 0;
    EXPECT_EQ(weft_group_ft_supported(&present), WEFT_OK);
    EXPECT_EQ(present, 1);
    EXPECT_EQ(WEFT_CAP_GROUP_FT, 1);
}

namespace {
// Every process of the launch, which must have more than this job.
void everyone_of_two_jobs(std::vector<weft_proc_t>& out) {
    uint32_t universe = 0;
    ASSERT_EQ(weft_universe_size(ctx, &universe), WEFT_OK);
    ASSERT_GT(universe, size) << "run with two jobs: weft-run -n A mp_pgroup : -n B mp_pgroup";
    for (uint32_t p = 0; p < universe; ++p) {
        weft_proc_t q{};
        ASSERT_EQ(weft_peer_identity(ctx, p, &q.job, &q.rank), WEFT_OK);
        out.push_back(q);
    }
}
}  // namespace

// Two jobs of one launch (weft-run -n 2 mp_pgroup : -n 3 mp_pgroup): one
// group over every process of both, with a context ID; each member sees
// the other job's members and their info. Then the root of each job leads
// and adds the rest of its own job (roots that know only each other).
TEST(CrossJob, OneGroupOverTwoJobs) {
    std::vector<weft_proc_t> everyone;
    ASSERT_NO_FATAL_FAILURE(everyone_of_two_jobs(everyone));
    const uint32_t universe = static_cast<uint32_t>(everyone.size());
    const weft_proc_t me{job(), rank};
    std::vector<uint8_t> info(16, uint8_t(me.job * 16 + me.rank));
    weft_group_options_t o{};
    o.flags = WEFT_GROUP_ASSIGN_CONTEXT_ID;
    o.info = info.data();
    o.info_len = info.size();
    ASSERT_EQ(weft_group_construct(ctx, "jobs", everyone.data(), everyone.size(), &o), WEFT_OK);
    const auto m = members("jobs");
    ASSERT_EQ(m.size(), universe);
    for (uint32_t i = 0; i < m.size(); ++i) {
        const void* p = nullptr;
        size_t len = 0;
        ASSERT_EQ(weft_group_info(ctx, "jobs", i, &p, &len), WEFT_OK);
        ASSERT_EQ(len, 16u);
        EXPECT_EQ(*static_cast<const uint8_t*>(p), uint8_t(m[i].job * 16 + m[i].rank));
    }
    uint64_t cid = 0;
    EXPECT_EQ(weft_group_context_id(ctx, "jobs", &cid), WEFT_OK);
    // The job-level information of both jobs, and where each member runs.
    weft_group_job_t jobs[4];
    size_t njobs = 0;
    ASSERT_EQ(weft_group_jobs(ctx, "jobs", jobs, 4, &njobs), WEFT_OK);
    ASSERT_EQ(njobs, 2u);
    EXPECT_EQ(jobs[0].size + jobs[1].size, universe);
    EXPECT_EQ(jobs[0].members, jobs[0].size);
    EXPECT_EQ(jobs[1].nodes, 1u) << "one host";
    uint32_t node = 9;
    ASSERT_EQ(weft_proc_node(ctx, m.back(), &node), WEFT_OK);
    EXPECT_EQ(node, 0u) << "every process on host 0";
    EXPECT_EQ(weft_proc_node(ctx, weft_proc_t{7, 0}, &node), WEFT_ERR_INVALID_RANK);
    EXPECT_EQ(weft_group_destruct(ctx, "jobs", 0), WEFT_OK);

    // Bootstrap: each job's root knows only that there are two roots, and
    // adds its own job (weft-run a : b whose roots know only each other).
    std::vector<weft_proc_t> rest;
    for (const auto& q : everyone)
        if (q.job == me.job && q.rank != 0) rest.push_back(q);
    if (rank == 0) {
        weft_group_options_t b{};
        b.bootstrap_leaders = 2;
        b.add_members = rest.data();
        b.n_add_members = rest.size();
        ASSERT_EQ(weft_group_construct(ctx, "bootjobs", &me, 1, &b), WEFT_OK);
    } else {
        ASSERT_EQ(weft_group_construct(ctx, "bootjobs", nullptr, 0, nullptr), WEFT_OK);
    }
    EXPECT_EQ(members("bootjobs").size(), universe);
    EXPECT_EQ(weft_group_destruct(ctx, "bootjobs", 0), WEFT_OK);

    // Each job's root leads; the roots name each other and add their own job.
    std::vector<weft_proc_t> roots, mine;
    for (const auto& q : everyone) {
        if (q.rank == 0) roots.push_back(q);
        if (q.job == me.job && q.rank != 0) mine.push_back(q);
    }
    weft_group_options_t a{};
    if (rank == 0) {
        a.add_members = mine.data();
        a.n_add_members = mine.size();
        ASSERT_EQ(weft_group_construct(ctx, "roots", roots.data(), roots.size(), &a), WEFT_OK);
    } else {
        ASSERT_EQ(weft_group_construct(ctx, "roots", nullptr, 0, nullptr), WEFT_OK);
    }
    EXPECT_EQ(members("roots").size(), universe);
    EXPECT_EQ(weft_group_destruct(ctx, "roots", 0), WEFT_OK);
}

// A group over both jobs as a communicator (issue 15, item 4): its ranks
// are the group's members, two jobs' processes; point to point (eager,
// large, ANY_SOURCE), blocking and non-blocking collectives, a split into
// communicators that still span both jobs, agreement, revoke and shrink
// work on it. Its
// messages stay out of each job's drain sums: while it lives a drain
// answers UNSUPPORTED in both jobs, and once it is freed each job drains
// to a quiescent point (which it could not if a cross-job message had been
// counted at one end only).
TEST(CrossJob, GroupAsCommunicator) {
    std::vector<weft_proc_t> everyone;
    ASSERT_NO_FATAL_FAILURE(everyone_of_two_jobs(everyone));
    const uint32_t universe = static_cast<uint32_t>(everyone.size());
    // Listed in an order other than the universe's: the second job first.
    std::sort(everyone.begin(), everyone.end(), [](const weft_proc_t& a, const weft_proc_t& b) {
        return a.job != b.job ? a.job > b.job : a.rank < b.rank;
    });
    const weft_proc_t me{job(), rank};
    weft_comm_t c = nullptr;
    ASSERT_NO_FATAL_FAILURE(group_comm_in_order("xcomm", everyone, everyone, c));
    uint32_t n = 0, r = 0;
    ASSERT_EQ(weft_comm_size(c, &n), WEFT_OK);
    ASSERT_EQ(weft_comm_rank(c, &r), WEFT_OK);
    ASSERT_EQ(n, universe);
    // The communicator's ranks are the group's members, in its order.
    for (uint32_t i = 0; i < n; ++i) {
        weft_proc_t p{};
        ASSERT_EQ(weft_comm_proc(c, i, &p), WEFT_OK);
        EXPECT_EQ(p.job, everyone[i].job) << "rank " << i;
        EXPECT_EQ(p.rank, everyone[i].rank) << "rank " << i;
        uint32_t jr = 0;
        EXPECT_EQ(weft_comm_job_rank(c, i, &jr), p.job == me.job ? WEFT_OK : WEFT_ERR_INVALID_RANK);
        if (p.job == me.job) {
            EXPECT_EQ(jr, p.rank);
        }
    }
    EXPECT_EQ(everyone[r].job, me.job);
    EXPECT_EQ(everyone[r].rank, me.rank);
    weft_proc_t none{};
    EXPECT_EQ(weft_comm_proc(c, n, &none), WEFT_ERR_INVALID_RANK);
    EXPECT_EQ(weft_comm_proc(c, 0, nullptr), WEFT_ERR_INVALID_ARG);
    uint32_t slot = 0;
    EXPECT_EQ(weft_comm_clock_slot(c, &slot), WEFT_ERR_NOT_FOUND) << "no Collective Clock across jobs";
    const uint64_t tag_of_me = uint64_t(me.job) * 1000 + me.rank;

    // Point to point: a ring, eager and large (past any eager limit).
    const uint32_t next = (r + 1) % n, prev = (r + n - 1) % n;
    for (size_t bytes : {size_t(8), size_t(1) << 20}) {
        std::vector<uint8_t> out(bytes, uint8_t(r + 1)), in(bytes, 0);
        weft_request_t reqs[2] = {};
        ASSERT_EQ(weft_irecv(c, in.data(), bytes, WEFT_BYTE, int32_t(prev), 7, &reqs[0]), WEFT_OK);
        ASSERT_EQ(weft_isend(c, out.data(), bytes, WEFT_BYTE, next, 7, &reqs[1]), WEFT_OK);
        weft_msg_status_t st[2] = {};
        ASSERT_EQ(weft_request_waitall(2, reqs, st), WEFT_OK) << bytes << " bytes";
        EXPECT_EQ(st[0].source, int32_t(prev));
        EXPECT_EQ(st[0].bytes, bytes);
        EXPECT_TRUE(std::all_of(in.begin(), in.end(), [&](uint8_t b) { return b == uint8_t(prev + 1); }))
            << bytes << " bytes from rank " << prev;
    }
    // ANY_SOURCE: rank 0 (of the other job's leading order) hears from all.
    if (r == 0) {
        std::vector<int> heard(n, 0);
        for (uint32_t k = 1; k < n; ++k) {
            uint64_t v = 0;
            weft_msg_status_t st{};
            ASSERT_EQ(weft_recv(c, &v, 1, WEFT_UINT64, WEFT_ANY_SOURCE, 9, &st), WEFT_OK);
            ASSERT_LT(uint32_t(st.source), n);
            EXPECT_EQ(v, uint64_t(everyone[st.source].job) * 1000 + everyone[st.source].rank);
            ++heard[st.source];
        }
        EXPECT_EQ(std::count(heard.begin() + 1, heard.end(), 1), int(n - 1));
    } else {
        ASSERT_EQ(weft_ssend(c, &tag_of_me, 1, WEFT_UINT64, 0, 9), WEFT_OK);
    }

    // Collectives: small and large allreduce, bcast from the last rank (the
    // first job's), allgather, barrier, and their non-blocking forms.
    uint64_t sum = 0, want = 0;
    for (const auto& q : everyone) want += uint64_t(q.job) * 1000 + q.rank;
    ASSERT_EQ(weft_allreduce(c, &tag_of_me, &sum, 1, WEFT_UINT64, WEFT_OP_SUM), WEFT_OK);
    EXPECT_EQ(sum, want);
    std::vector<double> big(1 << 16, double(r)), big_sum(1 << 16, 0);
    ASSERT_EQ(weft_allreduce(c, big.data(), big_sum.data(), big.size(), WEFT_DOUBLE, WEFT_OP_SUM), WEFT_OK);
    EXPECT_EQ(big_sum.front(), double(n) * (n - 1) / 2);
    EXPECT_EQ(big_sum.back(), double(n) * (n - 1) / 2);
    std::vector<uint64_t> b(4096, r == n - 1 ? 0xabcdu : 0);
    ASSERT_EQ(weft_bcast(c, b.data(), b.size(), WEFT_UINT64, n - 1), WEFT_OK);
    EXPECT_TRUE(std::all_of(b.begin(), b.end(), [](uint64_t x) { return x == 0xabcdu; }));
    std::vector<uint64_t> all(n, 0);
    ASSERT_EQ(weft_allgather(c, &tag_of_me, 1, WEFT_UINT64, all.data()), WEFT_OK);
    for (uint32_t i = 0; i < n; ++i) EXPECT_EQ(all[i], uint64_t(everyone[i].job) * 1000 + everyone[i].rank);
    ASSERT_EQ(weft_barrier(c), WEFT_OK);
    weft_request_t ib = nullptr, ia = nullptr;
    uint64_t isum = 0;
    ASSERT_EQ(weft_ibarrier(c, &ib), WEFT_OK);
    ASSERT_EQ(weft_iallreduce(c, &tag_of_me, &isum, 1, WEFT_UINT64, WEFT_OP_SUM, &ia), WEFT_OK);
    EXPECT_EQ(weft_request_wait(&ib, nullptr), WEFT_OK);
    EXPECT_EQ(weft_request_wait(&ia, nullptr), WEFT_OK);
    EXPECT_EQ(isum, want);

    // Agreement across both jobs (weft/ft.h): the AND of every flag.
    int flag = r == 1 ? 0 : 1;
    ASSERT_EQ(weft_comm_agree(c, &flag), WEFT_OK);
    EXPECT_EQ(flag, 0);

    // A split by parity: both halves still span the jobs (ranks alternate
    // between them only by chance; whatever they hold, the sums check it).
    weft_comm_t half = nullptr;
    ASSERT_EQ(weft_comm_split(c, int32_t(r % 2), int32_t(r), &half), WEFT_OK);
    uint32_t hn = 0;
    ASSERT_EQ(weft_comm_size(half, &hn), WEFT_OK);
    EXPECT_EQ(hn, r % 2 ? n / 2 : (n + 1) / 2);
    uint64_t hsum = 0, hwant = 0;
    for (uint32_t i = r % 2; i < n; i += 2) hwant += uint64_t(everyone[i].job) * 1000 + everyone[i].rank;
    ASSERT_EQ(weft_allreduce(half, &tag_of_me, &hsum, 1, WEFT_UINT64, WEFT_OP_SUM), WEFT_OK);
    EXPECT_EQ(hsum, hwant);
    uint64_t hid = 0;
    ASSERT_EQ(weft_comm_context_id(half, &hid), WEFT_OK);
    EXPECT_TRUE(same_on(half, hid)) << "a split's context ID is the same on every member, in both jobs";
    // Revoked by its first rank (of whichever job): a receive posted from
    // the other job's side fails on every member, and a shrink of it
    // rebuilds a working communicator over both jobs.
    weft_request_t pending = nullptr;
    uint64_t never = 0;
    if (hn > 1 && hr(half) != 0) {
        ASSERT_EQ(weft_irecv(half, &never, 1, WEFT_UINT64, 0, 11, &pending), WEFT_OK);
    }
    ASSERT_EQ(weft_barrier(c), WEFT_OK);
    if (hr(half) == 0) {
        ASSERT_EQ(weft_comm_revoke(half), WEFT_OK);
    }
    if (pending) {
        EXPECT_EQ(weft_request_wait(&pending, nullptr), WEFT_ERR_REVOKED);
    }
    ASSERT_TRUE(progress_until(
        [&] {
            int revoked = 0;
            return weft_comm_is_revoked(half, &revoked) == WEFT_OK && revoked == 1;
        },
        20.0))
        << "the revoke did not reach this member";
    EXPECT_EQ(weft_barrier(half), WEFT_ERR_REVOKED);
    weft_comm_t shrunk = nullptr;
    ASSERT_EQ(weft_comm_shrink(half, &shrunk), WEFT_OK);
    uint64_t ssum = 0;
    ASSERT_EQ(weft_allreduce(shrunk, &tag_of_me, &ssum, 1, WEFT_UINT64, WEFT_OP_SUM), WEFT_OK);
    EXPECT_EQ(ssum, hwant) << "the shrunk communicator has every member of the half";
    ASSERT_EQ(weft_comm_free(&shrunk), WEFT_OK);
    ASSERT_EQ(weft_comm_free(&half), WEFT_OK);

    // The drain spans one job: refused in both while the communicator lives.
    // Drain numbers are job-wide: every rank waits for the same ones, and
    // every rank gets the same outcome for each. A refused drain ends on each
    // rank as soon as it knows (as one ended by a failure does), so rank 0
    // asks for the next only once every rank of its job has this one's.
    weft_comm_t world = nullptr;
    ASSERT_EQ(weft_comm_world(ctx, &world), WEFT_OK);
    uint64_t number = 0;
    auto drain_once = [&] {
        weft_drain_result_t res{};
        ++number;
        if (rank == 0) {
            uint64_t asked = 0;
            EXPECT_EQ(weft_drain_request(ctx, &asked), WEFT_OK);
            EXPECT_EQ(asked, number);
        }
        const weft_status_t st = weft_drain_wait(ctx, number, 60000, &res);
        EXPECT_EQ(res.status, st);
        EXPECT_TRUE(same_on(world, uint64_t(st))) << "drain " << number << ": one outcome for the job";
        return st;
    };
    EXPECT_EQ(drain_once(), WEFT_ERR_UNSUPPORTED) << "a drain while a communicator spans the jobs";
    ASSERT_EQ(weft_comm_free(&c), WEFT_OK);
    EXPECT_EQ(c, nullptr);
    EXPECT_EQ(weft_group_destruct(ctx, "xcomm", 0), WEFT_OK);
    // Freed (its release barrier may still be finishing here: a drain that
    // starts before it does is refused again): each job now drains, and its
    // sums balance — no message between the jobs was counted at one end.
    weft_status_t st = WEFT_ERR_UNSUPPORTED;
    for (int k = 0; k < 200 && st == WEFT_ERR_UNSUPPORTED; ++k) {
        for (int i = 0; i < 100; ++i) weft_progress(ctx, nullptr);
        st = drain_once();
    }
    EXPECT_EQ(st, WEFT_OK) << "job " << me.job << " did not drain once the communicator was freed";
}

// ---------------------------------------------------------------- faults
// Each runs in its own ctest entry with the fault it needs
// (tests/mp/CMakeLists.txt); the victim is the last rank unless the test
// says otherwise. Survivors check on their own: they cannot line up with a
// dead rank's bootstrap barrier.
namespace {

[[noreturn]] void die_at(const char* point) {
    weft_fault_point(point);
    std::fprintf(stderr, "[rank %u] survived fault point %s: run under weft-run --fault kill:...:at=%s\n", rank, point,
                 point);
    std::_Exit(3);
}

struct FaultRun {
    Events ev;
    uint64_t id = 0;
    FaultRun() { EXPECT_EQ(weft_group_event_register(ctx, on_event, &ev, &id), WEFT_OK); }
    ~FaultRun() { weft_group_event_deregister(ctx, id); }
    bool failed_named(uint32_t r) {
        return progress_until(
            [&] {
                for (auto& [e, p] : ev.seen)
                    if (e == WEFT_GROUP_EVENT_MEMBER_FAILED && p.rank == r) return true;
                return false;
            },
            20.0);
    }
};

}  // namespace

// Seed 6.5.3.6.1 default: a participant lost before contributing aborts the
// construct on every survivor.
TEST(GroupFault, DeathBeforeContributingAborts) {
    FaultRun f;
    barrier();
    const uint32_t victim = size - 1;
    if (rank == victim) die_at("mp.pgroup.victim");
    auto procs = all_procs();
    const uint64_t t0 = now_ns();
    EXPECT_EQ(weft_group_construct(ctx, "doomed", procs.data(), procs.size(), nullptr), WEFT_ERR_CONSTRUCT_ABORT);
    std::fprintf(stderr, "[pgroup] rank %u: CONSTRUCT_ABORT after %.1f ms\n", rank, double(now_ns() - t0) / 1e6);
    uint32_t n = 0;
    EXPECT_EQ(weft_group_size(ctx, "doomed", &n), WEFT_ERR_NOT_FOUND);
}

// With FT_COLLECTIVE: completes on the survivors, the membership excludes
// the dead, and each survivor gets MEMBER_FAILED naming it. The victim is
// dead before the others call (the "already dead" case) or dies as they
// do, per the fault's timing.
TEST(GroupFault, FtCollectiveCompletesOnSurvivors) {
    FaultRun f;
    barrier();
    const uint32_t victim = size - 1;
    if (rank == victim) die_at("mp.pgroup.victim");
    auto procs = all_procs();
    weft_group_options_t o{};
    o.flags = WEFT_GROUP_FT_COLLECTIVE | WEFT_GROUP_ASSIGN_CONTEXT_ID;
    const uint64_t t0 = now_ns();
    ASSERT_EQ(weft_group_construct(ctx, "ft", procs.data(), procs.size(), &o), WEFT_OK);
    std::fprintf(stderr, "[pgroup] rank %u: FT construct on survivors after %.1f ms\n", rank,
                 double(now_ns() - t0) / 1e6);
    auto m = ranks_of(members("ft"));
    EXPECT_EQ(m.size(), size - 1u);
    EXPECT_EQ(std::count(m.begin(), m.end(), victim), 0) << "the dead are not members";
    EXPECT_TRUE(f.failed_named(victim)) << "no MEMBER_FAILED naming rank " << victim;
    EXPECT_EQ(weft_group_destruct(ctx, "ft", 0), WEFT_OK);
}

// The tracker (rank 0, the lowest leader) dies at group.construct.contributed,
// right after its own contribution went in: with FT_COLLECTIVE the next
// leader takes over (it QUERYs the others) and the survivors complete
// without it; its contribution died with it.
TEST(GroupFault, TrackerDiesAfterContributing) {
    FaultRun f;
    barrier();
    auto procs = all_procs();
    weft_group_options_t o{};
    o.flags = WEFT_GROUP_FT_COLLECTIVE;
    // The tracker's own contribution must not complete the construct.
    if (rank != 0) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    const weft_status_t st = weft_group_construct(ctx, "after", procs.data(), procs.size(), &o);
    ASSERT_NE(rank, 0u) << "the victim survived its fault point";
    ASSERT_EQ(st, WEFT_OK);
    auto m = ranks_of(members("after"));
    EXPECT_EQ(std::count(m.begin(), m.end(), 0u), 0) << "the dead are not members";
    EXPECT_EQ(m.size(), size - 1u);
    EXPECT_TRUE(f.failed_named(0)) << "no MEMBER_FAILED naming rank 0";
    EXPECT_EQ(weft_group_destruct(ctx, "after", 0), WEFT_OK);
}

// A member whose contribution the tracker holds dies before the construct
// completes: no abort, even without FT_COLLECTIVE. Rank 2 calls last, so
// the tracker (rank 0) holds the victim's contribution before it dies.
// Whether the victim is still listed depends on whether its death was
// known when the last contribution came; NOTIFY_TERMINATION reports it
// either way.
TEST(GroupFault, MemberDiesAfterContributing) {
    ASSERT_GE(size, 4u);
    FaultRun f;
    barrier();
    auto procs = all_procs();
    weft_group_options_t o{};
    o.flags = WEFT_GROUP_NOTIFY_TERMINATION;
    const uint32_t victim = size - 1, last = 2;
    weft_group_op_t op = nullptr;
    if (rank != last) {
        ASSERT_EQ(weft_group_construct_nb(ctx, "after", procs.data(), procs.size(), &o, &op), WEFT_OK);
    }
    if (rank == 0) {
        ASSERT_TRUE(progress_until([&] { return pgroups().contributions("after") == size - 1; }))
            << "the tracker holds " << pgroups().contributions("after") << " contributions";
    }
    barrier();
    if (rank == victim) die_at("mp.pgroup.victim");
    const weft_status_t st =
        rank == last ? weft_group_construct(ctx, "after", procs.data(), procs.size(), &o) : weft_group_op_wait(&op);
    ASSERT_EQ(st, WEFT_OK) << "a member that contributed does not abort the construct";
    auto m = ranks_of(members("after"));
    const auto listed = std::count(m.begin(), m.end(), victim);
    EXPECT_EQ(m.size(), size - 1u + uint32_t(listed));
    EXPECT_TRUE(f.failed_named(victim)) << "no MEMBER_FAILED naming rank " << victim;
    EXPECT_EQ(weft_group_destruct(ctx, "after", 0), WEFT_OK);
}

// Seed 6.5.3.6.3: an invitee that dies before answering fails its
// invitation (INVITE_FAILED at the leader) and, without OPTIONAL, aborts
// the construct for every acceptor.
TEST(GroupFault, InviteeDiesUnanswered) {
    FaultRun f;
    barrier();
    const uint32_t victim = size - 1;
    if (rank == victim) die_at("mp.pgroup.victim");
    std::vector<weft_proc_t> others;
    for (uint32_t r = 1; r < size; ++r) others.push_back(proc(r));
    if (rank == 0) {
        EXPECT_EQ(weft_group_invite(ctx, "unanswered", others.data(), others.size(), nullptr),
                  WEFT_ERR_CONSTRUCT_ABORT);
        EXPECT_TRUE(f.ev.saw(WEFT_GROUP_EVENT_INVITE_FAILED));
    } else {
        ASSERT_TRUE(answer_invitation(f.ev, "unanswered", 1)) << "no invitation";
        EXPECT_EQ(weft_group_op_wait(&f.ev.join_op), WEFT_ERR_CONSTRUCT_ABORT);
        EXPECT_TRUE(f.ev.saw(WEFT_GROUP_EVENT_CONSTRUCT_ABORT));
    }
}

// Seed 6.5.3.6.2: the leader dies after some accepted: each of them gets
// LEADER_FAILED naming it and its join ends CONSTRUCT_ABORT.
TEST(GroupFault, LeaderDiesAfterAcceptances) {
    // MP_PGROUP_SELECT: "nominate" (rank 1 nominates itself), "renominate"
    // (rank 1 does, and dies as the new leader decides, before telling
    // anyone; rank 2 nominates itself in
    // the second round), "abort" (rank 2 aborts), anything else: nobody
    // nominates.
    const char* env = std::getenv("MP_PGROUP_SELECT");
    const std::string mode = env ? env : "";
    const bool second_round = mode == "renominate";
    FaultRun f;
    if ((mode == "nominate" || second_round) && rank == 1) f.ev.on_leader_failed = 'n';
    if (second_round && rank == 2) f.ev.on_leader_failed = '2';
    if (mode == "abort" && rank == 2) f.ev.on_leader_failed = 'a';
    barrier();
    std::vector<weft_proc_t> others;
    for (uint32_t r = 1; r < size; ++r) others.push_back(proc(r));
    const uint32_t slow = size - 1;  // answers only after the leader died: "pending" in the vote
    if (rank == 0) {
        weft_group_options_t o{};
        o.flags = WEFT_GROUP_ASSIGN_CONTEXT_ID;
        weft_group_op_t op = nullptr;
        ASSERT_EQ(weft_group_invite_nb(ctx, "orphans", others.data(), others.size(), &o, &op), WEFT_OK);
        ASSERT_TRUE(
            progress_until([&] { return pgroups().contributions("orphans") == size - 1; }));  // its own and 1..size-2
        die_at("mp.pgroup.victim");
    }
    weft_status_t st = WEFT_OK;
    if (rank != slow) {
        ASSERT_TRUE(answer_invitation(f.ev, "orphans", 1)) << "no invitation";
        ASSERT_EQ(f.ev.join_status, WEFT_OK);
        st = weft_group_op_wait(&f.ev.join_op);
        EXPECT_TRUE(f.ev.saw(WEFT_GROUP_EVENT_LEADER_FAILED)) << "no LEADER_FAILED";
    } else {
        // Not an acceptor when the leader died: told the selection's outcome.
        ASSERT_TRUE(progress_until([&] {
            return f.ev.saw(WEFT_GROUP_EVENT_LEADER_SELECTED) || f.ev.saw(WEFT_GROUP_EVENT_CONSTRUCT_ABORT);
        })) << "no outcome of the selection reached the unanswered invitee";
        EXPECT_FALSE(f.ev.saw(WEFT_GROUP_EVENT_LEADER_FAILED)) << "it was not watching the leader";
        // A join may still name the first leader.
        st = weft_group_join(ctx, "orphans", proc(0), 1, nullptr);
    }
    if (mode == "nominate" || second_round) {
        const uint32_t leader = second_round ? 2 : 1;
        EXPECT_EQ(st, WEFT_OK);
        if (rank == leader) {
            EXPECT_EQ(f.ev.reselect_status, WEFT_OK);
        }
        weft_proc_t last{};
        for (const auto& [e, p] : f.ev.seen)
            if (e == WEFT_GROUP_EVENT_LEADER_SELECTED) last = p;
        EXPECT_EQ(last.rank, leader) << "the last LEADER_SELECTED names the nominee that leads";
        EXPECT_TRUE(f.ev.saw(WEFT_GROUP_EVENT_CONSTRUCT_COMPLETE));
        std::vector<weft_proc_t> m(size);
        size_t n = 0;
        ASSERT_EQ(weft_group_members(ctx, "orphans", m.data(), m.size(), &n), WEFT_OK);
        ASSERT_EQ(n, size_t(size - leader)) << "the survivors, without the dead leaders";
        for (size_t i = 0; i < n; ++i) EXPECT_EQ(m[i].rank, i + leader);
        uint64_t cid = 0;
        ASSERT_EQ(weft_group_context_id(ctx, "orphans", &cid), WEFT_OK);
        EXPECT_EQ((cid >> 32) & ((1u << 29) - 1), leader) << "the new leader assigned the context ID";
        EXPECT_EQ(weft_group_destruct(ctx, "orphans", 0), WEFT_OK) << "the re-led group is a normal group";
    } else {
        if (rank == slow) {
            EXPECT_EQ(st, WEFT_ERR_NOT_FOUND) << "the invitation died with the construct";
        } else {
            EXPECT_EQ(st, WEFT_ERR_CONSTRUCT_ABORT);
        }
        EXPECT_TRUE(f.ev.saw(WEFT_GROUP_EVENT_CONSTRUCT_ABORT));
        EXPECT_FALSE(f.ev.saw(WEFT_GROUP_EVENT_LEADER_SELECTED));
        if (mode == "abort" && rank == 2) {
            EXPECT_EQ(f.ev.reselect_status, WEFT_OK);
        }
    }
}

// Seed 6.5.3.4: a member dead before destruct fails it by default; with
// NOTIFY_TERMINATION the survivors get MEMBER_FAILED and SUCCESS.
TEST(GroupFault, DeathBeforeDestruct) {
    FaultRun f;
    auto procs = all_procs();
    const bool notify = std::getenv("MP_PGROUP_NOTIFY") != nullptr;
    weft_group_options_t o{};
    if (notify) o.flags = WEFT_GROUP_NOTIFY_TERMINATION;
    ASSERT_EQ(weft_group_construct(ctx, "dying", procs.data(), procs.size(), &o), WEFT_OK);
    barrier();
    const uint32_t victim = size - 1;
    if (rank == victim) die_at("mp.pgroup.victim");
    const weft_status_t st = weft_group_destruct(ctx, "dying", 0);
    if (notify) {
        EXPECT_EQ(st, WEFT_OK);
        EXPECT_TRUE(f.failed_named(victim));
    } else {
        EXPECT_EQ(st, WEFT_ERR_PEER_FAILED);
    }
    uint32_t n = 0;
    EXPECT_EQ(weft_group_size(ctx, "dying", &n), WEFT_ERR_NOT_FOUND) << "the group is gone either way";
}

int main(int argc, char** argv) { return mp::run_all(argc, argv); }
