// registry.cpp — the backend table, each backend's viability probe, and
// auto's rule (docs/transports.md).
#include "transport/registry.hpp"

#include <weft/config.hpp>

#if WEFT_HAVE_UCX
#include <ucp/api/ucp.h>
#endif
#if WEFT_HAVE_VERBS
#include <infiniband/verbs.h>
#endif

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace weft {

namespace {

// shm needs memfd segments and cross-memory attach, which every Linux weft
// builds on has; whether the job fits on one host is the selection's test.
Status shm_viable(std::string& why) {
    why = "memfd segments, for ranks on one host";
    return WEFT_OK;
}

#if WEFT_HAVE_UCX
// UCX can run where its library initialises with the features weft asks
// for (UCX_TLS and the rest of UCX's environment apply). Whether its
// transports reach the peers only wire-up can tell.
Status ucx_viable(std::string& why) {
    ucp_config_t* config = nullptr;
    ucs_status_t s = ucp_config_read(nullptr, nullptr, &config);
    if (s != UCS_OK) {
        why = std::string("ucp_config_read: ") + ucs_status_string(s);
        return WEFT_ERR_TRANSPORT;
    }
    ucp_params_t params;
    params.field_mask = UCP_PARAM_FIELD_FEATURES;
    params.features = UCP_FEATURE_RMA | UCP_FEATURE_AMO64 | UCP_FEATURE_AM;
    ucp_context_h ctx = nullptr;
    s = ucp_init(&params, config, &ctx);
    ucp_config_release(config);
    if (s != UCS_OK) {
        why = std::string("ucp_init: ") + ucs_status_string(s);
        return WEFT_ERR_TRANSPORT;
    }
    ucp_cleanup(ctx);
    why = std::string("UCX ") + ucp_get_version_string() + " initialises";
    return WEFT_OK;
}
#endif

#if WEFT_HAVE_VERBS
// True if device `dev` has an active port (`port`, or any where 0); says
// which in `found`.
bool has_active_port(ibv_device* dev, uint8_t port, std::string& found) {
    ibv_context* ctx = ibv_open_device(dev);
    if (!ctx) return false;
    ibv_device_attr da;
    bool ok = false;
    if (ibv_query_device(ctx, &da) == 0)
        for (uint8_t p = 1; p <= da.phys_port_cnt && !ok; ++p) {
            ibv_port_attr pa;
            if ((port && p != port) || ibv_query_port(ctx, p, &pa) != 0 || pa.state != IBV_PORT_ACTIVE) continue;
            found = std::string(ibv_get_device_name(dev)) + " port " + std::to_string(p) + " is active";
            ok = true;
        }
    ibv_close_device(ctx);
    return ok;
}

// Verbs can run where a device (WEFT_VERBS_DEVICE's, else any) has an
// active port; the GID and, with rdma_cm, the address are chosen at
// creation. Statuses are those creation would fail with.
Status verbs_viable(std::string& why) {
    const char* spec = std::getenv("WEFT_VERBS_DEVICE");
    std::string want = spec ? spec : "";
    uint8_t port = 0;
    if (size_t colon = want.find(':'); colon != std::string::npos) {
        const int p = std::atoi(want.c_str() + colon + 1);
        if (p < 1 || p > 255) {
            why = "WEFT_VERBS_DEVICE=" + std::string(spec) + ": bad port number";
            return WEFT_ERR_INVALID_ARG;
        }
        port = static_cast<uint8_t>(p);
        want.resize(colon);
    }
    int n = 0;
    ibv_device** list = ibv_get_device_list(&n);
    if (!list) {
        const int e = errno;
        why = std::string("ibv_get_device_list: ") + std::strerror(e) +
              (e == ENOSYS ? " (this kernel has no RDMA support)" : "");
        return WEFT_ERR_UNSUPPORTED;
    }
    bool named = false, ok = false;
    for (int i = 0; i < n && !ok; ++i) {
        if (!want.empty() && want != ibv_get_device_name(list[i])) continue;
        named = true;
        ok = has_active_port(list[i], port, why);
    }
    ibv_free_device_list(list);
    if (ok) return WEFT_OK;
    if (n == 0) {
        why = "no RDMA device on this host";
        return WEFT_ERR_UNSUPPORTED;
    }
    if (!named) {
        why = "WEFT_VERBS_DEVICE=" + std::string(spec) + " names no device";
        return WEFT_ERR_NOT_FOUND;
    }
    why = want.empty() ? "no RDMA device has an active port"
                       : "WEFT_VERBS_DEVICE=" + std::string(spec) + " has no active port";
    return WEFT_ERR_UNSUPPORTED;
}
#endif

// For a backend this build lacks: selection and weft-info look at `built`
// first, so this only keeps the table whole.
[[maybe_unused]] Status not_built(std::string& why) {
    why = "not built";
    return WEFT_ERR_UNSUPPORTED;
}
#if WEFT_HAVE_UCX
constexpr auto ucx_probe = ucx_viable;
#else
constexpr auto ucx_probe = not_built;
#endif
#if WEFT_HAVE_VERBS
constexpr auto verbs_probe = verbs_viable;
#else
constexpr auto verbs_probe = not_built;
#endif

const BackendEntry registry[] = {
    {"shm", true, "", true, true, shm_viable, create_shm_backend},
    {"ucx", WEFT_HAVE_UCX != 0, "no UCX at configure time", false, false, ucx_probe, create_ucx_backend},
    {"verbs", WEFT_HAVE_VERBS != 0, "no libibverbs at configure time", false, true, verbs_probe, create_verbs_backend},
};

}  // namespace

std::span<const BackendEntry> backend_registry() { return registry; }

const BackendEntry* find_backend(std::string_view name) {
    for (const BackendEntry& b : registry)
        if (name == b.name) return &b;
    return nullptr;
}

std::string backend_names() {
    std::string s;
    for (const BackendEntry& b : registry) s += (s.empty() ? "" : ", ") + std::string(b.name);
    return s;
}

const BackendEntry* auto_backend(bool one_host, bool verbs_on_every_rank) {
    // One host: shm. Its rings and CPU atomics on mapped memory beat any
    // loopback through a NIC or UCX, and its peer-failure notices are
    // immediate (docs/transports.md).
    if (one_host) return find_backend("shm");
    if (verbs_on_every_rank) return find_backend("verbs");
    const BackendEntry* ucx = find_backend("ucx");
    return ucx->built ? ucx : nullptr;
}

}  // namespace weft
