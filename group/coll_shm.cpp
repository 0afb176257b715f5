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
constexpr size_t bulk_slot_area = flags_bytes + 2 * bulk_chunk;
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
    if (bulk_win_ && slot < bulk_slots) std::memset(bulk_win_->local_base + bulk_off(slot), 0, flags_bytes);
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

}  // namespace weft::group
