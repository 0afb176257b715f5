/*
 * weft/group.h — PMIx-style process groups (docs/groups.md).
 *
 * A process group is a named set of processes, possibly from several jobs
 * of one launch, built by its participants among themselves: there is no
 * server and no host daemon. Construction (collective method): every
 * *leader* names every leader (procs, in any order); any leader may name
 * extra *members* (add_members), who call construct with procs = NULL and
 * learn the rest from the leaders. The call completes once every leader
 * and every added member has called, and returns the same membership,
 * context ID and per-member info everywhere.
 *
 * Bootstrap method: leaders that know only how many leaders there are
 * (opts->bootstrap_leaders) and pass only themselves find each other by
 * the group's name, across the jobs of a launch (docs/groups.md).
 *
 * Fault tolerance (WEFT_CAP_GROUP_FT, weft/version.h):
 *   - a participant that dies before it contributed aborts the construct
 *     (WEFT_ERR_CONSTRUCT_ABORT on every survivor), unless a leader set
 *     WEFT_GROUP_FT_COLLECTIVE: then it completes on the survivors, the
 *     membership excludes the dead, and each survivor's event handler gets
 *     WEFT_GROUP_EVENT_MEMBER_FAILED naming it;
 *   - destruct is collective over the current membership; a member that
 *     dies before calling it fails the destruct (WEFT_ERR_PEER_FAILED)
 *     unless the group was built with WEFT_GROUP_NOTIFY_TERMINATION: then
 *     the survivors get MEMBER_FAILED and the destruct succeeds;
 *   - leave is local: the others get WEFT_GROUP_EVENT_LEFT and drop the
 *     leaver; an in-flight construct or destruct completes without it;
 *   - every construction call takes a timeout; a live participant that
 *     never calls makes every caller return WEFT_ERR_TIMEOUT; an in-flight
 *     construct can be cancelled (WEFT_ERR_CANCELED everywhere).
 *
 * Event handlers run from weft's progress, on the thread that progresses;
 * a blocking group call made from one returns WEFT_ERR_WOULD_BLOCK.
 */
#ifndef WEFT_GROUP_H
#define WEFT_GROUP_H

#include <weft/weft.h>
#include <weft/comm.h>

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A process of the launch: its job and its rank in that job
 * (weft_job_id, weft_rank; weft_peer_identity for another job's). */
typedef struct weft_proc {
    uint32_t job;
    uint32_t rank;
} weft_proc_t;

/* A group's name: 1 to WEFT_GROUP_NAME_MAX - 1 bytes and a NUL. */
#define WEFT_GROUP_NAME_MAX 64
/* The largest info blob a participant may contribute. */
#define WEFT_GROUP_INFO_MAX ((size_t)64 << 10)

typedef enum weft_group_flag {
    /* Give the group a context ID unique across the launch while it lives. */
    WEFT_GROUP_ASSIGN_CONTEXT_ID = 1u << 0,
    /* A participant that dies before contributing is left out instead of
     * aborting the construct (PMIX_GROUP_FT_COLLECTIVE). */
    WEFT_GROUP_FT_COLLECTIVE = 1u << 1,
    /* A member's death is reported (MEMBER_FAILED) instead of failing the
     * destruct (PMIX_GROUP_NOTIFY_TERMINATION). */
    WEFT_GROUP_NOTIFY_TERMINATION = 1u << 2,
    /* Invite method: the group forms on the invitees that accepted, instead
     * of aborting when one declines, dies or stays silent (PMIX_GROUP_OPTIONAL). */
    WEFT_GROUP_OPTIONAL = 1u << 3
} weft_group_flag_t;

/* Options of a construct; NULL means all defaults. Zero-initialise it and
 * set what you need: new fields are added at the end. */
typedef struct weft_group_options {
    uint32_t flags;                 /* weft_group_flag_t, ORed */
    uint32_t timeout_ms;            /* 0: WEFT_TIMEOUT_MS */
    const weft_proc_t* add_members; /* leaders only: extra members, who call with procs = NULL */
    size_t n_add_members;
    /* Leaders only: the membership's order. It must list exactly the final
     * members (leaders and added members); every leader that gives one must
     * give the same. Otherwise WEFT_ERR_BAD_PARAM on every participant. */
    const weft_proc_t* final_order;
    size_t n_final_order;
    const void* info; /* this participant's group info (opaque), up to WEFT_GROUP_INFO_MAX */
    size_t info_len;
    /* Names of groups this process belongs to whose members are leaders
     * too: each is expanded to its membership before procs is checked. */
    const char* const* expand_groups;
    size_t n_expand_groups;
    /* Bootstrap method: the number of leaders. Each leader passes only
     * itself in procs and finds the others by the group's name (it may
     * still add members). Leaders that give different counts get
     * WEFT_ERR_BAD_PARAM. 0: the collective method. */
    uint32_t bootstrap_leaders;
} weft_group_options_t;

/* An in-flight non-blocking group operation. */
typedef struct weft_group_op* weft_group_op_t;

/*
 * Collective method. procs: every leader (duplicates are an error), this
 * process among them — else WEFT_ERR_NOT_A_MEMBER at once, with no traffic
 * (not checked when opts names add_members). An added member passes
 * procs = NULL, nprocs = 0. WEFT_ERR_BUSY if a group of that name exists
 * here or a construct of it is in flight.
 */
weft_status_t weft_group_construct(weft_context_t ctx, const char* name, const weft_proc_t* procs, size_t nprocs,
                                   const weft_group_options_t* opts);
weft_status_t weft_group_construct_nb(weft_context_t ctx, const char* name, const weft_proc_t* procs, size_t nprocs,
                                      const weft_group_options_t* opts, weft_group_op_t* op);

/* Collective over the group's current membership; releases its name and
 * context ID everywhere. timeout_ms 0: WEFT_TIMEOUT_MS. */
weft_status_t weft_group_destruct(weft_context_t ctx, const char* name, uint32_t timeout_ms);
weft_status_t weft_group_destruct_nb(weft_context_t ctx, const char* name, uint32_t timeout_ms, weft_group_op_t* op);

/*
 * Invite method: this process leads and invites procs (not itself). Each
 * invitee's handler gets WEFT_GROUP_EVENT_INVITED (proc: the leader) and
 * answers with weft_group_join_nb. The call returns once every invitee
 * answered, died, or stayed silent past the timeout (each such failure is
 * a WEFT_GROUP_EVENT_INVITE_FAILED here): WEFT_OK with the group formed, or
 * WEFT_ERR_CONSTRUCT_ABORT (any failure without WEFT_GROUP_OPTIONAL).
 * Every member then gets WEFT_GROUP_EVENT_CONSTRUCT_COMPLETE, or each
 * acceptor WEFT_GROUP_EVENT_CONSTRUCT_ABORT. opts: flags, timeout_ms, info.
 */
weft_status_t weft_group_invite(weft_context_t ctx, const char* name, const weft_proc_t* procs, size_t nprocs,
                                const weft_group_options_t* opts);
weft_status_t weft_group_invite_nb(weft_context_t ctx, const char* name, const weft_proc_t* procs, size_t nprocs,
                                   const weft_group_options_t* opts, weft_group_op_t* op);
/* An invitee's answer to leader's invitation (accept = 1 or 0). Accepting
 * starts an operation that completes with the outcome (WEFT_OK: a member;
 * WEFT_ERR_CONSTRUCT_ABORT; WEFT_ERR_TIMEOUT if the acceptance came after
 * the leader's timeout); declining completes at once (*op = NULL: nothing
 * to wait for). opts: info, timeout_ms.
 * If the leader dies first, every acceptor gets WEFT_GROUP_EVENT_LEADER_FAILED
 * and the construct goes on under a new leader when one acceptor nominates
 * itself (weft_group_nominate, e.g. from that handler): then every acceptor
 * and every invitee that has not answered gets LEADER_SELECTED naming it (a
 * join may name either leader). With no nominee, or when an acceptor calls
 * weft_group_abort, each acceptor gets CONSTRUCT_ABORT and its join ends
 * with WEFT_ERR_CONSTRUCT_ABORT.
 * The blocking form from an event handler returns WEFT_ERR_WOULD_BLOCK. */
weft_status_t weft_group_join(weft_context_t ctx, const char* name, weft_proc_t leader, int accept,
                              const weft_group_options_t* opts);
weft_status_t weft_group_join_nb(weft_context_t ctx, const char* name, weft_proc_t leader, int accept,
                                 const weft_group_options_t* opts, weft_group_op_t* op);

/* After WEFT_GROUP_EVENT_LEADER_FAILED (from its handler, or before this
 * process's answer went out): nominate this acceptor as the construct's new
 * leader, or abort the construct for every participant. When several
 * nominate themselves, the lowest (job, rank) leads. WEFT_ERR_NOT_FOUND
 * when no construct of name here lost its leader; WEFT_ERR_BUSY when this
 * process already answered the round. */
weft_status_t weft_group_nominate(weft_context_t ctx, const char* name);
weft_status_t weft_group_abort(weft_context_t ctx, const char* name);

/* Not collective: tells the other members and forgets the group here. An
 * in-flight construct of that name here ends with WEFT_ERR_CANCELED. */
weft_status_t weft_group_leave(weft_context_t ctx, const char* name);

/* A non-blocking operation: *done = 1 and *op = NULL once it completed
 * (the return value is then its status); wait blocks until then. */
weft_status_t weft_group_op_test(weft_group_op_t* op, int* done);
weft_status_t weft_group_op_wait(weft_group_op_t* op);
/* Cancels an in-flight construct everywhere (WEFT_ERR_CANCELED on every
 * participant); no effect once it completed. The op must still be waited. */
weft_status_t weft_group_op_cancel(weft_group_op_t op);

/* ----------------------------------------------------- a constructed group */

weft_status_t weft_group_size(weft_context_t ctx, const char* name, uint32_t* size);
/* Up to cap members in the group's order; *n gets the size. */
weft_status_t weft_group_members(weft_context_t ctx, const char* name, weft_proc_t* members, size_t cap, size_t* n);
/* WEFT_ERR_NOT_FOUND when the group has no context ID. */
weft_status_t weft_group_context_id(weft_context_t ctx, const char* name, uint64_t* id);
/* The info member `index` contributed (NULL, 0 if none). The pointer stays
 * valid until the group is destructed or left. */
weft_status_t weft_group_info(weft_context_t ctx, const char* name, uint32_t index, const void** info, size_t* len);

/* The job-level information of every job that has a member in the group
 * (PMIx gives each participant the job data of every namespace involved):
 * up to cap entries in job order; *n gets how many jobs there are. */
typedef struct weft_group_job {
    uint32_t job;     /* its job ID */
    uint32_t size;    /* its number of ranks */
    uint32_t members; /* how many of them are in the group */
    uint32_t nodes;   /* how many hosts its ranks run on */
} weft_group_job_t;
weft_status_t weft_group_jobs(weft_context_t ctx, const char* name, weft_group_job_t* jobs, size_t cap, size_t* n);
/* Node placement: the index of the host proc runs on, numbered in the
 * launch's order (two processes on one host get the same index). */
weft_status_t weft_proc_node(weft_context_t ctx, weft_proc_t proc, uint32_t* node);

/* The group as a communicator: collective over its members. Its ranks are
 * the members in the group's order, its context ID the group's; point to
 * point, collectives, the drain's Collective Clock and the fault-tolerance
 * calls work on it. Free it (weft_comm_free) before destructing the group.
 * Its members may come from several jobs of the launch: point to point,
 * collectives, communicator creation and the fault-tolerance calls work
 * across them; such a communicator has no Collective Clock, and a drain
 * of a job with a member in one answers WEFT_ERR_UNSUPPORTED until it is
 * freed (docs/groups.md, "Communicators across jobs").
 * WEFT_ERR_NOT_FOUND: no such group here, or it has no context ID
 * (construct with WEFT_GROUP_ASSIGN_CONTEXT_ID); WEFT_ERR_BUSY: its
 * communicator exists already. */
weft_status_t weft_group_comm(weft_context_t ctx, const char* name, weft_comm_t* comm);
/* The job and job rank of `rank` of comm (any communicator; across jobs
 * the only way to name another job's member). */
weft_status_t weft_comm_proc(weft_comm_t comm, uint32_t rank, weft_proc_t* proc);

/* ---------------------------------------------------------------- events */

typedef enum weft_group_event {
    WEFT_GROUP_EVENT_MEMBER_FAILED = 1,      /* proc: the member that died */
    WEFT_GROUP_EVENT_LEFT = 2,               /* proc: the member that left */
    WEFT_GROUP_EVENT_INVITED = 3,            /* proc: the leader inviting this process */
    WEFT_GROUP_EVENT_INVITE_FAILED = 4,      /* at the leader; proc: an invitee that declined, died or stayed silent */
    WEFT_GROUP_EVENT_CONSTRUCT_COMPLETE = 5, /* invite method, every member; proc: the leader */
    WEFT_GROUP_EVENT_CONSTRUCT_ABORT = 6,    /* invite method, every acceptor; proc: the leader */
    WEFT_GROUP_EVENT_LEADER_FAILED = 7,      /* an acceptor's leader died first; proc: the leader */
    WEFT_GROUP_EVENT_LEADER_SELECTED = 8     /* every acceptor and unanswered invitee; proc: the new leader */
} weft_group_event_t;

typedef void (*weft_group_event_fn)(void* arg, weft_group_event_t event, const char* name, weft_proc_t proc);
/* Handlers run in registration order; *id names the registration. */
weft_status_t weft_group_event_register(weft_context_t ctx, weft_group_event_fn fn, void* arg, uint64_t* id);
weft_status_t weft_group_event_deregister(weft_context_t ctx, uint64_t id);

/* Run-time discovery of the group fault-tolerance set (the build-time one
 * is WEFT_CAP_GROUP_FT in weft/version.h): *present = 1 when available. */
weft_status_t weft_group_ft_supported(int* present);

#ifdef __cplusplus
}
#endif

#endif /* WEFT_GROUP_H */
