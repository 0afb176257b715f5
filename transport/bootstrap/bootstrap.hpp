// bootstrap.hpp — start-up exchange between the processes of a launch.
//
// Three sources chosen from the environment at init, and a fourth handed in
// (weft_init_with_bootstrap, external.cpp: the caller's all-gather):
//   weft-run  (WEFT_BOOTSTRAP=unix:@NAME, or unix:/PATH under --hosts, +
//             WEFT_SECRET): a Unix socket to the
//             launcher, which gathers and redistributes contributions;
//   PMIx      (PMIX_RANK set, e.g. under Open MPI's mpirun): Put/Commit/
//             Fence/Get;
//   singleton (neither): a job of one rank.
// exchange() is a collective all-gather used at init and for control-path
// operations (window creation, barriers). It is never on a hot path.
#pragma once

#include "transport/bootstrap/wire.hpp"
#include "transport/common.hpp"

#include <weft/bootstrap.h>

#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace weft {

class Bootstrap {
public:
    virtual ~Bootstrap() = default;
    virtual const char* name() const = 0;

    uint32_t job() const { return job_; }
    uint32_t rank() const { return rank_; }
    uint32_t size() const { return job_sizes_.at(job_); }
    // Sizes of every job of the launch, indexed by job id.
    const std::vector<uint32_t>& job_sizes() const { return job_sizes_; }
    uint32_t universe_size() const {
        uint32_t n = 0;
        for (uint32_t s : job_sizes_) n += s;
        return n;
    }
    // Index of (job, rank) in universe order: job 0's ranks, then job 1's...
    uint32_t universe_index(uint32_t job, uint32_t rank) const {
        uint32_t n = 0;
        for (uint32_t j = 0; j < job; ++j) n += job_sizes_[j];
        return n + rank;
    }

    // All-gather: every member of `scope` contributes `mine`; on success
    // `all` holds every contribution, in rank order (job scope) or universe
    // order. Fails (never hangs past the deadline) when a member dies.
    virtual Status exchange(wire::Scope scope, std::span<const uint8_t> mine, std::vector<std::vector<uint8_t>>& all,
                            Deadline deadline) = 0;

    // While an exchange waits, the transport must keep progressing: over
    // UCX/tcp a peer's puts and emulated atomics complete only while we do,
    // and that peer may be flushing them before it can join us. Set by the
    // runtime once its backend exists.
    void set_progress(std::function<void()> progress) { progress_ = std::move(progress); }
    // Whether the transport knows job rank r is dead: an exchange need not
    // wait for its contribution. Set by the runtime once it tracks failures.
    void set_known_dead(std::function<bool(uint32_t)> dead) { known_dead_ = std::move(dead); }

    // loss_expected: the caller knows a member may be dead (finalize after
    // a failure) and logs the outcome itself; the bootstrap then names the
    // dead member at debug instead of as an error.
    Status barrier(Deadline deadline, bool loss_expected = false) {
        std::vector<std::vector<uint8_t>> none;
        loss_expected_ = loss_expected;
        const Status st = exchange(wire::Scope::job, {}, none, deadline);
        loss_expected_ = false;
        return st;
    }

    // Transparent checkpointing (Runtime::release/rebuild): whether this
    // source can let go of its connection to the launcher and make it
    // again, and doing so. The caller all-gathers first (nothing of an
    // exchange is half-done), and no exchange runs between the two.
    virtual bool can_release(std::string& why) const {
        (void)why;
        return true;  // nothing held (singleton; the caller's all-gather)
    }
    virtual void release() {}
    virtual Status reconnect(Deadline deadline) {
        (void)deadline;
        return WEFT_OK;
    }

protected:
    void progress_while_waiting() {
        if (progress_) progress_();
    }
    bool known_dead(uint32_t r) const { return known_dead_ && known_dead_(r); }
    std::function<void()> progress_;
    std::function<bool(uint32_t)> known_dead_;
    bool loss_expected_ = false;  // see barrier()
    uint32_t job_ = 0;
    uint32_t rank_ = 0;
    std::vector<uint32_t> job_sizes_{1};
};

Status make_bootstrap(std::unique_ptr<Bootstrap>& out);

// Individual sources (make_bootstrap picks one).
Status make_socket_bootstrap(std::unique_ptr<Bootstrap>& out);
Status make_pmix_bootstrap(std::unique_ptr<Bootstrap>& out);  // UNSUPPORTED without PMIx
std::unique_ptr<Bootstrap> make_singleton_bootstrap();
// The caller's all-gather (weft/bootstrap.h); INVALID_ARG for bad ops.
Status make_external_bootstrap(const weft_bootstrap_ops_t& ops, std::unique_ptr<Bootstrap>& out);

// Parse "4,2" into job sizes; false on anything else.
bool parse_job_sizes(const char* text, std::vector<uint32_t>& out);
// Decode a 64-hex-digit secret.
bool parse_secret(const char* hex, uint8_t out[wire::secret_size]);

}  // namespace weft
