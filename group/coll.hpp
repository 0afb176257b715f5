// coll.hpp — collectives: non-blocking schedules over the collective
// context (coll.cpp, schedule.hpp) and the blocking barrier and small
// allreduce over one-sided writes into pinned flags (flags.cpp)
// (docs/communicators.md, "Collectives"). Each one counts in the
// communicator's Collective Clock (DrainPort::commit_begin/commit_finish).
//
// Thread affinity: the Engine's (the API lock when MULTIPLE).
#pragma once

#include "group/comm.hpp"
#include "group/reduce.hpp"

#include <memory>
#include <vector>

namespace weft::group {

class Collectives {
public:
    explicit Collectives(Engine& eng);
    Collectives(const Collectives&) = delete;
    Collectives& operator=(const Collectives&) = delete;
    // The job-wide flag window (collective: every rank at init).
    Status init();

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

    // ------------------------------------------------- schedules (coll.cpp)
    // release: weft_comm_free's barrier (coll_tag's CollKind::release).
    Status barrier_start(Comm& c, Request*& out, bool release = false);
    Status bcast_start(Comm& c, void* buf, size_t bytes, uint32_t root, Request*& out);
    Status reduce_start(Comm& c, const void* sendbuf, void* recvbuf, size_t count, weft_datatype_t type, weft_op_t op,
                        uint32_t root, bool all, Request*& out);
    Status allgather_start(Comm& c, const void* sendbuf, size_t bytes, void* recvbuf, Request*& out);
    // From progress: runs every active schedule until it must wait.
    uint32_t advance_schedules();
    bool no_schedules() const { return active_colls_.empty(); }
    // Active collectives fail with st: those over c (revoke), or those over
    // a communicator that contains job rank `peer` (its failure).
    void fail_on(const Comm& c, Status st);
    void fail_with_member(uint32_t peer, Status st);

    // Schedules' scratch memory, recycled.
    struct Scratch {
        std::unique_ptr<uint8_t[]> buf;
        size_t size = 0;
    };
    Scratch take_scratch(size_t n);
    void give_scratch(Scratch s);

    // ------------------------------------------------- flags (flags.cpp)
    // Blocking forms over one-sided writes into pinned flags, when
    // flags_usable says so (the same answer on every member).
    bool flags_usable(const Comm& c, size_t bytes) const;
    Status barrier_flags(Comm& c);
    Status allreduce_flags(Comm& c, const void* sendbuf, void* recvbuf, size_t count, weft_datatype_t type,
                           weft_op_t op);
    // A slot's flags to zero before a new communicator learns the slot
    // (Registry::take_slot).
    void clear_flags(uint32_t slot);

    // ------------------------------------------------- shm bulk (coll_shm.cpp)
    // Blocking allreduce, bcast and allgather above flag_max_bytes when every
    // member's memory is mapped here (shm) and the communicator's slots have
    // a bulk area (bulk_usable: the same answer on every member, for
    // payloads of more than `above` bytes). Staging in mapped memory, one
    // pass over peers' data, chunks of bulk_chunk.
    bool bulk_usable(const Comm& c, size_t bytes, size_t above = 0) const;
    Status allreduce_bulk(Comm& c, const void* sendbuf, void* recvbuf, size_t count, weft_datatype_t type,
                          weft_op_t op);
    Status bcast_bulk(Comm& c, void* buf, size_t bytes, uint32_t root);
    // Bcasts of at most small_bcast_max bytes (bulk_usable(c, bytes) true).
    Status bcast_small(Comm& c, void* buf, size_t bytes, uint32_t root);
    // Barriers (count 0) and allreduces of at most flag_max_bytes among at
    // most flat_max_ranks members, when flat_usable says so (the same answer
    // on every member, and then for every size up to flag_max_bytes).
    bool flat_usable(const Comm& c, size_t bytes) const;
    Status allreduce_flat(Comm& c, const void* sendbuf, void* recvbuf, size_t count, weft_datatype_t type,
                          weft_op_t op);
    Status allgather_bulk(Comm& c, const void* sendbuf, size_t bytes, void* recvbuf);
    // Two members (bulk_usable true): each copies straight from or into the
    // other's buffer with the transport's pull / push_into, half of a bcast
    // each, its peer's block of an allgather each.
    bool pair_usable(const Comm& c, size_t bytes, size_t at_most = SIZE_MAX) const;
    Status bcast_pair(Comm& c, void* buf, size_t bytes, uint32_t root);
    Status allgather_pair(Comm& c, const void* sendbuf, size_t bytes, void* recvbuf);

private:
    Status init_bulk();  // from init(): the bulk window, on shm only
    void clear_bulk_flags(uint32_t slot);
    uint8_t* bulk_area(const Comm& c, uint32_t member) const;
    void bulk_set(const Comm& c, uint32_t which, uint64_t epoch);
    Status bulk_wait(const Comm& c, uint32_t member, uint32_t which, uint64_t epoch);
    Status bulk_wait_all(const Comm& c, uint32_t which, uint64_t epoch);
    uint64_t bulk_epoch(const Comm& c) const;
    template <typename Copy>
    Status pair_exchange(Comm& c, const void* mine, size_t bytes, Copy&& copy);
    Status signal(const Comm& c, uint32_t to, uint64_t flag_off, const void* data, size_t bytes, uint64_t epoch);
    Status await(const Comm& c, uint64_t flag_off, uint64_t epoch);
    Status await_word(const Comm& c, uint64_t* word, uint64_t epoch);
    void rest(Backoff& b);

    Engine& eng_;
    Runtime& rt_;
    // Scratch buffers of finished schedules, largest kept. The Engine
    // declares this part before P2p: schedules give theirs back while the
    // request pool is destroyed.
    std::vector<Scratch> scratch_pool_;
    std::vector<Request*> active_colls_;
    weft_window* flag_win_ = nullptr;  // owned by the Runtime (freed at finalize)
    weft_window* bulk_win_ = nullptr;  // likewise; null unless every rank's area is mapped here
    bool ordered_puts_ = false;
};

}  // namespace weft::group
