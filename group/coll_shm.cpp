// coll_shm.cpp — blocking allreduce, bcast and allgather above the flag
// path's 256 bytes, when every member's memory is mapped here (the shm
// backend: a window's RemoteRegion::direct). No message passing: each rank
// reads its peers' staging buffers with plain loads.
//
// A job-wide window gives the first bulk_slots clock slots, on every rank,
// three flag lines (`in`, `out`, `done`) and two staging buffers of bulk_chunk bytes
// (parities). A collective runs in chunks of at most bulk_chunk staged
// bytes; chunk k of the communicator's life has epoch e = k + 1 and uses
// staging parity e & 1. Each rank's flags are written only by itself
// (release) and read by the others (acquire).
//
//   allreduce  copy-in: my chunk, but my own slice, into my stage; in = e;
//              wait every in >= e; reduce my slice — rank 0's slice, then
//              ranks 1..P-1's in order, 16 KiB at a time so the accumulator
//              stays in L1 — into my stage; out = e; wait every out >= e;
//              copy every rank's reduced slice into recvbuf; done = e.
//              Each slice is
//              reduced once, by its owner, in rank order: every rank gets
//              the same bits. Traffic per rank ~3 bytes moved per byte.
//   bcast      the root stages the chunk, in = e; the others wait for it,
//              copy it out; everyone out = done = e.
//   allgather  every rank stages its chunk of its block, in = e; waits every
//              in >= e; copies every block's chunk out; out = done = e.
// `done` = e: this rank reads nothing of epoch e any more. Reuse of a stage:
// before writing its stage at epoch e a rank waits for every done >= e - 2,
// the previous use of that parity (an allreduce's gather reads peers'
// stages after their `out`, so `out` alone would not do: the test
// LargeBackToBackKeepsEveryResult caught exactly that). Every member moves
// its flags through the same epochs whatever its role, so the epoch is its
// own done flag + 1 (a slot's flags are zeroed before a new
// communicator learns the slot, clear_flags).
//
// Small bcasts (at most small_bcast_max bytes) use a ring of
// small_cells cells in each member's area instead, plus one word per
// member, `small_done`: the small bcasts this member has finished on the
// communicator. Bcast e (= small_done + 1, the same on every member) lives
// in cell e % cells of its root's area: the root copies the data in, stores
// e in the cell's first word (release) and returns; the others wait for that
// word to reach e, copy the data out and set their small_done = e. The root
// writes a cell again, for bcast e, only once every member's small_done >=
// e - cells — it remembers the lowest it saw (Comm::small_bcast_free), so it
// reads its peers' words once every few bcasts, not every time. A root runs
// up to `cells` bcasts ahead of the slowest member, as an eager tree's root
// would, where the staged path above waits for every member two bcasts back.
// A cell read for bcast e can only hold e or an older bcast (< e): never a
// newer one, which would need this reader's small_done >= e.
//
// Barriers and allreduces of at most flag_max_bytes among at most
// flat_max_ranks members (allreduce_flat) need no rounds: each member has
// two cells (parities) of {epoch, data}; for collective e (the
// communicator's count of them, Comm::flat_epoch) a member writes its data
// and then e into its cell of parity e & 1, waits until every member's cell
// of that parity holds e, and reduces the members' data in rank order (the
// same bits everywhere). One write and N - 1 reads each, at depth one: a
// rank that must wait for the others to be scheduled (more ranks than
// cores) waits once, where a dissemination waits once per round. A cell of
// parity p is written again at e + 2 only after every member's cell held
// e + 1, which each wrote after its last read of e.
//
// Bcasts and allgathers of more than pair_above bytes between two members
// (pair_usable) copy once, straight between the members' own buffers,
// through the transport's pull and push_into (cross-memory attach on shm):
// a staged copy moves every byte twice, and a point-to-point rendezvous
// leaves all of a bcast's copy to the receiver while the root's core waits.
// Pair collective e (Comm::pair_epoch) of each member: it writes its
// buffer's address into its pair line and then e (release), waits for the
// peer's e, copies — a bcast's root pushes the second half into the
// receiver's buffer while the receiver pulls the first half from the root's;
// in an allgather each pulls the other's block — and writes 2e + (its copy
// failed) into the line's done word. Each then waits for the peer's done
// before returning: until then the peer may still be copying from or into
// its buffer. The line is written again, for e + 1, only after the peer's
// done for e, which it wrote after its last read of our address. A member
// that gives up waiting for its peer (the deadline, a revoke) publishes its
// failed done before it returns, and the peer, once it sees that, copies
// nothing: the buffer that member published may be gone (a root's late
// push would write into it). If the peer came in the meantime, the member
// waits for the peer's done first (a seq_cst store and load on each side:
// one of the two always sees the other).
//
// Failures: every wait is flags.cpp's: a failed member, a revoke or the
// deadline end it with a status. A failed member's mapping stays valid here
// (the memfd lives while we map it), so reads of its stage never fault.
#include "group/engine.hpp"
#include "group/reduce.hpp"

#include <algorithm>
#include <atomic>
#include <cstring>

namespace weft::group {

namespace {
constexpr size_t line = 64;
constexpr size_t flags_bytes = 3 * line;  // in, out, done
constexpr uint32_t in_flag = 0, out_flag = 1, done_flag = 2;
constexpr size_t small_cells = 64;
constexpr size_t small_cell = 8 + small_bcast_max;          // epoch word + data
constexpr size_t small_off = flags_bytes + 2 * bulk_chunk;  // small_done's line, then the cells
constexpr size_t small_area = line + small_cells * small_cell;
constexpr size_t flat_cell = 320;  // epoch word + flag_max_bytes, in whole lines
constexpr size_t flat_off = small_off + small_area;
constexpr size_t pair_off = flat_off + 2 * flat_cell;  // one line: ready epoch, buffer address, done
constexpr size_t bulk_slot_area = pair_off + line;
static_assert(8 + flag_max_bytes <= flat_cell && flat_cell % line == 0);
static_assert(small_cell % line == 0 && bulk_slot_area % line == 0);
constexpr size_t reduce_piece = 16 * 1024;  // accumulator bytes per pass: L1-resident
static_assert(bulk_chunk % line == 0 && bulk_chunk % 8 == 0);

inline uint64_t bulk_off(uint32_t slot) { return uint64_t(slot) * bulk_slot_area; }
// The staging buffer of epoch e, from the start of a slot's area.
inline size_t stage_off(uint64_t e) { return flags_bytes + (e & 1) * bulk_chunk; }
// The epoch whose readers must be done before epoch e writes its stage.
inline uint64_t stage_prev(uint64_t e) { return e > 2 ? e - 2 : 0; }

// [off, off + len) of rank r's slice of n elements split over p ranks.
inline void slice(size_t n, uint32_t p, uint32_t r, size_t& off, size_t& len) {
    const size_t q = n / p, rem = n % p;
    off = r * q + std::min<size_t>(r, rem);
    len = q + (r < rem ? 1 : 0);
}
}  // namespace

Status Collectives::init_bulk() {
    if (std::strcmp(rt_.backend().name(), "shm") != 0) return WEFT_OK;
    const size_t bytes = bulk_slot_area * bulk_slots;
    Status st = rt_.window_create(true, nullptr, bytes, bulk_win_);
    if (st != WEFT_OK) {
        // Every rank learns the same failure (window_create's exchange):
        // all stay on the schedules.
        WEFT_LOG(info, "no %zu-byte bulk collective window (%s): large collectives use schedules", bytes,
                 weft_strerror(st));
        bulk_win_ = nullptr;
        return WEFT_OK;
    }
    for (uint32_t r = 0; r < bulk_win_->nranks; ++r)
        if (!bulk_win_->remote[r].direct) bulk_win_ = nullptr;  // freed with the Runtime's windows
    return WEFT_OK;
}

bool Collectives::bulk_usable(const Comm& c, size_t bytes, size_t above) const {
    if (!bulk_win_ || bytes <= above || c.size < 2 || c.slot >= bulk_slots) return false;
    for (uint32_t s : c.slots)
        if (s >= bulk_slots) return false;
    return true;
}

void Collectives::clear_bulk_flags(uint32_t slot) {
    if (!bulk_win_ || slot >= bulk_slots) return;
    uint8_t* area = bulk_win_->local_base + bulk_off(slot);
    std::memset(area, 0, flags_bytes);
    std::memset(area + small_off, 0, line);
    for (size_t k = 0; k < small_cells; ++k) std::memset(area + small_off + line + k * small_cell, 0, 8);
    std::memset(area + flat_off, 0, 8);
    std::memset(area + flat_off + flat_cell, 0, 8);
    std::memset(area + pair_off, 0, line);
}

bool Collectives::flat_usable(const Comm& c, size_t bytes) const {
    return c.size <= flat_max_ranks && bytes <= flag_max_bytes && bulk_usable(c, bytes + 1);
}

uint8_t* Collectives::bulk_area(const Comm& c, uint32_t member) const {
    return bulk_win_->remote[c.members[member]].direct + bulk_off(c.slots[member]);
}

void Collectives::bulk_set(const Comm& c, uint32_t which, uint64_t epoch) {
    std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(bulk_area(c, c.rank) + which * line))
        .store(epoch, std::memory_order_release);
}

// Waits until member m's flag `which` reaches epoch (flags.cpp's wait: a
// failed member, a revoke or the deadline end it with a status).
Status Collectives::bulk_wait(const Comm& c, uint32_t m, uint32_t which, uint64_t epoch) {
    return await_word(c, reinterpret_cast<uint64_t*>(bulk_area(c, m) + which * line), epoch);
}

Status Collectives::bulk_wait_all(const Comm& c, uint32_t which, uint64_t epoch) {
    for (uint32_t m = 0; m < c.size; ++m)
        if (m != c.rank)
            if (Status st = bulk_wait(c, m, which, epoch)) return st;
    return WEFT_OK;
}

uint64_t Collectives::bulk_epoch(const Comm& c) const {
    return std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(bulk_area(c, c.rank) + done_flag * line))
        .load(std::memory_order_relaxed);
}

Status Collectives::allreduce_bulk(Comm& c, const void* sendbuf, void* recvbuf, size_t count, weft_datatype_t type,
                                   weft_op_t op) {
    eng_.drain_port().commit_begin(c);
    const uint32_t p = c.size, me = c.rank;
    const size_t es = datatype_size(type), chunk_elems = bulk_chunk / es;
    const ReduceFn reduce = reduce_fn(type, op);
    auto* out = static_cast<uint8_t*>(recvbuf);
    const auto* in = sendbuf == WEFT_IN_PLACE ? out : static_cast<const uint8_t*>(sendbuf);
    uint64_t e = bulk_epoch(c);
    Status st = WEFT_OK;
    for (size_t base = 0; base < count && st == WEFT_OK; base += chunk_elems) {
        ++e;
        const size_t n = std::min(chunk_elems, count - base);
        const uint8_t* src = in + base * es;
        const size_t stage = stage_off(e);
        size_t off, len;
        slice(n, p, me, off, len);
        st = bulk_wait_all(c, done_flag, stage_prev(e));
        if (st != WEFT_OK) break;
        uint8_t* mine = bulk_area(c, me) + stage;
        std::memcpy(mine, src, off * es);  // every slice but mine
        std::memcpy(mine + (off + len) * es, src + (off + len) * es, (n - off - len) * es);
        bulk_set(c, in_flag, e);
        st = bulk_wait_all(c, in_flag, e);
        if (st != WEFT_OK) break;
        for (size_t done = 0; done < len * es; done += reduce_piece) {
            const size_t at = off * es + done, bytes = std::min(reduce_piece, len * es - done);
            auto part = [&](uint32_t m) { return m == me ? src + at : bulk_area(c, m) + stage + at; };
            std::memcpy(mine + at, part(0), bytes);
            for (uint32_t m = 1; m < p; ++m) reduce(mine + at, part(m), bytes / es);
        }
        bulk_set(c, out_flag, e);
        st = bulk_wait_all(c, out_flag, e);
        if (st != WEFT_OK) break;
        for (uint32_t m = 0; m < p; ++m) {
            size_t moff, mlen;
            slice(n, p, m, moff, mlen);
            std::memcpy(out + (base + moff) * es, bulk_area(c, m) + stage + moff * es, mlen * es);
        }
        bulk_set(c, done_flag, e);
    }
    eng_.drain_port().commit_finish(c);
    return st;
}

Status Collectives::bcast_bulk(Comm& c, void* buf, size_t bytes, uint32_t root) {
    eng_.drain_port().commit_begin(c);
    auto* data = static_cast<uint8_t*>(buf);
    uint64_t e = bulk_epoch(c);
    Status st = WEFT_OK;
    for (size_t base = 0; base < bytes && st == WEFT_OK; base += bulk_chunk) {
        ++e;
        const size_t n = std::min(bulk_chunk, bytes - base);
        const size_t stage = stage_off(e);
        uint8_t* staged = bulk_area(c, root) + stage;
        if (c.rank == root) {  // stages once the previous use of the buffer is read everywhere
            if ((st = bulk_wait_all(c, done_flag, stage_prev(e))) != WEFT_OK) break;
            std::memcpy(staged, data + base, n);
            bulk_set(c, in_flag, e);
        } else {
            bulk_set(c, in_flag, e);
            if ((st = bulk_wait(c, root, in_flag, e)) != WEFT_OK) break;
            std::memcpy(data + base, staged, n);
        }
        bulk_set(c, out_flag, e);
        bulk_set(c, done_flag, e);
    }
    eng_.drain_port().commit_finish(c);
    return st;
}

Status Collectives::bcast_small(Comm& c, void* buf, size_t bytes, uint32_t root) {
    eng_.drain_port().commit_begin(c);
    auto word = [&](uint32_t m, size_t off) {
        return std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(bulk_area(c, m) + small_off + off));
    };
    const uint64_t e = word(c.rank, 0).load(std::memory_order_relaxed) + 1;
    const size_t cell = line + (e % small_cells) * small_cell;
    Status st = WEFT_OK;
    if (c.rank == root) {
        // Every member must have read the cell's previous bcast, e - cells.
        const uint64_t need = e > small_cells ? e - small_cells : 0;
        if (c.small_bcast_free < need) {
            uint64_t lowest = UINT64_MAX;
            for (uint32_t m = 0; m < c.size && st == WEFT_OK; ++m) {
                if (m == c.rank) continue;
                uint64_t* done = reinterpret_cast<uint64_t*>(bulk_area(c, m) + small_off);
                st = await_word(c, done, need);
                lowest = std::min(lowest, std::atomic_ref<uint64_t>(*done).load(std::memory_order_acquire));
            }
            if (st == WEFT_OK) c.small_bcast_free = lowest;
        }
        if (st == WEFT_OK) {
            std::memcpy(bulk_area(c, root) + small_off + cell + 8, buf, bytes);
            word(root, cell).store(e, std::memory_order_release);
        }
    } else {
        st = await_word(c, reinterpret_cast<uint64_t*>(bulk_area(c, root) + small_off + cell), e);
        if (st == WEFT_OK) std::memcpy(buf, bulk_area(c, root) + small_off + cell + 8, bytes);
    }
    if (st == WEFT_OK) word(c.rank, 0).store(e, std::memory_order_release);
    eng_.drain_port().commit_finish(c);
    return st;
}

Status Collectives::allreduce_flat(Comm& c, const void* sendbuf, void* recvbuf, size_t count, weft_datatype_t type,
                                   weft_op_t op) {
    eng_.drain_port().commit_begin(c);
    const uint64_t e = ++c.flat_epoch;
    const size_t cell = flat_off + (e & 1) * flat_cell;
    const size_t bytes = count ? count * datatype_size(type) : 0;
    uint8_t* mine = bulk_area(c, c.rank) + cell;
    if (bytes) std::memcpy(mine + 8, sendbuf == WEFT_IN_PLACE ? recvbuf : sendbuf, bytes);
    std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(mine)).store(e, std::memory_order_release);
    Status st = WEFT_OK;
    for (uint32_t m = 0; m < c.size && st == WEFT_OK; ++m)
        if (m != c.rank) st = await_word(c, reinterpret_cast<uint64_t*>(bulk_area(c, m) + cell), e);
    if (st == WEFT_OK && bytes) {
        const ReduceFn reduce = reduce_fn(type, op);
        auto* acc = static_cast<uint8_t*>(recvbuf);
        std::memcpy(acc, bulk_area(c, 0) + cell + 8, bytes);
        for (uint32_t m = 1; m < c.size; ++m) reduce(acc, bulk_area(c, m) + cell + 8, count);
    }
    eng_.drain_port().commit_finish(c);
    return st;
}

Status Collectives::allgather_bulk(Comm& c, const void* sendbuf, size_t bytes, void* recvbuf) {
    eng_.drain_port().commit_begin(c);
    const uint32_t p = c.size, me = c.rank;
    auto* out = static_cast<uint8_t*>(recvbuf);
    const auto* in = sendbuf == WEFT_IN_PLACE ? out + me * bytes : static_cast<const uint8_t*>(sendbuf);
    uint64_t e = bulk_epoch(c);
    Status st = WEFT_OK;
    for (size_t base = 0; base < bytes && st == WEFT_OK; base += bulk_chunk) {
        ++e;
        const size_t n = std::min(bulk_chunk, bytes - base);
        const size_t stage = stage_off(e);
        st = bulk_wait_all(c, done_flag, stage_prev(e));
        if (st != WEFT_OK) break;
        std::memcpy(bulk_area(c, me) + stage, in + base, n);
        bulk_set(c, in_flag, e);
        st = bulk_wait_all(c, in_flag, e);
        if (st != WEFT_OK) break;
        for (uint32_t m = 0; m < p; ++m)
            if (m != me) std::memcpy(out + m * bytes + base, bulk_area(c, m) + stage, n);
        if (sendbuf != WEFT_IN_PLACE) std::memmove(out + me * bytes + base, in + base, n);
        bulk_set(c, out_flag, e);
        bulk_set(c, done_flag, e);
    }
    eng_.drain_port().commit_finish(c);
    return st;
}

bool Collectives::pair_usable(const Comm& c, size_t bytes, size_t at_most) const {
    return c.size == 2 && bytes > pair_above && bytes <= at_most && bulk_usable(c, bytes);
}

template <typename Copy>
Status Collectives::pair_exchange(Comm& c, const void* mine, size_t bytes, Copy&& copy) {
    auto word = [&](uint32_t m, uint32_t k) {
        return std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(bulk_area(c, m) + pair_off + 8 * k));
    };
    constexpr uint32_t ready = 0, address = 1, done = 2;
    const uint32_t peer = 1 - c.rank;
    const uint64_t e = ++c.pair_epoch;
    ExposedBuffer exposed;
    Status st = rt_.backend().expose(mine, bytes, exposed);
    if (st != WEFT_OK) return st;  // shm exposes any memory: no member fails alone here
    word(c.rank, address).store(exposed.addr, std::memory_order_relaxed);
    // seq_cst, with the loads below: of a member that gives up waiting
    // (done = 2e + 1, then a look at our ready) and us (ready = e, then a
    // look at its done), at least one sees the other's store.
    word(c.rank, ready).store(e, std::memory_order_seq_cst);
    uint64_t* peer_ready = reinterpret_cast<uint64_t*>(bulk_area(c, peer) + pair_off);
    st = await_word(c, peer_ready, e);
    if (st == WEFT_OK && word(peer, done).load(std::memory_order_seq_cst) == 2 * e + 1)
        // It gave up (or failed) before we came: its buffer may be gone;
        // touch nothing. (2e: it finished its part, a bcast's receiver may.)
        st = WEFT_FAIL(WEFT_ERR_TIMEOUT, "collective on communicator %llx: the peer gave up waiting for us",
                       static_cast<unsigned long long>(c.id));
    else if (st == WEFT_OK)
        st = copy(c.members[peer], word(peer, address).load(std::memory_order_relaxed));
    word(c.rank, done).store(2 * e + (st != WEFT_OK), std::memory_order_seq_cst);
    // Gave up (deadline, revoke) while the peer had already come: it may be
    // copying into our buffer, which must outlive that.
    const bool peer_came = word(peer, ready).load(std::memory_order_seq_cst) >= e;
    if (st != WEFT_ERR_PEER_FAILED && (peer_came || (st != WEFT_ERR_REVOKED && st != WEFT_ERR_TIMEOUT))) {
        const Status waited = await_word(c, peer_ready + done, 2 * e);
        if (st == WEFT_OK) st = waited;
        if (st == WEFT_OK && (word(peer, done).load(std::memory_order_acquire) & 1))
            st = WEFT_FAIL(WEFT_ERR_TRANSPORT, "collective on communicator %llx: the peer's copy failed",
                           static_cast<unsigned long long>(c.id));
    }
    rt_.backend().unexpose(exposed);
    return st;
}

Status Collectives::bcast_pair(Comm& c, void* buf, size_t bytes, uint32_t root) {
    eng_.drain_port().commit_begin(c);
    auto* data = static_cast<uint8_t*>(buf);
    // Split at a multiple of 4 KiB: with a page-aligned buffer each side
    // pins only its own pages.
    const size_t head = (bytes / 2) & ~size_t(4095);
    Status st = pair_exchange(c, buf, bytes, [&](uint32_t peer, uint64_t at) {
        return c.rank == root ? rt_.backend().push_into(peer, at + head, nullptr, 0, data + head, bytes - head)
                              : rt_.backend().pull(peer, at, nullptr, 0, data, head);
    });
    eng_.drain_port().commit_finish(c);
    return st;
}

Status Collectives::allgather_pair(Comm& c, const void* sendbuf, size_t bytes, void* recvbuf) {
    eng_.drain_port().commit_begin(c);
    auto* out = static_cast<uint8_t*>(recvbuf);
    const uint32_t me = c.rank, peer = 1 - me;
    const auto* in = sendbuf == WEFT_IN_PLACE ? out + me * bytes : static_cast<const uint8_t*>(sendbuf);
    if (sendbuf != WEFT_IN_PLACE) std::memcpy(out + me * bytes, in, bytes);
    Status st = pair_exchange(c, in, bytes, [&](uint32_t peer_job, uint64_t at) {
        return rt_.backend().pull(peer_job, at, nullptr, 0, out + peer * bytes, bytes);
    });
    eng_.drain_port().commit_finish(c);
    return st;
}

}  // namespace weft::group
