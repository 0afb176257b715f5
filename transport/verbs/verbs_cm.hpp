// verbs_cm.hpp — connecting the verbs backend's RC QPs through the RDMA
// connection manager (WEFT_VERBS_CONNECT=rdma_cm) instead of by QP numbers
// exchanged over the bootstrap (the default, WEFT_VERBS_CONNECT=exchange).
//
// Why rdma_cm: the kernel resolves the path — GID index, RoCE version, VLAN,
// IB path record from the subnet administrator — from an IP address, and
// the two sides agree on PSNs and RDMA-read resources through the standard
// CM protocol, as every other rdma_cm application on the fabric does.
//
// How weft uses it (control path, once, during init):
//   * the device context is librdmacm's own (open_device(from_rdmacm)), so
//     the QPs weft creates live where the rdma_cm_ids are bound;
//   * every process listens on its device's IP address (cm_local_address)
//     and publishes address and port in its bootstrap connection record —
//     the bootstrap stays the name service, rdma_cm does the connecting;
//   * of two processes, the one with the lower universe index connects,
//     once per QP role (application, failure detector), naming the role in
//     the private data; the QPs are weft's own ("external" to rdma_cm):
//     each side moves its QP to RTR and RTS with the attributes
//     rdma_init_qp_attr gives, then the active side calls rdma_establish;
//   * a process's loopback QPs need no address and are connected directly.
// The rdma_cm_ids live until the backend is destroyed: destroying one
// sends the peer a disconnect request.
#pragma once

#include "transport/common.hpp"
#include "transport/verbs/verbs_device.hpp"

#include <infiniband/verbs.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace weft::verbs {

enum class ConnectMode : uint8_t { exchange = 0, rdma_cm = 1 };

// WEFT_VERBS_CONNECT: "exchange" (default) or "rdma_cm".
Status connect_mode_from_env(ConnectMode& out);

// An IPv4 or IPv6 address and port, as published in connection records.
struct CmAddress {
    uint8_t family = 0;  // AF_INET or AF_INET6; 0 = none
    uint8_t pad = 0;
    uint16_t port_be = 0;  // network byte order
    uint8_t addr[16] = {};
};
static_assert(sizeof(CmAddress) == 20);

// The IP address rdma_cm should listen on for dev: WEFT_VERBS_CM_ADDR if set;
// on RoCE the address the chosen GID carries; on InfiniBand the IPoIB
// interface's IPv4 address. Fails (with the reason) if there is none or it
// is a loopback address, which rdma_cm cannot route.
Status cm_local_address(const Device& dev, CmAddress& out);
// The same without logging (weft-info): false and the reason in `why`.
bool cm_address_of(const Device& dev, CmAddress& out, std::string& why);
std::string cm_address_text(const CmAddress& a);

// QP attributes weft sets itself whatever rdma_cm proposes.
struct CmQpTuning {
    uint8_t timeout;  // local ACK timeout exponent
    uint8_t retry_cnt;
    uint8_t rnr_retry;
    uint8_t rd_atomic;  // RDMA reads/atomics in flight, each direction
};

// One QP to connect: ours, to universe peer `universe`, for `role`.
struct CmLink {
    ibv_qp* qp;
    uint32_t universe;
    uint32_t role;  // 0 = application QP, 1 = failure detector's
};

class CmConnector {
public:
    CmConnector();
    ~CmConnector();
    CmConnector(const CmConnector&) = delete;
    CmConnector& operator=(const CmConnector&) = delete;

    // Binds a listener to `local` (port 0: the kernel picks one) on dev;
    // fills local.port_be.
    Status listen(const Device& dev, CmAddress& local);

    // Connects every link: actively (to remote[link.universe]) when
    // self_universe < link.universe, else by accepting the peer's request.
    // Returns when all are connected, or fails at the deadline or on the
    // first error, naming the peer.
    Status connect_all(uint32_t self_universe, const std::vector<CmLink>& links, const std::vector<CmAddress>& remote,
                       const CmQpTuning& tuning, Deadline deadline);

private:
    struct State;
    std::unique_ptr<State> s_;
};

}  // namespace weft::verbs
