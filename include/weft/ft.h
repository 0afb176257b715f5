/*
 * ft.h — fault tolerance on communicators (C ABI): failed-process sets,
 * agreement, revoke and shrink. Semantics: the MPI-3 FT working group's
 * validate design (F ⊇ L ⊇ G) and ULFM's agree/revoke/shrink; design and
 * protocol in docs/fault-tolerance.md.
 *
 * Failure model: fail-stop. A process is declared failed by the transport,
 * by the death of a local process (pidfd), or by the heartbeat detector
 * (WEFT_FT_PERIOD_MS, default 100; WEFT_FT_TIMEOUT_MS, default 1000;
 * WEFT_FT_WATCH successors observed, default 3). A declared process is
 * fenced: its later messages are dropped everywhere, even if it was only
 * stopped and resumes.
 *
 * Order: validate_global, agree/iagree and shrink/ishrink on one
 * communicator are matched in the order members start them, blocking or
 * not. Members that call different ones at the same point (an erroneous
 * program: say one recovers while another goes on) get
 * WEFT_ERR_BAD_PARAM from each of those calls, with an error logged,
 * instead of one value decided for different questions; the calls after
 * them match again by order.
 *
 * Threading: as comm.h. The FAILED_NEW cursors are per calling thread.
 */
#ifndef WEFT_FT_H
#define WEFT_FT_H

#include <weft/comm.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The source of a receive from a recognised-failed rank. A failure is
 * recognised (the seed's CLEARED state) by weft_comm_validate_clear or by
 * weft_comm_validate_global (after which L = G = the cleared set).
 * Point-to-point with a recognised-failed rank has PROC_NULL semantics: a
 * send completes at once and sends nothing; a receive naming it completes
 * at once with source WEFT_PROC_NULL, tag WEFT_ANY_TAG, 0 bytes. An
 * unrecognised failure (in L or not) makes operations naming it fail with
 * WEFT_ERR_PEER_FAILED (comm.h). */
#define WEFT_PROC_NULL (-2)

/* Any-source receives (weft_recv, weft_irecv with WEFT_ANY_SOURCE) posted
 * while a member's failure is not recognised return
 * WEFT_ERR_PEER_FAILED_PENDING at once — nothing is posted — unless a
 * queued message already matches. Recognise the failure (validate_clear or
 * validate_global) and post again. A receive already posted when the
 * failure happens keeps waiting for a message (or its deadline). */

/* Which set weft_comm_get_failed returns. */
typedef enum weft_failed_set {
    WEFT_FAILED_LOCAL = 0,    /* L: known failed by this process */
    WEFT_FAILED_GLOBAL = 1,   /* G: known to be known by every member */
    WEFT_FAILED_CLEARED = 2,  /* members of L whose failure was recognised */
    WEFT_FAILED_UNCLEARED = 3 /* members of L not recognised yet */
} weft_failed_set_t;

typedef enum weft_failed_kind {
    WEFT_FAILED_ALL = 0, /* the whole set, as of this thread's last validate */
    WEFT_FAILED_NEW = 1  /* what this thread's last validate added */
} weft_failed_kind_t;

/* Local: adds to L the members the detector knows failed. *num_failed =
 * |L|, *num_new = how many this call added. Either pointer may be NULL. */
weft_status_t weft_comm_validate_local(weft_comm_t comm, uint32_t* num_failed, uint32_t* num_new);

/* Collective over the survivors, fault tolerant (it completes when members,
 * including whichever coordinates, fail during it): G becomes the union of
 * every survivor's L, identical on every survivor, and L = G. *num_failed =
 * |L|, *num_new = how many this call added to L. */
weft_status_t weft_comm_validate_global(weft_comm_t comm, uint32_t* num_failed, uint32_t* num_new);

/* Local: the ranks (communicator ranks, ascending) of set `which`, all of
 * it or only the ranks this thread's last validate call added (per thread:
 * two threads each see a new failure once). CLEARED and UNCLEARED split the
 * thread's L and take WEFT_FAILED_ALL only. capacity is the room in ranks;
 * *count is set to the size needed. WEFT_ERR_TRUNCATE, with nothing
 * written to ranks (and *count still the size needed), when capacity is
 * too small. ranks = NULL with capacity 0 is a size query (WEFT_OK). */
weft_status_t weft_comm_get_failed(weft_comm_t comm, weft_failed_set_t which, weft_failed_kind_t kind, uint32_t* ranks,
                                   size_t capacity, size_t* count);

/* Local: recognises the failures of the listed ranks (each must be in L:
 * WEFT_ERR_INVALID_ARG otherwise, WEFT_ERR_INVALID_RANK outside comm), so
 * that point-to-point with them has PROC_NULL semantics. Nothing changes
 * when any rank is bad. */
weft_status_t weft_comm_validate_clear(weft_comm_t comm, const uint32_t* ranks, size_t n);

/* State of a rank as this process knows it (the seed's GROUP_VALIDATE). */
typedef enum weft_rank_state {
    WEFT_RANK_OK = 0,     /* not in L */
    WEFT_RANK_FAILED = 1, /* in L, not recognised */
    WEFT_RANK_CLEARED = 2 /* in L, recognised: PROC_NULL */
} weft_rank_state_t;

/* Local: states[i] = the state of ranks[i]. */
weft_status_t weft_comm_rank_states(weft_comm_t comm, const uint32_t* ranks, size_t n, weft_rank_state_t* states);

/* Collective, fault tolerant: *flag becomes the bitwise AND of the flags of
 * the members that contributed, the same on every survivor (ULFM's
 * MPIX_Comm_agree). Returns WEFT_ERR_PEER_FAILED — uniformly — when the
 * agreed set of failed members holds one not in G (not yet acknowledged by
 * validate_global); *flag is set either way. Works on a revoked
 * communicator. */
weft_status_t weft_comm_agree(weft_comm_t comm, int* flag);

/* Non-blocking weft_comm_agree: *flag (which must stay valid) is written
 * when the request completes; the request's status is agree's. Agreements
 * on one communicator, blocking or not, are matched in the order members
 * start them. */
weft_status_t weft_comm_iagree(weft_comm_t comm, int* flag, weft_request_t* req);

/* Local, not blocking: revokes comm on every member. Pending and later
 * point-to-point and collective operations on it return WEFT_ERR_REVOKED
 * at every member (once the notice arrived: O(log N) relays); validate,
 * get_failed, agree and shrink still work. */
weft_status_t weft_comm_revoke(weft_comm_t comm);

/* Collective, fault tolerant: a new communicator of the members not failed
 * (agreed: identical membership, in the old rank order, on every
 * survivor). Works on a revoked communicator. */
weft_status_t weft_comm_shrink(weft_comm_t comm, weft_comm_t* newcomm);

/* The seed's WIN_VALIDATE. Collective over comm, whose members must all be
 * ranks of win: a validate_global on comm, after which the window's targets
 * that are failed in comm's G behave as PROC_NULL — put, get, the atomics
 * and flush naming them return WEFT_OK and do nothing (a get leaves dst, an
 * atomic *old_value, as they were) — and a flush of all no longer reports
 * them. *num_failed (may be NULL): how many of win's targets are PROC_NULL
 * now. Before it, operations on a failed target return
 * WEFT_ERR_PEER_FAILED, and a flush of all reports it once. */
weft_status_t weft_window_validate(weft_window_t win, weft_comm_t comm, uint32_t* num_failed);

/* Non-blocking weft_comm_shrink: *newcomm (which must stay valid) is
 * written when the request completes, with the same communicator every
 * survivor gets; the request's status is shrink's. It progresses inside any
 * weft call; shrinks on one communicator, blocking or not, are matched in
 * the order members start them (as agreements are). */
weft_status_t weft_comm_ishrink(weft_comm_t comm, weft_comm_t* newcomm, weft_request_t* req);

/* 1 when comm was revoked here. */
weft_status_t weft_comm_is_revoked(weft_comm_t comm, int* flag);

#ifdef __cplusplus
}
#endif
#endif /* WEFT_FT_H */
