/*
 * state_window.h — the fixed layout of every rank's pinned state window.
 *
 * Each rank owns one window, registered with the transport at init and
 * reachable by weft_get / weft_put / weft_atomic_* through
 * weft_state_window(). Every word is 64 bits; every word that two parties
 * touch concurrently sits on its own 64-byte cache line so that a peer's
 * atomic never false-shares with the owner's stores.
 *
 * Who writes each word, and how (see docs/state-window.md):
 *   OWNER-STORE words are written only by the owning rank with CPU atomics
 *   (store/fetch-add); peers only *read* them (weft_get). They may mix CPU
 *   writes with remote reads on any device.
 *   REMOTE-ATOMIC words are changed by peers with one-sided atomics. When the
 *   transport reports WEFT_ATOMIC_SCOPE_DEVICE (NIC atomics not coherent with
 *   the CPU), the owner also updates them only through the transport (an
 *   atomic to itself, i.e. loopback), never with CPU atomics.
 */
#ifndef WEFT_STATE_WINDOW_H
#define WEFT_STATE_WINDOW_H

#include <stdint.h>

#define WEFT_STATE_MAGIC 0x5745465453574e31ull /* "WEFTSWN1" */
#define WEFT_STATE_LAYOUT_VERSION 5u
#define WEFT_STATE_LINE 64u
#define WEFT_STATE_COMM_SLOTS 256u   /* Collective-Clock records */
#define WEFT_STATE_FAILURE_WORDS 64u /* bitmap of 4096 ranks */

/* Byte offsets of each word inside the window. */
enum weft_state_offset {
    /* line 0, OWNER-STORE: magic, version, rank, pid (at init), finalized */
    WEFT_STATE_MAGIC_OFF = 0,
    WEFT_STATE_VERSION_OFF = 8,
    WEFT_STATE_OWNER_RANK_OFF = 16,
    WEFT_STATE_OWNER_PID_OFF = 24,
    /* OWNER-STORE: set to 1 by weft_finalize just before the process may
     * exit, so that a peer seeing it exit knows it departed, not failed. */
    WEFT_STATE_FINALIZED_OFF = 32,
    /* OWNER-STORE: incremented by the owner while it is alive and running;
     * observed one-sidedly by the failure detector. */
    WEFT_STATE_HEARTBEAT_OFF = 1 * WEFT_STATE_LINE,
    /* REMOTE-ATOMIC: the highest drain number requested of this rank
     * (compare-swap max by whichever rank asks for a drain). */
    WEFT_STATE_EPOCH_OFF = 2 * WEFT_STATE_LINE,
    /* OWNER-STORE: point-to-point messages sent / received by this rank. */
    WEFT_STATE_P2P_SENT_OFF = 3 * WEFT_STATE_LINE,
    WEFT_STATE_P2P_RECEIVED_OFF = 4 * WEFT_STATE_LINE,
    /* REMOTE-ATOMIC: failure notices pushed to this rank (fetch-add). */
    WEFT_STATE_FAILURE_NOTICES_OFF = 5 * WEFT_STATE_LINE,
    /* REMOTE-ATOMIC: bitmap of ranks known failed, set by compare-swap. */
    WEFT_STATE_FAILURE_BITMAP_OFF = 6 * WEFT_STATE_LINE,
    /* Collective-Clock records, one cache line per communicator slot (slot 0
     * is the world; weft_comm_clock_slot() names a communicator's):
     *   +0  seq       OWNER-STORE   collectives begun (commit_begin)
     *   +8  target    REMOTE-ATOMIC (peers raise it with a compare-swap max):
     *                               bits 52..63 the drain attempt, 40..51 the
     *                               slot's use (a raise meant for the slot's
     *                               previous communicator is refused),
     *                               0..39 the clock value
     *   +16 finished  OWNER-STORE   collectives finished (commit_finish);
     *                               seq != finished: inside a collective
     *   +24 sent      OWNER-STORE   point-to-point messages sent on it
     *   +32 received  OWNER-STORE   point-to-point messages arrived on it
     *   +40 context   OWNER-STORE   the communicator's context ID + 1 (0: free) */
    WEFT_STATE_CLOCKS_OFF = 6 * WEFT_STATE_LINE + WEFT_STATE_FAILURE_WORDS * 8,
    WEFT_STATE_CLOCK_SEQ = 0,
    WEFT_STATE_CLOCK_TARGET = 8,
    WEFT_STATE_CLOCK_FINISHED = 16,
    WEFT_STATE_CLOCK_SENT = 24,
    WEFT_STATE_CLOCK_RECEIVED = 32,
    WEFT_STATE_CLOCK_CONTEXT = 40,
    /* REMOTE-ATOMIC, used on rank 0 only: the outcome of the current drain
     * attempt, (attempt << 4) | code, settled by compare-swap (drain.cpp).
     * The word after it (+8, PUT) holds a failed member's rank + 1, written
     * before a drain is settled as ended by that member's failure. */
    WEFT_STATE_DRAIN_DECISION_OFF = WEFT_STATE_CLOCKS_OFF + WEFT_STATE_COMM_SLOTS * WEFT_STATE_LINE,
    /* OWNER-STORE line: where this rank's drain is, read by every drainer:
     *   +0  (attempt << 4) | phase it obeys (1 collective, 2 point-to-point)
     *   +8  point-to-point transfers not finished (pulls, replies, exposed)
     *   +16 the last drain number it finished its quiescent work for
     *   +24 clock slots in use are below this
     *   +32 targets it raised (all drains; informative)
     *   +40 messages buffered here at the quiescent point (summed by every
     *       drainer into the job's total)
     *   +48 receives blocked inside weft (WEFT_DRAIN_MODE=blocking)
     *   +56 the drain number whose quiescent point this rank asked to hold
     *       (weft_ckpt_release), written before +16; 0: none */
    WEFT_STATE_DRAIN_STATUS_OFF = WEFT_STATE_DRAIN_DECISION_OFF + WEFT_STATE_LINE,
    WEFT_STATE_DRAIN_PHASE = 0,
    WEFT_STATE_DRAIN_PENDING = 8,
    WEFT_STATE_DRAIN_QUIESCENT = 16,
    WEFT_STATE_DRAIN_SLOTS_HI = 24,
    WEFT_STATE_DRAIN_RAISES = 32,
    WEFT_STATE_DRAIN_BUFFERED = 40,
    WEFT_STATE_DRAIN_BLOCKED = 48,
    WEFT_STATE_DRAIN_HOLD = 56,
    /* PUT by one peer per line: the drain's dissemination inboxes
     * (WEFT_DRAIN_OBSERVE=tree), one line per step (12 steps: 4096 ranks)
     * and round parity, holding (attempt, round) tag << 8 | hops << 2 | flags. */
    WEFT_STATE_DRAIN_INBOX_OFF = WEFT_STATE_DRAIN_STATUS_OFF + WEFT_STATE_LINE,
    WEFT_STATE_DRAIN_INBOX_STEPS = 12,
    WEFT_STATE_SIZE = WEFT_STATE_DRAIN_INBOX_OFF + 2 * WEFT_STATE_DRAIN_INBOX_STEPS * WEFT_STATE_LINE
};

/* Offset of communicator slot `slot`'s record field (SEQ or TARGET). */
#define WEFT_STATE_CLOCK_OFF(slot, field) ((uint64_t)WEFT_STATE_CLOCKS_OFF + (uint64_t)(slot)*WEFT_STATE_LINE + (field))

#endif /* WEFT_STATE_WINDOW_H */
