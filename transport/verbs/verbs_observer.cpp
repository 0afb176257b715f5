// verbs_observer.cpp — the failure detector's verbs path (see
// verbs_observer.hpp).
#include <weft/config.hpp>

#if WEFT_HAVE_VERBS

#include "transport/verbs/verbs_observer.hpp"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <thread>

namespace weft::verbs {

VerbsObserver::~VerbsObserver() {
    for (ibv_qp* q : qps_)
        if (q) ibv_destroy_qp(q);
    if (results_mr_) ibv_dereg_mr(results_mr_);
    if (cq_) ibv_destroy_cq(cq_);
    std::free(results_);
}

Status VerbsObserver::create(ibv_context* ctx, ibv_pd* pd, uint8_t port, uint32_t npeers) {
    // One WR per peer in flight: the CQ can never overflow.
    cq_ = ibv_create_cq(ctx, static_cast<int>(npeers + 8), nullptr, nullptr, 0);
    if (!cq_) return WEFT_FAIL(WEFT_ERR_TRANSPORT, "verbs observer: ibv_create_cq: %s", std::strerror(errno));
    void* mem = nullptr;
    if (posix_memalign(&mem, 64, 8ull * npeers) != 0) return WEFT_FAIL(WEFT_ERR_NO_MEMORY, "verbs observer: results");
    std::memset(mem, 0, 8ull * npeers);
    results_ = static_cast<uint64_t*>(mem);
    results_mr_ = ibv_reg_mr(pd, results_, 8ull * npeers, IBV_ACCESS_LOCAL_WRITE);
    if (!results_mr_) return WEFT_FAIL(WEFT_ERR_NO_MEMORY, "verbs observer: ibv_reg_mr: %s", std::strerror(errno));
    qps_.assign(npeers, nullptr);
    busy_.assign(npeers, 0);
    dead_ = std::make_unique<std::atomic<bool>[]>(npeers);
    for (uint32_t p = 0; p < npeers; ++p) {
        ibv_qp_init_attr qa{};
        qa.send_cq = cq_;
        qa.recv_cq = cq_;
        qa.qp_type = IBV_QPT_RC;
        qa.sq_sig_all = 1;
        qa.cap.max_send_wr = 2;
        qa.cap.max_recv_wr = 1;  // none posted: reads and atomics consume no receive
        qa.cap.max_send_sge = 1;
        qa.cap.max_recv_sge = 1;
        qps_[p] = ibv_create_qp(pd, &qa);
        if (!qps_[p])
            return WEFT_FAIL(WEFT_ERR_TRANSPORT, "verbs observer: ibv_create_qp (peer %u): %s", p,
                             std::strerror(errno));
        ibv_qp_attr a{};
        a.qp_state = IBV_QPS_INIT;
        a.pkey_index = 0;
        a.port_num = port;
        // As a responder it serves the peers' observers.
        a.qp_access_flags = IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
        if (ibv_modify_qp(qps_[p], &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) != 0)
            return WEFT_FAIL(WEFT_ERR_TRANSPORT, "verbs observer: QP to peer %u -> INIT: %s", p, std::strerror(errno));
    }
    return WEFT_OK;
}

void VerbsObserver::bind(const weft_window& sw) {
    addr_.assign(qps_.size(), 0);
    rkey_.assign(qps_.size(), 0);
    for (uint32_t r = 0; r < sw.nranks && r < qps_.size(); ++r) {
        addr_[r] = sw.remote[r].addr;
        rkey_[r] = sw.remote[r].rkey32;
    }
}

void VerbsObserver::reap() {
    ibv_wc wc[8];
    int n;
    while ((n = ibv_poll_cq(cq_, 8, wc)) > 0) {
        for (int i = 0; i < n; ++i) {
            const uint32_t p = static_cast<uint32_t>(wc[i].wr_id);
            if (p >= busy_.size()) continue;
            busy_[p] = 0;
            if (wc[i].status != IBV_WC_SUCCESS && !dead_[p]) {
                char why[128];
                std::snprintf(why, sizeof why, "verbs observer: read/atomic failed: %s (vendor error 0x%x)",
                              ibv_wc_status_str(wc[i].status), wc[i].vendor_err);
                broke(p, why);
            }
        }
    }
}

void VerbsObserver::close(uint32_t p) {
    if (p >= qps_.size() || !qps_[p] || dead_[p].exchange(true)) return;
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_ERR;
    ibv_modify_qp(qps_[p], &a, IBV_QP_STATE);
}

void VerbsObserver::broke(uint32_t p, const char* why) {
    close(p);  // after close() by peer_failed: the declaration is a no-op
    rt_.declare_failed(p, why);
}

Status VerbsObserver::run(uint32_t p, ibv_send_wr& wr, uint64_t& out, Deadline d) {
    if (p >= addr_.size() || !rkey_[p] || p == rt_.rank())
        return WEFT_FAIL(WEFT_ERR_INVALID_ARG, "verbs observer: no state window of peer %u", p);
    // The answer comes from the peer's NIC, not its CPU: poll, yielding.
    auto wait_idle = [&] {
        for (;;) {
            reap();
            if (!busy_[p] || dead_[p]) return true;
            if (d.passed()) return false;
            std::this_thread::yield();
        }
    };
    if (!wait_idle()) return WEFT_ERR_TIMEOUT;  // the previous answer is still out
    if (dead_[p]) return WEFT_ERR_PEER_FAILED;
    ibv_sge sge{reinterpret_cast<uint64_t>(&results_[p]), 8, results_mr_->lkey};
    wr.wr_id = p;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.next = nullptr;
    ibv_send_wr* bad = nullptr;
    const int rc = ibv_post_send(qps_[p], &wr, &bad);
    if (rc != 0) {
        char why[96];
        std::snprintf(why, sizeof why, "verbs observer: ibv_post_send: %s", std::strerror(rc));
        broke(p, why);
        return WEFT_ERR_PEER_FAILED;
    }
    busy_[p] = 1;
    if (!wait_idle()) return WEFT_ERR_TIMEOUT;
    if (dead_[p]) return WEFT_ERR_PEER_FAILED;
    out = std::atomic_ref<uint64_t>(results_[p]).load(std::memory_order_acquire);
    return WEFT_OK;
}

Status VerbsObserver::read(uint32_t p, uint64_t off, uint64_t& v, Deadline d) {
    ibv_send_wr wr{};
    wr.opcode = IBV_WR_RDMA_READ;
    if (p < addr_.size()) {
        wr.wr.rdma.remote_addr = addr_[p] + off;
        wr.wr.rdma.rkey = rkey_[p];
    }
    return run(p, wr, v, d);
}

Status VerbsObserver::atomic(ibv_wr_opcode op, uint32_t p, uint64_t off, uint64_t compare_add, uint64_t swap,
                             uint64_t& old, Deadline d) {
    ibv_send_wr wr{};
    wr.opcode = op;
    if (p < addr_.size()) {
        wr.wr.atomic.remote_addr = addr_[p] + off;
        wr.wr.atomic.rkey = rkey_[p];
    }
    wr.wr.atomic.compare_add = compare_add;
    wr.wr.atomic.swap = swap;
    return run(p, wr, old, d);
}

Status VerbsObserver::compare_swap(uint32_t p, uint64_t off, uint64_t expected, uint64_t desired, uint64_t& old,
                                   Deadline d) {
    return atomic(IBV_WR_ATOMIC_CMP_AND_SWP, p, off, expected, desired, old, d);
}

Status VerbsObserver::fetch_add(uint32_t p, uint64_t off, uint64_t add, uint64_t& old, Deadline d) {
    return atomic(IBV_WR_ATOMIC_FETCH_AND_ADD, p, off, add, 0, old, d);
}

}  // namespace weft::verbs

#endif  // WEFT_HAVE_VERBS
