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
#include <vector>

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

// What weft-info reports of every verbs device: the structured form (its
// --json) and the text describe_devices prints are both made from it.
struct GidReport {
    int index = 0;
    std::string address;     // IPv6 text; IPv4-mapped for RoCE v2 over IPv4
    const char* type = "?";  // "IB", "RoCE v1", "RoCE v2"
};
struct PortReport {
    uint8_t port = 1;
    const char* state = "";
    const char* link_layer = "";
    bool roce = false;  // Ethernet link layer: GIDs are addresses
    uint16_t lid = 0;
    int active_mtu = 0;           // bytes
    std::vector<GidReport> gids;  // the entries in use
    int chosen_gid = -1;          // the index weft would take; -1 if none is usable
    std::string chosen_why;
    bool cm_usable = false;  // WEFT_VERBS_CONNECT=rdma_cm could listen here
    std::string cm_address;  // when usable
    std::string cm_why;      // when not
};
struct DeviceReport {
    std::string name;
    std::string error;  // non-empty: the device could not be opened or queried
    const char* atomics = "";
    unsigned port_count = 0;  // physical ports; `ports` holds those that answered a query
    int max_qp_wr = 0;
    int max_cqe = 0;
    uint64_t max_mr_size = 0;
    std::vector<PortReport> ports;
};
// Every verbs device with its ports and GIDs. Returns false, with `why`,
// when the device list itself cannot be had (no RDMA support in the kernel).
bool list_devices(std::vector<DeviceReport>& out, std::string& why);

// Human-readable summary of every verbs device (weft-info), from
// list_devices. Returns the number of devices.
int describe_devices(FILE* out);

const char* atomic_cap_name(ibv_atomic_cap c);

// GID helpers shared with rdma_cm's address choice.
bool gid_is_ipv4_mapped(const ibv_gid& g);
bool gid_is_link_local(const ibv_gid& g);

}  // namespace weft::verbs
