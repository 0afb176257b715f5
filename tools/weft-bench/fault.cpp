// fault.cpp — weft-bench's failure-detection row (-t fault): one rank is
// killed for real and every survivor times how long weft took to tell it.
// Run under weft-run --keep-survivors --fault kill:rank=R:at=weft-bench.victim
// (R > 0). The victim stamps CLOCK_MONOTONIC (one clock for every process on
// the host: run on one host) into every survivor's window, flushes, and
// reaches the fault point, where weft-run's fault kills it with SIGKILL.
// Each survivor waits inside weft (weft_wait backs off to the kernel, as an
// application would: spinning survivors on few cores would starve the
// threads that learn of the death) until weft_peer_failed says so; its
// sample is notice - stamp. weft_comm_validate_global then makes the
// failure known on the world communicator, so the survivors' samples are
// pooled over it: the row's max is the time until every survivor knew.
// It runs last: the job has one rank fewer afterwards.
#include "session.hpp"

#include <weft/ft.h>

#include <cstdlib>
#include <cstring>

namespace weft_bench {

namespace {
constexpr const char* victim_point = "weft-bench.victim";
}

bool armed_as_victim() {
    // weft-run arms a fault for the chosen rank only, in WEFT_FAULT_POINTS
    // ("kill@NAME#COUNT;...": transport/common.cpp).
    const char* v = std::getenv("WEFT_FAULT_POINTS");
    return v && std::strstr(v, "kill@weft-bench.victim") != nullptr;
}

void run_fault(Session& s) {
    check(s, weft_set_peer_failure_handler(s.ctx, nullptr, nullptr), "weft_set_peer_failure_handler");
    check(s, weft_barrier(s.world), "barrier");
    if (s.rank == s.victim) {
        const uint64_t stamp = bench::now_ns();
        for (uint32_t r = 0; r < s.size; ++r)
            if (r != s.victim) check(s, weft_put(s.win, r, fault_stamp_off, &stamp, sizeof stamp), "weft_put (stamp)");
        check(s, weft_flush(s.win, WEFT_RANK_ALL), "weft_flush");
        weft_fault_point(victim_point);
        die(s,
            "the victim survived its fault point: run under weft-run --keep-survivors --fault "
            "kill:rank=R:at=weft-bench.victim");
    }
    int failed = 0;
    const uint64_t deadline = bench::now_ns() + bench::wait_limit_ns();
    for (;;) {
        check(s, weft_peer_failed(s.ctx, s.victim, &failed), "weft_peer_failed");
        if (failed || bench::now_ns() >= deadline) break;
        const weft_status_t st = weft_wait(s.ctx, 1000000);
        if (st != WEFT_ERR_TIMEOUT && st != WEFT_ERR_PEER_FAILED) check(s, st, "weft_wait");
    }
    const uint64_t notice = bench::now_ns();
    if (!failed) die(s, "the victim's death was not known in time");
    uint64_t stamp = 0;
    std::memcpy(&stamp, s.base + fault_stamp_off, sizeof stamp);
    if (stamp == 0 || stamp > notice) die(s, "the victim's time stamp did not arrive");
    uint32_t num_failed = 0;
    check(s, weft_comm_validate_global(s.world, &num_failed, nullptr), "weft_comm_validate_global");
    if (num_failed != 1) die(s, "validate_global counted other failures than the victim");
    Samples smp;
    smp.add(notice - stamp);
    check(s, smp.pool(s.world), "pooling the samples");
    if (s.rank != 0) return;
    Row r = smp.row("fault_notice", "event", 0, s.size - 1);
    r.iters = 1;  // one death, one sample per survivor
    s.rows.push_back(r);
}

}  // namespace weft_bench
