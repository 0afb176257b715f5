// shm_datapath.cpp — RMA for the shm backend: loads, stores and CPU atomics
// on a peer's mapped segment (weft-allocated windows), cross-memory attach
// for registered windows. No call here enters the backend object: the
// window's RmaOps table is the whole datapath.
#include "transport/shm/shm_backend.hpp"

#include <atomic>
#include <cerrno>
#include <cstring>
#include <sys/uio.h>

namespace weft::shm {

Status cma_copy(int32_t pid, void* local, uint64_t remote, size_t len, bool write) {
    size_t done = 0;
    while (done < len) {
        iovec l{static_cast<uint8_t*>(local) + done, len - done};
        iovec r{reinterpret_cast<void*>(remote + done), len - done};
        ssize_t n = write ? process_vm_writev(pid, &l, 1, &r, 1, 0) : process_vm_readv(pid, &l, 1, &r, 1, 0);
        if (n <= 0) {
            if (n < 0 && errno == EINTR) continue;
            return WEFT_FAIL(errno == ESRCH ? WEFT_ERR_PEER_FAILED : WEFT_ERR_TRANSPORT,
                             "cross-memory %s of %zu bytes with pid %d: %s", write ? "write" : "read", len,
                             static_cast<int>(pid), n < 0 ? std::strerror(errno) : "no progress");
        }
        done += static_cast<size_t>(n);
    }
    return WEFT_OK;
}

// ---------------------------------------------------- RMA on mapped memory
namespace {

inline uint64_t* word_at(weft_window* w, uint32_t rank, uint64_t off) {
    return reinterpret_cast<uint64_t*>(w->remote[rank].direct + off);
}

Status direct_put(weft_window* w, uint32_t rank, uint64_t off, const void* src, size_t len) {
    // Release: earlier puts and stores of this origin are visible before this
    // one (ordered puts: a data put followed by a flag put is safe).
    std::atomic_thread_fence(std::memory_order_release);
    std::memcpy(w->remote[rank].direct + off, src, len);
    return WEFT_OK;
}

Status direct_get(weft_window* w, uint32_t rank, uint64_t off, void* dst, size_t len) {
    std::memcpy(dst, w->remote[rank].direct + off, len);
    std::atomic_thread_fence(std::memory_order_acquire);
    return WEFT_OK;
}

Status direct_fetch_add(weft_window* w, uint32_t rank, uint64_t off, uint64_t v, uint64_t* old) {
    *old = std::atomic_ref<uint64_t>(*word_at(w, rank, off)).fetch_add(v, std::memory_order_seq_cst);
    return WEFT_OK;
}

Status direct_compare_swap(weft_window* w, uint32_t rank, uint64_t off, uint64_t expected, uint64_t desired,
                           uint64_t* old) {
    std::atomic_ref<uint64_t>(*word_at(w, rank, off))
        .compare_exchange_strong(expected, desired, std::memory_order_seq_cst);
    *old = expected;  // holds the previous value whether or not it matched
    return WEFT_OK;
}

Status direct_swap(weft_window* w, uint32_t rank, uint64_t off, uint64_t v, uint64_t* old) {
    *old = std::atomic_ref<uint64_t>(*word_at(w, rank, off)).exchange(v, std::memory_order_seq_cst);
    return WEFT_OK;
}

}  // namespace

const RmaOps direct_ops{direct_put, direct_get, direct_fetch_add, direct_compare_swap, direct_swap};

// --------------------------------------- RMA on registered (unmapped) memory
namespace {

Status cma_put(weft_window* w, uint32_t rank, uint64_t off, const void* src, size_t len) {
    const RemoteRegion& r = w->remote[rank];
    if (r.direct) {
        std::memcpy(r.direct + off, src, len);
        return WEFT_OK;
    }
    return cma_copy(r.pid, const_cast<void*>(src), r.addr + off, len, true);
}

Status cma_get(weft_window* w, uint32_t rank, uint64_t off, void* dst, size_t len) {
    const RemoteRegion& r = w->remote[rank];
    if (r.direct) {
        std::memcpy(dst, r.direct + off, len);
        return WEFT_OK;
    }
    return cma_copy(r.pid, dst, r.addr + off, len, false);
}

[[gnu::cold]] Status cma_no_atomics() {
    return WEFT_FAIL(WEFT_ERR_UNSUPPORTED,
                     "shm: atomics need a window from weft_window_allocate (registered memory "
                     "is not shared with peers)");
}
Status cma_fetch_add(weft_window*, uint32_t, uint64_t, uint64_t, uint64_t*) { return cma_no_atomics(); }
Status cma_compare_swap(weft_window*, uint32_t, uint64_t, uint64_t, uint64_t, uint64_t*) { return cma_no_atomics(); }
Status cma_swap(weft_window*, uint32_t, uint64_t, uint64_t, uint64_t*) { return cma_no_atomics(); }

}  // namespace

const RmaOps cma_ops{cma_put, cma_get, cma_fetch_add, cma_compare_swap, cma_swap};

}  // namespace weft::shm
