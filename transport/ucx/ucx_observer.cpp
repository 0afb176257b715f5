// ucx_observer.cpp — the failure detector's UCX path (see ucx_observer.hpp).
#include <weft/config.hpp>

#if WEFT_HAVE_UCX

#include "transport/ucx/ucx_observer.hpp"

#include <cstdio>

namespace weft {

size_t finish_ep_closes(ucp_worker_h worker, std::vector<ucs_status_ptr_t>& closing, Deadline d) {
    Backoff backoff;
    while (!closing.empty() && !d.passed()) {
        ucp_worker_progress(worker);
        std::erase_if(closing, [](ucs_status_ptr_t r) {
            if (ucp_request_check_status(r) == UCS_INPROGRESS) return false;
            ucp_request_free(r);
            return true;
        });
        backoff.pause();
    }
    const size_t left = closing.size();
    for (ucs_status_ptr_t r : closing) ucp_request_free(r);
    closing.clear();
    return left;
}

Status wire_up(ucp_worker_h worker, const std::vector<ucp_ep_h>& eps, Deadline d, const char* who) {
    std::vector<ucs_status_ptr_t> reqs(eps.size(), nullptr);
    Status result = WEFT_OK;
    for (size_t i = 0; i < eps.size(); ++i) {
        if (!eps[i]) continue;
        ucp_request_param_t prm;
        prm.op_attr_mask = 0;
        const ucs_status_ptr_t r = ucp_ep_flush_nbx(eps[i], &prm);
        if (UCS_PTR_IS_ERR(r)) {
            if (result == WEFT_OK)
                result = WEFT_FAIL(WEFT_ERR_PEER_FAILED, "%s: wire-up of the endpoint to peer %zu: %s", who, i,
                                   ucs_status_string(UCS_PTR_STATUS(r)));
            continue;
        }
        reqs[i] = r;
    }
    Backoff backoff;
    for (;;) {
        const unsigned events = ucp_worker_progress(worker);
        size_t left = 0;
        for (size_t i = 0; i < reqs.size(); ++i) {
            if (!reqs[i]) continue;
            const ucs_status_t s = ucp_request_check_status(reqs[i]);
            if (s == UCS_INPROGRESS) {
                ++left;
                continue;
            }
            ucp_request_free(reqs[i]);
            reqs[i] = nullptr;
            if (s != UCS_OK && result == WEFT_OK)
                result = WEFT_FAIL(WEFT_ERR_PEER_FAILED, "%s: wire-up of the endpoint to peer %zu: %s", who, i,
                                   ucs_status_string(s));
        }
        if (left == 0) return result;
        if (d.passed()) {
            for (size_t i = 0; i < reqs.size(); ++i) {
                if (!reqs[i]) continue;
                if (result == WEFT_OK)
                    result = WEFT_FAIL(WEFT_ERR_TIMEOUT,
                                       "%s: the endpoint to peer %zu was not wired up by the deadline "
                                       "(%zu endpoints left; is the peer progressing?)",
                                       who, i, left);
                ucp_request_free(reqs[i]);  // UCX finishes it; nothing of ours is in it
            }
            return result;
        }
        if (events == 0) backoff.pause();
    }
}

void force_close_ep(ucp_ep_h& ep, std::vector<ucs_status_ptr_t>& closing) {
    if (!ep) return;
    ucp_request_param_t prm;
    prm.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    prm.flags = UCP_EP_CLOSE_FLAG_FORCE;
    ucs_status_ptr_t r = ucp_ep_close_nbx(ep, &prm);
    if (r && !UCS_PTR_IS_ERR(r)) closing.push_back(r);
    ep = nullptr;
}

Status worker_address(ucp_worker_h worker, std::vector<uint8_t>& out) {
    ucp_address_t* addr = nullptr;
    size_t len = 0;
    const ucs_status_t s = ucp_worker_get_address(worker, &addr, &len);
    if (s != UCS_OK) return WEFT_FAIL(WEFT_ERR_TRANSPORT, "ucp_worker_get_address: %s", ucs_status_string(s));
    out.assign(reinterpret_cast<uint8_t*>(addr), reinterpret_cast<uint8_t*>(addr) + len);
    ucp_worker_release_address(worker, addr);
    return WEFT_OK;
}

Status create_ep(ucp_worker_h worker, const uint8_t* address, bool peer_err_mode, ucp_err_handler_cb_t cb, void* arg,
                 ucp_ep_h& out) {
    ucp_ep_params_t ep;
    ep.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
    ep.address = reinterpret_cast<const ucp_address_t*>(address);
    ep.err_mode = peer_err_mode ? UCP_ERR_HANDLING_MODE_PEER : UCP_ERR_HANDLING_MODE_NONE;
    if (peer_err_mode) {
        ep.field_mask |= UCP_EP_PARAM_FIELD_ERR_HANDLER;
        ep.err_handler.cb = cb;
        ep.err_handler.arg = arg;
    }
    const ucs_status_t s = ucp_ep_create(worker, &ep, &out);
    return s == UCS_OK ? WEFT_OK : WEFT_FAIL(WEFT_ERR_TRANSPORT, "ucp_ep_create: %s", ucs_status_string(s));
}

UcxObserver::~UcxObserver() {
    if (!worker_) return;
    // finalize's barrier already met every live peer: force-close (as the
    // backend does with its own endpoints).
    for (uint32_t i = 0; i < npeers_; ++i) shut(peers_[i]);
    if (const size_t left = finish_ep_closes(worker_, closing_, Deadline::after_ns(2'000'000'000ull)))
        WEFT_LOG(warn, "ucx observer: %zu endpoints did not close in 2 s", left);
    ucp_worker_destroy(worker_);
}

Status UcxObserver::create(uint32_t npeers, std::vector<uint8_t> err_mode, std::vector<uint8_t>& address) {
    ucp_worker_params_t wp;
    wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    wp.thread_mode = UCS_THREAD_MODE_SINGLE;  // the detector thread only (and init before it starts)
    const ucs_status_t s = ucp_worker_create(context_, &wp, &worker_);
    if (s != UCS_OK) return WEFT_FAIL(WEFT_ERR_TRANSPORT, "ucx observer: ucp_worker_create: %s", ucs_status_string(s));
    Status st = worker_address(worker_, address);
    if (st != WEFT_OK) return st;
    npeers_ = npeers;
    addresses_.assign(npeers, {});
    peers_ = std::make_unique<Peer[]>(npeers);
    for (uint32_t i = 0; i < npeers; ++i) {
        peers_[i].self = this;
        peers_[i].index = i;
        peers_[i].err_mode = i < err_mode.size() && err_mode[i];
    }
    return WEFT_OK;
}

Status UcxObserver::bind(const weft_window& sw, const std::vector<std::vector<uint8_t>>& packed) {
    bound_ = true;
    for (uint32_t r = 0; r < sw.nranks && r < npeers_ && r < packed.size(); ++r) {
        Peer& p = peers_[r];
        if (r == rt_.rank() || addresses_[r].empty() || packed[r].empty()) continue;
        Status st = create_ep(worker_, addresses_[r].data(), p.err_mode, on_ep_error, &p, p.ep);
        if (st != WEFT_OK) return WEFT_FAIL(st, "ucx observer: no endpoint to peer %u", r);
        p.addr = sw.remote[r].addr;
        const ucs_status_t s = ucp_ep_rkey_unpack(p.ep, packed[r].data(), &p.rkey);
        if (s != UCS_OK)
            return WEFT_FAIL(WEFT_ERR_TRANSPORT, "ucx observer: ucp_ep_rkey_unpack for rank %u: %s", r,
                             ucs_status_string(s));
    }
    addresses_ = {};
    // Every peer binds in its init too (before the job's init barrier), and
    // progresses its detector worker while it waits here: see wire_up.
    std::vector<ucp_ep_h> eps(npeers_, nullptr);
    for (uint32_t r = 0; r < npeers_; ++r) eps[r] = peers_[r].ep;
    // Not fatal: an endpoint left unwired connects at its first use, and a
    // peer that died here fails the job's init barrier anyway.
    wire_up(worker_, eps, rt_.op_deadline(), "ucx observer");
    return WEFT_OK;
}

void UcxObserver::on_ep_error(void* arg, ucp_ep_h, ucs_status_t status) {
    // Inside ucp_worker_progress on the detector thread: mark and report.
    auto* p = static_cast<Peer*>(arg);
    char why[96];
    std::snprintf(why, sizeof why, "ucx observer endpoint error: %s", ucs_status_string(status));
    p->self->broke(*p, why);
}

void UcxObserver::broke(Peer& p, const char* why) {
    if (p.dead.exchange(true)) return;
    rt_.declare_failed(p.index, why);
}

bool UcxObserver::settle(Peer& p) {
    if (!p.req) return true;
    const ucs_status_t s = ucp_request_check_status(p.req);
    if (s == UCS_INPROGRESS) return false;
    ucp_request_free(p.req);
    p.req = nullptr;
    if (s != UCS_OK) {
        char why[96];
        std::snprintf(why, sizeof why, "ucx observer: operation failed: %s", ucs_status_string(s));
        broke(p, why);
    }
    return true;
}

void UcxObserver::shut(Peer& p) {
    // The slot outlives the worker, so a freed request may still land in it.
    if (p.req) ucp_request_free(p.req);
    p.req = nullptr;
    p.dead.store(true);
    // The close cancels a request still out, which may use the key until
    // then: the key goes after (UCX asks for it before the endpoint goes, a
    // rule no order can keep with an operation in flight to a dead peer).
    force_close_ep(p.ep, closing_);
    if (p.rkey) ucp_rkey_destroy(p.rkey);
    p.rkey = nullptr;
}

size_t UcxObserver::quiesce(Deadline d) {
    Backoff backoff;
    for (;;) {
        serve();
        size_t out = 0;
        for (uint32_t i = 0; i < npeers_; ++i)
            if (!peers_[i].dead.load() && !settle(peers_[i])) ++out;
        if (out == 0 || d.passed()) return out;
        backoff.pause();
    }
}

void UcxObserver::serve() {
    for (int i = 0; i < 64 && ucp_worker_progress(worker_); ++i) {
    }
    // A declared peer's endpoint is closed now only where both sides have
    // peer error handling (ucp.h: a force-close is undefined otherwise);
    // else it stays, unused, until the destructor (as the backend's own).
    if (!close_pending_.exchange(false, std::memory_order_acq_rel)) return;
    for (uint32_t i = 0; i < npeers_; ++i) {
        Peer& p = peers_[i];
        if (!p.close_wanted.load(std::memory_order_acquire)) continue;
        p.dead.store(true);
        if (p.ep && p.err_mode) shut(p);
    }
}

Status UcxObserver::run(uint32_t peer, Op op, uint64_t off, uint64_t a, uint64_t b, uint64_t& out, Deadline d) {
    if (peer >= npeers_ || !peers_[peer].rkey)
        return WEFT_FAIL(WEFT_ERR_INVALID_ARG, "ucx observer: no state window of peer %u", peer);
    Peer& p = peers_[peer];
    // The answer may need the peer's detector thread (emulation): poll our
    // worker, backing off (an oversubscribed core is shared with the
    // application), until it comes or the deadline passes.
    auto wait = [&] {
        Backoff backoff;
        for (;;) {
            ucp_worker_progress(worker_);
            if (p.dead.load() || settle(p)) return true;
            if (d.passed()) return false;
            backoff.pause();
        }
    };
    if (!wait()) return WEFT_ERR_TIMEOUT;  // the previous answer is still out
    if (p.dead.load() || p.close_wanted.load()) return WEFT_ERR_PEER_FAILED;
    ucp_request_param_t prm;
    prm.op_attr_mask = 0;
    ucs_status_ptr_t r;
    if (op == Op::get) {
        r = ucp_get_nbx(p.ep, &p.reply, 8, p.addr + off, p.rkey, &prm);
    } else {
        // CSWAP: operand = compare value, reply = swap value in / old out.
        p.operand = a;
        p.reply = b;
        prm.op_attr_mask = UCP_OP_ATTR_FIELD_DATATYPE | UCP_OP_ATTR_FIELD_REPLY_BUFFER;
        prm.datatype = ucp_dt_make_contig(8);
        prm.reply_buffer = &p.reply;
        r = ucp_atomic_op_nbx(p.ep, op == Op::cswap ? UCP_ATOMIC_OP_CSWAP : UCP_ATOMIC_OP_ADD, &p.operand, 1,
                              p.addr + off, p.rkey, &prm);
    }
    if (UCS_PTR_IS_ERR(r)) {
        char why[96];
        std::snprintf(why, sizeof why, "ucx observer: %s", ucs_status_string(UCS_PTR_STATUS(r)));
        broke(p, why);
        return WEFT_ERR_PEER_FAILED;
    }
    p.req = r;
    if (r && !wait()) return WEFT_ERR_TIMEOUT;
    if (p.dead.load()) return WEFT_ERR_PEER_FAILED;
    out = p.reply;
    return WEFT_OK;
}

Status UcxObserver::read(uint32_t peer, uint64_t off, uint64_t& v, Deadline d) {
    return run(peer, Op::get, off, 0, 0, v, d);
}

Status UcxObserver::compare_swap(uint32_t peer, uint64_t off, uint64_t expected, uint64_t desired, uint64_t& old,
                                 Deadline d) {
    return run(peer, Op::cswap, off, expected, desired, old, d);
}

Status UcxObserver::fetch_add(uint32_t peer, uint64_t off, uint64_t add, uint64_t& old, Deadline d) {
    return run(peer, Op::add, off, add, 0, old, d);
}

}  // namespace weft

#endif  // WEFT_HAVE_UCX
