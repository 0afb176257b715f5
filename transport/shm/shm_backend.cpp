// shm_backend.cpp — the shared-memory backend (control path; RMA is in
// shm_datapath.cpp).
//
// Each rank creates one memfd segment: a header (doorbell), one inbound
// active-message ring per process of the universe, and a heap that backs
// weft-allocated windows (the state window included). Peers obtain the memfd
// with pidfd_getfd and map it, so RMA is memcpy and remote atomics are CPU
// atomics on the peer's memory. Nothing is ever named in /dev/shm: when the
// last process holding the memfd dies, the kernel frees it, however the job
// ended (SIGKILL included).
//
// Windows over memory the program registered itself cannot be mapped; put
// and get on them use cross-memory attach (process_vm_readv/writev), which is
// also how large active messages travel (rendezvous: the receiver pulls the
// sender's buffer in one copy).
#include "transport/backend.hpp"
#include "transport/runtime.hpp"
#include "transport/shm/am_ring.hpp"
#include "transport/shm/shm_backend.hpp"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <linux/futex.h>
#include <map>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace weft {
namespace {

constexpr uint64_t segment_magic = 0x5745465453454731ull;  // "WEFTSEG1"

struct SegmentHeader {
    uint64_t magic;
    uint64_t owner_universe;
    uint64_t universe_size;
    uint64_t ring_capacity;
    uint64_t rings_offset;
    uint64_t heap_offset;
    uint64_t heap_size;
    uint64_t total_size;
    // Senders bump it after publishing a record; the owner sleeps on it.
    alignas(64) std::atomic<uint32_t> doorbell;
    alignas(64) std::atomic<uint32_t> sleeping;
};

long futex(std::atomic<uint32_t>* addr, int op, uint32_t val, const timespec* ts) {
    return syscall(SYS_futex, reinterpret_cast<uint32_t*>(addr), op, val, ts, nullptr, 0);
}

// First-fit allocator over the segment heap (control path only).
class HeapAllocator {
public:
    void reset(uint64_t size) {
        free_.clear();
        free_[0] = size;
    }
    // The bytes a window of `size` occupies in the heap.
    static uint64_t span(uint64_t size) { return round_up(size ? size : 64, 64); }
    bool alloc(uint64_t size, uint64_t& off) {
        size = span(size);
        for (auto it = free_.begin(); it != free_.end(); ++it) {
            if (it->second < size) continue;
            off = it->first;
            uint64_t rest = it->second - size;
            free_.erase(it);
            if (rest) free_[off + size] = rest;
            return true;
        }
        return false;
    }
    void release(uint64_t off, uint64_t size) {
        size = span(size);
        auto it = free_.emplace(off, size).first;
        auto next = std::next(it);
        if (next != free_.end() && it->first + it->second == next->first) {
            it->second += next->second;
            free_.erase(next);
        }
        if (it != free_.begin()) {
            auto prev = std::prev(it);
            if (prev->first + prev->second == it->first) {
                prev->second += it->second;
                free_.erase(it);
            }
        }
    }

private:
    static uint64_t round_up(uint64_t n, uint64_t a) { return (n + a - 1) / a * a; }
    std::map<uint64_t, uint64_t> free_;
};

// Page runs {offset, length} of the heap [from, to) of a segment that hold
// anything: a memfd's data (SEEK_DATA/SEEK_HOLE: pages never touched are
// holes), or a private mapping's resident pages (mincore). A release and a
// rebuild copy these alone, so they cost what the windows use, not the
// heap's size (the bulk collective window alone reserves tens of MiB).
using Runs = std::vector<std::pair<uint64_t, uint64_t>>;

Runs file_data_runs(int fd, uint64_t from, uint64_t to) {
    Runs runs;
    for (uint64_t at = from; at < to;) {
        const off_t d = lseek(fd, static_cast<off_t>(at), SEEK_DATA);
        if (d < 0 || static_cast<uint64_t>(d) >= to) break;  // ENXIO: no data past `at`
        off_t h = lseek(fd, d, SEEK_HOLE);
        const uint64_t end = h < 0 ? to : std::min<uint64_t>(static_cast<uint64_t>(h), to);
        runs.emplace_back(static_cast<uint64_t>(d), end - static_cast<uint64_t>(d));
        at = end;
    }
    return runs;
}

Runs resident_runs(const uint8_t* base, uint64_t from, uint64_t to) {
    const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
    std::vector<unsigned char> in((to - from + page - 1) / page);
    Runs runs;
    if (mincore(const_cast<uint8_t*>(base + from), to - from, in.data()) != 0) {
        runs.emplace_back(from, to - from);  // cannot tell: all of it
        return runs;
    }
    for (uint64_t i = 0; i < in.size();) {
        if (!(in[i] & 1)) {
            ++i;
            continue;
        }
        uint64_t j = i;
        while (j < in.size() && (in[j] & 1)) ++j;
        runs.emplace_back(from + i * page, std::min(to, from + j * page) - (from + i * page));
        i = j;
    }
    return runs;
}

struct WindowData {
    uint64_t heap_offset = 0;  // allocated windows: where in our heap
    uint64_t size = 0;
};

struct Peer {
    uint8_t* base = nullptr;  // the peer's segment, mapped here
    uint64_t size = 0;
    SegmentHeader* header = nullptr;
    shm::RingProducer to_peer;  // our ring inside the peer's segment
    int32_t pid = 0;
};

// ---------------------------------------------------------------- backend
class ShmBackend final : public Backend {
public:
    explicit ShmBackend(Runtime& rt) : rt_(rt) {}
    ~ShmBackend() override;
    Status init();

    const char* name() const override { return "shm"; }
    InternalCaps internal_caps() const override { return {.idle_poll = IdlePoll::woken}; }
    void query_caps(weft_caps_t& c) const override {
        c.transport = "shm";
        c.atomics = WEFT_ATOMICS_CPU;
        c.atomics_registered = WEFT_ATOMICS_NONE;
        c.atomic_scope = WEFT_ATOMIC_SCOPE_GLOBAL;
        c.ordered_puts = 1;
        c.peer_failure_immediate = 1;
        c.am_eager_limit = eager_limit_;
        c.am_max_size = WEFT_AM_MAX_SIZE;
    }
    Status window_create(weft_window& w, bool allocate, void* base, size_t size) override;
    void window_destroy(weft_window& w) override;
    void free_heap(uint64_t off, uint64_t size);
    Status flush(weft_window&, uint32_t) override {
        // Stores to mapped memory are coherent; cross-memory writes are
        // complete when their syscall returns. A full fence orders them
        // before whatever the caller does next.
        std::atomic_thread_fence(std::memory_order_seq_cst);
        return WEFT_OK;
    }
    size_t am_eager_limit() const override { return eager_limit_; }
    Status am_send(uint32_t peer, uint32_t id, const void* payload, size_t len) override;
    uint32_t progress() override;
    void wait_for_event(uint64_t timeout_ns) override;
    void wake() override {
        if (!header_) return;  // released (a late declaration from another thread)
        header_->doorbell.fetch_add(1, std::memory_order_seq_cst);
        futex(&header_->doorbell, FUTEX_WAKE, INT_MAX, nullptr);
    }
    // Any memory of ours is reachable by cross-memory attach: nothing to
    // register, the address is the key.
    Status expose(const void* buf, size_t, ExposedBuffer& out) override {
        out.addr = reinterpret_cast<uint64_t>(buf);
        out.key.clear();
        return WEFT_OK;
    }
    Status pull(uint32_t peer, uint64_t addr, const uint8_t*, size_t, void* dst, size_t len) override {
        if (peer == rt_.rank()) {
            std::memcpy(dst, reinterpret_cast<const void*>(addr), len);
            return WEFT_OK;
        }
        return shm::cma_copy(peers_[peer].pid, dst, addr, len, false);
    }
    Status push_into(uint32_t peer, uint64_t addr, const uint8_t*, size_t, const void* src, size_t len) override {
        if (peer == rt_.rank()) {
            std::memcpy(reinterpret_cast<void*>(addr), src, len);
            return WEFT_OK;
        }
        return shm::cma_copy(peers_[peer].pid, const_cast<void*>(src), addr, len, true);
    }

    bool can_release(std::string& why) const override;
    Status release(std::span<weft_window* const> windows) override;
    Status rebuild(std::span<weft_window* const> windows) override;

private:
    static constexpr uint64_t rings_offset = 4096;
    Status make_segment();
    Status map_peers();
    Status push(uint32_t peer, shm::RecordType type, uint16_t id, uint64_t aux, const void* a, uint32_t alen);
    void handle(uint32_t source_peer, const shm::Record& rec);
    void ring_doorbell(Peer& p) {
        // seq_cst pairs with the owner's sleeping-flag store in wait_for_event:
        // either it sees our increment or we see it sleeping.
        p.header->doorbell.fetch_add(1, std::memory_order_seq_cst);
        if (p.header->sleeping.load(std::memory_order_seq_cst))
            futex(&p.header->doorbell, FUTEX_WAKE, INT_MAX, nullptr);
    }

    Runtime& rt_;
    int memfd_ = -1;
    uint8_t* base_ = nullptr;
    uint64_t total_size_ = 0;
    uint64_t heap_offset_ = 0, heap_size_ = 0, ring_stride_ = 0;
    SegmentHeader* header_ = nullptr;
    uint64_t ring_capacity_ = 0;
    uint64_t eager_limit_ = 0;
    HeapAllocator heap_;
    std::vector<Peer> peers_;                 // by peer index
    std::vector<shm::RingConsumer> inbound_;  // by peer index
    uint32_t seen_doorbell_ = 0;
    uint32_t depth_ = 0;
    std::vector<std::vector<uint8_t>> scratch_;  // one per progress nesting level
    uint64_t next_cookie_ = 1;
    std::vector<uint64_t> fins_;  // rendezvous cookies completed by the receiver
};

Status ShmBackend::init() {
    const uint32_t n = rt_.universe_size();
    uint64_t ring_kb = env_u64("WEFT_SHM_RING_KB", 64);
    ring_capacity_ = 1024;
    while (ring_capacity_ < ring_kb * 1024 && ring_capacity_ < (1ull << 30)) ring_capacity_ <<= 1;
    eager_limit_ = std::min<uint64_t>(8192, ring_capacity_ / 4);
    heap_size_ = env_u64("WEFT_SHM_HEAP_MB", 128) << 20;
    ring_stride_ = shm::ring_bytes(ring_capacity_);
    heap_offset_ = (rings_offset + n * ring_stride_ + 4095) / 4096 * 4096;
    total_size_ = heap_offset_ + heap_size_;
    if (Status st = make_segment(); st != WEFT_OK) return st;
    heap_.reset(heap_size_);
    return map_peers();
}

// A new memfd for our segment, mapped at base_ when it is set (a rebuild:
// what lies there now, the windows' contents, is copied in first), else
// anywhere; then its header and empty rings.
Status ShmBackend::make_segment() {
    char name[64];
    std::snprintf(name, sizeof name, "weft-j%u-r%u", rt_.job(), rt_.rank());
    memfd_ = static_cast<int>(syscall(SYS_memfd_create, name, 0));  // no CLOEXEC: peers fetch it by number
    if (memfd_ < 0) return WEFT_FAIL(WEFT_ERR_NO_MEMORY, "memfd_create: %s", std::strerror(errno));
    if (ftruncate(memfd_, static_cast<off_t>(total_size_)) != 0)
        return WEFT_FAIL(WEFT_ERR_NO_MEMORY, "ftruncate segment to %llu bytes: %s",
                         static_cast<unsigned long long>(total_size_), std::strerror(errno));
    if (base_) {
        // What the heap holds now (written before the release, or while
        // released), into the new segment before it is mapped over it.
        for (const auto& [at, size] : resident_runs(base_, heap_offset_, total_size_)) {
            for (uint64_t done = 0; done < size;) {
                const ssize_t k = pwrite(memfd_, base_ + at + done, size - done, static_cast<off_t>(at + done));
                if (k <= 0)
                    return WEFT_FAIL(WEFT_ERR_NO_MEMORY, "rebuild: copying a window into the new segment: %s",
                                     k < 0 ? std::strerror(errno) : "short write");
                done += static_cast<uint64_t>(k);
            }
        }
    }
    void* m = mmap(base_, total_size_, PROT_READ | PROT_WRITE, MAP_SHARED | (base_ ? MAP_FIXED : 0), memfd_, 0);
    if (m == MAP_FAILED) return WEFT_FAIL(WEFT_ERR_NO_MEMORY, "mmap segment: %s", std::strerror(errno));
    base_ = static_cast<uint8_t*>(m);
    const uint32_t n = rt_.universe_size();
    header_ = new (base_) SegmentHeader{};
    header_->owner_universe = rt_.self_universe();
    header_->universe_size = n;
    header_->ring_capacity = ring_capacity_;
    header_->rings_offset = rings_offset;
    header_->heap_offset = heap_offset_;
    header_->heap_size = heap_size_;
    header_->total_size = total_size_;
    for (uint32_t u = 0; u < n; ++u) new (base_ + rings_offset + u * ring_stride_) shm::RingControl{};
    header_->magic = segment_magic;
    return WEFT_OK;
}

// Tells everyone where our segment is and maps theirs: anywhere the first
// time, over the reservation their last mapping left at a rebuild (so every
// address into a peer's segment, windows included, is what it was).
Status ShmBackend::map_peers() {
    const uint32_t n = rt_.universe_size();
    std::vector<uint8_t> mine;
    wire::put_u32(mine, static_cast<uint32_t>(memfd_));
    wire::put_u32(mine, static_cast<uint32_t>(total_size_));
    wire::put_u32(mine, static_cast<uint32_t>(total_size_ >> 32));
    std::vector<std::vector<uint8_t>> all;
    Status st = rt_.bootstrap().exchange(wire::Scope::universe, mine, all, rt_.op_deadline());
    if (st != WEFT_OK) return WEFT_FAIL(st, "shm segment exchange failed");

    const bool again = !peers_.empty();
    if (!again) peers_.assign(n, Peer{});
    inbound_.assign(n, shm::RingConsumer{});
    const uint32_t self_u = rt_.self_universe();
    for (uint32_t u = 0; u < n; ++u) {
        const uint32_t p = rt_.peer_of_universe(u);
        Peer& peer = peers_[p];
        peer.pid = rt_.peer(p).pid;
        if (all[u].size() != 12) return WEFT_FAIL(WEFT_ERR_PROTOCOL, "shm segment record %u corrupted", u);
        const int remote_fd = static_cast<int>(wire::get_u32(all[u].data()));
        const uint64_t size = wire::get_u32(all[u].data() + 4) | uint64_t(wire::get_u32(all[u].data() + 8)) << 32;
        if (u == self_u) {
            peer.base = base_;
            peer.size = total_size_;
        } else {
            if (again && size != peer.size)
                return WEFT_FAIL(WEFT_ERR_PROTOCOL, "rebuild: peer %u's segment is %llu bytes, was %llu", p,
                                 static_cast<unsigned long long>(size), static_cast<unsigned long long>(peer.size));
            int pidfd = static_cast<int>(syscall(SYS_pidfd_open, peer.pid, 0));
            int fd = -1, err = 0;
            if (pidfd < 0 && errno == ENOSYS) {
                // No pidfd (a kernel before 5.6, or valgrind, which the
                // instruction counts of bench/run_ipo.sh run under): open
                // the peer's memfd through /proc, which asks the same
                // ptrace permission.
                char path[64];
                std::snprintf(path, sizeof path, "/proc/%d/fd/%d", static_cast<int>(peer.pid), remote_fd);
                fd = open(path, O_RDWR | O_CLOEXEC);
                err = errno;
            } else {
                if (pidfd < 0)
                    return WEFT_FAIL(WEFT_ERR_PEER_FAILED, "pidfd_open(%d) for peer %u: %s", peer.pid, p,
                                     std::strerror(errno));
                fd = static_cast<int>(syscall(SYS_pidfd_getfd, pidfd, remote_fd, 0));
                err = errno;
                close(pidfd);
            }
            if (fd < 0)
                return WEFT_FAIL(WEFT_ERR_TRANSPORT,
                                 "pidfd_getfd from peer %u (pid %d): %s — shm needs ranks of one user "
                                 "allowed to ptrace each other",
                                 p, peer.pid, std::strerror(err));
            void* pm = mmap(again ? peer.base : nullptr, size, PROT_READ | PROT_WRITE,
                            MAP_SHARED | (again ? MAP_FIXED : 0), fd, 0);
            close(fd);
            if (pm == MAP_FAILED)
                return WEFT_FAIL(WEFT_ERR_NO_MEMORY, "mmap peer %u segment: %s", p, std::strerror(errno));
            peer.base = static_cast<uint8_t*>(pm);
            peer.size = size;
        }
        peer.header = reinterpret_cast<SegmentHeader*>(peer.base);
        if (peer.header->magic != segment_magic || peer.header->universe_size != n ||
            peer.header->owner_universe != u || peer.header->total_size != size)
            return WEFT_FAIL(WEFT_ERR_PROTOCOL, "peer %u's segment header is not weft's", p);
        const uint64_t cap = peer.header->ring_capacity;
        peer.to_peer = shm::RingProducer(peer.base + peer.header->rings_offset + self_u * shm::ring_bytes(cap), cap);
        inbound_[p] = shm::RingConsumer(base_ + rings_offset + u * ring_stride_, ring_capacity_);
    }
    seen_doorbell_ = header_->doorbell.load(std::memory_order_acquire);
    return WEFT_OK;
}

bool ShmBackend::can_release(std::string&) const { return true; }

// Nothing is in transit (the runtime quiesced the job). Our segment becomes
// private memory at the same address holding the windows' contents (one
// mmap over it), and each peer's mapping a reservation of its range
// (private, untouched: no memory), so that the rebuild maps them where they
// were.
Status ShmBackend::release(std::span<weft_window* const> windows) {
    // The heap's contents aside first: nothing has changed if this fails.
    const Runs used = file_data_runs(memfd_, heap_offset_, total_size_);
    uint64_t keep = 0;
    for (const auto& [off, size] : used) keep += size;
    // Populated at once: one call instead of a page fault per page.
    void* aside =
        keep ? mmap(nullptr, keep, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0) : nullptr;
    if (aside == MAP_FAILED) return WEFT_FAIL(WEFT_ERR_NO_MEMORY, "release: mmap: %s", std::strerror(errno));
    uint64_t at = 0;
    for (const auto& [off, size] : used) {
        std::memcpy(static_cast<uint8_t*>(aside) + at, base_ + off, size);
        at += size;
    }
    for (weft_window* w : windows) w->ops = &released_ops;
    // MAP_FIXED replaces the shared mapping in one step: the range is never
    // unmapped, so no other mapping can land in it meanwhile.
    if (mmap(base_, total_size_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1,
             0) == MAP_FAILED) {
        const int e = errno;
        if (aside) munmap(aside, keep);
        return WEFT_FAIL(WEFT_ERR_NO_MEMORY, "release: replacing the segment: %s", std::strerror(e));
    }
    // Then the pages themselves are moved into place (mremap moves page
    // table entries, no byte is copied twice); the runs are whole pages
    // (the memfd's data granularity). A run that cannot move is copied.
    at = 0;
    for (const auto& [off, size] : used) {
        uint8_t* from = static_cast<uint8_t*>(aside) + at;
        if (move_pages(from, size, base_ + off) != base_ + off) std::memcpy(base_ + off, from, size);
        at += size;
    }
    if (aside) munmap(aside, keep);  // what is left of it: the runs that were copied
    header_ = nullptr;
    close(memfd_);
    memfd_ = -1;
    Status st = WEFT_OK;
    for (Peer& peer : peers_) {
        peer.header = nullptr;
        peer.to_peer = shm::RingProducer{};
        if (peer.base == base_ || !peer.base) continue;
        if (mmap(peer.base, peer.size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED,
                 -1, 0) == MAP_FAILED)
            st = WEFT_FAIL(WEFT_ERR_NO_MEMORY, "release: reserving a peer's range: %s", std::strerror(errno));
    }
    inbound_.assign(inbound_.size(), shm::RingConsumer{});
    return st;
}

Status ShmBackend::rebuild(std::span<weft_window* const> windows) {
    if (Status st = make_segment(); st != WEFT_OK) return st;
    if (Status st = map_peers(); st != WEFT_OK) return st;
    // Every window's memory, ours and the peers', is where it was, and so
    // are the addresses into it: only the operations and the pids change.
    for (weft_window* w : windows) {
        for (uint32_t r = 0; r < w->remote_storage.size(); ++r) w->remote_storage[r].pid = peers_[r].pid;
        w->ops = w->allocated ? &shm::direct_ops : &shm::cma_ops;
    }
    return WEFT_OK;
}

ShmBackend::~ShmBackend() {
    for (uint32_t p = 0; p < peers_.size(); ++p)
        if (peers_[p].base && peers_[p].base != base_) munmap(peers_[p].base, peers_[p].size);
    if (base_) munmap(base_, total_size_);
    if (memfd_ >= 0) close(memfd_);
}

Status ShmBackend::window_create(weft_window& w, bool allocate, void* base, size_t size) {
    auto* data = new WindowData{};
    uint8_t kind = allocate ? 0 : 1;
    uint64_t where = reinterpret_cast<uint64_t>(base);
    if (allocate) {
        if (heap_.alloc(size, data->heap_offset)) {
            where = data->heap_offset;  // zeroes already: free heap bytes always are (free_heap)
        } else {
            WEFT_LOG(error, "shm heap exhausted: %zu bytes wanted (set WEFT_SHM_HEAP_MB)", size);
            kind = 2;  // still take part in the exchange so peers do not hang
        }
    }
    data->size = size;
    std::vector<uint8_t> mine;
    mine.push_back(kind);
    wire::put_u32(mine, static_cast<uint32_t>(where));
    wire::put_u32(mine, static_cast<uint32_t>(where >> 32));
    wire::put_u32(mine, static_cast<uint32_t>(uint64_t(size)));
    wire::put_u32(mine, static_cast<uint32_t>(uint64_t(size) >> 32));
    std::vector<std::vector<uint8_t>> all;
    Status st = rt_.bootstrap().exchange(wire::Scope::job, mine, all, rt_.op_deadline());
    auto undo = [&](Status s) {
        if (allocate && kind == 0) free_heap(data->heap_offset, size);
        delete data;
        return s;
    };
    if (st != WEFT_OK) return undo(WEFT_FAIL(st, "window exchange failed"));
    w.remote_storage.assign(rt_.size(), RemoteRegion{});
    for (uint32_t r = 0; r < rt_.size(); ++r) {
        const auto& b = all[r];
        if (b.size() != 17) return undo(WEFT_FAIL(WEFT_ERR_PROTOCOL, "window record from rank %u corrupted", r));
        uint8_t k = b[0];
        uint64_t at = wire::get_u32(b.data() + 1) | uint64_t(wire::get_u32(b.data() + 5)) << 32;
        uint64_t sz = wire::get_u32(b.data() + 9) | uint64_t(wire::get_u32(b.data() + 13)) << 32;
        if (k == 2) return undo(WEFT_FAIL(WEFT_ERR_NO_MEMORY, "rank %u could not allocate its window", r));
        if (k != (allocate ? 0 : 1))
            return undo(WEFT_FAIL(WEFT_ERR_INVALID_ARG, "rank %u called a different window constructor", r));
        RemoteRegion& reg = w.remote_storage[r];
        reg.size = sz;
        reg.pid = peers_[r].pid;
        if (allocate) {
            const SegmentHeader* h = peers_[r].header;
            if (at > h->heap_size || sz > h->heap_size - at)
                return undo(WEFT_FAIL(WEFT_ERR_PROTOCOL, "rank %u's window lies outside its heap", r));
            reg.direct = peers_[r].base + h->heap_offset + at;
            reg.addr = at;
        } else {
            reg.addr = at;
            reg.direct = r == rt_.rank() ? static_cast<uint8_t*>(base) : nullptr;
        }
    }
    w.local_base = allocate ? base_ + header_->heap_offset + data->heap_offset : static_cast<uint8_t*>(base);
    w.local_size = size;
    w.ops = allocate ? &shm::direct_ops : &shm::cma_ops;
    w.backend_data = data;
    return WEFT_OK;
}

void ShmBackend::window_destroy(weft_window& w) {
    auto* data = static_cast<WindowData*>(w.backend_data);
    if (!data) return;
    if (w.allocated) free_heap(data->heap_offset, data->size);
    delete data;
    w.backend_data = nullptr;
}

// The heap's rule: a free byte reads zero, so a new window needs no
// clearing. The freed range's whole pages become a hole in the memfd (no
// memory, and nothing for a release or a rebuild to copy: the bulk
// collective window alone is megabytes of mostly untouched pages, which a
// memset at creation used to make resident); its partial pages, shared
// with neighbours, are cleared.
void ShmBackend::free_heap(uint64_t off, uint64_t size) {
    heap_.release(off, size);
    if (!base_) return;
    const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
    const uint64_t from = heap_offset_ + off, to = from + HeapAllocator::span(size);
    const uint64_t hole_from = (from + page - 1) / page * page, hole_to = to / page * page;
    // Released (no memfd: the heap is private memory until the rebuild
    // copies it into a new one) or no whole page: cleared in place.
    if (memfd_ < 0 || hole_from >= hole_to ||
        fallocate(memfd_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, static_cast<off_t>(hole_from),
                  static_cast<off_t>(hole_to - hole_from)) != 0) {
        std::memset(base_ + from, 0, to - from);
        return;
    }
    std::memset(base_ + from, 0, hole_from - from);
    std::memset(base_ + hole_to, 0, to - hole_to);
}

Status ShmBackend::push(uint32_t peer, shm::RecordType type, uint16_t id, uint64_t aux, const void* a, uint32_t alen) {
    Peer& p = peers_[peer];
    if (p.to_peer.try_push(type, id, aux, a, alen)) {
        ring_doorbell(p);
        return WEFT_OK;
    }
    // Ring full: keep draining our own rings (the receiver may be blocked
    // sending to us) until space appears, the peer dies, or the deadline.
    const Deadline d = rt_.op_deadline();
    Backoff backoff;
    for (;;) {
        if (rt_.peer_failed(peer))
            return WEFT_FAIL(WEFT_ERR_PEER_FAILED, "am_send: peer %u failed while its ring was full", peer);
        if (d.passed())
            return WEFT_FAIL(WEFT_ERR_TIMEOUT, "am_send: peer %u's ring stayed full (is it progressing?)", peer);
        rt_.progress();
        if (p.to_peer.try_push(type, id, aux, a, alen)) {
            ring_doorbell(p);
            return WEFT_OK;
        }
        backoff.pause();
    }
}

Status ShmBackend::am_send(uint32_t peer, uint32_t id, const void* payload, size_t len) {
    if (len <= eager_limit_)
        return push(peer, shm::RecordType::eager, static_cast<uint16_t>(id), 0, payload, static_cast<uint32_t>(len));
    // Rendezvous: announce {addr, len}; the receiver pulls with one
    // cross-memory read, runs the handler and answers FIN.
    const uint64_t cookie = next_cookie_++;
    uint8_t rts[16];
    const uint64_t addr = reinterpret_cast<uint64_t>(payload), n = len;
    std::memcpy(rts, &addr, 8);
    std::memcpy(rts + 8, &n, 8);
    Status st = push(peer, shm::RecordType::rts, static_cast<uint16_t>(id), cookie, rts, sizeof rts);
    if (st != WEFT_OK) return st;
    const Deadline d = rt_.op_deadline();
    Backoff backoff;
    for (;;) {
        auto it = std::find(fins_.begin(), fins_.end(), cookie);
        if (it != fins_.end()) {
            fins_.erase(it);
            return WEFT_OK;
        }
        if (rt_.peer_failed(peer))
            return WEFT_FAIL(WEFT_ERR_PEER_FAILED, "am_send: peer %u failed during a rendezvous", peer);
        if (d.passed()) return WEFT_FAIL(WEFT_ERR_TIMEOUT, "am_send: no rendezvous completion from peer %u", peer);
        if (rt_.progress() == 0) {
            if (backoff.should_block())
                wait_for_event(1000000);
            else
                backoff.pause();
        }
    }
}

void ShmBackend::handle(uint32_t source, const shm::Record& rec) {
    switch (static_cast<shm::RecordType>(rec.header.type)) {
        case shm::RecordType::eager:
            rt_.deliver_am(source, rec.header.id, rec.payload, rec.header.len);
            return;
        case shm::RecordType::fin:
            fins_.push_back(rec.header.aux);
            return;
        case shm::RecordType::rts: {
            if (rec.header.len != 16) break;
            uint64_t addr, len;
            std::memcpy(&addr, rec.payload, 8);
            std::memcpy(&len, rec.payload + 8, 8);
            const uint64_t cookie = rec.header.aux;
            const uint16_t id = rec.header.id;
            if (len > WEFT_AM_MAX_SIZE) break;
            std::vector<uint8_t> buf(len);
            Status st = peers_[source].pid == peers_[rt_.rank()].pid
                            ? (std::memcpy(buf.data(), reinterpret_cast<void*>(addr), len), WEFT_OK)
                            : shm::cma_copy(peers_[source].pid, buf.data(), addr, len, false);
            if (st != WEFT_OK) {
                WEFT_LOG(error, "dropped a %llu-byte rendezvous message from peer %u: pull failed",
                         static_cast<unsigned long long>(len), source);
                return;
            }
            // Answer first, so the sender is free even if the handler blocks.
            push(source, shm::RecordType::fin, 0, cookie, nullptr, 0);
            rt_.deliver_am(source, id, buf.data(), buf.size());
            return;
        }
        default:
            break;
    }
    WEFT_LOG(error, "shm: dropped a malformed record (type %u, %u bytes) from peer %u", rec.header.type, rec.header.len,
             source);
}

uint32_t ShmBackend::progress() {
    const uint32_t db = header_->doorbell.load(std::memory_order_acquire);
    if (db == seen_doorbell_) return 0;
    seen_doorbell_ = db;
    if (scratch_.size() <= depth_) scratch_.resize(depth_ + 1);
    ++depth_;
    uint32_t n = 0;
    for (uint32_t p = 0; p < inbound_.size(); ++p) {
        shm::Record rec;
        while (inbound_[p].poll(scratch_[depth_ - 1], rec)) {
            handle(p, rec);
            ++n;
        }
    }
    --depth_;
    return n;
}

void ShmBackend::wait_for_event(uint64_t timeout_ns) {
    const uint32_t seen = seen_doorbell_;
    header_->sleeping.store(1, std::memory_order_seq_cst);
    if (header_->doorbell.load(std::memory_order_seq_cst) == seen) {
        timespec ts{static_cast<time_t>(timeout_ns / 1000000000ull), static_cast<long>(timeout_ns % 1000000000ull)};
        futex(&header_->doorbell, FUTEX_WAIT, seen, &ts);
    }
    header_->sleeping.store(0, std::memory_order_relaxed);
}

}  // namespace

Status create_shm_backend(Runtime& rt, std::unique_ptr<Backend>& out) { return make_backend<ShmBackend>(rt, out); }

}  // namespace weft
