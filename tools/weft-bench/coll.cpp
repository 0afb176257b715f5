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

// The ranks a row runs on: a communicator and this rank's place in it.
struct Members {
    weft_comm_t comm;
    uint32_t rank, size;
};

// One collective call timed alone: the buffers are filled and checked
// outside it.
template <typename Op>
void timed(Stopwatch& sw, uint64_t it, Op&& op) {
    sw.start();
    op();
    sw.lap(it);
}

void finish(Session& s, const Members& m, Samples& smp, const char* op, const char* unit, uint64_t bytes) {
    check(s, smp.pool(m.comm), "pooling the samples");
    if (m.rank != 0) return;
    Row r = smp.row(op, unit, bytes, m.size);
    r.iters /= m.size;  // iterations per rank; the statistics are over all ranks' samples
    s.rows.push_back(r);
}

void barrier_row(Session& s, const Members& m) {
    const uint64_t warm = s.p.warmup, total = warm + s.p.iterations;
    Samples smp;
    Stopwatch smp_sw(smp, warm);
    check(s, weft_barrier(m.comm), "barrier");
    for (uint64_t it = 0; it < total; ++it) timed(smp_sw, it, [&] { check(s, weft_barrier(m.comm), "weft_barrier"); });
    finish(s, m, smp, "barrier", "call", 0);
}

void bcast_row(Session& s, const Members& m, uint64_t size) {
    const uint64_t warm = s.warmup_for(size), total = warm + s.iters_for(size);
    std::vector<uint8_t> buf(size, 0);
    Samples smp;
    Stopwatch smp_sw(smp, warm);
    check(s, weft_barrier(m.comm), "barrier");
    for (uint64_t it = 0; it < total; ++it) {
        if (m.rank == 0) std::memcpy(buf.data(), s.pat(it + 1), size);
        timed(smp_sw, it, [&] { check(s, weft_bcast(m.comm, buf.data(), size, WEFT_BYTE, 0), "weft_bcast"); });
        verify(s, buf.data(), s.pat(it + 1), size, "bcast", it);
    }
    finish(s, m, smp, "bcast", "call", size);
}

// uint64 sums: element k of rank r is r + k + it; the sum is known.
void allreduce_row(Session& s, const Members& m, uint64_t size) {
    const uint64_t warm = s.warmup_for(size), total = warm + s.iters_for(size), n = size / 8;
    std::vector<uint64_t> in(n), out(n);
    const uint64_t ranks = m.size, rank_sum = ranks * (ranks - 1) / 2;
    Samples smp;
    Stopwatch smp_sw(smp, warm);
    check(s, weft_barrier(m.comm), "barrier");
    for (uint64_t it = 0; it < total; ++it) {
        for (uint64_t k = 0; k < n; ++k) in[k] = m.rank + k + it;
        timed(smp_sw, it, [&] {
            check(s, weft_allreduce(m.comm, in.data(), out.data(), n, WEFT_UINT64, WEFT_OP_SUM), "weft_allreduce");
        });
        for (uint64_t k = 0; k < n; ++k)
            if (out[k] != ranks * (k + it) + rank_sum) die(s, "allreduce returned a wrong sum");
    }
    finish(s, m, smp, "allreduce", "call", size);
}

void allgather_row(Session& s, const Members& m, uint64_t size) {
    const uint64_t warm = s.warmup_for(size), total = warm + s.iters_for(size);
    std::vector<uint8_t> out(size * m.size, 0);
    Samples smp;
    Stopwatch smp_sw(smp, warm);
    check(s, weft_barrier(m.comm), "barrier");
    for (uint64_t it = 0; it < total; ++it) {
        timed(smp_sw, it, [&] {
            check(s, weft_allgather(m.comm, s.pat(it + m.rank), size, WEFT_BYTE, out.data()), "weft_allgather");
        });
        for (uint32_t r = 0; r < m.size; ++r) verify(s, out.data() + r * size, s.pat(it + r), size, "allgather", it);
    }
    finish(s, m, smp, "allgather", "call", size);
}

void comm_rows(Session& s, const Members& m) {
    const uint64_t warm = s.p.warmup, total = warm + s.p.iterations;
    uint64_t world_id = 0;
    check(s, weft_comm_context_id(m.comm, &world_id), "weft_comm_context_id");
    Samples dup, free;
    Stopwatch dup_sw(dup, warm), free_sw(free, warm);
    check(s, weft_barrier(m.comm), "barrier");
    for (uint64_t it = 0; it < total; ++it) {
        weft_comm_t c = nullptr;
        timed(dup_sw, it, [&] { check(s, weft_comm_dup(m.comm, &c), "weft_comm_dup"); });
        uint32_t n = 0, r = 0;
        uint64_t id = 0;
        check(s, weft_comm_size(c, &n), "weft_comm_size");
        check(s, weft_comm_rank(c, &r), "weft_comm_rank");
        check(s, weft_comm_context_id(c, &id), "weft_comm_context_id");
        if (n != m.size || r != m.rank || id == world_id) die(s, "weft_comm_dup made a wrong communicator");
        timed(free_sw, it, [&] { check(s, weft_comm_free(&c), "weft_comm_free"); });
        if (c != nullptr) die(s, "weft_comm_free left the handle set");
    }
    finish(s, m, dup, "comm_dup", "call", 0);
    finish(s, m, free, "comm_free", "call", 0);
}

// Process groups cost milliseconds: at most 200 iterations (and 10 warm-up).
void group_rows(Session& s, const Members& m) {
    const uint64_t warm = std::min<uint64_t>(s.p.warmup, 10), total = warm + std::min<uint64_t>(s.p.iterations, 200);
    std::vector<weft_proc_t> procs(m.size);
    for (uint32_t r = 0; r < m.size; ++r) procs[r] = {s.job, r};
    weft_group_options_t opts{};
    Samples construct, destruct;
    Stopwatch construct_sw(construct, warm), destruct_sw(destruct, warm);
    check(s, weft_barrier(m.comm), "barrier");
    for (uint64_t it = 0; it < total; ++it) {
        timed(construct_sw, it, [&] {
            check(s, weft_group_construct(s.ctx, "weft-bench", procs.data(), procs.size(), &opts),
                  "weft_group_construct");
        });
        uint32_t n = 0;
        check(s, weft_group_size(s.ctx, "weft-bench", &n), "weft_group_size");
        if (n != m.size) die(s, "the group has a wrong size");
        timed(destruct_sw, it, [&] { check(s, weft_group_destruct(s.ctx, "weft-bench", 0), "weft_group_destruct"); });
    }
    finish(s, m, construct, "group_construct", "call", 0);
    finish(s, m, destruct, "group_destruct", "call", 0);
}

// Rank 0 requests each drain and waits for it; the others wait for the same
// drain number. "drain_round" is one observation round: the drain's own
// measure of its rounds' work (weft_drain_result_t.round_work_ns / rounds).
void drain_rows(Session& s, const Members& m) {
    const uint64_t warm = std::min<uint64_t>(s.p.warmup, 5), total = warm + std::min<uint64_t>(s.p.iterations, 100);
    Samples full, round;
    Stopwatch full_sw(full, warm);
    check(s, weft_barrier(m.comm), "barrier");
    for (uint64_t it = 0; it < total; ++it) {
        weft_drain_result_t res{};
        timed(full_sw, it, [&] {
            if (m.rank == 0)
                check(s, weft_drain(s.ctx, &res), "weft_drain");
            else
                check(s, weft_drain_wait(s.ctx, s.drains + 1, 60000, &res), "weft_drain_wait");
        });
        ++s.drains;
        if (res.status != WEFT_OK || res.drain != s.drains) die(s, "a drain did not complete as expected");
        if (it >= warm && res.rounds > 0) round.add(res.round_work_ns / res.rounds);
    }
    finish(s, m, full, "drain", "call", 0);
    finish(s, m, round, "drain_round", "round", 0);
}

// The rows at one rank count: every member of m runs them.
void rows_on(Session& s, const Members& m) {
    auto sizes = [&](uint64_t from, auto&& body) {
        for (uint64_t size = std::max(s.p.min_size, from); size <= s.p.max_size; size *= 2) body(size);
    };
    if (s.has(t_barrier)) barrier_row(s, m);
    if (s.has(t_bcast)) sizes(1, [&](uint64_t n) { bcast_row(s, m, n); });
    if (s.has(t_allreduce)) sizes(8, [&](uint64_t n) { allreduce_row(s, m, n); });
    if (s.has(t_allgather)) sizes(1, [&](uint64_t n) { allgather_row(s, m, n); });
    if (s.has(t_comm)) comm_rows(s, m);
    if (s.has(t_group)) group_rows(s, m);
    // A drain is job-wide: only at the job's full size.
    if (s.has(t_drain) && m.size == s.size) drain_rows(s, m);
}

}  // namespace

void run_collectives(Session& s) {
    // --rank-sweep: first the first 2, 4, 8, ... ranks (a communicator split
    // off the world; the others wait at the world's barrier), then all.
    if (s.p.rank_sweep)
        for (uint32_t k = 2; k < s.size; k *= 2) {
            weft_comm_t c = nullptr;
            check(s, weft_comm_split(s.world, s.rank < k ? 0 : WEFT_UNDEFINED, static_cast<int32_t>(s.rank), &c),
                  "weft_comm_split");
            if (c != nullptr) {
                Members m{c, s.rank, k};
                rows_on(s, m);
                check(s, weft_comm_free(&c), "weft_comm_free");
            }
            row_barrier(s);
        }
    rows_on(s, Members{s.world, s.rank, s.size});
}

}  // namespace weft_bench
