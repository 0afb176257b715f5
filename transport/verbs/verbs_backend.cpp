// verbs_backend.cpp — the verbs backend's control path: bring-up, windows,
// active messages, completion handling, progress and teardown. See
// verbs_backend.hpp for the resources and their rules.
#include "transport/backend.hpp"

#include <weft/config.hpp>

#if WEFT_HAVE_VERBS

#include "transport/verbs/verbs_backend.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>

namespace weft::verbs {

extern const RmaOps verbs_ops;
extern const RmaOps verbs_no_atomics_ops;

// The per-process connection record exchanged over the bootstrap:
// fixed part, then one QP number per universe peer (the QP that process
// created for us).
struct ConnRecord {
    uint32_t psn;
    uint32_t ctrl_rkey;
    uint64_t ctrl_addr;
    uint16_t lid;
    uint8_t link_layer;
    uint8_t mtu;  // ibv_mtu of the active port
    uint8_t gid[16];
    uint8_t connect_mode;  // ConnectMode: every process must use the same
    uint8_t pad[3];
    CmAddress cm;  // where this process's rdma_cm listens (rdma_cm mode)
};
static_assert(sizeof(ConnRecord) == 64);

namespace {

// A queued rendezvous is deliverable once its reads completed (or failed).
bool pulled(const Arrival& a) { return a.pull.done; }

const char* mode_name(uint8_t m) {
    switch (static_cast<ConnectMode>(m)) {
        case ConnectMode::exchange:
            return "exchange";
        case ConnectMode::rdma_cm:
            return "rdma_cm";
    }
    return "?";
}

uint8_t* alloc_pages(size_t len) {
    void* p = nullptr;
    if (posix_memalign(&p, 4096, (len + 4095) & ~size_t(4095)) != 0) return nullptr;
    std::memset(p, 0, len);
    return static_cast<uint8_t*>(p);
}

// IB timeout exponent: 4.096 µs · 2^t per attempt. 14 ≈ 67 ms, with 6
// retries ≈ 0.5 s from a dead peer's silence to IBV_WC_RETRY_EXC_ERR.
uint8_t qp_timeout() { return static_cast<uint8_t>(std::min<uint64_t>(env_u64("WEFT_VERBS_TIMEOUT", 14), 31)); }
// Verbs trap: rdma_rxe treats retry_cnt == 7 like rnr_retry == 7, i.e.
// "retry forever" (rxe_comp.c), so a dead peer would never surface. 6 is
// finite everywhere.
uint8_t qp_retry() { return static_cast<uint8_t>(std::min<uint64_t>(env_u64("WEFT_VERBS_RETRY", 6), 6)); }

}  // namespace

// ------------------------------------------------------------------ init
Status VerbsBackend::init() {
    Status st = connect_mode_from_env(mode_);
    if (st != WEFT_OK) return st;
    const ConnectMode mode = mode_;
    st = open_device(dev_, mode == ConnectMode::rdma_cm);
    if (st != WEFT_OK) return st;
    nconns_ = rt_.universe_size();
    arrivals_.resize(nconns_);
    pd_ = ibv_alloc_pd(dev_.ctx);
    if (!pd_) return WEFT_FAIL(WEFT_ERR_TRANSPORT, "verbs: ibv_alloc_pd: %s", std::strerror(errno));
    channel_ = ibv_create_comp_channel(dev_.ctx);
    if (!channel_) return WEFT_FAIL(WEFT_ERR_TRANSPORT, "verbs: ibv_create_comp_channel: %s", std::strerror(errno));
    fcntl(channel_->fd, F_SETFL, fcntl(channel_->fd, F_GETFL) | O_NONBLOCK);
    if (wake_fd_ < 0) wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);  // kept across a release
    if (wake_fd_ < 0) return WEFT_FAIL(WEFT_ERR_TRANSPORT, "verbs: eventfd: %s", std::strerror(errno));

    // One CQ for every QP's sends and receives: it can never overflow
    // because no QP has more WRs outstanding than it was created with.
    const uint64_t cqe = uint64_t(nconns_) * (sq_depth + recv_slots) + 16;
    if (cqe > uint64_t(dev_.attr.max_cqe))
        return WEFT_FAIL(WEFT_ERR_UNSUPPORTED, "verbs: %u peers need %llu CQEs, %s allows %d", nconns_,
                         static_cast<unsigned long long>(cqe), dev_.name.c_str(), dev_.attr.max_cqe);
    cq_ = ibv_create_cq(dev_.ctx, static_cast<int>(cqe), nullptr, channel_, 0);
    if (!cq_)
        return WEFT_FAIL(WEFT_ERR_TRANSPORT, "verbs: ibv_create_cq(%llu): %s", static_cast<unsigned long long>(cqe),
                         std::strerror(errno));

    const size_t ctrl_len = sizeof(PeerCtrl) * nconns_;
    ctrl_mem_ = alloc_pages(ctrl_len);
    local_len_ = size_t(nconns_) * (recv_slots * recv_slot_size + stage_size);
    local_mem_ = alloc_pages(local_len_);
    if (!ctrl_mem_ || !local_mem_) return WEFT_FAIL(WEFT_ERR_NO_MEMORY, "verbs: no memory for %u peers", nconns_);
    ctrl_mr_ = ibv_reg_mr(pd_, ctrl_mem_, ctrl_len, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    local_mr_ = ibv_reg_mr(pd_, local_mem_, local_len_, IBV_ACCESS_LOCAL_WRITE);
    if (!ctrl_mr_ || !local_mr_)
        return WEFT_FAIL(WEFT_ERR_NO_MEMORY, "verbs: ibv_reg_mr of %zu bytes of queues: %s (RLIMIT_MEMLOCK?)",
                         ctrl_len + local_len_, std::strerror(errno));

    conns_ = std::make_unique<Conn[]>(nconns_);
    for (uint32_t p = 0; p < nconns_; ++p) {
        Conn& c = conns_[p];
        c.peer = p;
        // Control slots are by universe index: that is how the peer, which
        // numbers its peers differently (its own job first), addresses us.
        c.ctrl = reinterpret_cast<PeerCtrl*>(ctrl_mem_) + rt_.peer(p).universe_index;
        c.recv = local_mem_ + size_t(p) * (recv_slots * recv_slot_size + stage_size);
        c.stage = c.recv + recv_slots * recv_slot_size;
        ibv_qp_init_attr qa{};
        qa.send_cq = cq_;
        qa.recv_cq = cq_;
        qa.qp_type = IBV_QPT_RC;
        qa.sq_sig_all = 0;  // selective signalling
        qa.cap.max_send_wr = sq_depth;
        qa.cap.max_recv_wr = recv_slots;
        qa.cap.max_send_sge = 1;
        qa.cap.max_recv_sge = 1;
        qa.cap.max_inline_data = requested_inline;
        c.qp = ibv_create_qp(pd_, &qa);
        if (!c.qp) {
            // Some devices cap inline data lower: ask for none.
            qa.cap.max_inline_data = 0;
            c.qp = ibv_create_qp(pd_, &qa);
        }
        if (!c.qp) return WEFT_FAIL(WEFT_ERR_TRANSPORT, "verbs: ibv_create_qp (peer %u): %s", p, std::strerror(errno));
        // create_qp reports the inline size actually granted.
        max_inline_ = p == 0 ? qa.cap.max_inline_data : std::min(max_inline_, qa.cap.max_inline_data);
        ibv_qp_attr a{};
        a.qp_state = IBV_QPS_INIT;
        a.pkey_index = 0;
        a.port_num = dev_.port;
        a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
        if (ibv_modify_qp(c.qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) != 0)
            return WEFT_FAIL(WEFT_ERR_TRANSPORT, "verbs: QP to peer %u -> INIT: %s", p, std::strerror(errno));
        // Receives may be posted in INIT: every slot is ready before any
        // peer can learn our QP number.
        for (uint32_t s = 0; s < recv_slots; ++s) {
            st = post_recv(c, s);
            if (st != WEFT_OK) return st;
        }
    }

    observer_ = std::make_unique<VerbsObserver>(rt_);
    st = observer_->create(dev_.ctx, pd_, dev_.port, nconns_);
    if (st != WEFT_OK) return st;

    CmAddress listening{};
    if (mode == ConnectMode::rdma_cm) {
        cm_ = std::make_unique<CmConnector>();
        st = cm_local_address(dev_, listening);
        if (st == WEFT_OK) st = cm_->listen(dev_, listening);
        if (st != WEFT_OK) return st;
    }

    psn_ = (static_cast<uint32_t>(getpid()) * 2654435761u ^ static_cast<uint32_t>(now_ns())) & 0xffffff;
    ConnRecord me{};
    me.connect_mode = static_cast<uint8_t>(mode);
    me.cm = listening;
    me.psn = psn_;
    me.ctrl_rkey = ctrl_mr_->rkey;
    me.ctrl_addr = reinterpret_cast<uint64_t>(ctrl_mem_);
    me.lid = dev_.port_attr.lid;
    me.link_layer = dev_.port_attr.link_layer;
    me.mtu = static_cast<uint8_t>(dev_.port_attr.active_mtu);
    std::memcpy(me.gid, dev_.gid.raw, 16);
    // Record: the fixed part, our QP for universe index u in slot u, then
    // our observer QP for u in slot nconns_ + u.
    std::vector<uint8_t> mine(sizeof me + 8 * nconns_);
    std::memcpy(mine.data(), &me, sizeof me);
    for (uint32_t p = 0; p < nconns_; ++p) {
        const uint32_t qpn = conns_[p].qp->qp_num, obs = observer_->qp(p)->qp_num;
        std::memcpy(mine.data() + sizeof me + 4 * rt_.peer(p).universe_index, &qpn, 4);
        std::memcpy(mine.data() + sizeof me + 4 * (nconns_ + rt_.peer(p).universe_index), &obs, 4);
    }
    std::vector<std::vector<uint8_t>> all;
    st = rt_.bootstrap().exchange(wire::Scope::universe, mine, all, rt_.op_deadline());
    if (st != WEFT_OK) return WEFT_FAIL(st, "verbs: connection exchange failed");
    if (all.size() != nconns_)
        return WEFT_FAIL(WEFT_ERR_PROTOCOL, "verbs: connection exchange: %zu of %u records", all.size(), nconns_);
    const uint32_t self_u = rt_.self_universe();
    std::vector<CmLink> cm_links;
    std::vector<CmAddress> cm_addrs(nconns_);
    for (uint32_t u = 0; u < nconns_; ++u) {
        if (all[u].size() != sizeof(ConnRecord) + 8 * nconns_)
            return WEFT_FAIL(WEFT_ERR_PROTOCOL, "verbs: connection record %u has %zu bytes", u, all[u].size());
        ConnRecord r;
        std::memcpy(&r, all[u].data(), sizeof r);
        if (r.connect_mode != me.connect_mode)
            return WEFT_FAIL(WEFT_ERR_INVALID_ARG,
                             "verbs: universe rank %u connects by %s, this process by %s (set WEFT_VERBS_CONNECT "
                             "alike everywhere)",
                             u, mode_name(r.connect_mode), mode_name(me.connect_mode));
        uint32_t qpn, obs;
        std::memcpy(&qpn, all[u].data() + sizeof(ConnRecord) + 4 * self_u, 4);
        std::memcpy(&obs, all[u].data() + sizeof(ConnRecord) + 4 * (nconns_ + self_u), 4);
        const uint32_t p = rt_.peer_of_universe(u);
        st = use_record(conns_[p], r);
        if (st != WEFT_OK) return st;
        if (mode == ConnectMode::rdma_cm && u != self_u) {
            // rdma_cm connects these below; our loopback QPs need no address.
            cm_addrs[u] = r.cm;
            cm_links.push_back(CmLink{conns_[p].qp, u, 0});
            cm_links.push_back(CmLink{observer_->qp(p), u, 1});
            continue;
        }
        st = bring_up(conns_[p].qp, p, all[u].data(), qpn);
        if (st != WEFT_OK) return st;
        st = bring_up(observer_->qp(p), p, all[u].data(), obs);
        if (st != WEFT_OK) return st;
    }
    if (mode == ConnectMode::rdma_cm) {
        // A process that dies here leaves its peers' connections to it
        // unmade: they must fail, naming it (tests/rxe/cm-test.sh).
        WEFT_FAULT_POINT("transport.verbs.connecting");
        const uint8_t rd =
            static_cast<uint8_t>(std::min({dev_.attr.max_qp_rd_atom, dev_.attr.max_qp_init_rd_atom, 16}));
        st = cm_->connect_all(self_u, cm_links, cm_addrs, CmQpTuning{qp_timeout(), qp_retry(), 6, rd},
                              rt_.op_deadline());
        if (st != WEFT_OK) return st;
    }
    // Nobody sends before every QP of the universe is ready to receive
    // (a packet to a QP still in INIT is dropped and costs a retry timeout).
    all.clear();
    st = rt_.bootstrap().exchange(wire::Scope::universe, {}, all, rt_.op_deadline());
    if (st != WEFT_OK) return WEFT_FAIL(st, "verbs: post-connection barrier failed");
    WEFT_LOG(debug, "verbs: %u RC QPs on %s port %u, inline %u, atomics %s", nconns_, dev_.name.c_str(), dev_.port,
             max_inline_, atomic_cap_name(dev_.attr.atomic_cap));
    return WEFT_OK;
}

// The peer's control slot for us, once its record says where it is.
Status VerbsBackend::use_record(Conn& c, const ConnRecord& r) {
    if (r.link_layer != dev_.port_attr.link_layer)
        return WEFT_FAIL(WEFT_ERR_UNSUPPORTED, "verbs: peer %u is on another link layer (%u, here %u)", c.peer,
                         r.link_layer, dev_.port_attr.link_layer);
    c.remote_ctrl = r.ctrl_addr + sizeof(PeerCtrl) * rt_.self_universe();
    c.remote_ctrl_rkey = r.ctrl_rkey;
    return WEFT_OK;
}

// INIT -> RTR -> RTS towards the peer's QP remote_qpn.
Status VerbsBackend::bring_up(ibv_qp* qp, uint32_t peer, const uint8_t* remote, uint32_t remote_qpn) {
    ConnRecord r;
    std::memcpy(&r, remote, sizeof r);
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = static_cast<ibv_mtu>(std::min<int>(r.mtu, dev_.port_attr.active_mtu));
    a.dest_qp_num = remote_qpn;
    a.rq_psn = r.psn;
    a.max_dest_rd_atomic = static_cast<uint8_t>(std::min(dev_.attr.max_qp_rd_atom, 16));
    a.min_rnr_timer = 12;  // 0.64 ms; credits mean an RNR NAK is a bug
    a.ah_attr.port_num = dev_.port;
    if (dev_.roce) {
        // RoCE has no LIDs: the GRH (destination GID) is the address.
        a.ah_attr.is_global = 1;
        std::memcpy(a.ah_attr.grh.dgid.raw, r.gid, 16);
        a.ah_attr.grh.sgid_index = static_cast<uint8_t>(dev_.gid_index);
        a.ah_attr.grh.hop_limit = 64;
    } else {
        a.ah_attr.dlid = r.lid;
    }
    if (ibv_modify_qp(qp, &a,
                      IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                          IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER) != 0)
        return WEFT_FAIL(WEFT_ERR_TRANSPORT, "verbs: QP to peer %u -> RTR: %s", peer, std::strerror(errno));
    a = ibv_qp_attr{};
    a.qp_state = IBV_QPS_RTS;
    a.sq_psn = psn_;
    a.timeout = qp_timeout();
    a.retry_cnt = qp_retry();
    a.rnr_retry = 6;  // finite: a receiver without buffers is a bug that must surface
    a.max_rd_atomic = static_cast<uint8_t>(std::min(dev_.attr.max_qp_init_rd_atom, 16));
    if (ibv_modify_qp(qp, &a,
                      IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                          IBV_QP_MAX_QP_RD_ATOMIC) != 0)
        return WEFT_FAIL(WEFT_ERR_TRANSPORT, "verbs: QP to peer %u -> RTS: %s", peer, std::strerror(errno));
    return WEFT_OK;
}

VerbsBackend::~VerbsBackend() {
    // Let our last sends (finalize's goodbyes, credits) leave before the QPs
    // go: a destroyed QP drops what it has not transmitted.
    if (conns_ && cq_) (void)complete_sends(Deadline::after_ns(std::min<uint64_t>(rt_.timeout_ns(), 2000000000ull)));
    teardown();
    if (wake_fd_ >= 0) close(wake_fd_);
}

void VerbsBackend::teardown() {
    closing_ = true;  // the flushes that destroying QPs causes are not failures
    arrivals_.for_each([](Arrival& a) {
        if (a.pull.mr) ibv_dereg_mr(a.pull.mr);
        a.pull.mr = nullptr;
    });
    arrivals_.clear();
    if (conns_)
        for (uint32_t p = 0; p < nconns_; ++p)
            if (conns_[p].qp) ibv_destroy_qp(conns_[p].qp);
    conns_.reset();
    nconns_ = 0;
    observer_.reset();
    // After the QPs: a destroyed rdma_cm_id tells the peer we disconnect.
    cm_.reset();
    if (local_mr_) ibv_dereg_mr(local_mr_);
    if (ctrl_mr_) ibv_dereg_mr(ctrl_mr_);
    local_mr_ = ctrl_mr_ = nullptr;
    if (cq_) {
        if (unacked_events_) ibv_ack_cq_events(cq_, unacked_events_);
        ibv_destroy_cq(cq_);
    }
    cq_ = nullptr;
    unacked_events_ = 0;
    if (channel_) ibv_destroy_comp_channel(channel_);
    channel_ = nullptr;
    if (pd_) ibv_dealloc_pd(pd_);
    pd_ = nullptr;
    close_device(dev_);
    std::free(ctrl_mem_);
    std::free(local_mem_);
    ctrl_mem_ = local_mem_ = nullptr;
    local_len_ = 0;
    service_.clear();
    wc_pos_ = wc_count_ = 0;
    max_inline_ = 0;
    direct_ok_ = false;
    closing_ = false;
}

void VerbsBackend::query_caps(weft_caps_t& c) const {
    c.transport = "verbs";
    const bool hw = dev_.attr.atomic_cap != IBV_ATOMIC_NONE;
    c.atomics = hw ? WEFT_ATOMICS_HARDWARE : WEFT_ATOMICS_NONE;
    c.atomics_registered = c.atomics;  // any region registered with REMOTE_ATOMIC
    // ATOMIC_HCA: the NIC's atomics are atomic only among themselves, so
    // CPU and NIC atomics must never mix on one word (state_window.h).
    c.atomic_scope = dev_.attr.atomic_cap == IBV_ATOMIC_GLOB ? WEFT_ATOMIC_SCOPE_GLOBAL : WEFT_ATOMIC_SCOPE_DEVICE;
    // RC executes writes in order, but the order in which the target CPU
    // sees their bytes is not guaranteed: do not promise it.
    c.ordered_puts = 0;
    c.peer_failure_immediate = rt_.all_same_host() ? 1 : 0;  // pidfd; else QP retry timeout
    c.am_eager_limit = recv_slot_size;
    c.am_max_size = WEFT_AM_MAX_SIZE;
}

// --------------------------------------------------------------- windows
Status VerbsBackend::window_create(weft_window& w, bool allocate, void* base, size_t size) {
    auto* data = new WindowData{this, nullptr, nullptr};
    uint8_t* local = static_cast<uint8_t*>(base);
    Status mine = WEFT_OK;
    if (allocate) {
        data->owned = alloc_pages(std::max<size_t>(size, 64));
        if (!data->owned) mine = WEFT_FAIL(WEFT_ERR_NO_MEMORY, "verbs: cannot allocate a %zu-byte window", size);
        local = data->owned;
    }
    const Status st = publish_window(w, *data, local, size, allocate, mine);
    if (st != WEFT_OK) {
        if (data->mr) ibv_dereg_mr(data->mr);
        std::free(data->owned);
        delete data;
        return st;
    }
    w.backend_data = data;
    w.local_base = local;
    w.local_size = size;
    return WEFT_OK;
}

Status VerbsBackend::publish_window(weft_window& w, WindowData& data, uint8_t* local, size_t size, bool allocate,
                                    Status mine) {
    if (mine == WEFT_OK && (allocate || size > 0)) {
        const size_t len = allocate ? std::max<size_t>(size, 64) : size;
        data.mr = ibv_reg_mr(
            pd_, local, len,
            IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC);
        if (!data.mr) {
            const int e = errno;
            // EFAULT/EINVAL: [base, base+size) is not (all) mapped memory of
            // this process. ENOMEM: out of pinnable memory (RLIMIT_MEMLOCK).
            mine = WEFT_FAIL(e == ENOMEM ? WEFT_ERR_NO_MEMORY : WEFT_ERR_INVALID_ARG,
                             "verbs: ibv_reg_mr(%p, %zu bytes): %s", static_cast<void*>(local), len, std::strerror(e));
        }
    }
    // Record: status, kind, addr, size, rkey. Every rank takes part even
    // after a local failure so that no peer hangs in the exchange.
    std::vector<uint8_t> record;
    record.push_back(static_cast<uint8_t>(mine));
    record.push_back(allocate ? 0 : 1);
    const uint64_t where = reinterpret_cast<uint64_t>(local);
    const uint64_t sz = size;
    const uint32_t rkey = data.mr ? data.mr->rkey : 0;
    record.insert(record.end(), reinterpret_cast<const uint8_t*>(&where), reinterpret_cast<const uint8_t*>(&where) + 8);
    record.insert(record.end(), reinterpret_cast<const uint8_t*>(&sz), reinterpret_cast<const uint8_t*>(&sz) + 8);
    record.insert(record.end(), reinterpret_cast<const uint8_t*>(&rkey), reinterpret_cast<const uint8_t*>(&rkey) + 4);

    std::vector<std::vector<uint8_t>> all;
    Status st = rt_.bootstrap().exchange(wire::Scope::job, record, all, rt_.op_deadline());
    if (st != WEFT_OK) WEFT_LOG(error, "verbs: window exchange failed: %s", weft_strerror(st));
    const uint32_t n = rt_.size();
    if (st == WEFT_OK && all.size() != n)
        st = WEFT_FAIL(WEFT_ERR_PROTOCOL, "verbs window exchange: %zu of %u records", all.size(), n);
    for (uint32_t r = 0; st == WEFT_OK && r < n; ++r) {
        const auto& b = all[r];
        if (b.size() != 22)
            st = WEFT_FAIL(WEFT_ERR_PROTOCOL, "verbs window record from rank %u corrupted", r);
        else if (b[0] != WEFT_OK)
            st = r == rt_.rank()
                     ? static_cast<Status>(b[0])
                     : WEFT_FAIL(static_cast<Status>(b[0]), "verbs: rank %u could not register its window: %s", r,
                                 weft_strerror(static_cast<Status>(b[0])));
        else if (b[1] != (allocate ? 0 : 1))
            st = WEFT_FAIL(WEFT_ERR_INVALID_ARG, "rank %u called a different window constructor", r);
    }
    if (st != WEFT_OK) return st;
    w.remote_storage.assign(n, RemoteRegion{});
    for (uint32_t r = 0; r < n; ++r) {
        RemoteRegion& reg = w.remote_storage[r];
        std::memcpy(&reg.addr, all[r].data() + 2, 8);
        std::memcpy(&reg.size, all[r].data() + 10, 8);
        std::memcpy(&reg.rkey32, all[r].data() + 18, 4);
        reg.pid = rt_.peer(r).pid;
    }
    // Informational only: even our own rank is reached through the loopback
    // QP, never through this pointer (NIC vs CPU atomics, see state_window.h).
    w.remote_storage[rt_.rank()].direct = local;
    // Chosen here, not per operation: no capability check on the hot path.
    w.ops = atomics_available() ? &verbs_ops : &verbs_no_atomics_ops;
    return WEFT_OK;
}

void VerbsBackend::window_destroy(weft_window& w) {
    auto* data = static_cast<WindowData*>(w.backend_data);
    if (!data) return;
    if (data->mr) ibv_dereg_mr(data->mr);
    std::free(data->owned);
    delete data;
    w.backend_data = nullptr;
}

Status VerbsBackend::flush(weft_window& w, uint32_t rank) {
    // RC acknowledges a write once the target has it, and a signalled
    // completion retires every earlier WR: flushing a QP is waiting until
    // everything posted has completed. Like UCX, this covers every window.
    const uint32_t lo = rank == WEFT_RANK_ALL ? 0 : rank;
    const uint32_t hi = rank == WEFT_RANK_ALL ? w.nranks : rank + 1;
    Status result = WEFT_OK;
    for (uint32_t r = lo; r < hi; ++r) {
        Conn& c = conns_[r];
        if (c.dead || rt_.peer_failed(r)) {
            // All ranks: a failed rank is skipped (its failure is reported
            // through the handler); one rank: say so.
            if (rank != WEFT_RANK_ALL) return dead_conn(c, "flush");
            continue;
        }
        if (!c.dirty) continue;
        if (c.completed < c.posted && c.last_signaled < c.posted) nudge(c);
        Status st = wait_done(c, c.posted, "flush");
        if (st == WEFT_OK)
            c.dirty = false;
        else if (result == WEFT_OK)
            result = st;
    }
    return result;
}

// ------------------------------------------------------- active messages
Status VerbsBackend::send_eager(Conn& c, uint32_t imm, const void* payload, size_t len) {
    // One credit per message: the peer has a receive posted for it.
    if (__builtin_expect(
            c.am_sent - std::atomic_ref<uint64_t>(c.ctrl->freed).load(std::memory_order_acquire) >= recv_slots, 0)) {
        Status st = wait_until(c, "am_send (credits)", [&] {
            return c.am_sent - std::atomic_ref<uint64_t>(c.ctrl->freed).load(std::memory_order_acquire) < recv_slots;
        });
        if (st != WEFT_OK) return st;
    }
    ibv_sge sge;
    ibv_send_wr wr{};
    wr.opcode = IBV_WR_SEND_WITH_IMM;
    wr.imm_data = htonl(imm);
    wr.sg_list = &sge;
    wr.num_sge = 1;
    if (len <= max_inline_) {
        Status st = room(c, sq_data_limit, "am_send");
        if (st != WEFT_OK) return st;
        sge = ibv_sge{reinterpret_cast<uint64_t>(payload), static_cast<uint32_t>(len), 0};
        wr.send_flags = IBV_SEND_INLINE;
    } else {
        uint8_t* s = nullptr;
        Status st = stage_reserve(c, len, s);
        if (st == WEFT_OK) st = room(c, sq_data_limit, "am_send");
        if (st != WEFT_OK) return st;
        std::memcpy(s, payload, len);
        sge = ibv_sge{reinterpret_cast<uint64_t>(s), static_cast<uint32_t>(len), local_mr_->lkey};
    }
    Status st = post(c, wr, false);
    if (st != WEFT_OK) return st;
    ++c.am_sent;
    c.dirty = true;
    return WEFT_OK;
}

Status VerbsBackend::am_send(uint32_t peer, uint32_t id, const void* payload, size_t len) {
    Conn& c = conns_[peer];
    if (c.dead) return dead_conn(c, "am_send");
    if (len <= recv_slot_size) return send_eager(c, make_imm(id, AmKind::eager), payload, len);

    // Rendezvous: expose the payload, tell the peer where it is, wait until
    // it has pulled it (its FIN is a write of its pull count into our
    // control slot). Returns when payload may be reused.
    ibv_mr* mr = ibv_reg_mr(pd_, const_cast<void*>(payload), len, IBV_ACCESS_REMOTE_READ);
    if (!mr)
        return WEFT_FAIL(errno == ENOMEM ? WEFT_ERR_NO_MEMORY : WEFT_ERR_INVALID_ARG,
                         "verbs am_send: ibv_reg_mr of a %zu-byte payload: %s", len, std::strerror(errno));
    const RtsMsg rts{reinterpret_cast<uint64_t>(payload), len, ++c.rndv_sent, mr->rkey, 0};
    const uint64_t seq = rts.seq;
    Status st = send_eager(c, make_imm(id, AmKind::rts), &rts, sizeof rts);
    if (st == WEFT_OK)
        st = wait_until(c, "am_send (rendezvous)", [&] {
            return std::atomic_ref<uint64_t>(c.ctrl->rndv_done).load(std::memory_order_acquire) >= seq;
        });
    ibv_dereg_mr(mr);
    return st;
}

void VerbsBackend::deliver(uint32_t source, uint32_t id, const void* data, size_t len) {
    ++delivered_;
    ++depth_;
    const bool saved = direct_ok_;
    direct_ok_ = false;  // a handler's own waits queue what they find
    rt_.deliver_am(source, id, data, len);
    direct_ok_ = saved;
    --depth_;
}

void VerbsBackend::on_recv(Conn& c, uint32_t slot, const ibv_wc& wc) {
    uint8_t* buf = c.recv + size_t(slot) * recv_slot_size;
    const uint32_t imm = ntohl(wc.imm_data);
    const uint32_t id = imm & 0xff;
    const auto kind = static_cast<AmKind>(imm >> 8);
    const size_t len = wc.byte_len;
    if (!(wc.wc_flags & IBV_WC_WITH_IMM) || (kind != AmKind::eager && kind != AmKind::rts) ||
        (kind == AmKind::rts && len != sizeof(RtsMsg))) {
        WEFT_LOG(error, "verbs: dropped a malformed %zu-byte message from peer %u (imm 0x%x)", len, c.peer, imm);
        repost(c, slot);
        return;
    }
    if (kind == AmKind::eager && direct_ok_ && arrivals_.empty()) {
        // The fast path: run the handler on the receive buffer, then give
        // the buffer back.
        deliver(c.peer, id, buf, len);
        repost(c, slot);
        return;
    }
    if (kind == AmKind::rts) {
        RndvPull& rv = arrivals_.push_rndv(c.peer, id).pull;
        std::memcpy(&rv.rts, buf, sizeof rv.rts);
    } else {
        arrivals_.push_eager(c.peer, id, buf, len);
    }
    repost(c, slot);
}

Status VerbsBackend::post_recv(Conn& c, uint32_t slot) {
    ibv_sge sge{reinterpret_cast<uint64_t>(c.recv + size_t(slot) * recv_slot_size),
                static_cast<uint32_t>(recv_slot_size), local_mr_->lkey};
    ibv_recv_wr wr{};
    wr.wr_id = make_wr_id(true, c.peer, slot);
    wr.sg_list = &sge;
    wr.num_sge = 1;
    ibv_recv_wr* bad = nullptr;
    const int rc = ibv_post_recv(c.qp, &wr, &bad);
    if (rc != 0) return WEFT_FAIL(WEFT_ERR_TRANSPORT, "verbs: ibv_post_recv (peer %u): %s", c.peer, std::strerror(rc));
    return WEFT_OK;
}

void VerbsBackend::repost(Conn& c, uint32_t slot) {
    if (c.dead) return;
    if (post_recv(c, slot) != WEFT_OK) {
        mark_dead(c);
        rt_.declare_failed(c.peer, "verbs: cannot re-post a receive");
        return;
    }
    ++c.freed;
    if (c.freed - c.freed_returned >= credit_batch) want_service(c);
}

void VerbsBackend::want_service(Conn& c) {
    if (c.in_service) return;
    c.in_service = true;
    service_.push_back(c.peer);
}

Status VerbsBackend::write_ctrl_word(Conn& c, uint64_t* src, uint64_t value, size_t field_off) {
    *src = value;  // monotonic: a non-inline write that reads it later sends a newer value, never an older one
    ibv_sge sge{reinterpret_cast<uint64_t>(src), 8, ctrl_mr_->lkey};
    ibv_send_wr wr{};
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.send_flags = max_inline_ >= 8 ? IBV_SEND_INLINE : 0;
    wr.wr.rdma.remote_addr = c.remote_ctrl + field_off;
    wr.wr.rdma.rkey = c.remote_ctrl_rkey;
    return post(c, wr, false);
}

void VerbsBackend::service() {
    // Credits and rendezvous FINs owed to peers. Never waits: a QP whose SQ
    // is full keeps its entry for the next round.
    for (size_t i = 0; i < service_.size();) {
        Conn& c = conns_[service_[i]];
        bool done = c.dead;
        if (!done && c.inflight() < sq_depth - 1) {
            if (c.rndv_pulled > c.rndv_returned) {
                if (write_ctrl_word(c, &c.ctrl->rndv_src, c.rndv_pulled, offsetof(PeerCtrl, rndv_done)) == WEFT_OK)
                    c.rndv_returned = c.rndv_pulled;
            }
            if (c.inflight() < sq_depth - 1 && c.freed > c.freed_returned) {
                if (write_ctrl_word(c, &c.ctrl->freed_src, c.freed, offsetof(PeerCtrl, freed)) == WEFT_OK)
                    c.freed_returned = c.freed;
            }
            done = c.dead || (c.rndv_pulled == c.rndv_returned && c.freed == c.freed_returned);
        }
        if (done) {
            c.in_service = false;
            service_[i] = service_.back();
            service_.pop_back();
        } else {
            ++i;
        }
    }
}

void VerbsBackend::start_rndv() {
    arrivals_.start_pulls([&](Arrival& a) {
        RndvPull& rv = a.pull;
        Conn& c = conns_[a.source];
        const uint64_t len = rv.rts.len;
        const uint32_t wrs = static_cast<uint32_t>((len + rndv_chunk - 1) / rndv_chunk);
        if (!c.dead && c.inflight() + wrs > sq_data_limit) return;  // next round
        arrivals_.mark_started(a);
        if (c.dead || len == 0 || len > WEFT_AM_MAX_SIZE) {
            if (!c.dead)
                WEFT_LOG(error, "verbs: rendezvous of %llu bytes from peer %u refused",
                         static_cast<unsigned long long>(len), a.source);
            rv.failed = rv.done = true;
            return;
        }
        rv.rbuf.reset(new (std::nothrow) uint8_t[len]);
        if (rv.rbuf) rv.mr = ibv_reg_mr(pd_, rv.rbuf.get(), len, IBV_ACCESS_LOCAL_WRITE);
        if (!rv.mr) {
            WEFT_LOG(error, "verbs: no registered memory for a %llu-byte message from peer %u: dropped",
                     static_cast<unsigned long long>(len), a.source);
            rv.failed = rv.done = true;
            // Still release the sender.
            ++c.rndv_pulled;
            want_service(c);
            return;
        }
        for (uint64_t off = 0; off < len; off += rndv_chunk) {
            const uint64_t n = std::min<uint64_t>(rndv_chunk, len - off);
            ibv_sge sge{reinterpret_cast<uint64_t>(rv.rbuf.get() + off), static_cast<uint32_t>(n), rv.mr->lkey};
            ibv_send_wr wr{};
            wr.opcode = IBV_WR_RDMA_READ;
            wr.sg_list = &sge;
            wr.num_sge = 1;
            wr.wr.rdma.remote_addr = rv.rts.addr + off;
            wr.wr.rdma.rkey = rv.rts.rkey;
            if (post(c, wr, off + n == len) != WEFT_OK) break;  // the QP failed: dead, handled below
        }
        rv.read_seq = c.posted;
        ++c.rndv_reading;
        check_rndv(c);
    });
}

void VerbsBackend::check_rndv(Conn& c) {
    // A source's reads were posted in its order of arrival and RC completes
    // them in order: the first one not done ends the walk.
    arrivals_.for_each_of(c.peer, [&](Arrival& a) {
        if (!c.rndv_reading) return false;
        RndvPull& rv = a.pull;
        if (!a.rndv || !a.started || rv.done) return true;
        if (!c.dead && c.completed < rv.read_seq) return false;  // in order: later ones are not done either
        --c.rndv_reading;
        rv.done = true;
        if (rv.mr) ibv_dereg_mr(rv.mr);
        rv.mr = nullptr;
        if (c.dead) {
            rv.failed = true;
            return true;
        }
        ++c.rndv_pulled;
        want_service(c);
        return true;
    });
}

uint32_t VerbsBackend::dispatch() {
    return arrivals_.dispatch(pulled, [&](Arrival& a) {
        if (!a.rndv)
            deliver(a.source, a.id, a.eager.data(), a.eager.size());
        else if (!a.pull.failed)
            deliver(a.source, a.id, a.pull.rbuf.get(), a.pull.rts.len);
        else
            WEFT_LOG(info, "verbs: dropped a %llu-byte rendezvous message from peer %u",
                     static_cast<unsigned long long>(a.pull.rts.len), a.source);
        return true;
    });
}

// ----------------------------------------------------------- completions
uint32_t VerbsBackend::poll() {
    uint32_t n = 0;
    // Ends: when ibv_poll_cq finds the CQ empty. Every completion is one of
    // our posted work requests (send-queue depth, posted receives); a peer
    // extends the pass only by sending within the credits it holds, and
    // credits go back by service(), after the loop.
    for (;;) {
        if (wc_pos_ == wc_count_) {
            // User-space CQ read: no system call on the way.
            const int k = ibv_poll_cq(cq_, wc_batch, wcs_);
            wc_pos_ = 0;
            wc_count_ = k > 0 ? k : 0;
            if (k < 0) WEFT_LOG(error, "verbs: ibv_poll_cq failed (%d)", k);
            if (k <= 0) break;
        }
        const ibv_wc wc = wcs_[wc_pos_++];  // a copy: handling may poll again
        ++n;
        on_completion(wc);
    }
    // Rendezvous pulls start here, not only in progress(): a peer blocked in
    // its own rendezvous send to us may be waiting for exactly this pull
    // while we wait for it.
    if (arrivals_.unstarted()) start_rndv();
    if (!service_.empty()) service();
    return n;
}

void VerbsBackend::on_completion(const ibv_wc& wc) {
    const uint32_t peer = static_cast<uint32_t>(wc.wr_id >> 32) & 0x7fffffff;
    const uint32_t low = static_cast<uint32_t>(wc.wr_id);
    if (__builtin_expect(peer >= nconns_, 0)) {
        WEFT_LOG(error, "verbs: completion with a foreign wr_id 0x%llx", static_cast<unsigned long long>(wc.wr_id));
        return;
    }
    Conn& c = conns_[peer];
    if (__builtin_expect(wc.status != IBV_WC_SUCCESS, 0)) return on_error(c, wc);
    if (wc.wr_id & wr_recv_bit) return on_recv(c, low, wc);
    // A signalled send completion retires every WR up to it. The 64-bit
    // sequence is rebuilt from its low 32 bits (never 2^32 WRs in flight).
    const uint64_t seq = c.posted - static_cast<uint32_t>(static_cast<uint32_t>(c.posted) - low);
    if (seq > c.completed) {
        c.completed = seq;
        c.stage_tail = c.stage_end[seq % sq_depth];
    }
    if (c.rndv_reading) check_rndv(c);
}

void VerbsBackend::on_error(Conn& c, const ibv_wc& wc) {
    // After a QP error every outstanding WR completes with FLUSH_ERR: only
    // the first error says anything.
    if (c.dead || closing_) return;
    char why[160];
    std::snprintf(why, sizeof why, "verbs: %s completion failed: %s (vendor error 0x%x)",
                  (wc.wr_id & wr_recv_bit) ? "receive" : "send", ibv_wc_status_str(wc.status), wc.vendor_err);
    mark_dead(c);
    rt_.declare_failed(c.peer, why);
    if (c.rndv_reading) check_rndv(c);
}

void VerbsBackend::mark_dead(Conn& c) {
    if (c.dead) return;
    c.dead = true;
    // ERR flushes everything still queued (FLUSH_ERR completions), so no
    // WR or staging slot stays owned by the NIC.
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_ERR;
    ibv_modify_qp(c.qp, &a, IBV_QP_STATE);
}

Status VerbsBackend::post_failed(Conn& c, int rc) {
    // ibv_post_send fails on a QP in error (or on a bug in a WR).
    char why[96];
    std::snprintf(why, sizeof why, "verbs: ibv_post_send: %s", std::strerror(rc));
    if (!c.dead) {
        mark_dead(c);
        rt_.declare_failed(c.peer, why);
    }
    return WEFT_FAIL(WEFT_ERR_PEER_FAILED, "%s (peer %u)", why, c.peer);
}

ObserverChannel* VerbsBackend::observer_channel(const weft_window& state_window) {
    if (!observer_ || !atomics_available()) return nullptr;
    observer_->bind(state_window);
    return observer_.get();
}

// ------------------------------------------- transparent checkpointing
bool VerbsBackend::can_release(std::string& why) const {
    if (mode_ != ConnectMode::rdma_cm) return true;
    // librdmacm opens every device when first used and keeps those contexts
    // (and the QPs' doorbell mappings of that context) until the process
    // exits: nothing weft can let go of.
    why = "verbs over rdma_cm (WEFT_VERBS_CONNECT=rdma_cm): librdmacm keeps its device contexts open until exit";
    return false;
}

Status VerbsBackend::complete_sends(Deadline d) {
    // RC retires a WR once the target's NIC acknowledged it: a QP whose
    // every WR has retired has delivered everything we sent on it. (Also
    // the destructor's last wait: a destroyed QP drops what it holds.)
    Backoff backoff(Backoff::nic_completion, d);
    for (uint32_t p = 0; p < nconns_; ++p) {
        Conn& c = conns_[p];
        while (c.qp && !c.dead && !rt_.peer_failed(p) && c.completed < c.posted) {
            if (c.unsignalled_tail()) nudge(c);
            if (poll() > 0) continue;
            if (d.passed())
                return WEFT_FAIL(WEFT_ERR_TIMEOUT, "verbs: %llu WRs to peer %u did not complete in time",
                                 static_cast<unsigned long long>(c.posted - c.completed), p);
            backoff.pause();
        }
    }
    return WEFT_OK;
}

// Every window's registration goes (its memory is weft's or the program's
// and stays where it is, contents and all), then every QP, CQ, PD, the
// device context and the queues' registered memory (teardown). Credits owed
// and receive slots need no saving: the rebuild starts every connection
// afresh on both sides.
Status VerbsBackend::release(std::span<weft_window* const> windows) {
    Status result = WEFT_OK;
    if (!arrivals_.empty())  // the quiescing should have delivered them: say so rather than lose them quietly
        result = WEFT_FAIL(WEFT_ERR_PROTOCOL, "verbs release: messages arrived and not delivered are dropped");
    for (weft_window* w : windows) {
        w->ops = &released_ops;
        for (auto& reg : w->remote_storage) {
            reg.rkey32 = 0;
            reg.direct = nullptr;
        }
        auto* data = static_cast<WindowData*>(w->backend_data);
        if (!data || !data->mr) continue;
        ibv_dereg_mr(data->mr);
        data->mr = nullptr;
    }
    teardown();
    return result;
}

Status VerbsBackend::rebuild(std::span<weft_window* const> windows) {
    if (Status st = init(); st != WEFT_OK) return st;
    // Registered again where they are, keys exchanged in creation order
    // (every rank has the same live windows in the same order).
    for (weft_window* w : windows) {
        auto* data = static_cast<WindowData*>(w->backend_data);
        if (!data) continue;
        if (Status st = publish_window(*w, *data, w->local_base, w->local_size, w->allocated, WEFT_OK); st != WEFT_OK)
            return st;
    }
    return WEFT_OK;
}

void VerbsBackend::peer_failed(uint32_t peer) {
    if (peer >= nconns_) return;
    Conn& c = conns_[peer];
    mark_dead(c);
    if (observer_) observer_->close(peer);
    if (c.rndv_reading) check_rndv(c);
    arrivals_.for_each_of(peer, [&](Arrival& a) {
        if (a.rndv && !a.started) {
            arrivals_.mark_started(a);
            a.pull.done = a.pull.failed = true;
        }
        return true;
    });
}

// -------------------------------------------------------------- progress
uint32_t VerbsBackend::progress() {
    const uint32_t before = delivered_;
    direct_ok_ = depth_ == 0;
    poll();
    direct_ok_ = false;
    if (!arrivals_.empty()) dispatch();
    return delivered_ - before;
}

void VerbsBackend::wait_for_event(uint64_t timeout_ns) {
    // Arm the CQ, then look once more: a completion that arrived before the
    // arm raises no event.
    if (ibv_req_notify_cq(cq_, 0) != 0) return;  // the caller falls back to polling
    if (poll() > 0 || arrivals_.deliverable(pulled)) return;
    pollfd fds[2] = {{channel_->fd, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
    const timespec ts{static_cast<time_t>(timeout_ns / 1000000000ull), static_cast<long>(timeout_ns % 1000000000ull)};
    if (ppoll(fds, 2, &ts, nullptr) <= 0) return;
    if (fds[0].revents & POLLIN) {
        ibv_cq* cq = nullptr;
        void* ctx = nullptr;
        while (ibv_get_cq_event(channel_, &cq, &ctx) == 0) ++unacked_events_;
        // Acknowledging takes a lock inside libibverbs: batch it.
        if (unacked_events_ >= 64) {
            ibv_ack_cq_events(cq_, unacked_events_);
            unacked_events_ = 0;
        }
    }
    if (fds[1].revents & POLLIN) {
        uint64_t v;
        (void)!read(wake_fd_, &v, sizeof v);
    }
}

void VerbsBackend::wake() {
    const uint64_t one = 1;
    (void)!write(wake_fd_, &one, sizeof one);
}

}  // namespace weft::verbs

namespace weft {
bool verbs_backend_built() { return true; }
Status create_verbs_backend(Runtime& rt, std::unique_ptr<Backend>& out) {
    return make_backend<verbs::VerbsBackend>(rt, out);
}
}  // namespace weft

#else  // !WEFT_HAVE_VERBS

namespace weft {
bool verbs_backend_built() { return false; }
Status create_verbs_backend(Runtime&, std::unique_ptr<Backend>&) {
    return WEFT_FAIL(WEFT_ERR_UNSUPPORTED, "the verbs backend is not built (rdma-core's libibverbs-dev was not found)");
}
}  // namespace weft

#endif  // WEFT_HAVE_VERBS
