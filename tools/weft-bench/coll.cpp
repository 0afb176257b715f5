// coll.cpp — weft-bench's rows on every rank: barrier, bcast, allreduce and
// allgather over sizes; communicator dup and free; process-group construct
// and destruct; the full drain and one drain observation round. Each
// iteration is timed on every rank and the row pools all ranks' samples
// (Samples::pool), so its median and tail are the job's, not rank 0's.
// Every result is checked after its timing: the broadcast bytes, the sums,
// each rank's block of the allgather, the new communicator's and group's
// size, the drain's status.
#include "session.hpp"

#include <weft/drain.h>
#include <weft/group.h>

#include <algorithm>
#include <cstring>

namespace weft_bench {

namespace {

// One collective call timed alone: the buffers are filled and checked
// outside it.
template <typename Op>
void timed(Stopwatch& sw, uint64_t it, Op&& op) {
    sw.start();
    op();
    sw.lap(it);
}

void finish(Session& s, Samples& smp, const char* op, const char* unit, uint64_t bytes) {
    check(s, smp.pool(s.world), "pooling the samples");
    if (s.rank != 0) return;
    Row r = smp.row(op, unit, bytes, s.size);
    r.iters /= s.size;  // iterations per rank; the statistics are over all ranks' samples
    s.rows.push_back(r);
}

void barrier_row(Session& s) {
    const uint64_t warm = s.p.warmup, total = warm + s.p.iterations;
    Samples smp;
    Stopwatch smp_sw(smp, warm);
    check(s, weft_barrier(s.world), "barrier");
    for (uint64_t it = 0; it < total; ++it) timed(smp_sw, it, [&] { check(s, weft_barrier(s.world), "weft_barrier"); });
    finish(s, smp, "barrier", "call", 0);
}

void bcast_row(Session& s, uint64_t size) {
    const uint64_t warm = s.warmup_for(size), total = warm + s.iters_for(size);
    std::vector<uint8_t> buf(size, 0);
    Samples smp;
    Stopwatch smp_sw(smp, warm);
    check(s, weft_barrier(s.world), "barrier");
    for (uint64_t it = 0; it < total; ++it) {
        if (s.rank == 0) std::memcpy(buf.data(), s.pat(it + 1), size);
        timed(smp_sw, it, [&] { check(s, weft_bcast(s.world, buf.data(), size, WEFT_BYTE, 0), "weft_bcast"); });
        verify(s, buf.data(), s.pat(it + 1), size, "bcast", it);
    }
    finish(s, smp, "bcast", "call", size);
}

// uint64 sums: element k of rank r is r + k + it; the sum is known.
void allreduce_row(Session& s, uint64_t size) {
    const uint64_t warm = s.warmup_for(size), total = warm + s.iters_for(size), n = size / 8;
    std::vector<uint64_t> in(n), out(n);
    const uint64_t ranks = s.size, rank_sum = ranks * (ranks - 1) / 2;
    Samples smp;
    Stopwatch smp_sw(smp, warm);
    check(s, weft_barrier(s.world), "barrier");
    for (uint64_t it = 0; it < total; ++it) {
        for (uint64_t k = 0; k < n; ++k) in[k] = s.rank + k + it;
        timed(smp_sw, it, [&] {
            check(s, weft_allreduce(s.world, in.data(), out.data(), n, WEFT_UINT64, WEFT_OP_SUM), "weft_allreduce");
        });
        for (uint64_t k = 0; k < n; ++k)
            if (out[k] != ranks * (k + it) + rank_sum) die(s, "allreduce returned a wrong sum");
    }
    finish(s, smp, "allreduce", "call", size);
}

void allgather_row(Session& s, uint64_t size) {
    const uint64_t warm = s.warmup_for(size), total = warm + s.iters_for(size);
    std::vector<uint8_t> out(size * s.size, 0);
    Samples smp;
    Stopwatch smp_sw(smp, warm);
    check(s, weft_barrier(s.world), "barrier");
    for (uint64_t it = 0; it < total; ++it) {
        timed(smp_sw, it, [&] {
            check(s, weft_allgather(s.world, s.pat(it + s.rank), size, WEFT_BYTE, out.data()), "weft_allgather");
        });
        for (uint32_t r = 0; r < s.size; ++r) verify(s, out.data() + r * size, s.pat(it + r), size, "allgather", it);
    }
    finish(s, smp, "allgather", "call", size);
}

void comm_rows(Session& s) {
    const uint64_t warm = s.p.warmup, total = warm + s.p.iterations;
    uint64_t world_id = 0;
    check(s, weft_comm_context_id(s.world, &world_id), "weft_comm_context_id");
    Samples dup, free;
    Stopwatch dup_sw(dup, warm), free_sw(free, warm);
    check(s, weft_barrier(s.world), "barrier");
    for (uint64_t it = 0; it < total; ++it) {
        weft_comm_t c = nullptr;
        timed(dup_sw, it, [&] { check(s, weft_comm_dup(s.world, &c), "weft_comm_dup"); });
        uint32_t n = 0, r = 0;
        uint64_t id = 0;
        check(s, weft_comm_size(c, &n), "weft_comm_size");
        check(s, weft_comm_rank(c, &r), "weft_comm_rank");
        check(s, weft_comm_context_id(c, &id), "weft_comm_context_id");
        if (n != s.size || r != s.rank || id == world_id) die(s, "weft_comm_dup made a wrong communicator");
        timed(free_sw, it, [&] { check(s, weft_comm_free(&c), "weft_comm_free"); });
        if (c != nullptr) die(s, "weft_comm_free left the handle set");
    }
    finish(s, dup, "comm_dup", "call", 0);
    finish(s, free, "comm_free", "call", 0);
}

// Process groups cost milliseconds: at most 200 iterations (and 10 warm-up).
void group_rows(Session& s) {
    const uint64_t warm = std::min<uint64_t>(s.p.warmup, 10), total = warm + std::min<uint64_t>(s.p.iterations, 200);
    std::vector<weft_proc_t> procs(s.size);
    for (uint32_t r = 0; r < s.size; ++r) procs[r] = {s.job, r};
    weft_group_options_t opts{};
    Samples construct, destruct;
    Stopwatch construct_sw(construct, warm), destruct_sw(destruct, warm);
    check(s, weft_barrier(s.world), "barrier");
    for (uint64_t it = 0; it < total; ++it) {
        timed(construct_sw, it, [&] {
            check(s, weft_group_construct(s.ctx, "weft-bench", procs.data(), procs.size(), &opts),
                  "weft_group_construct");
        });
        uint32_t n = 0;
        check(s, weft_group_size(s.ctx, "weft-bench", &n), "weft_group_size");
        if (n != s.size) die(s, "the group has a wrong size");
        timed(destruct_sw, it, [&] { check(s, weft_group_destruct(s.ctx, "weft-bench", 0), "weft_group_destruct"); });
    }
    finish(s, construct, "group_construct", "call", 0);
    finish(s, destruct, "group_destruct", "call", 0);
}

// Rank 0 requests each drain and waits for it; the others wait for the same
// drain number. "drain_round" is one observation round: the drain's own
// measure of its rounds' work (weft_drain_result_t.round_work_ns / rounds).
void drain_rows(Session& s) {
    const uint64_t warm = std::min<uint64_t>(s.p.warmup, 5), total = warm + std::min<uint64_t>(s.p.iterations, 100);
    Samples full, round;
    Stopwatch full_sw(full, warm);
    check(s, weft_barrier(s.world), "barrier");
    for (uint64_t it = 0; it < total; ++it) {
        weft_drain_result_t res{};
        timed(full_sw, it, [&] {
            if (s.rank == 0)
                check(s, weft_drain(s.ctx, &res), "weft_drain");
            else
                check(s, weft_drain_wait(s.ctx, s.drains + 1, 60000, &res), "weft_drain_wait");
        });
        ++s.drains;
        if (res.status != WEFT_OK || res.drain != s.drains) die(s, "a drain did not complete as expected");
        if (it >= warm && res.rounds > 0) round.add(res.round_work_ns / res.rounds);
    }
    finish(s, full, "drain", "call", 0);
    finish(s, round, "drain_round", "round", 0);
}

}  // namespace

void run_collectives(Session& s) {
    auto sizes = [&](uint64_t from, auto&& body) {
        for (uint64_t size = std::max(s.p.min_size, from); size <= s.p.max_size; size *= 2) body(size);
    };
    if (s.has(t_barrier)) barrier_row(s);
    if (s.has(t_bcast)) sizes(1, [&](uint64_t n) { bcast_row(s, n); });
    if (s.has(t_allreduce)) sizes(8, [&](uint64_t n) { allreduce_row(s, n); });
    if (s.has(t_allgather)) sizes(1, [&](uint64_t n) { allgather_row(s, n); });
    if (s.has(t_comm)) comm_rows(s);
    if (s.has(t_group)) group_rows(s);
    if (s.has(t_drain)) drain_rows(s);
}

}  // namespace weft_bench
