// pmix.cpp — bootstrap through an existing PMIx server (Open MPI's mpirun,
// PRRTE, Slurm srun --mpi=pmix). Every exchange is Put + Commit + Fence
// (collecting data) + one Get per member; the server does the gathering.
// The universe is this PMIx namespace: one job.
#include "transport/bootstrap/bootstrap.hpp"

#include <weft/config.hpp>

#if WEFT_HAVE_PMIX
#include <pmix.h>

#include <atomic>
#include <cstring>

namespace weft {
namespace {

class PmixBootstrap final : public Bootstrap {
public:
    ~PmixBootstrap() override {
        if (initialized_) PMIx_Finalize(nullptr, 0);
    }
    bool can_release(std::string& why) const override {
        why =
            "the PMIx bootstrap cannot let go of its PMIx server connection and make it again yet (PMIx "
            "re-initialisation is not relied on)";
        return false;
    }
    const char* name() const override { return "pmix"; }

    Status init() {
        pmix_status_t rc = PMIx_Init(&me_, nullptr, 0);
        if (rc != PMIX_SUCCESS) return WEFT_FAIL(WEFT_ERR_BOOTSTRAP, "PMIx_Init: %s", PMIx_Error_string(rc));
        initialized_ = true;
        pmix_proc_t wildcard;
        PMIX_PROC_CONSTRUCT(&wildcard);
        PMIX_LOAD_NSPACE(wildcard.nspace, me_.nspace);
        wildcard.rank = PMIX_RANK_WILDCARD;
        pmix_value_t* val = nullptr;
        rc = PMIx_Get(&wildcard, PMIX_JOB_SIZE, nullptr, 0, &val);
        if (rc != PMIX_SUCCESS || !val)
            return WEFT_FAIL(WEFT_ERR_BOOTSTRAP, "PMIx_Get(JOB_SIZE): %s", PMIx_Error_string(rc));
        uint32_t size = 0;
        if (val->type == PMIX_UINT32)
            size = val->data.uint32;
        else if (val->type == PMIX_INT)
            size = static_cast<uint32_t>(val->data.integer);
        else if (val->type == PMIX_UINT64)
            size = static_cast<uint32_t>(val->data.uint64);
        PMIX_VALUE_RELEASE(val);
        if (size == 0 || me_.rank >= size)
            return WEFT_FAIL(WEFT_ERR_BOOTSTRAP, "PMIx job size %u / rank %u make no sense", size, me_.rank);
        job_ = 0;
        rank_ = me_.rank;
        job_sizes_.assign(1, size);
        return WEFT_OK;
    }

    Status exchange(wire::Scope scope, std::span<const uint8_t> mine, std::vector<std::vector<uint8_t>>& all,
                    Deadline deadline) override {
        char key[PMIX_MAX_KEYLEN + 1];
        std::snprintf(key, sizeof key, "weft.%u.%u", static_cast<unsigned>(scope), ++seq_);
        pmix_value_t v;
        PMIX_VALUE_CONSTRUCT(&v);
        v.type = PMIX_BYTE_OBJECT;
        // PMIx copies the value during Put; an empty blob still needs a key.
        static const uint8_t empty = 0;
        v.data.bo.bytes = const_cast<char*>(reinterpret_cast<const char*>(mine.empty() ? &empty : mine.data()));
        v.data.bo.size = mine.size();
        pmix_status_t rc = PMIx_Put(PMIX_GLOBAL, key, &v);
        if (rc != PMIX_SUCCESS) return WEFT_FAIL(WEFT_ERR_BOOTSTRAP, "PMIx_Put: %s", PMIx_Error_string(rc));
        rc = PMIx_Commit();
        if (rc != PMIX_SUCCESS) return WEFT_FAIL(WEFT_ERR_BOOTSTRAP, "PMIx_Commit: %s", PMIx_Error_string(rc));
        pmix_proc_t wildcard;
        PMIX_PROC_CONSTRUCT(&wildcard);
        PMIX_LOAD_NSPACE(wildcard.nspace, me_.nspace);
        wildcard.rank = PMIX_RANK_WILDCARD;
        pmix_info_t info;
        bool collect = true;
        PMIX_INFO_CONSTRUCT(&info);
        PMIX_INFO_LOAD(&info, PMIX_COLLECT_DATA, &collect, PMIX_BOOL);
        // Non-blocking fence so the transport keeps progressing meanwhile
        // (see Bootstrap::set_progress). The callback runs on PMIx's thread.
        struct FenceDone {
            std::atomic<int> done{0};
            std::atomic<int> status{PMIX_SUCCESS};
        };
        // Heap-allocated: on a timeout the callback may still fire later, so
        // the record is then deliberately left alive.
        auto* fence = new FenceDone;
        rc = PMIx_Fence_nb(
            &wildcard, 1, &info, 1,
            [](pmix_status_t status, void* arg) {
                auto* f = static_cast<FenceDone*>(arg);
                f->status.store(status);
                f->done.store(1, std::memory_order_release);
            },
            fence);
        PMIX_INFO_DESTRUCT(&info);
        if (rc == PMIX_OPERATION_SUCCEEDED) {
            fence->done.store(1);
        } else if (rc != PMIX_SUCCESS) {
            delete fence;
            return WEFT_FAIL(WEFT_ERR_BOOTSTRAP, "PMIx_Fence_nb: %s", PMIx_Error_string(rc));
        }
        // A member known to have died may have contributed first (then the
        // fence completes) or not (then a fault-tolerant launcher may never
        // complete it: PRRTE with `recoverable` does not). Wait a grace
        // period for the first case, then give up on the exchange: it
        // cannot succeed without that member anyway. Finalize's barrier
        // after a known failure (loss_expected_) needs no grace.
        const uint64_t grace_ns = loss_expected_ ? 100'000'000ull : 1'000'000'000ull;
        uint64_t dead_since = 0;
        uint32_t dead_rank = 0;
        Backoff backoff;
        while (!fence->done.load(std::memory_order_acquire)) {
            if (deadline.passed()) return WEFT_FAIL(WEFT_ERR_TIMEOUT, "PMIx fence did not complete");
            if (!dead_since) {
                for (uint32_t r = 0; r < size() && !dead_since; ++r) {
                    if (!known_dead(r)) continue;
                    dead_since = now_ns();
                    dead_rank = r;
                }
            } else if (now_ns() - dead_since > grace_ns) {
                // The record stays alive: the callback may still fire.
                if (loss_expected_) {
                    WEFT_LOG(debug, "PMIx exchange %s: rank %u died and the fence did not complete", key, dead_rank);
                    return WEFT_ERR_PEER_FAILED;
                }
                return WEFT_FAIL(WEFT_ERR_PEER_FAILED,
                                 "PMIx exchange %s: rank %u died and the fence did not complete within %llu ms", key,
                                 dead_rank, static_cast<unsigned long long>(grace_ns / 1000000));
            }
            progress_while_waiting();
            backoff.pause();
        }
        rc = fence->status.load();
        delete fence;
        if (rc != PMIX_SUCCESS) return WEFT_FAIL(WEFT_ERR_BOOTSTRAP, "PMIx_Fence: %s", PMIx_Error_string(rc));
        all.assign(size(), {});
        // Every Get is bounded by the deadline. A member known to have died
        // may have contributed before it died (the fence then completed
        // with its value) or not (a fault-tolerant launcher, prterun
        // --runtime-options recoverable, completes the fence without it):
        // its value is asked for with PMIX_IMMEDIATE, so the server answers
        // from what the fence collected and never waits for one that will
        // not come.
        pmix_info_t bound[2];
        int seconds = static_cast<int>(deadline.remaining_ns() / 1000000000ull) + 1;
        bool immediate = true;
        PMIX_INFO_CONSTRUCT(&bound[0]);
        PMIX_INFO_LOAD(&bound[0], PMIX_TIMEOUT, &seconds, PMIX_INT);
        PMIX_INFO_CONSTRUCT(&bound[1]);
        PMIX_INFO_LOAD(&bound[1], PMIX_IMMEDIATE, &immediate, PMIX_BOOL);
        for (uint32_t r = 0; r < size(); ++r) {
            const bool dead = known_dead(r);
            pmix_proc_t p;
            PMIX_PROC_CONSTRUCT(&p);
            PMIX_LOAD_NSPACE(p.nspace, me_.nspace);
            p.rank = r;
            pmix_value_t* got = nullptr;
            rc = PMIx_Get(&p, key, bound, dead ? 2 : 1, &got);
            if (rc != PMIX_SUCCESS || !got || got->type != PMIX_BYTE_OBJECT) {
                if (got) PMIX_VALUE_RELEASE(got);
                if (dead && loss_expected_) {
                    WEFT_LOG(debug, "PMIx exchange %s: rank %u died before it contributed", key, r);
                    return WEFT_ERR_PEER_FAILED;
                }
                if (dead)
                    return WEFT_FAIL(WEFT_ERR_PEER_FAILED, "PMIx exchange %s: rank %u died before it contributed", key,
                                     r);
                return WEFT_FAIL(WEFT_ERR_BOOTSTRAP, "PMIx_Get(%s) from rank %u: %s", key, r, PMIx_Error_string(rc));
            }
            const auto* b = reinterpret_cast<const uint8_t*>(got->data.bo.bytes);
            all[r].assign(b, b + got->data.bo.size);
            PMIX_VALUE_RELEASE(got);
        }
        return WEFT_OK;
    }

private:
    pmix_proc_t me_{};
    bool initialized_ = false;
    uint32_t seq_ = 0;
};

}  // namespace

Status make_pmix_bootstrap(std::unique_ptr<Bootstrap>& out) {
    auto b = std::make_unique<PmixBootstrap>();
    Status st = b->init();
    if (st != WEFT_OK) return st;
    out = std::move(b);
    return WEFT_OK;
}

}  // namespace weft

#else

namespace weft {
Status make_pmix_bootstrap(std::unique_ptr<Bootstrap>&) {
    return WEFT_FAIL(WEFT_ERR_UNSUPPORTED, "launched by PMIx, but this weft was built without PMIx (WEFT_ENABLE_PMIX)");
}
}  // namespace weft
#endif
