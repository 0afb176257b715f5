// verbs_datapath.cpp — put, get and atomics on RC queue pairs, and the waits
// they may need (SQ or staging full, a result to come back).
//
// Every operation returns once its local buffers are done with: a put once
// src is copied (inline into the WQE, or into the staging ring), a get or
// an atomic once the reply has landed. Remote completion of puts is flush().
#include <weft/config.hpp>

#if WEFT_HAVE_VERBS

#include "transport/verbs/verbs_backend.hpp"

#include <algorithm>

namespace weft::verbs {

namespace {

inline VerbsBackend* backend_of(weft_window* w) { return static_cast<WindowData*>(w->backend_data)->backend; }

Status verbs_put(weft_window* w, uint32_t rank, uint64_t off, const void* src, size_t len) {
    return backend_of(w)->put(w->remote[rank], rank, off, src, len);
}
Status verbs_get(weft_window* w, uint32_t rank, uint64_t off, void* dst, size_t len) {
    return backend_of(w)->get(w->remote[rank], rank, off, dst, len);
}
Status verbs_fetch_add(weft_window* w, uint32_t rank, uint64_t off, uint64_t v, uint64_t* old) {
    return backend_of(w)->atomic(IBV_WR_ATOMIC_FETCH_AND_ADD, w->remote[rank], rank, off, v, 0, old);
}
Status verbs_compare_swap(weft_window* w, uint32_t rank, uint64_t off, uint64_t expected, uint64_t desired,
                          uint64_t* old) {
    return backend_of(w)->atomic(IBV_WR_ATOMIC_CMP_AND_SWP, w->remote[rank], rank, off, expected, desired, old);
}
// Verbs has no plain swap: compare-swap until the guess was right. Each
// failed attempt returns the current value, which is the next guess, so this
// ends as soon as no other writer intervenes between two of our attempts.
Status verbs_swap(weft_window* w, uint32_t rank, uint64_t off, uint64_t v, uint64_t* old) {
    VerbsBackend* b = backend_of(w);
    uint64_t guess = 0, seen = 0;
    for (;;) {
        Status st = b->atomic(IBV_WR_ATOMIC_CMP_AND_SWP, w->remote[rank], rank, off, guess, v, &seen);
        if (st != WEFT_OK) return st;
        if (seen == guess) break;
        guess = seen;
    }
    *old = seen;
    return WEFT_OK;
}

// A device without atomics (atomic_cap NONE): every atomic fails as the
// capabilities say (WEFT_ATOMICS_NONE), without posting anything.
Status verbs_no_fetch_add(weft_window* w, uint32_t rank, uint64_t off, uint64_t, uint64_t*) {
    return backend_of(w)->no_atomics(w->remote[rank], rank, off);
}
Status verbs_no_compare_swap(weft_window* w, uint32_t rank, uint64_t off, uint64_t, uint64_t, uint64_t*) {
    return backend_of(w)->no_atomics(w->remote[rank], rank, off);
}
Status verbs_no_swap(weft_window* w, uint32_t rank, uint64_t off, uint64_t, uint64_t*) {
    return backend_of(w)->no_atomics(w->remote[rank], rank, off);
}

}  // namespace

extern const RmaOps verbs_ops;
const RmaOps verbs_ops{verbs_put, verbs_get, verbs_fetch_add, verbs_compare_swap, verbs_swap};
extern const RmaOps verbs_no_atomics_ops;
const RmaOps verbs_no_atomics_ops{verbs_put, verbs_get, verbs_no_fetch_add, verbs_no_compare_swap, verbs_no_swap};

Status VerbsBackend::put(const RemoteRegion& r, uint32_t rank, uint64_t off, const void* src, size_t len) {
    Conn& c = conns_[rank];
    if (__builtin_expect(c.dead, 0)) return dead_conn(c, "put");
    c.dirty = true;
    ibv_sge sge;
    ibv_send_wr wr{};
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.wr.rdma.rkey = r.rkey32;
    if (len <= max_inline_) {
        // Inline: the payload is copied into the WQE; src is free at once
        // and no lkey is needed.
        Status st = room(c, sq_data_limit, "put");
        if (__builtin_expect(st != WEFT_OK, 0)) return st;
        sge = ibv_sge{reinterpret_cast<uint64_t>(src), static_cast<uint32_t>(len), 0};
        wr.send_flags = IBV_SEND_INLINE;
        wr.wr.rdma.remote_addr = r.addr + off;
        return post(c, wr, false);
    }
    const uint8_t* p = static_cast<const uint8_t*>(src);
    while (len > 0) {
        const size_t n = std::min(len, stage_chunk);
        uint8_t* s = nullptr;
        Status st = stage_reserve(c, n, s);
        if (st == WEFT_OK) st = room(c, sq_data_limit, "put");
        if (__builtin_expect(st != WEFT_OK, 0)) return st;
        std::memcpy(s, p, n);
        sge = ibv_sge{reinterpret_cast<uint64_t>(s), static_cast<uint32_t>(n), local_mr_->lkey};
        wr.send_flags = 0;
        wr.wr.rdma.remote_addr = r.addr + off;
        st = post(c, wr, false);
        if (__builtin_expect(st != WEFT_OK, 0)) return st;
        p += n;
        off += n;
        len -= n;
    }
    return WEFT_OK;
}

Status VerbsBackend::get(const RemoteRegion& r, uint32_t rank, uint64_t off, void* dst, size_t len) {
    Conn& c = conns_[rank];
    if (__builtin_expect(c.dead, 0)) return dead_conn(c, "get");
    uint8_t* out = static_cast<uint8_t*>(dst);
    // Rounds of up to 4 staged reads; the last of a round is signalled and
    // retires the others (RC completes in order).
    while (len > 0) {
        uint8_t* bufs[4];
        size_t lens[4];
        int k = 0;
        uint64_t last = 0;
        for (; k < 4 && len > 0; ++k) {
            const size_t n = std::min(len, stage_chunk);
            Status st = stage_reserve(c, n, bufs[k]);
            if (st == WEFT_OK) st = room(c, sq_data_limit, "get");
            if (__builtin_expect(st != WEFT_OK, 0)) return st;
            ibv_sge sge{reinterpret_cast<uint64_t>(bufs[k]), static_cast<uint32_t>(n), local_mr_->lkey};
            ibv_send_wr wr{};
            wr.opcode = IBV_WR_RDMA_READ;
            wr.sg_list = &sge;
            wr.num_sge = 1;
            wr.wr.rdma.remote_addr = r.addr + off;
            wr.wr.rdma.rkey = r.rkey32;
            lens[k] = n;
            off += n;
            len -= n;
            st = post(c, wr, k == 3 || len == 0);
            if (__builtin_expect(st != WEFT_OK, 0)) return st;
            last = c.posted;
        }
        Status st = wait_done(c, last, "get");
        if (__builtin_expect(st != WEFT_OK, 0)) return st;
        for (int i = 0; i < k; ++i) {
            std::memcpy(out, bufs[i], lens[i]);
            out += lens[i];
        }
    }
    return WEFT_OK;
}

Status VerbsBackend::atomic(ibv_wr_opcode op, const RemoteRegion& r, uint32_t rank, uint64_t off, uint64_t add_or_cmp,
                            uint64_t swap, uint64_t* old) {
    Conn& c = conns_[rank];
    if (__builtin_expect(c.dead, 0)) return dead_conn(c, "atomic");
    const uint64_t raddr = r.addr + off;
    // The API checked the offset; a registered window's base may still be
    // unaligned, and an unaligned NIC atomic is a remote error that would
    // kill the QP. (A device without atomics never gets here: its windows
    // bind verbs_no_atomics_ops.)
    if (__builtin_expect((raddr & 7) != 0, 0))
        return WEFT_FAIL(WEFT_ERR_UNALIGNED, "verbs atomic on rank %u at 0x%llx: %s", rank,
                         static_cast<unsigned long long>(raddr), "address not 8-byte aligned");
    Status st = room(c, sq_data_limit, "atomic");
    if (__builtin_expect(st != WEFT_OK, 0)) return st;
    ibv_sge sge{reinterpret_cast<uint64_t>(&c.ctrl->atomic_result), 8, ctrl_mr_->lkey};
    ibv_send_wr wr{};
    wr.opcode = op;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.wr.atomic.remote_addr = raddr;
    wr.wr.atomic.rkey = r.rkey32;
    wr.wr.atomic.compare_add = add_or_cmp;
    wr.wr.atomic.swap = swap;
    st = post(c, wr, true);
    if (__builtin_expect(st != WEFT_OK, 0)) return st;
    st = wait_done(c, c.posted, "atomic");
    if (__builtin_expect(st != WEFT_OK, 0)) return st;  // outputs only on success
    // The NIC wrote the reply before the completion was visible.
    *old = std::atomic_ref<uint64_t>(c.ctrl->atomic_result).load(std::memory_order_acquire);
    return WEFT_OK;
}

Status VerbsBackend::no_atomics(const RemoteRegion& r, uint32_t rank, uint64_t off) {
    // The same answers atomic() gave such a device: a failed peer first.
    const Conn& c = conns_[rank];
    if (c.dead) return dead_conn(c, "atomic");
    return WEFT_FAIL(WEFT_ERR_UNSUPPORTED, "verbs atomic on rank %u at 0x%llx: %s", rank,
                     static_cast<unsigned long long>(r.addr + off), "the device has no atomics");
}

// ---------------------------------------------------------------- waits
Status VerbsBackend::wait_room(Conn& c, uint32_t limit, const char* what) {
    return wait_until(c, what, [&] { return c.inflight() < limit; });
}

Status VerbsBackend::wait_stage(Conn& c, uint64_t need) {
    return wait_until(c, "staging", [&] { return c.stage_head + need - c.stage_tail <= stage_size; });
}

Status VerbsBackend::wait_seq(Conn& c, uint64_t seq, const char* what) {
    return wait_until(c, what, [&] { return c.completed >= seq; });
}

Status VerbsBackend::dead_conn(const Conn& c, const char* what) {
    return WEFT_FAIL(WEFT_ERR_PEER_FAILED, "verbs %s: peer %u has failed", what, c.peer);
}

void VerbsBackend::nudge(Conn& c) {
    // A signalled 8-byte write of our credit counter: harmless (monotonic)
    // and always within the SQ (data WRs leave room for it).
    if (c.dead || c.inflight() >= sq_depth) return;
    c.ctrl->freed_src = c.freed_returned;
    ibv_sge sge{reinterpret_cast<uint64_t>(&c.ctrl->freed_src), 8, ctrl_mr_->lkey};
    ibv_send_wr wr{};
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.send_flags = max_inline_ >= 8 ? IBV_SEND_INLINE : 0;
    wr.wr.rdma.remote_addr = c.remote_ctrl + offsetof(PeerCtrl, freed);
    wr.wr.rdma.rkey = c.remote_ctrl_rkey;
    (void)post(c, wr, true);
}

}  // namespace weft::verbs

#endif  // WEFT_HAVE_VERBS
