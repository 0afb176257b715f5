// comm.hpp — a communicator as every part of the engine sees it: its
// members, its clock slot in the pinned state window, its three matching
// contexts, and the C handle that outlives it.
//
// Each communicator has three contexts: point-to-point (its ID), collective
// (ID | coll_bit, internal traffic of collectives, tag = collective sequence
// number) and creation (ID | create_bit, create_from_ranks' handshake).
// Its fields are written under the context's API lock (docs/architecture.md).
#pragma once

#include <weft/comm.h>
#include <weft/state_window.h>

#include "group/buffer_pool.hpp"
#include "group/comm_handle.hpp"
#include "transport/runtime.hpp"
#include "transport/state_window_view.hpp"

#include <atomic>
#include <deque>
#include <vector>

namespace weft::group {

static_assert(WEFT_STATE_CLOCK_SEQ == 0 && WEFT_STATE_CLOCK_FINISHED == 16,
              "Comm::clock indexes seq as [0], finished as [2]");

constexpr uint64_t coll_bit = 1ull << 63;
constexpr uint64_t create_bit = 1ull << 62;
constexpr uint32_t no_slot = UINT32_MAX;   // a communicator without a clock slot (all were taken)
constexpr size_t flag_max_bytes = 256;     // largest allreduce on the flag path (flags.cpp)
constexpr size_t bulk_chunk = 256 * 1024;  // staged bytes per step of the shm bulk path (coll_shm.cpp)
constexpr uint32_t bulk_slots = 8;         // clock slots with a bulk area (coll_shm.cpp)
// Bcasts of up to this many bytes keep the binomial tree even on shm: its
// eager sends let the root run ahead, where the bulk path's root waits for
// every member to have read its stage two bcasts ago (8 ranks on 2 cores:
// 14.8 us p50 against 0.7 us, bench/RESULTS.md, issue 14).
constexpr size_t bulk_bcast_above = 8192;
// ... and so do bcasts among 3 ranks (2 use the pair path below): the bulk
// path copies every byte twice and its root waits for the members (2 ranks,
// 1 MiB: p50 120 us against 496 us for the tree; 3 ranks were not measured).
constexpr uint32_t bulk_bcast_min_ranks = 4;
// Bcasts of up to this many bytes on shm go through a ring of cells in the
// root's bulk area (coll_shm.cpp, bcast_small): the root writes a cell and
// returns, up to 64 bcasts (the ring's cells) ahead of the slowest member.
constexpr size_t small_bcast_max = 1016;
// Barriers and small allreduces among at most this many members on shm read
// every member's cell at once (coll_shm.cpp, allreduce_flat) instead of
// log2 N rounds of flags (flags.cpp).
constexpr uint32_t flat_max_ranks = 16;
// Bcasts and allgathers of more than this many bytes between exactly two
// members on shm copy straight between the members' own buffers, the copy
// split between them (coll_shm.cpp, bcast_pair / allgather_pair).
constexpr size_t pair_above = 16 * 1024;
// ... but an allgather's blocks of more than this many bytes are staged
// (allgather_bulk): above it two copies in cache beat one cross-memory copy,
// whose page pinning costs more than a cached memcpy. 2 ranks, mean: 128
// KiB blocks 16-18 us pair against 19-23 us staged; 256 KiB blocks 30-34
// against 26-28; 512 KiB 55-63 against 44-46 (bench/RESULTS.md, issue 14).
constexpr size_t pair_allgather_max = 128 * 1024;

class Engine;
struct Request;

// A message that arrived before its receive was posted. Move-only: its
// bytes are a block of the Engine's BufferPool.
struct Unexpected {
    int32_t src = 0;  // rank in the communicator
    int32_t tag = 0;
    uint32_t kind = 0;  // P2p::MsgKind
    uint32_t source_peer = 0;
    uint64_t len = 0;
    uint64_t cookie = 0;
    uint64_t addr = 0;        // rendezvous: where the sender exposed it
    BufferPool::Buffer data;  // eager: the payload; rendezvous: the key
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
    // comm rank -> peer index (transport/runtime.hpp): a member of this
    // job is its job rank; a member of another job of the launch (a process
    // group's communicator, group/pgroup.cpp) is past rt.size().
    std::vector<uint32_t> members;
    std::vector<uint32_t> slots;      // comm rank -> its clock slot
    std::vector<uint16_t> slot_uses;  // comm rank -> the use of that slot (clock_use_bits)
    uint32_t slot = 0;                // ours
    uint64_t* clock =
        nullptr;              // our clock record in the state window (seq, +1 target, +2 finished); null without a slot
    uint32_t coll_seq = 0;    // next collective's number (internal tag)
    uint64_t splits = 0;      // splits and dups started on it (Registry::split)
    uint64_t flag_epoch = 0;  // blocking collectives on the flag path so far
    uint64_t flag_allreduces = 0;   // of which allreduces (their inbox parity)
    uint64_t flat_epoch = 0;        // allreduce_flat: barriers and allreduces so far
    uint64_t small_bcast_free = 0;  // bcast_small: every member has read every bcast up to this one
    uint64_t pair_epoch = 0;        // bcast_pair and allgather_pair so far
    uint32_t refs = 0;              // live requests naming it
    bool freeing = false;           // user freed it; the release barrier runs
    bool slots_known = true;  // every member's clock slot is known (create_from_ranks: after its first collective)
    bool world = false;
    // A member of another job: the communicator has no clock slot and runs
    // its collectives as message schedules (the state, flag and bulk
    // windows span one job), its messages stay out of the job's drain
    // counters, and a drain refuses while it lives (drain/: the drain spans
    // one job). See docs/groups.md, "Communicators across jobs".
    bool spans_jobs = false;
    // The Collective Clock of an external stack's communicator
    // (weft_drain_clock_create): the stack's, so a checkpoint leaves it out
    // and the stack makes it again before a restart (group/snapshot.cpp).
    bool stack_clock = false;
    bool revoked = false;       // weft_comm_revoke (group/ft.cpp)
    Comm* survivors = nullptr;  // G non-empty: collectives run over this (group/ft)
    const uint8_t* recognised =
        nullptr;                  // by rank: failure cleared (group/ft), PROC_NULL for point-to-point; null: none
    CommShell* handle = nullptr;  // its C handle's shell (comm_handle.hpp); null for internal ones
    MatchQueue p2p, coll, create;

    int32_t rank_of_peer(uint32_t peer) const;
};

// This rank's word at `off` of its pinned state window, for
// std::atomic_ref (the registry, point-to-point counters, the drain port
// and revoke use it): the view's (transport/state_window_view.hpp).
inline uint64_t* state_word(Runtime& rt, uint64_t off) { return StateWindowView(rt.state_window()).word(off); }

}  // namespace weft::group
