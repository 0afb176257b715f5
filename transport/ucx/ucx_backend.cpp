// ucx_backend.cpp — the UCX backend's control path: context, worker and
// endpoints, windows, active messages, progress and teardown. See
// ucx_backend.hpp for the rules that shape it.
#include "transport/backend.hpp"

#include <weft/config.hpp>

#if WEFT_HAVE_UCX

#include "transport/ucx/ucx_backend.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <poll.h>
#include <sys/mman.h>
#include <unistd.h>
#include <string_view>

namespace weft::ucx {

extern const RmaOps ucx_ops;

namespace {

// The transports UCX_TLS selects can include shared memory. In UCX 1.13,
// UCP_ERR_HANDLING_MODE_PEER together with shm either fails endpoint
// creation or silently drops shm, so peer error handling is enabled only
// when shm cannot be in use.
bool tls_may_use_shm() {
    const char* tls = std::getenv("UCX_TLS");
    if (!tls || !*tls) return true;
    std::string_view s(tls);
    if (s.front() == '^') return true;  // an exclusion list keeps "the rest", shm included
    static constexpr std::string_view shm_names[] = {"shm", "sysv", "posix", "cma", "all", "sm", "knem", "xpmem"};
    while (!s.empty()) {
        size_t comma = s.find(',');
        std::string_view tok = s.substr(0, comma);
        for (auto n : shm_names)
            if (tok == n) return true;
        if (comma == std::string_view::npos) break;
        s.remove_prefix(comma + 1);
    }
    return false;
}

size_t whole_pages(size_t n) {
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    return (n + page - 1) / page * page;
}

}  // namespace

// ---------------------------------------------------------------- init
Status UcxBackend::init() {
    arrivals_.resize(rt_.universe_size());  // before any callback can queue
    shm_possible_ = tls_may_use_shm();
    peer_err_mode_ = !shm_possible_;

    ucp_config_t* config = nullptr;
    ucs_status_t s = ucp_config_read(nullptr, nullptr, &config);
    if (s != UCS_OK) return WEFT_FAIL(WEFT_ERR_TRANSPORT, "ucp_config_read: %s", ucs_status_string(s));
    ucp_params_t params;
    params.field_mask =
        UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_ESTIMATED_NUM_EPS | UCP_PARAM_FIELD_MT_WORKERS_SHARED;
    // Two workers on two threads (ours and the failure detector's, see
    // ucx_observer.hpp) share the context's registrations.
    params.mt_workers_shared = 1;
    // WAKEUP: ucp_worker_get_efd/arm/signal for wait_for_event and wake.
    params.features = UCP_FEATURE_RMA | UCP_FEATURE_AMO64 | UCP_FEATURE_AM | UCP_FEATURE_WAKEUP;
    params.estimated_num_eps = rt_.universe_size();
    s = ucp_init(&params, config, &context_);
    ucp_config_release(config);
    if (s != UCS_OK) return WEFT_FAIL(WEFT_ERR_TRANSPORT, "ucp_init: %s", ucs_status_string(s));

    ucp_worker_params_t wp;
    wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    // A weft context is used by one thread at a time; the monitor thread
    // only calls ucp_worker_signal, which is safe in any mode.
    wp.thread_mode = UCS_THREAD_MODE_SINGLE;
    s = ucp_worker_create(context_, &wp, &worker_);
    if (s != UCS_OK) return WEFT_FAIL(WEFT_ERR_TRANSPORT, "ucp_worker_create: %s", ucs_status_string(s));
    s = ucp_worker_get_efd(worker_, &efd_);
    if (s != UCS_OK) return WEFT_FAIL(WEFT_ERR_TRANSPORT, "ucp_worker_get_efd: %s", ucs_status_string(s));

    ucp_am_handler_param_t ap;
    ap.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_FLAGS | UCP_AM_HANDLER_PARAM_FIELD_CB |
                    UCP_AM_HANDLER_PARAM_FIELD_ARG;
    ap.id = weft_am_id;
    ap.flags = UCP_AM_FLAG_WHOLE_MSG;  // one callback per message, fragments reassembled
    ap.cb = on_am;
    ap.arg = this;
    s = ucp_worker_set_am_recv_handler(worker_, &ap);
    if (s != UCS_OK) return WEFT_FAIL(WEFT_ERR_TRANSPORT, "ucp_worker_set_am_recv_handler: %s", ucs_status_string(s));

    slot_ = new Slot{};

    // Worker addresses to and from every process of the universe. Record:
    // the main worker's address length, that address, then the failure
    // detector's worker address.
    std::vector<uint8_t> addr, observer_addr;
    Status st = worker_address(worker_, addr);
    if (st != WEFT_OK) return st;
    observer_ = std::make_unique<UcxObserver>(rt_, context_);
    std::vector<uint8_t> observer_err_mode(rt_.size());
    for (uint32_t p = 0; p < rt_.size(); ++p) observer_err_mode[p] = p != rt_.rank() && err_mode_to(p);
    st = observer_->create(rt_.size(), std::move(observer_err_mode), observer_addr);
    if (st != WEFT_OK) return st;
    std::vector<uint8_t> mine;
    wire::put_u32(mine, static_cast<uint32_t>(addr.size()));
    mine.insert(mine.end(), addr.begin(), addr.end());
    mine.insert(mine.end(), observer_addr.begin(), observer_addr.end());
    std::vector<std::vector<uint8_t>> all;
    st = rt_.bootstrap().exchange(wire::Scope::universe, mine, all, rt_.op_deadline());
    if (st != WEFT_OK) return WEFT_FAIL(st, "ucx worker address exchange failed");

    const uint32_t n = rt_.universe_size();
    if (all.size() != n) return WEFT_FAIL(WEFT_ERR_PROTOCOL, "ucx address exchange: %zu of %u records", all.size(), n);
    for (uint32_t u = 0; u < n; ++u) {
        const auto& b = all[u];
        if (b.size() < 4 || b.size() < 4ull + wire::get_u32(b.data()))
            return WEFT_FAIL(WEFT_ERR_PROTOCOL, "ucx address record %u corrupted", u);
        const uint32_t main_len = wire::get_u32(b.data());
        const uint32_t p = rt_.peer_of_universe(u);
        // The detector observes its own job only.
        if (p < rt_.size() && p != rt_.rank())
            observer_->set_address(p, b.data() + 4 + main_len, b.size() - 4 - main_len);
        all[u] = std::vector<uint8_t>(b.begin() + 4, b.begin() + 4 + main_len);
    }
    eps_.assign(n, Endpoint{});
    uint32_t with_err_mode = 0;
    for (uint32_t u = 0; u < n; ++u) {
        const uint32_t p = rt_.peer_of_universe(u);
        Endpoint& e = eps_[p];
        e.backend = this;
        e.peer = p;
        e.err_mode = p != rt_.rank() && err_mode_to(p);
        with_err_mode += e.err_mode;
        if (all[u].empty()) return WEFT_FAIL(WEFT_ERR_PROTOCOL, "ucx address of peer %u is empty", p);
        st = create_ep(worker_, all[u].data(), e.err_mode, on_ep_error, &e, e.ep);
        if (st != WEFT_OK) return WEFT_FAIL(st, "no ucx endpoint to peer %u", p);
    }
    // Wire up the endpoints to this job's ranks before init's barrier (see
    // wire_up): they are all in this init, progressing while they wait here
    // or in the bootstrap. Other jobs' endpoints stay lazy: a job's ranks
    // need not progress for another job's start-up once their own is done.
    std::vector<ucp_ep_h> job_eps(rt_.size(), nullptr);
    for (uint32_t p = 0; p < rt_.size(); ++p)
        if (p != rt_.rank()) job_eps[p] = eps_[p].ep;
    st = wire_up(worker_, job_eps, rt_.op_deadline(), "ucx");
    if (st != WEFT_OK) return st;
    WEFT_LOG(debug, "ucx: %u endpoints, %u with peer error handling (%s)", n, with_err_mode,
             peer_err_mode_ ? "no shm" : "peers on other hosts");
    return WEFT_OK;
}

UcxBackend::~UcxBackend() { teardown(); }

void UcxBackend::teardown() {
    // Pending rendezvous receives: release the requests (UCX finishes or
    // drops them internally); their buffers outlive the worker.
    arrivals_.for_each([&](Arrival& a) {
        if (!a.rndv) return;
        if (a.pull.req)
            ucp_request_free(a.pull.req);
        else if (a.pull.desc && worker_)
            ucp_am_data_release(worker_, a.pull.desc);
        a.pull.req = nullptr;
        a.pull.desc = nullptr;
    });
    closing_ = true;
    if (worker_) {
        // finalize completed everything we sent before its barrier
        // (depart), and after the barrier peers exit as they like: a flush
        // or a flushing close could meet a gone peer ("Connection reset by
        // remote peer"). A force-close completes locally whatever the peer
        // did; the errors it raises on endpoints are our own (closing_).
        for (auto& e : eps_) force_close(e);
        if (const size_t left = finish_ep_closes(worker_, killed_, rt_.op_deadline()))
            WEFT_LOG(warn, "ucx: %zu endpoints did not close before the deadline", left);
        ucp_worker_destroy(worker_);
    }
    observer_.reset();  // its worker, before the context (the detector thread has stopped)
    if (context_) ucp_cleanup(context_);
    arrivals_.for_each([](Arrival& a) {
        if (a.rndv) std::free(a.pull.buf);
        a.pull.buf = nullptr;
    });
    arrivals_.clear();
    delete slot_;
    for (Slot* s : retired_) delete s;
    worker_ = nullptr;
    context_ = nullptr;
    efd_ = -1;
    slot_ = nullptr;
    retired_.clear();
    killed_.clear();
    eps_.clear();
    flush_reqs_.clear();
    closing_ = false;
}

ObserverChannel* UcxBackend::observer_channel(const weft_window& sw) {
    auto* data = static_cast<WindowData*>(sw.backend_data);
    if (!observer_ || !data || observer_->bound()) return nullptr;
    const Status st = observer_->bind(sw, data->packed_rkeys);
    data->packed_rkeys = {};
    return st == WEFT_OK ? observer_.get() : nullptr;
}

void UcxBackend::kill_endpoint(uint32_t peer) {
    Endpoint& e = eps_[peer];
    e.dead = true;
    if (!e.err_mode || !e.ep) return;
    force_close(e);
    WEFT_LOG(debug, "ucx: endpoint to failed peer %u force-closed", peer);
}

void UcxBackend::force_close(Endpoint& e) { force_close_ep(e.ep, killed_); }

// ------------------------------------------------------------- windows
Status UcxBackend::window_create(weft_window& w, bool allocate, void* base, size_t size) {
    auto* data = new WindowData{this, nullptr};
    uint8_t kind = allocate ? 0 : 1;  // 2: this rank failed, the window fails everywhere
    uint8_t* local = static_cast<uint8_t*>(base);
    const size_t map_len = allocate ? std::max(size, min_alloc) : size;
    // Where shm may be in use, UCX allocates (ALLOCATE: it places the
    // memory in a segment its shm transports can map, so peers' atomics on
    // it are CPU atomics). Elsewhere that gains nothing, and UCX may take
    // the memory from malloc, whose range a release could not keep: weft
    // maps it itself and registers it.
    data->owned = allocate && !shm_possible_;
    if (data->owned) {
        void* m = mmap(nullptr, whole_pages(map_len), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED) {
            WEFT_LOG(error, "mmap of a %zu-byte window: %s", map_len, std::strerror(errno));
            data->owned = false;
            kind = 2;
        } else {
            local = static_cast<uint8_t*>(m);
        }
    }
    if (map_len > 0 && kind != 2) {
        ucp_mem_map_params_t mp;
        mp.field_mask =
            UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH | UCP_MEM_MAP_PARAM_FIELD_FLAGS;
        mp.address = allocate && !data->owned ? nullptr : local;
        mp.length = map_len;
        mp.flags = allocate && !data->owned ? UCP_MEM_MAP_ALLOCATE : 0;
        ucs_status_t s = ucp_mem_map(context_, &mp, &data->memh);
        if (s != UCS_OK) {
            WEFT_LOG(error, "ucp_mem_map of %zu bytes (%s): %s", map_len, allocate ? "allocate" : "register",
                     ucs_status_string(s));
            data->memh = nullptr;
            kind = 2;
        }
        if (kind != 2 && allocate && !data->owned) {
            ucp_mem_attr_t ma;
            ma.field_mask = UCP_MEM_ATTR_FIELD_ADDRESS;
            s = ucp_mem_query(data->memh, &ma);
            if (s != UCS_OK || (reinterpret_cast<uintptr_t>(ma.address) & 63) != 0) {
                WEFT_LOG(error, "ucp_mem_query of an allocated window: %s",
                         s != UCS_OK ? ucs_status_string(s) : "not 64-byte aligned");
                kind = 2;
            } else {
                local = static_cast<uint8_t*>(ma.address);
                std::memset(local, 0, map_len);
            }
        }
    }
    w.local_size = size;
    data->map_len = map_len;
    return publish_window(w, data, kind, local, allocate);
}

Status UcxBackend::publish_window(weft_window& w, WindowData* data, uint8_t kind, uint8_t* local, bool allocate) {
    void* packed = nullptr;
    size_t packed_len = 0;
    if (kind != 2 && data->memh) {
        const ucs_status_t s = ucp_rkey_pack(context_, data->memh, &packed, &packed_len);
        if (s != UCS_OK) {
            WEFT_LOG(error, "ucp_rkey_pack: %s", ucs_status_string(s));
            packed = nullptr;
            packed_len = 0;
            kind = 2;
        }
    }
    // Record: kind, addr, size, rkey length, rkey. Every rank takes part
    // even after a local failure so that no peer hangs in the exchange.
    const uint64_t where = reinterpret_cast<uint64_t>(local);
    const uint64_t size = w.local_size;
    std::vector<uint8_t> mine;
    mine.push_back(kind);
    wire::put_u32(mine, static_cast<uint32_t>(where));
    wire::put_u32(mine, static_cast<uint32_t>(where >> 32));
    wire::put_u32(mine, static_cast<uint32_t>(size));
    wire::put_u32(mine, static_cast<uint32_t>(size >> 32));
    wire::put_u32(mine, static_cast<uint32_t>(packed_len));
    if (packed) mine.insert(mine.end(), static_cast<uint8_t*>(packed), static_cast<uint8_t*>(packed) + packed_len);
    if (packed) ucp_rkey_buffer_release(packed);

    std::vector<std::vector<uint8_t>> all;
    Status st = rt_.bootstrap().exchange(wire::Scope::job, mine, all, rt_.op_deadline());
    if (st == WEFT_OK) {
        w.backend_data = data;
        w.local_base = local;
        st = unpack_window(w, all, allocate, local);
        if (st == WEFT_OK) {
            w.ops = &ucx_ops;
            return WEFT_OK;
        }
        window_destroy(w);  // releases the rkeys unpacked so far, the mapping and data
        w.local_base = nullptr;
        w.local_size = 0;
        return st;
    }
    if (data->memh) ucp_mem_unmap(context_, data->memh);
    if (data->owned && local) munmap(local, whole_pages(data->map_len));
    delete data;
    w.backend_data = nullptr;
    return WEFT_FAIL(st, "ucx window exchange failed");
}

Status UcxBackend::unpack_window(weft_window& w, const std::vector<std::vector<uint8_t>>& all, bool allocate,
                                 void* local) {
    const uint32_t n = rt_.size();
    if (all.size() != n) return WEFT_FAIL(WEFT_ERR_PROTOCOL, "ucx window exchange: %zu of %u records", all.size(), n);
    // First validate every record so that all ranks agree on failure
    // before any rkey is unpacked.
    for (uint32_t r = 0; r < n; ++r) {
        const auto& b = all[r];
        if (b.size() < 21 || b.size() != 21u + wire::get_u32(b.data() + 17))
            return WEFT_FAIL(WEFT_ERR_PROTOCOL, "ucx window record from rank %u corrupted", r);
        if (b[0] == 2) return WEFT_FAIL(WEFT_ERR_NO_MEMORY, "rank %u could not map its window", r);
        if (b[0] != (allocate ? 0 : 1))
            return WEFT_FAIL(WEFT_ERR_INVALID_ARG, "rank %u called a different window constructor", r);
    }
    w.remote_storage.assign(n, RemoteRegion{});
    // The state window (made before Runtime knows it) keeps its packed keys
    // for the observer channel's endpoints.
    WindowData* keep = observer_ && (!rt_.state_window() || rt_.state_window() == &w)
                           ? static_cast<WindowData*>(w.backend_data)
                           : nullptr;
    if (keep) keep->packed_rkeys.assign(n, {});
    for (uint32_t r = 0; r < n; ++r) {
        const auto& b = all[r];
        RemoteRegion& reg = w.remote_storage[r];
        reg.addr = wire::get_u32(b.data() + 1) | uint64_t(wire::get_u32(b.data() + 5)) << 32;
        reg.size = wire::get_u32(b.data() + 9) | uint64_t(wire::get_u32(b.data() + 13)) << 32;
        reg.pid = rt_.peer(r).pid;
        const uint32_t klen = wire::get_u32(b.data() + 17);
        if (klen == 0) {
            // Nothing mapped (a zero-byte registered window): the API's
            // bounds check keeps every access away from it.
            if (reg.size != 0)
                return WEFT_FAIL(WEFT_ERR_PROTOCOL, "rank %u sent no rkey for %llu bytes", r,
                                 static_cast<unsigned long long>(reg.size));
            continue;
        }
        if (keep) keep->packed_rkeys[r].assign(b.begin() + 21, b.end());
        if (rt_.peer_failed(r)) continue;  // never addressed: the API checks peer_failed first
        ucp_rkey_h rkey = nullptr;
        ucs_status_t s = ucp_ep_rkey_unpack(eps_[r].ep, b.data() + 21, &rkey);
        if (s != UCS_OK)
            return WEFT_FAIL(WEFT_ERR_TRANSPORT, "ucp_ep_rkey_unpack for rank %u: %s", r, ucs_status_string(s));
        reg.rkey = rkey;
        // Informational: where UCX maps the region here (shm). The datapath
        // does not use it; every access goes through UCX.
        void* ptr = nullptr;
        if (r == rt_.rank())
            reg.direct = static_cast<uint8_t*>(local);
        else if (ucp_rkey_ptr(rkey, reg.addr, &ptr) == UCS_OK)
            reg.direct = static_cast<uint8_t*>(ptr);
    }
    return WEFT_OK;
}

void UcxBackend::window_destroy(weft_window& w) {
    auto* data = static_cast<WindowData*>(w.backend_data);
    if (!data) return;
    for (auto& reg : w.remote_storage) {
        if (reg.rkey) ucp_rkey_destroy(static_cast<ucp_rkey_h>(reg.rkey));
        reg.rkey = nullptr;
        reg.direct = nullptr;
    }
    if (data->memh) ucp_mem_unmap(context_, data->memh);
    if (data->owned && w.local_base) munmap(w.local_base, whole_pages(data->map_len));
    delete data;
    w.backend_data = nullptr;
}

Status UcxBackend::flush(weft_window& w, uint32_t rank) {
    // UCX flushes endpoints, not regions: this completes every put to the
    // rank(s), whatever window it targeted. Only endpoints that carried a
    // put since their last flush are flushed (get and atomics complete
    // before they return), so an idle endpoint never waits for wire-up.
    if (rank != WEFT_RANK_ALL) {
        Endpoint& e = eps_[rank];
        if (e.dead || rt_.peer_failed(rank)) return dead_endpoint(rank, "flush");
        if (!e.dirty) return WEFT_OK;
        ucp_request_param_t p;
        p.op_attr_mask = 0;
        ucs_status_ptr_t r = ucp_ep_flush_nbx(e.ep, &p);
        Status st = r ? complete(r, rank, "flush") : WEFT_OK;
        if (st == WEFT_OK) e.dirty = false;
        return st;
    }
    // All ranks: start every flush, then wait for each. A rank already
    // known failed is skipped: its puts cannot complete, and the failure
    // has been (or will be) reported through the failure handler.
    flush_reqs_.assign(w.nranks, nullptr);
    Status result = WEFT_OK;
    for (uint32_t r = 0; r < w.nranks; ++r) {
        Endpoint& e = eps_[r];
        if (!e.dirty || e.dead || rt_.peer_failed(r)) continue;
        ucp_request_param_t p;
        p.op_attr_mask = 0;
        flush_reqs_[r] = ucp_ep_flush_nbx(e.ep, &p);
        if (flush_reqs_[r] == nullptr) e.dirty = false;
    }
    for (uint32_t r = 0; r < w.nranks; ++r) {
        if (!flush_reqs_[r]) continue;
        Status st = complete(flush_reqs_[r], r, "flush");
        if (st == WEFT_OK)
            eps_[r].dirty = false;
        else if (result == WEFT_OK)
            result = st;
    }
    return result;
}

// ------------------------------------------- transparent checkpointing

Status UcxBackend::complete_sends(Deadline d) {
    // A flush of the worker completes every operation on every endpoint
    // at its target: our active messages are in the peers' receive queues.
    ucp_request_param_t p;
    p.op_attr_mask = 0;
    ucs_status_ptr_t r = ucp_worker_flush_nbx(worker_, &p);
    if (r == nullptr) return WEFT_OK;
    if (UCS_PTR_IS_ERR(r))
        return WEFT_FAIL(WEFT_ERR_TRANSPORT, "ucx: worker flush: %s", ucs_status_string(UCS_PTR_STATUS(r)));
    Backoff backoff(Backoff::transport, d);
    for (;;) {
        ucp_worker_progress(worker_);
        const ucs_status_t s = ucp_request_check_status(r);
        if (s != UCS_INPROGRESS) {
            ucp_request_free(r);
            return s == UCS_OK ? WEFT_OK : WEFT_FAIL(WEFT_ERR_TRANSPORT, "ucx: worker flush: %s", ucs_status_string(s));
        }
        if (d.passed()) {
            abandon(r);
            return WEFT_FAIL(WEFT_ERR_TIMEOUT, "ucx: worker flush did not complete");
        }
        backoff.pause();
    }
}

// Every window's keys and registration go; an allocated window's memory
// (UCX's: it goes with its registration) is copied into private memory put
// at the same address. Then the endpoints, workers and the context.
Status UcxBackend::release(std::span<weft_window* const> windows) {
    Status result = WEFT_OK;
    for (weft_window* w : windows) {
        w->ops = &released_ops;
        for (auto& reg : w->remote_storage) {
            if (reg.rkey) ucp_rkey_destroy(static_cast<ucp_rkey_h>(reg.rkey));
            reg.rkey = nullptr;
            reg.direct = nullptr;
        }
        auto* data = static_cast<WindowData*>(w->backend_data);
        if (!data || !data->memh) continue;
        data->packed_rkeys.clear();
        if (!w->allocated || data->owned) {  // the memory is the program's or weft's: it stays
            ucp_mem_unmap(context_, data->memh);
            data->memh = nullptr;
            continue;
        }
        // Copied once into populated private memory, then those pages moved
        // to the window's address once UCX has let go of it.
        const size_t len = whole_pages(data->map_len);
        void* aside = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
        if (aside == MAP_FAILED) {
            result = WEFT_FAIL(WEFT_ERR_NO_MEMORY, "release: no memory to keep a window's %zu bytes in: %s", len,
                               std::strerror(errno));
            continue;
        }
        std::memcpy(aside, w->local_base, w->local_size);
        ucp_mem_unmap(context_, data->memh);
        data->memh = nullptr;
        // Reserved first (NOREPLACE): a range someone else took meanwhile
        // is an error, not something to overwrite.
        void* m =
            mmap(w->local_base, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
        if (m != w->local_base) {
            if (m != MAP_FAILED) munmap(m, len);
            munmap(aside, len);
            result = WEFT_FAIL(WEFT_ERR_NO_MEMORY,
                               "release: a window's range was not free once UCX let go of it (%s): its memory is lost",
                               m == MAP_FAILED ? std::strerror(errno) : "placed elsewhere");
            continue;
        }
        if (move_pages(aside, len, w->local_base) != w->local_base) {
            std::memcpy(w->local_base, aside, w->local_size);
            munmap(aside, len);
        }
    }
    teardown();
    return result;
}

Status UcxBackend::rebuild(std::span<weft_window* const> windows) {
    if (Status st = init(); st != WEFT_OK) return st;
    for (weft_window* w : windows) {
        auto* data = static_cast<WindowData*>(w->backend_data);
        if (!data) continue;
        uint8_t kind = w->allocated ? 0 : 1;
        uint8_t* local = w->local_base;
        if (data->map_len > 0) {
            // The window's memory first, put back where it was.
            const bool ucx_allocates = w->allocated && !data->owned;
            // The contents move aside (page tables, no copy), freeing the
            // range for UCX to allocate in; copied back once it has.
            // (mremap moves nothing unless told where: a reservation first.)
            const size_t len = whole_pages(data->map_len);
            void* aside = nullptr;
            ucs_status_t s = UCS_OK;
            if (ucx_allocates) {
                aside = mmap(nullptr, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
                if (aside == MAP_FAILED || move_pages(local, len, aside) != aside) {
                    if (aside != MAP_FAILED) munmap(aside, len);
                    aside = nullptr;  // the memory stays where it is; the rebuild fails below
                    s = UCS_ERR_NO_MEMORY;
                }
            }
            ucp_mem_map_params_t mp;
            mp.field_mask =
                UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH | UCP_MEM_MAP_PARAM_FIELD_FLAGS;
            mp.address = local;
            mp.length = data->map_len;
            mp.flags = ucx_allocates ? UCP_MEM_MAP_ALLOCATE | UCP_MEM_MAP_FIXED : 0;
            if (s == UCS_OK) s = ucp_mem_map(context_, &mp, &data->memh);
            if (s == UCS_OK && ucx_allocates) {
                ucp_mem_attr_t ma;
                ma.field_mask = UCP_MEM_ATTR_FIELD_ADDRESS;
                if (ucp_mem_query(data->memh, &ma) != UCS_OK || ma.address != local) s = UCS_ERR_NO_MEMORY;
            }
            if (s != UCS_OK) {
                WEFT_LOG(error, "rebuild: ucp_mem_map of a window's %zu bytes at %p: %s", data->map_len,
                         static_cast<void*>(local), ucs_status_string(s));
                if (data->memh) ucp_mem_unmap(context_, data->memh);
                data->memh = nullptr;
                kind = 2;
            } else if (ucx_allocates) {
                std::memcpy(local, aside, w->local_size);
            }
            if (aside) munmap(aside, len);
        }
        if (Status st = publish_window(*w, data, kind, local, w->allocated); st != WEFT_OK) return st;
    }
    return WEFT_OK;
}

// ------------------------------------------- zero-copy rendezvous (p2p)
Status UcxBackend::expose(const void* buf, size_t len, ExposedBuffer& out) {
    // Where endpoints have peer error handling (tcp; zero_copy_to) UCX emulates a
    // get with messages that the *exposing* side serves, and UCX 1.13 aborts
    // the process (ucp_request.inl "unexpected error: Endpoint timeout")
    // when the puller dies before the reply is sent. Large messages then go
    // as UCX rendezvous active messages instead, which survive a dead peer.
    if (peer_err_mode_) return WEFT_ERR_UNSUPPORTED;
    // Registration per message: this is the large-message path, where the
    // copy it saves costs far more than the registration.
    ucp_mem_map_params_t mp;
    mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
    mp.address = const_cast<void*>(buf);
    mp.length = len;
    ucp_mem_h memh = nullptr;
    ucs_status_t s = ucp_mem_map(context_, &mp, &memh);
    if (s != UCS_OK)
        return WEFT_FAIL(WEFT_ERR_TRANSPORT, "ucx expose: ucp_mem_map of %zu bytes: %s", len, ucs_status_string(s));
    void* packed = nullptr;
    size_t packed_len = 0;
    s = ucp_rkey_pack(context_, memh, &packed, &packed_len);
    if (s != UCS_OK) {
        ucp_mem_unmap(context_, memh);
        return WEFT_FAIL(WEFT_ERR_TRANSPORT, "ucx expose: ucp_rkey_pack: %s", ucs_status_string(s));
    }
    const auto* p = static_cast<const uint8_t*>(packed);
    out.key.assign(p, p + packed_len);
    ucp_rkey_buffer_release(packed);
    out.addr = reinterpret_cast<uint64_t>(buf);
    out.handle = memh;
    return WEFT_OK;
}

void UcxBackend::unexpose(ExposedBuffer& b) {
    if (b.handle) ucp_mem_unmap(context_, static_cast<ucp_mem_h>(b.handle));
    b.handle = nullptr;
}

Status UcxBackend::pull(uint32_t peer, uint64_t addr, const uint8_t* key, size_t key_len, void* dst, size_t len) {
    (void)key_len;  // a packed rkey carries its own length
    Endpoint& e = eps_[peer];
    if (e.dead) return dead_endpoint(peer, "pull");
    ucp_rkey_h rkey = nullptr;
    ucs_status_t s = ucp_ep_rkey_unpack(e.ep, key, &rkey);
    if (s != UCS_OK)
        return WEFT_FAIL(WEFT_ERR_PROTOCOL, "ucx pull from peer %u: bad remote key: %s", peer, ucs_status_string(s));
    ucp_request_param_t p;
    p.op_attr_mask = 0;
    ucs_status_ptr_t req = ucp_get_nbx(e.ep, dst, len, addr, rkey, &p);
    Status st = req == nullptr ? WEFT_OK : complete(req, peer, "pull");
    ucp_rkey_destroy(rkey);
    return st;
}

// ------------------------------------------------------ active messages
Status UcxBackend::am_send(uint32_t peer, uint32_t id, const void* payload, size_t len) {
    Endpoint& e = eps_[peer];
    if (e.dead) return dead_endpoint(peer, "am_send");
    slot_->header = AmHeader{id, rt_.self_universe()};
    ucp_request_param_t p;
    p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    p.flags = len <= eager_limit ? UCP_AM_SEND_FLAG_EAGER : UCP_AM_SEND_FLAG_RNDV;
    ucs_status_ptr_t r = ucp_am_send_nbx(e.ep, weft_am_id, &slot_->header, sizeof(AmHeader), payload, len, &p);
    if (r == nullptr) return WEFT_OK;
    // Returns when payload may be reused: for rendezvous, once the
    // receiver has pulled it.
    return complete(r, peer, "am_send");
}

void UcxBackend::depart(std::span<const uint32_t> peers, uint32_t id, const void* payload, size_t len, Deadline d) {
    // Every goodbye and every endpoint flush is started at once, then all
    // are waited for: a flush completes what the endpoint carried before it
    // (the goodbye, puts, wire-up) at the peer. Errors are expected from a
    // peer of another job that finalized and left: debug only; a failure of
    // our own job's peer is declared by the endpoint's error callback.
    depart_header_ = AmHeader{id, rt_.self_universe()};
    const auto* p = static_cast<const uint8_t*>(payload);
    depart_payload_.assign(p, p + len);
    struct Pending {
        uint32_t peer;
        const char* what;
        ucs_status_ptr_t req;
    };
    std::vector<Pending> pending;
    auto start = [&](uint32_t peer, const char* what, ucs_status_ptr_t r) {
        if (UCS_PTR_IS_ERR(r)) {
            WEFT_LOG(debug, "ucx finalize: %s to peer %u: %s", what, peer, ucs_status_string(UCS_PTR_STATUS(r)));
            return;
        }
        if (r) pending.push_back(Pending{peer, what, r});
    };
    for (uint32_t peer : peers) {
        Endpoint& e = eps_[peer];
        if (e.dead || !e.ep) continue;
        ucp_request_param_t prm;
        prm.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
        prm.flags = UCP_AM_SEND_FLAG_EAGER;
        start(peer, "goodbye",
              ucp_am_send_nbx(e.ep, weft_am_id, &depart_header_, sizeof depart_header_, depart_payload_.data(),
                              depart_payload_.size(), &prm));
        prm.op_attr_mask = 0;
        start(peer, "flush", ucp_ep_flush_nbx(e.ep, &prm));
        e.dirty = false;  // the flush covers every put so far
    }
    Backoff backoff;
    while (!pending.empty()) {
        const unsigned events = ucp_worker_progress(worker_);
        if (arrivals_.unstarted()) start_rndv();  // a peer's rendezvous to us may be what it waits on
        std::erase_if(pending, [&](const Pending& q) {
            const ucs_status_t s = ucp_request_check_status(q.req);
            if (s == UCS_INPROGRESS) return false;
            if (s != UCS_OK) WEFT_LOG(debug, "ucx finalize: %s to peer %u: %s", q.what, q.peer, ucs_status_string(s));
            ucp_request_free(q.req);
            return true;
        });
        if (pending.empty()) break;
        if (d.passed()) {
            // A live peer that does not progress (stopped): its endpoint is
            // closed with the others after the barrier.
            WEFT_LOG(warn, "ucx finalize: %zu goodbye(s)/flush(es) not complete by the deadline (first: %s to peer %u)",
                     pending.size(), pending.front().what, pending.front().peer);
            for (const Pending& q : pending) ucp_request_free(q.req);  // UCX finishes them; their buffers are ours
            break;
        }
        if (events == 0) backoff.pause();
    }
}

ucs_status_t UcxBackend::on_am(void* arg, const void* header, size_t header_length, void* data, size_t length,
                               const ucp_am_recv_param_t* param) {
    // Runs inside ucp_worker_progress: queue only, never call a handler.
    auto* self = static_cast<UcxBackend*>(arg);
    const bool rndv = (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) != 0;
    AmHeader h;
    if (header_length != sizeof h) {
        WEFT_LOG(error, "ucx: dropped an active message with a %zu-byte header (not weft's)", header_length);
        return UCS_OK;  // for rendezvous this drops the descriptor
    }
    std::memcpy(&h, header, sizeof h);
    if (h.src_universe >= self->rt_.universe_size()) {
        WEFT_LOG(error, "ucx: dropped an active message from universe index %u (of %u)", h.src_universe,
                 self->rt_.universe_size());
        return UCS_OK;
    }
    const uint32_t source = self->rt_.peer_of_universe(h.src_universe);
    if (!rndv) {
        self->arrivals_.push_eager(source, h.id, data, length);
        return UCS_OK;
    }
    // Rendezvous: keep the descriptor; progress() starts the pull outside
    // this callback.
    RndvPull& rv = self->arrivals_.push_rndv(source, h.id).pull;
    rv.desc = data;
    rv.len = length;
    return UCS_INPROGRESS;
}

void UcxBackend::start_rndv() {
    arrivals_.start_pulls([&](Arrival& a) {
        arrivals_.mark_started(a);
        RndvPull& rv = a.pull;
        rv.buf = static_cast<uint8_t*>(std::malloc(rv.len));
        if (!rv.buf) {
            WEFT_LOG(error, "ucx: no memory for a %zu-byte rendezvous message from peer %u: dropped", rv.len, a.source);
            ucp_am_data_release(worker_, rv.desc);
            rv.desc = nullptr;
            rv.done = true;
            rv.status = UCS_ERR_NO_MEMORY;
            return;
        }
        ucp_request_param_t p;
        p.op_attr_mask = 0;
        void* desc = rv.desc;
        rv.desc = nullptr;  // UCX owns it from here, whatever the outcome
        ucs_status_ptr_t r = ucp_am_recv_data_nbx(worker_, desc, rv.buf, rv.len, &p);
        if (r == nullptr) {
            rv.done = true;
        } else if (UCS_PTR_IS_ERR(r)) {
            rv.done = true;
            rv.status = UCS_PTR_STATUS(r);
        } else {
            rv.req = r;
        }
    });
}

uint32_t UcxBackend::dispatch() {
    auto pulled = [&](Arrival& a) {
        RndvPull& rv = a.pull;
        if (!rv.done && rv.req) {
            ucs_status_t s = ucp_request_check_status(rv.req);
            if (s != UCS_INPROGRESS) {
                ucp_request_free(rv.req);
                rv.req = nullptr;
                rv.done = true;
                rv.status = s;
            }
        }
        return rv.done;
    };
    return arrivals_.dispatch(pulled, [&](Arrival& a) {
        if (!a.rndv) {
            rt_.deliver_am(a.source, a.id, a.eager.data(), a.eager.size());
            return true;
        }
        const bool ok = a.pull.status == UCS_OK;
        if (ok)
            rt_.deliver_am(a.source, a.id, a.pull.buf, a.pull.len);
        else
            WEFT_LOG(error, "ucx: dropped a %zu-byte rendezvous message (id %u) from peer %u: %s", a.pull.len, a.id,
                     a.source, ucs_status_string(a.pull.status));
        std::free(a.pull.buf);
        return ok;
    });
}

// ------------------------------------------------------------ progress
uint32_t UcxBackend::progress() {
    ucp_worker_progress(worker_);
    if (arrivals_.unstarted()) start_rndv();
    return arrivals_.empty() ? 0 : dispatch();
}

void UcxBackend::wait_for_event(uint64_t timeout_ns) {
    // Something queued but not deliverable yet (a rendezvous in flight)
    // still needs UCX to progress: arm, which reports BUSY if it has events.
    ucs_status_t s = ucp_worker_arm(worker_);
    if (s == UCS_ERR_BUSY) return;
    if (s != UCS_OK) {
        WEFT_LOG(debug, "ucp_worker_arm: %s", ucs_status_string(s));
        return;  // the caller's loop falls back to polling
    }
    pollfd pfd{efd_, POLLIN, 0};
    const timespec ts{static_cast<time_t>(timeout_ns / 1000000000ull), static_cast<long>(timeout_ns % 1000000000ull)};
    ppoll(&pfd, 1, &ts, nullptr);
}

void UcxBackend::on_ep_error(void* arg, ucp_ep_h, ucs_status_t status) {
    // Runs inside ucp_worker_progress. Only mark and report: declare_failed
    // is thread-safe and calls no user code (the handler runs later from
    // Runtime::progress). The endpoint is closed by the destructor.
    auto* e = static_cast<Endpoint*>(arg);
    e->dead = true;
    if (e->backend->closing_) return;
    char why[96];
    std::snprintf(why, sizeof why, "ucx endpoint error: %s", ucs_status_string(status));
    e->backend->rt_.declare_failed(e->peer, why);
}

}  // namespace weft::ucx

namespace weft {

bool ucx_backend_built() { return true; }

Status create_ucx_backend(Runtime& rt, std::unique_ptr<Backend>& out) { return make_backend<ucx::UcxBackend>(rt, out); }

}  // namespace weft

#else  // !WEFT_HAVE_UCX

namespace weft {
bool ucx_backend_built() { return false; }
Status create_ucx_backend(Runtime&, std::unique_ptr<Backend>&) {
    return WEFT_FAIL(WEFT_ERR_UNSUPPORTED, "the UCX backend is not built");
}
}  // namespace weft

#endif  // WEFT_HAVE_UCX
