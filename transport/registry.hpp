// registry.hpp — every backend weft knows, in one table: whether this build
// has it, whether it can run on this host, and how to make it. Backend
// selection (WEFT_TRANSPORT, weft-run --transport, auto) and weft-info read
// only this table; docs/transports.md describes both.
//
// Control path: read at init and by weft-info, never on a hot path.
#pragma once

#include "transport/backend.hpp"

#include <memory>
#include <span>
#include <string>
#include <string_view>

namespace weft {

struct BackendEntry {
    const char* name;           // WEFT_TRANSPORT's value
    bool built;                 // compiled into this build (weft/config.hpp)
    const char* not_built_why;  // for messages when !built
    bool one_host_only;         // serves only jobs whose ranks share one host (shm)
    // Selection probes with viable() before create(); false where the probe
    // is the costly half of create itself and create reports the same
    // reason (ucx: ucp_init).
    bool probe_at_selection;
    // A cheap look, without a job, whether the backend can run on this host:
    // WEFT_OK, or the status its creation would fail with. `why` says what
    // was found either way. Only for built entries; any thread.
    Status (*viable)(std::string& why);
    // Constructs and initialises the backend for rt (collective over the
    // job); `out` is set only on success.
    Status (*create)(Runtime& rt, std::unique_ptr<Backend>& out);
};

// Every backend, in the order WEFT_TRANSPORT documents them: shm, ucx, verbs.
std::span<const BackendEntry> backend_registry();
// The entry called `name`, or null.
const BackendEntry* find_backend(std::string_view name);
// "shm, ucx, verbs", for messages.
std::string backend_names();

// auto's rule (docs/transports.md), from facts every rank of the universe
// shares: one host: shm; several hosts: verbs where every rank can use it,
// else ucx where built. Null when nothing fits (several hosts, and neither
// verbs on every rank nor UCX in this build).
const BackendEntry* auto_backend(bool one_host, bool verbs_on_every_rank);

}  // namespace weft
