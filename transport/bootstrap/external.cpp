// external.cpp — bootstrap through an all-gather the caller supplies
// (weft/bootstrap.h): an MPI library's MPI_Iallgather, or any launcher's
// exchange weft does not speak itself. One job; universe = job.
//
// weft's exchanges have contributions of any length, the caller's
// all-gather one length for all: each exchange is two all-gathers, the
// lengths (8 bytes each), then every contribution padded to the longest
// (skipped when all are empty).
#include "transport/bootstrap/bootstrap.hpp"

#include <weft/bootstrap.h>

#include <cstring>
#include <memory>

namespace weft {
namespace {

class ExternalBootstrap final : public Bootstrap {
public:
    explicit ExternalBootstrap(const weft_bootstrap_ops_t& ops) : ops_(ops) {
        job_ = 0;
        rank_ = ops.rank;
        job_sizes_.assign(1, ops.size);
    }
    const char* name() const override { return "external"; }

    Status exchange(wire::Scope, std::span<const uint8_t> mine, std::vector<std::vector<uint8_t>>& all,
                    Deadline deadline) override {
        const uint32_t n = size();
        ++seq_;
        auto lengths = std::make_unique<uint8_t[]>(sizeof(uint64_t) * n);
        auto my_len = std::make_unique<uint8_t[]>(sizeof(uint64_t));
        const uint64_t len = mine.size();
        std::memcpy(my_len.get(), &len, sizeof len);
        Status st = allgather(my_len, sizeof len, lengths, deadline, "lengths");
        if (st != WEFT_OK) return st;
        uint64_t longest = 0;
        std::vector<uint64_t> length(n);
        std::memcpy(length.data(), lengths.get(), sizeof(uint64_t) * n);
        for (uint64_t l : length) longest = l > longest ? l : longest;
        all.assign(n, {});
        if (longest == 0) return WEFT_OK;
        auto padded = std::make_unique<uint8_t[]>(longest);
        auto gathered = std::make_unique<uint8_t[]>(longest * n);
        if (!mine.empty()) std::memcpy(padded.get(), mine.data(), mine.size());
        st = allgather(padded, longest, gathered, deadline, "contributions");
        if (st != WEFT_OK) return st;
        for (uint32_t r = 0; r < n; ++r) {
            const uint8_t* from = gathered.get() + r * longest;
            all[r].assign(from, from + length[r]);
        }
        return WEFT_OK;
    }

private:
    // One all-gather through the caller's functions, progressing the
    // transport between tests, bounded by the deadline. A member known to
    // be dead never contributes: after a grace period (as the PMIx
    // bootstrap allows for a fence that may still complete) the exchange
    // fails rather than waiting for the deadline.
    Status allgather(std::unique_ptr<uint8_t[]>& mine, size_t len, std::unique_ptr<uint8_t[]>& out, Deadline deadline,
                     const char* what) {
        Status st = allgather_into(mine.get(), len, out.get(), deadline, what);
        // Given up on (deadline, a dead member) or failed: the caller's
        // all-gather may still be outstanding, reading `mine` and writing
        // `out`.
        if (st != WEFT_OK) {
            abandon(std::move(mine));
            abandon(std::move(out));
        }
        return st;
    }

    // Buffers an outstanding all-gather may still write: kept for the life
    // of the process, reachable (no leak report).
    static void abandon(std::unique_ptr<uint8_t[]> buffer) {
        static auto* kept = new std::vector<std::unique_ptr<uint8_t[]>>;
        kept->push_back(std::move(buffer));
    }

    Status allgather_into(const void* mine, size_t len, void* out, Deadline deadline, const char* what) {
        void* request = nullptr;
        if (ops_.iallgather(ops_.arg, mine, len, out, &request) != 0)
            return WEFT_FAIL(WEFT_ERR_BOOTSTRAP, "external bootstrap, exchange %u (%s): the all-gather did not start",
                             seq_, what);
        const uint64_t grace_ns = loss_expected_ ? 100'000'000ull : 1'000'000'000ull;
        uint64_t dead_since = 0;
        Backoff backoff;
        for (;;) {
            int done = 0;
            if (ops_.test(ops_.arg, request, &done) != 0)
                return WEFT_FAIL(WEFT_ERR_BOOTSTRAP, "external bootstrap, exchange %u (%s): the all-gather failed",
                                 seq_, what);
            if (done) return WEFT_OK;
            if (deadline.passed())
                return WEFT_FAIL(WEFT_ERR_TIMEOUT, "external bootstrap, exchange %u (%s): not complete by the deadline",
                                 seq_, what);
            if (!dead_since) {
                for (uint32_t r = 0; r < size() && !dead_since; ++r)
                    if (known_dead(r)) dead_since = now_ns();
            } else if (now_ns() - dead_since > grace_ns) {
                if (loss_expected_) return WEFT_ERR_PEER_FAILED;
                return WEFT_FAIL(WEFT_ERR_PEER_FAILED,
                                 "external bootstrap, exchange %u (%s): a member died and the all-gather did not "
                                 "complete",
                                 seq_, what);
            }
            progress_while_waiting();
            backoff.pause();
        }
    }

    weft_bootstrap_ops_t ops_;
    uint32_t seq_ = 0;
};

}  // namespace

Status make_external_bootstrap(const weft_bootstrap_ops_t& ops, std::unique_ptr<Bootstrap>& out) {
    if (!ops.iallgather || !ops.test)
        return WEFT_FAIL(WEFT_ERR_INVALID_ARG, "weft_init_with_bootstrap: iallgather and test are both required");
    if (ops.size == 0 || ops.rank >= ops.size)
        return WEFT_FAIL(WEFT_ERR_INVALID_ARG, "weft_init_with_bootstrap: rank %u of size %u", ops.rank, ops.size);
    out = std::make_unique<ExternalBootstrap>(ops);
    return WEFT_OK;
}

}  // namespace weft
