// verbs_device.hpp — finding and opening the RDMA device weft uses, and
// describing every device (weft-info).
//
// Selection (control path, once per context):
//   WEFT_VERBS_DEVICE     device name, optionally with a port: "mlx5_0",
//                         "rxe0:1". Default: the first device with an ACTIVE
//                         port.
//   WEFT_VERBS_GID_INDEX  GID table index to use. Default: chosen (below).
// GID choice: on InfiniBand, the LID routes and GID 0 is used for the GRH if
// one is ever needed. On Ethernet (RoCE) there is no LID: the GID *is* the
// address, and its table mixes RoCE v1 (raw Ethernet, not routable) and v2
// (UDP/IP) entries for every IP address of the netdev. weft takes a RoCE v2
// entry, preferring an IPv4-mapped one (::ffff:a.b.c.d — what switches'
// ECN/PFC configurations usually expect), then any v2, then v1. Index 0 is
// usually v1 from the MAC: taking it by default is the classic RoCE trap.
#pragma once

#include "transport/common.hpp"

#include <infiniband/verbs.h>

#include <cstdio>
#include <string>

namespace weft::verbs {

struct Device {
    ibv_context* ctx = nullptr;
    bool ctx_from_rdmacm = false;  // librdmacm's context: it stays open with librdmacm
    std::string name;
    uint8_t port = 1;
    int gid_index = 0;
    ibv_gid gid{};
    bool roce = false;  // Ethernet link layer: address by GID, GRH required
    ibv_port_attr port_attr{};
    ibv_device_attr attr{};
};

// Opens the device WEFT_VERBS_DEVICE names (or the first usable one) and
// fills `out`. On failure nothing stays open and the reason is logged.
// from_rdmacm: take the device context librdmacm opened (rdma_get_devices)
// instead of opening one: a QP that rdma_cm connects must live on the
// context its rdma_cm_id is bound to (verbs_cm.hpp).
Status open_device(Device& out, bool from_rdmacm = false);
void close_device(Device& d);

// The GID index weft would pick on (ctx, port); -1 if none is usable.
// `why` says which kind of entry it is.
int choose_gid(ibv_context* ctx, uint8_t port, const ibv_port_attr& pa, std::string& why);

// Human-readable summary of every verbs device (weft-info). Returns the
// number of devices.
int describe_devices(FILE* out);

const char* atomic_cap_name(ibv_atomic_cap c);

// GID helpers shared with rdma_cm's address choice.
bool gid_is_ipv4_mapped(const ibv_gid& g);
bool gid_is_link_local(const ibv_gid& g);

}  // namespace weft::verbs
