// verbs_device.cpp — device discovery, port and GID selection, weft-info's
// device listing.
#include "transport/verbs/verbs_device.hpp"

#include "transport/verbs/verbs_cm.hpp"

#include <weft/config.hpp>

#include <arpa/inet.h>
#if WEFT_HAVE_RDMACM
#include <rdma/rdma_cma.h>
#endif

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace weft::verbs {

namespace {

bool gid_is_zero(const ibv_gid& g) {
    static const ibv_gid zero{};
    return std::memcmp(&g, &zero, sizeof g) == 0;
}

std::string gid_text(const ibv_gid& g) {
    char buf[INET6_ADDRSTRLEN] = {0};
    inet_ntop(AF_INET6, g.raw, buf, sizeof buf);
    return buf;
}

const char* link_layer_name(uint8_t l) {
    switch (l) {
        case IBV_LINK_LAYER_INFINIBAND:
            return "InfiniBand";
        case IBV_LINK_LAYER_ETHERNET:
            return "Ethernet (RoCE)";
        default:
            return "unspecified";
    }
}

const char* gid_type_name(uint32_t t) {
    switch (t) {
        case IBV_GID_TYPE_IB:
            return "IB";
        case IBV_GID_TYPE_ROCE_V1:
            return "RoCE v1";
        case IBV_GID_TYPE_ROCE_V2:
            return "RoCE v2";
        default:
            return "?";
    }
}

// GID table entry i of (ctx, port) if it is in use (non-zero).
bool gid_entry(ibv_context* ctx, uint8_t port, int i, ibv_gid& g, uint32_t& type) {
    ibv_gid_entry e;
    // Empty entries fail (ENODATA): skip them.
    if (ibv_query_gid_ex(ctx, port, static_cast<uint32_t>(i), &e, 0) != 0) return false;
    std::memcpy(g.raw, e.gid.raw, sizeof g.raw);
    type = e.gid_type;
    return !gid_is_zero(g);
}

// First ACTIVE port of ctx (or `want` if non-zero and active); 0 if none.
uint8_t active_port(ibv_context* ctx, const ibv_device_attr& da, uint8_t want, ibv_port_attr& pa) {
    for (uint8_t p = 1; p <= da.phys_port_cnt; ++p) {
        if (want && p != want) continue;
        if (ibv_query_port(ctx, p, &pa) == 0 && pa.state == IBV_PORT_ACTIVE) return p;
    }
    return 0;
}

// Queries ctx; fills d if it has a usable port and GID, else says why in
// `tried`. Does not close ctx.
bool probe(ibv_context* ctx, const char* name, uint8_t want_port, Device& d, std::string& tried) {
    d.ctx = ctx;
    d.name = name;
    if (ibv_query_device(ctx, &d.attr) != 0) {
        tried += std::string(" ") + name + "(query failed)";
        return false;
    }
    d.port = active_port(ctx, d.attr, want_port, d.port_attr);
    if (!d.port) {
        tried += std::string(" ") + name + "(no active port)";
        return false;
    }
    d.roce = d.port_attr.link_layer == IBV_LINK_LAYER_ETHERNET;
    std::string why;
    const uint64_t forced = env_u64("WEFT_VERBS_GID_INDEX", UINT64_MAX);
    d.gid_index = forced != UINT64_MAX ? static_cast<int>(forced) : choose_gid(ctx, d.port, d.port_attr, why);
    if (d.gid_index < 0 || d.gid_index >= d.port_attr.gid_tbl_len ||
        ibv_query_gid(ctx, d.port, d.gid_index, &d.gid) != 0 || (d.roce && gid_is_zero(d.gid))) {
        tried += std::string(" ") + name + "(no usable GID)";
        return false;
    }
    WEFT_LOG(debug, "verbs: %s port %u, %s, lid %u, gid[%d] %s%s%s", name, d.port,
             link_layer_name(d.port_attr.link_layer), d.port_attr.lid, d.gid_index, gid_text(d.gid).c_str(),
             why.empty() ? "" : ": ", why.c_str());
    return true;
}

}  // namespace

bool gid_is_ipv4_mapped(const ibv_gid& g) {
    static const uint8_t prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    return std::memcmp(g.raw, prefix, sizeof prefix) == 0;
}

bool gid_is_link_local(const ibv_gid& g) { return g.raw[0] == 0xfe && (g.raw[1] & 0xc0) == 0x80; }

const char* atomic_cap_name(ibv_atomic_cap c) {
    switch (c) {
        case IBV_ATOMIC_NONE:
            return "none";
        case IBV_ATOMIC_HCA:
            return "HCA (atomic among device atomics only)";
        case IBV_ATOMIC_GLOB:
            return "global (coherent with CPU atomics)";
        default:
            return "?";
    }
}

int choose_gid(ibv_context* ctx, uint8_t port, const ibv_port_attr& pa, std::string& why) {
    if (pa.link_layer != IBV_LINK_LAYER_ETHERNET) {
        why = "InfiniBand: routed by LID, GID 0 for a GRH";
        return 0;
    }
    int best = -1, best_rank = 0;
    for (int i = 0; i < pa.gid_tbl_len; ++i) {
        ibv_gid g;
        uint32_t type = 0;
        if (!gid_entry(ctx, port, i, g, type)) continue;
        int r = 0;
        if (type == IBV_GID_TYPE_ROCE_V2)
            r = gid_is_ipv4_mapped(g) ? 3 : 2;
        else if (type == IBV_GID_TYPE_ROCE_V1)
            r = 1;
        if (r > best_rank) {
            best_rank = r;
            best = i;
        }
    }
    why = best_rank == 3 ? "RoCE v2, IPv4-mapped" : best_rank == 2 ? "RoCE v2" : best_rank == 1 ? "RoCE v1" : "none";
    return best;
}

Status open_device(Device& out, bool from_rdmacm) {
    const std::string spec = env_string("WEFT_VERBS_DEVICE", "");
    std::string want_name = spec;
    uint8_t want_port = 0;
    if (size_t colon = spec.find(':'); colon != std::string::npos) {
        want_name = spec.substr(0, colon);
        const int p = std::atoi(spec.c_str() + colon + 1);
        if (p < 1 || p > 255)
            return WEFT_FAIL(WEFT_ERR_INVALID_ARG, "WEFT_VERBS_DEVICE=%s: bad port number", spec.c_str());
        want_port = static_cast<uint8_t>(p);
    }

    int n = 0;
    Status st = WEFT_ERR_UNSUPPORTED;
    std::string tried;
    if (from_rdmacm) {
#if WEFT_HAVE_RDMACM
        // librdmacm opened every device already and keeps the contexts.
        ibv_context** list = rdma_get_devices(&n);
        if (!list)
            return WEFT_FAIL(WEFT_ERR_UNSUPPORTED, "verbs: rdma_get_devices: %s (is rdma_ucm loaded?)",
                             std::strerror(errno));
        for (int i = 0; i < n && st != WEFT_OK; ++i) {
            const char* name = ibv_get_device_name(list[i]->device);
            if (!want_name.empty() && want_name != name) continue;
            Device d;
            if (!probe(list[i], name, want_port, d, tried)) continue;
            d.ctx_from_rdmacm = true;
            out = std::move(d);
            st = WEFT_OK;
        }
        rdma_free_devices(list);
#else
        return WEFT_FAIL(WEFT_ERR_UNSUPPORTED,
                         "verbs: this build of weft has no librdmacm (WEFT_VERBS_CONNECT=rdma_cm)");
#endif
    } else {
        ibv_device** list = ibv_get_device_list(&n);
        if (!list)
            return WEFT_FAIL(WEFT_ERR_UNSUPPORTED, "verbs: ibv_get_device_list: %s (is ib_uverbs loaded?)",
                             std::strerror(errno));
        for (int i = 0; i < n && st != WEFT_OK; ++i) {
            const char* name = ibv_get_device_name(list[i]);
            if (!want_name.empty() && want_name != name) continue;
            ibv_context* ctx = ibv_open_device(list[i]);
            if (!ctx) {
                tried += std::string(" ") + name + "(cannot open)";
                continue;
            }
            Device d;
            if (!probe(ctx, name, want_port, d, tried)) {
                ibv_close_device(ctx);
                continue;
            }
            out = std::move(d);
            st = WEFT_OK;
        }
        ibv_free_device_list(list);
    }
    if (st == WEFT_OK) return WEFT_OK;
    if (n == 0) return WEFT_FAIL(WEFT_ERR_UNSUPPORTED, "verbs: no RDMA device on this host");
    if (!want_name.empty() && tried.empty())
        return WEFT_FAIL(WEFT_ERR_NOT_FOUND, "verbs: WEFT_VERBS_DEVICE=%s names no device", spec.c_str());
    return WEFT_FAIL(WEFT_ERR_UNSUPPORTED, "verbs: no usable device:%s", tried.c_str());
}

void close_device(Device& d) {
    if (d.ctx && !d.ctx_from_rdmacm) ibv_close_device(d.ctx);
    d.ctx = nullptr;
}

bool list_devices(std::vector<DeviceReport>& out, std::string& why) {
    out.clear();
    int n = 0;
    ibv_device** list = ibv_get_device_list(&n);
    if (!list) {
        why = std::string("ibv_get_device_list: ") + std::strerror(errno);
        if (errno == ENOSYS) why += " (this kernel has no RDMA support; see tests/rxe/run-in-vm.sh)";
        return false;
    }
    for (int i = 0; i < n; ++i) {
        DeviceReport& dev = out.emplace_back();
        dev.name = ibv_get_device_name(list[i]);
        ibv_context* ctx = ibv_open_device(list[i]);
        if (!ctx) {
            dev.error = std::string("cannot open (") + std::strerror(errno) + ")";
            continue;
        }
        ibv_device_attr da;
        if (ibv_query_device(ctx, &da) != 0) {
            dev.error = "ibv_query_device failed";
            ibv_close_device(ctx);
            continue;
        }
        dev.atomics = atomic_cap_name(da.atomic_cap);
        dev.port_count = da.phys_port_cnt;
        dev.max_qp_wr = da.max_qp_wr;
        dev.max_cqe = da.max_cqe;
        dev.max_mr_size = da.max_mr_size;
        for (uint8_t p = 1; p <= da.phys_port_cnt; ++p) {
            ibv_port_attr pa;
            if (ibv_query_port(ctx, p, &pa) != 0) continue;
            PortReport& port = dev.ports.emplace_back();
            port.port = p;
            port.state = ibv_port_state_str(pa.state);
            port.link_layer = link_layer_name(pa.link_layer);
            port.roce = pa.link_layer == IBV_LINK_LAYER_ETHERNET;
            port.lid = pa.lid;
            port.active_mtu = 128 << pa.active_mtu;
            port.chosen_gid = choose_gid(ctx, p, pa, port.chosen_why);
            for (int g = 0; g < pa.gid_tbl_len; ++g) {
                ibv_gid gid;
                uint32_t type = 0;
                if (gid_entry(ctx, p, g, gid, type)) port.gids.push_back({g, gid_text(gid), gid_type_name(type)});
            }
            // Where WEFT_VERBS_CONNECT=rdma_cm would listen.
            Device d;
            d.name = dev.name;
            d.port = p;
            d.roce = port.roce;
            if (port.chosen_gid >= 0) ibv_query_gid(ctx, p, port.chosen_gid, &d.gid);
            CmAddress cm;
            port.cm_usable = cm_address_of(d, cm, port.cm_why);
            if (port.cm_usable) port.cm_address = cm_address_text(cm);
        }
        ibv_close_device(ctx);
    }
    ibv_free_device_list(list);
    return true;
}

int describe_devices(FILE* out) {
    std::vector<DeviceReport> devices;
    std::string why;
    if (!list_devices(devices, why)) {
        std::fprintf(out, "  none: %s\n", why.c_str());
        return 0;
    }
    if (devices.empty()) std::fprintf(out, "  no RDMA devices (none in /sys/class/infiniband)\n");
    for (const DeviceReport& dev : devices) {
        if (!dev.error.empty()) {
            std::fprintf(out, "  %s: %s\n", dev.name.c_str(), dev.error.c_str());
            continue;
        }
        std::fprintf(out, "  %s: %u port(s), atomics %s, max QP WRs %d, max CQEs %d, max MR %llu bytes\n",
                     dev.name.c_str(), dev.port_count, dev.atomics, dev.max_qp_wr, dev.max_cqe,
                     static_cast<unsigned long long>(dev.max_mr_size));
        for (const PortReport& port : dev.ports) {
            std::fprintf(out, "    port %u: %s, %s, lid %u, active MTU %d\n", port.port, port.state, port.link_layer,
                         port.lid, port.active_mtu);
            for (const GidReport& g : port.gids)
                std::fprintf(out, "      gid[%d] %-40s %s%s\n", g.index, g.address.c_str(), g.type,
                             g.index == port.chosen_gid ? "   <- weft's choice" : "");
            if (port.roce && port.chosen_gid >= 0)
                std::fprintf(out, "      weft uses gid[%d] (%s)\n", port.chosen_gid, port.chosen_why.c_str());
            if (port.cm_usable)
                std::fprintf(out, "      rdma_cm address: %s\n", port.cm_address.c_str());
            else
                std::fprintf(out, "      rdma_cm: unusable: %s\n", port.cm_why.c_str());
        }
    }
    return static_cast<int>(devices.size());
}

}  // namespace weft::verbs
