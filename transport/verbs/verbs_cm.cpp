// verbs_cm.cpp — connecting RC QPs through rdma_cm (see verbs_cm.hpp).
#include <weft/config.hpp>

#if WEFT_HAVE_VERBS

#include "transport/verbs/verbs_cm.hpp"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <poll.h>

#if WEFT_HAVE_RDMACM
#include <rdma/rdma_cma.h>
#endif

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <unordered_map>

namespace weft::verbs {

Status connect_mode_from_env(ConnectMode& out) {
    const std::string v = env_string("WEFT_VERBS_CONNECT", "exchange");
    if (v == "exchange")
        out = ConnectMode::exchange;
    else if (v == "rdma_cm")
        out = ConnectMode::rdma_cm;
    else
        return WEFT_FAIL(WEFT_ERR_INVALID_ARG, "WEFT_VERBS_CONNECT=%s: expected exchange or rdma_cm", v.c_str());
    return WEFT_OK;
}

std::string cm_address_text(const CmAddress& a) {
    char buf[INET6_ADDRSTRLEN] = "?";
    if (a.family == AF_INET || a.family == AF_INET6) inet_ntop(a.family, a.addr, buf, sizeof buf);
    if (a.port_be == 0) return buf;
    const std::string host = a.family == AF_INET6 ? "[" + std::string(buf) + "]" : std::string(buf);
    return host + ":" + std::to_string(ntohs(a.port_be));
}

namespace {

bool is_loopback(const CmAddress& a) {
    if (a.family == AF_INET) return a.addr[0] == 127;
    static const uint8_t v6_loopback[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
    return std::memcmp(a.addr, v6_loopback, 16) == 0;
}

// The IPv4 address of one of the device's network interfaces (IPoIB on
// InfiniBand: /sys/class/infiniband/DEV/device/net/IFNAME).
bool interface_ipv4(const std::string& dev_name, CmAddress& out) {
    const std::string dir = "/sys/class/infiniband/" + dev_name + "/device/net";
    DIR* d = opendir(dir.c_str());
    if (!d) return false;
    std::vector<std::string> names;
    while (dirent* e = readdir(d))
        if (e->d_name[0] != '.') names.emplace_back(e->d_name);
    closedir(d);
    ifaddrs* all = nullptr;
    if (getifaddrs(&all) != 0) return false;
    bool found = false;
    for (ifaddrs* i = all; i && !found; i = i->ifa_next) {
        if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET) continue;
        if (std::find(names.begin(), names.end(), i->ifa_name) == names.end()) continue;
        out.family = AF_INET;
        std::memcpy(out.addr, &reinterpret_cast<const sockaddr_in*>(i->ifa_addr)->sin_addr, 4);
        found = true;
    }
    freeifaddrs(all);
    return found;
}

}  // namespace

bool cm_address_of(const Device& dev, CmAddress& out, std::string& why) {
    out = CmAddress{};
    const std::string forced = env_string("WEFT_VERBS_CM_ADDR", "");
    if (!forced.empty()) {
        if (inet_pton(AF_INET, forced.c_str(), out.addr) == 1)
            out.family = AF_INET;
        else if (inet_pton(AF_INET6, forced.c_str(), out.addr) == 1)
            out.family = AF_INET6;
        else
            return why = "WEFT_VERBS_CM_ADDR=" + forced + " is not an IP address", false;
    } else if (dev.roce) {
        // A RoCE v2 GID is the interface's IP address.
        if (gid_is_ipv4_mapped(dev.gid)) {
            out.family = AF_INET;
            std::memcpy(out.addr, dev.gid.raw + 12, 4);
        } else if (!gid_is_link_local(dev.gid)) {
            out.family = AF_INET6;
            std::memcpy(out.addr, dev.gid.raw, 16);
        } else {
            return why = dev.name + "'s GID is link-local (no IP address on its interface?): set WEFT_VERBS_CM_ADDR",
                   false;
        }
    } else if (!interface_ipv4(dev.name, out)) {
        return why = "no IPv4 address on " + dev.name + "'s IPoIB interface: set WEFT_VERBS_CM_ADDR", false;
    }
    if (is_loopback(out))
        return why = dev.name + "'s address " + cm_address_text(out) +
                     " is a loopback address, which rdma_cm cannot route (is the device on the lo interface?): use a "
                     "device on an IP interface, or WEFT_VERBS_CONNECT=exchange",
               false;
    return true;
}

Status cm_local_address(const Device& dev, CmAddress& out) {
    std::string why;
    if (!cm_address_of(dev, out, why)) return WEFT_FAIL(WEFT_ERR_UNSUPPORTED, "verbs rdma_cm: %s", why.c_str());
    return WEFT_OK;
}

#if WEFT_HAVE_RDMACM

namespace {

constexpr uint32_t hello_magic = 0x77656674;  // "weft"
constexpr int resolve_ms_max = 5000;

// The active side's private data: who is asking, for which QP.
struct Hello {
    uint32_t magic;
    uint32_t universe;
    uint32_t role;
    uint32_t pad;
};

sockaddr_storage to_sockaddr(const CmAddress& a) {
    sockaddr_storage ss{};
    if (a.family == AF_INET) {
        auto* s = reinterpret_cast<sockaddr_in*>(&ss);
        s->sin_family = AF_INET;
        s->sin_port = a.port_be;
        std::memcpy(&s->sin_addr, a.addr, 4);
    } else {
        auto* s = reinterpret_cast<sockaddr_in6*>(&ss);
        s->sin6_family = AF_INET6;
        s->sin6_port = a.port_be;
        std::memcpy(&s->sin6_addr, a.addr, 16);
    }
    return ss;
}

int resolve_ms(const Deadline& d) {
    return static_cast<int>(std::clamp<uint64_t>(d.remaining_ns() / 1000000, 1, resolve_ms_max));
}

}  // namespace

// One connection being made: ours is `link`; `id` is its rdma_cm_id once
// there is one.
struct Pending {
    CmLink link{};
    bool active = false;
    bool done = false;
    rdma_cm_id* id = nullptr;
};

struct CmConnector::State {
    const Device* dev = nullptr;
    CmAddress local{};
    rdma_event_channel* channel = nullptr;
    rdma_cm_id* listener = nullptr;
    std::vector<rdma_cm_id*> ids;  // every connection's, kept until the end
};

CmConnector::CmConnector() : s_(std::make_unique<State>()) {}

CmConnector::~CmConnector() {
    for (rdma_cm_id* id : s_->ids) rdma_destroy_id(id);
    if (s_->listener) rdma_destroy_id(s_->listener);
    if (s_->channel) rdma_destroy_event_channel(s_->channel);
}

Status CmConnector::listen(const Device& dev, CmAddress& local) {
    s_->dev = &dev;
    s_->channel = rdma_create_event_channel();
    if (!s_->channel)
        return WEFT_FAIL(WEFT_ERR_TRANSPORT, "verbs rdma_cm: rdma_create_event_channel: %s (is rdma_ucm loaded?)",
                         std::strerror(errno));
    // Non-blocking: connect_all polls the channel with its deadline.
    fcntl(s_->channel->fd, F_SETFL, fcntl(s_->channel->fd, F_GETFL) | O_NONBLOCK);
    if (rdma_create_id(s_->channel, &s_->listener, nullptr, RDMA_PS_TCP) != 0)
        return WEFT_FAIL(WEFT_ERR_TRANSPORT, "verbs rdma_cm: rdma_create_id: %s", std::strerror(errno));
    local.port_be = 0;
    sockaddr_storage sa = to_sockaddr(local);
    if (rdma_bind_addr(s_->listener, reinterpret_cast<sockaddr*>(&sa)) != 0)
        return WEFT_FAIL(WEFT_ERR_TRANSPORT, "verbs rdma_cm: cannot bind to %s: %s", cm_address_text(local).c_str(),
                         std::strerror(errno));
    // The address decides the device: it must be the one weft opened.
    if (s_->listener->verbs != dev.ctx)
        return WEFT_FAIL(
            WEFT_ERR_INVALID_ARG, "verbs rdma_cm: %s belongs to device %s, not %s", cm_address_text(local).c_str(),
            s_->listener->verbs ? ibv_get_device_name(s_->listener->verbs->device) : "(none)", dev.name.c_str());
    if (rdma_listen(s_->listener, 1024) != 0)
        return WEFT_FAIL(WEFT_ERR_TRANSPORT, "verbs rdma_cm: rdma_listen on %s: %s", cm_address_text(local).c_str(),
                         std::strerror(errno));
    local.port_be = rdma_get_src_port(s_->listener);
    s_->local = local;
    WEFT_LOG(debug, "verbs rdma_cm: listening on %s (%s)", cm_address_text(local).c_str(), dev.name.c_str());
    return WEFT_OK;
}

namespace {

// Our QP to RTR and RTS with the attributes rdma_cm negotiated for id, and
// weft's own timeouts and retries (a dead peer must surface in the same
// time as without rdma_cm). `responder` and `initiator`: RDMA reads and
// atomics in flight, as agreed. Returns nullptr, or the step that failed
// (errno says why): the caller reports it naming the link, like every
// other failure of a connection.
const char* ready_qp(rdma_cm_id* id, ibv_qp* qp, const CmQpTuning& t, uint8_t responder, uint8_t initiator) {
    ibv_qp_attr a{};
    int mask = 0;
    a.qp_state = IBV_QPS_RTR;
    if (rdma_init_qp_attr(id, &a, &mask) != 0) return "rdma_init_qp_attr(RTR)";
    a.max_dest_rd_atomic = responder;
    if (ibv_modify_qp(qp, &a, mask) != 0) return "ibv_modify_qp(RTR)";
    a = ibv_qp_attr{};
    a.qp_state = IBV_QPS_RTS;
    if (rdma_init_qp_attr(id, &a, &mask) != 0) return "rdma_init_qp_attr(RTS)";
    a.timeout = t.timeout;
    a.retry_cnt = t.retry_cnt;
    a.rnr_retry = t.rnr_retry;
    a.max_rd_atomic = initiator;
    mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
    if (ibv_modify_qp(qp, &a, mask) != 0) return "ibv_modify_qp(RTS)";
    return nullptr;
}

const char* role_name(uint32_t role) { return role == 0 ? "application" : "detector"; }

}  // namespace

Status CmConnector::connect_all(uint32_t self_universe, const std::vector<CmLink>& links,
                                const std::vector<CmAddress>& remote, const CmQpTuning& tuning, Deadline deadline) {
    State& s = *s_;
    std::vector<Pending> pend(links.size());
    std::unordered_map<uint64_t, size_t> awaited;  // (universe, role) -> passive link
    size_t left = 0;
    for (size_t i = 0; i < links.size(); ++i) {
        Pending& p = pend[i];
        p.link = links[i];
        if (p.link.universe == self_universe || p.link.universe >= remote.size())
            return WEFT_FAIL(WEFT_ERR_INVALID_ARG, "verbs rdma_cm: no connection to make to peer %u", p.link.universe);
        ++left;
        p.active = self_universe < p.link.universe;
        if (!p.active) {
            awaited[uint64_t(p.link.universe) << 1 | p.link.role] = i;
            continue;
        }
        if (rdma_create_id(s.channel, &p.id, &p, RDMA_PS_TCP) != 0)
            return WEFT_FAIL(WEFT_ERR_TRANSPORT, "verbs rdma_cm: rdma_create_id: %s", std::strerror(errno));
        s.ids.push_back(p.id);
        // From our own address: the route must leave through our device.
        CmAddress from = s.local;
        from.port_be = 0;
        sockaddr_storage src = to_sockaddr(from);
        sockaddr_storage dst = to_sockaddr(remote[p.link.universe]);
        if (rdma_resolve_addr(p.id, reinterpret_cast<sockaddr*>(&src), reinterpret_cast<sockaddr*>(&dst),
                              resolve_ms(deadline)) != 0)
            return WEFT_FAIL(WEFT_ERR_TRANSPORT, "verbs rdma_cm: resolving %s (peer %u): %s",
                             cm_address_text(remote[p.link.universe]).c_str(), p.link.universe, std::strerror(errno));
    }

    auto fail = [&](const Pending& p, const char* what, int status) {
        return WEFT_FAIL(WEFT_ERR_TRANSPORT, "verbs rdma_cm: %s QP %s peer %u at %s: %s (status %d)",
                         role_name(p.link.role), p.active ? "to" : "from", p.link.universe,
                         cm_address_text(remote[p.link.universe]).c_str(), what, status);
    };
    // A call that failed with errno set, for the same link.
    auto fail_call = [&](const Pending& p, const char* call) {
        const int err = errno;
        return WEFT_FAIL(WEFT_ERR_TRANSPORT, "verbs rdma_cm: %s QP %s peer %u at %s: %s: %s", role_name(p.link.role),
                         p.active ? "to" : "from", p.link.universe, cm_address_text(remote[p.link.universe]).c_str(),
                         call, std::strerror(err));
    };
    const uint8_t our_resp = tuning.rd_atomic, our_init = tuning.rd_atomic;

    while (left > 0) {
        rdma_cm_event* ev = nullptr;
        if (rdma_get_cm_event(s.channel, &ev) != 0) {
            if (errno != EAGAIN && errno != EWOULDBLOCK)
                return WEFT_FAIL(WEFT_ERR_TRANSPORT, "verbs rdma_cm: rdma_get_cm_event: %s", std::strerror(errno));
            if (deadline.passed()) {
                for (const Pending& p : pend)
                    if (!p.done)
                        return WEFT_FAIL(WEFT_ERR_TIMEOUT,
                                         "verbs rdma_cm: %zu connection(s) not made in time, among them the %s QP "
                                         "%s peer %u at %s",
                                         left, role_name(p.link.role), p.active ? "to" : "from", p.link.universe,
                                         cm_address_text(remote[p.link.universe]).c_str());
            }
            pollfd pfd{s.channel->fd, POLLIN, 0};
            poll(&pfd, 1, static_cast<int>(std::min<uint64_t>(deadline.remaining_ns() / 1000000 + 1, 100)));
            continue;
        }
        Status st = WEFT_OK;
        const int status = ev->status;
        if (ev->event == RDMA_CM_EVENT_CONNECT_REQUEST) {
            // A peer's request on our listener: find which of our QPs it is for.
            rdma_cm_id* id = ev->id;
            s.ids.push_back(id);
            Hello h{};
            const auto& conn = ev->param.conn;
            if (conn.private_data && conn.private_data_len >= sizeof h) std::memcpy(&h, conn.private_data, sizeof h);
            auto it =
                h.magic == hello_magic && h.role < 2 ? awaited.find(uint64_t(h.universe) << 1 | h.role) : awaited.end();
            if (it == awaited.end() || pend[it->second].done || pend[it->second].id) {
                WEFT_LOG(warn,
                         "verbs rdma_cm: rejected a connection request (magic %#x, peer %u, role %u) that "
                         "this process does not expect",
                         h.magic, h.universe, h.role);
                rdma_reject(id, nullptr, 0);
            } else {
                Pending& p = pend[it->second];
                p.id = id;
                id->context = &p;
                const uint8_t resp = std::min<uint8_t>(our_resp, conn.responder_resources);
                const uint8_t init = std::min<uint8_t>(our_init, conn.initiator_depth);
                if (const char* step = ready_qp(id, p.link.qp, tuning, resp, init)) st = fail_call(p, step);
                if (st == WEFT_OK) {
                    rdma_conn_param cp{};
                    cp.responder_resources = resp;
                    cp.initiator_depth = init;
                    cp.rnr_retry_count = tuning.rnr_retry;
                    cp.qp_num = p.link.qp->qp_num;
                    if (rdma_accept(id, &cp) != 0) st = fail_call(p, "rdma_accept");
                }
            }
        } else {
            Pending* p = ev->id ? static_cast<Pending*>(ev->id->context) : nullptr;
            if (!p) {
                // An event of the listener's, or of a rejected request's id.
            } else if (ev->event == RDMA_CM_EVENT_ADDR_RESOLVED) {
                if (rdma_resolve_route(p->id, resolve_ms(deadline)) != 0) st = fail_call(*p, "rdma_resolve_route");
            } else if (ev->event == RDMA_CM_EVENT_ROUTE_RESOLVED) {
                if (p->id->verbs != s.dev->ctx) {
                    st = fail(*p,
                              "the route leaves through another device (set WEFT_VERBS_DEVICE or "
                              "WEFT_VERBS_CM_ADDR)",
                              0);
                } else {
                    Hello h{hello_magic, self_universe, p->link.role, 0};
                    rdma_conn_param cp{};
                    cp.private_data = &h;
                    cp.private_data_len = sizeof h;
                    cp.responder_resources = our_resp;
                    cp.initiator_depth = our_init;
                    cp.retry_count = tuning.retry_cnt;
                    cp.rnr_retry_count = tuning.rnr_retry;
                    cp.flow_control = 1;
                    cp.qp_num = p->link.qp->qp_num;
                    if (rdma_connect(p->id, &cp) != 0) st = fail_call(*p, "rdma_connect");
                }
            } else if (ev->event == RDMA_CM_EVENT_CONNECT_RESPONSE) {
                // The peer accepted: our QP to RTR/RTS, then the RTU.
                const auto& conn = ev->param.conn;
                if (const char* step =
                        ready_qp(p->id, p->link.qp, tuning, std::min<uint8_t>(our_resp, conn.responder_resources),
                                 std::min<uint8_t>(our_init, conn.initiator_depth)))
                    st = fail_call(*p, step);
                if (st == WEFT_OK && rdma_establish(p->id) != 0) st = fail_call(*p, "rdma_establish");
                if (st == WEFT_OK && !p->done) {
                    p->done = true;
                    --left;
                }
            } else if (ev->event == RDMA_CM_EVENT_ESTABLISHED) {
                if (!p->done) {
                    p->done = true;
                    --left;
                }
            } else if (ev->event == RDMA_CM_EVENT_ADDR_ERROR || ev->event == RDMA_CM_EVENT_ROUTE_ERROR ||
                       ev->event == RDMA_CM_EVENT_CONNECT_ERROR || ev->event == RDMA_CM_EVENT_UNREACHABLE ||
                       ev->event == RDMA_CM_EVENT_REJECTED || ev->event == RDMA_CM_EVENT_DISCONNECTED ||
                       ev->event == RDMA_CM_EVENT_DEVICE_REMOVAL) {
                st = fail(*p, rdma_event_str(ev->event), status);
            }
        }
        rdma_ack_cm_event(ev);
        if (st != WEFT_OK) return st;
    }
    // The ids outlive `pend`: nothing may find a Pending through them later.
    for (Pending& p : pend)
        if (p.id) p.id->context = nullptr;
    WEFT_LOG(debug, "verbs rdma_cm: %zu QPs connected", links.size());
    return WEFT_OK;
}

#else  // !WEFT_HAVE_RDMACM

struct CmConnector::State {};
CmConnector::CmConnector() : s_(std::make_unique<State>()) {}
CmConnector::~CmConnector() = default;
Status CmConnector::listen(const Device&, CmAddress&) {
    return WEFT_FAIL(WEFT_ERR_UNSUPPORTED, "verbs: this build of weft has no librdmacm (WEFT_VERBS_CONNECT=rdma_cm)");
}
Status CmConnector::connect_all(uint32_t, const std::vector<CmLink>&, const std::vector<CmAddress>&, const CmQpTuning&,
                                Deadline) {
    return WEFT_ERR_UNSUPPORTED;
}

#endif  // WEFT_HAVE_RDMACM

}  // namespace weft::verbs

#endif  // WEFT_HAVE_VERBS
