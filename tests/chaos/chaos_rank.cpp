// chaos_rank.cpp — one rank of a seeded chaos job (tests/chaos/README.md).
//
// Every rank derives the same plan from the seed: rounds of steps, each step
// a point-to-point pattern (eager, rendezvous, ssend, any-source), a
// collective (blocking or not), a dup/work/free, a revoke, a drain request
// or a validate_local. A round ends with an agreement on "did every step
// succeed here"; a round that failed on some rank (a peer died, was revoked,
// a wait gave up) is followed by ULFM's recovery on every survivor: revoke,
// validate_global, shrink, and an allgather on the shrunk communicator that
// checks every survivor got the same failed set and membership. Every check
// the rank can make alone (payloads, statuses, reduction results) is made
// here; what needs several ranks' views (a send that reported success
// against its receive, drain counters, recovery records) goes to a per-rank
// log that chaos.py compares after the job.
//
// Only the public C ABI is used. Log lines: "<kind> key=value ...", flushed
// at once (a rank may be SIGKILLed at any instruction). "V ..." lines are
// invariant violations found by this rank.
#include <weft/comm.h>
#include <weft/drain.h>
#include <weft/ft.h>
#include <weft/state_window.h>
#include <weft/weft.h>

#include <algorithm>
#include <atomic>
#include <cinttypes>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>
#include <unistd.h>

namespace {

// ------------------------------------------------------------ randomness
uint64_t mix(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}
uint64_t hash(std::initializer_list<uint64_t> parts) {
    uint64_t h = 0x243f6a8885a308d3ull;
    for (uint64_t p : parts) h = mix(h ^ mix(p));
    return h;
}
struct Rng {
    uint64_t s;
    uint64_t next() { return s = mix(s); }
    uint32_t below(uint32_t n) { return n ? uint32_t(next() % n) : 0; }
    bool percent(uint32_t p) { return below(100) < p; }
};

// ---------------------------------------------------------------- state
uint64_t g_seed = 0;
weft_context_t g_ctx = nullptr;
uint32_t g_wrank = 0, g_wsize = 0;
size_t g_eager = 8192;
FILE* g_log = nullptr;
uint32_t g_rounds = 8;
std::atomic<const uint64_t*> g_state{nullptr};  // this rank's state window (read by the drain callback)
uint32_t g_violations = 0;

uint64_t now_ms() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return uint64_t(ts.tv_sec) * 1000 + uint64_t(ts.tv_nsec) / 1000000;
}

[[gnu::format(printf, 1, 2)]] void logf(const char* fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    std::vfprintf(g_log, fmt, ap);
    va_end(ap);
    std::fputc('\n', g_log);
    std::fflush(g_log);
}

// An invariant this rank can check alone failed: log it (chaos.py fails the
// run and prints the seed) and to stderr for the job's output.
[[gnu::format(printf, 2, 3)]] void violation(const char* invariant, const char* fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    ++g_violations;
    logf("V inv=%s rank=%u %s", invariant, g_wrank, msg);
    std::fprintf(stderr, "chaos: rank %u: VIOLATION %s: %s (seed %" PRIu64 ")\n", g_wrank, invariant, msg, g_seed);
}

const char* sname(weft_status_t s) {
    switch (s) {
        case WEFT_OK:
            return "OK";
        case WEFT_ERR_PEER_FAILED:
            return "PEER_FAILED";
        case WEFT_ERR_REVOKED:
            return "REVOKED";
        case WEFT_ERR_PEER_FAILED_PENDING:
            return "PENDING";
        case WEFT_ERR_TIMEOUT:
            return "TIMEOUT";
        case WEFT_ERR_TRUNCATE:
            return "TRUNCATE";
        case WEFT_ERR_BUSY:
            return "BUSY";
        case WEFT_ERR_TRANSPORT:
            return "TRANSPORT";
        default:
            return "OTHER";
    }
}

// Statuses a fault or a revoke may legitimately produce; anything else
// (TIMEOUT: a wait that no failure or revoke ended; BUSY; ...) is logged
// as a violation by the caller.
bool expected_failure(weft_status_t s) {
    return s == WEFT_ERR_PEER_FAILED || s == WEFT_ERR_REVOKED || s == WEFT_ERR_PEER_FAILED_PENDING;
}

// ------------------------------------------------------------- payloads
// A message's bytes derive from its identity (seed, epoch, round, step,
// sender's job rank, receiver's job rank, seq): a receiver recomputes them.
struct MsgId {
    uint32_t epoch, round, step, src, dst, seq;
    uint64_t key() const { return hash({g_seed, epoch, round, step, src, dst, seq}); }
    std::string str() const {
        char b[96];
        std::snprintf(b, sizeof b, "%u.%u.%u.%u.%u.%u", epoch, round, step, src, dst, seq);
        return b;
    }
};
void fill(std::vector<uint8_t>& buf, size_t len, uint64_t key) {
    buf.resize(len);
    for (size_t i = 0; i < len; i += 8) {
        const uint64_t w = mix(key + i);
        std::memcpy(buf.data() + i, &w, std::min<size_t>(8, len - i));
    }
}
// Index of the first wrong byte, or SIZE_MAX.
size_t first_mismatch(const uint8_t* p, size_t len, uint64_t key) {
    for (size_t i = 0; i < len; i += 8) {
        const uint64_t w = mix(key + i);
        const size_t n = std::min<size_t>(8, len - i);
        if (std::memcmp(p + i, &w, n) != 0)
            for (size_t j = 0; j < n; ++j)
                if (p[i + j] != reinterpret_cast<const uint8_t*>(&w)[j]) return i + j;
    }
    return SIZE_MAX;
}

// ---------------------------------------------------------- communicator
struct Comm {
    weft_comm_t c = nullptr;
    std::vector<uint32_t> members;  // communicator rank -> job rank
    uint32_t me = 0;
    uint32_t n() const { return uint32_t(members.size()); }
    uint64_t mask() const {
        uint64_t m = 0;
        for (uint32_t r : members) m |= 1ull << r;
        return m;
    }
};
bool describe(weft_comm_t c, Comm& out) {
    out.c = c;
    uint32_t n = 0;
    if (weft_comm_size(c, &n) != WEFT_OK || weft_comm_rank(c, &out.me) != WEFT_OK) return false;
    out.members.resize(n);
    for (uint32_t i = 0; i < n; ++i)
        if (weft_comm_job_rank(c, i, &out.members[i]) != WEFT_OK) return false;
    return true;
}

// Where the plan is: identifies every message and every record.
struct Where {
    uint32_t epoch, round, step;
};

// Sizes: eager (below the eager limit), rendezvous (above it, up to 1 MiB).
enum Kind : uint32_t { EAGER = 0, RNDV = 1, SSEND_EAGER = 2, SSEND_RNDV = 3 };
const char* kname(uint32_t k) {
    static const char* names[] = {"eager", "rndv", "ssend", "ssend_rndv"};
    return names[k & 3];
}
size_t msg_len(const MsgId& id, uint32_t kind) {
    Rng r{id.key() ^ 0x51a5};
    if (kind == EAGER || kind == SSEND_EAGER) return 1 + r.below(uint32_t(std::max<size_t>(g_eager / 2, 8)));
    const uint32_t big = r.percent(15) ? (1u << 20) : (96u << 10);
    return g_eager + 1 + r.below(big);
}

// ------------------------------------------------------------- requests
// Everything a step started and must complete before it ends: each pending
// request keeps its buffers until its wait returns.
struct Op {
    enum Type { SEND, RECV, COLL } type;
    explicit Op(Type t) : type(t) {}
    weft_request_t req = nullptr;
    MsgId id{};  // SEND/RECV: the message (RECV any-source: src unknown)
    uint32_t kind = 0;
    bool any_source = false;
    std::vector<uint8_t> buf;
    size_t want_len = 0;           // RECV: expected bytes (named source)
    std::string what;              // COLL: what to log
    std::vector<uint64_t> out;     // COLL: result buffer
    std::vector<uint64_t> in;      // COLL: send buffer
    std::vector<uint64_t> expect;  // COLL: reference result
    bool done = false;
};

struct Step {
    Where w;
    Comm* comm;
    std::vector<Op> ops;
    weft_status_t first_error = WEFT_OK;
    std::vector<MsgId> anysrc_seen;  // senders matched by any-source receives
};

void note_error(Step& s, weft_status_t st, const char* what) {
    if (st == WEFT_OK) return;
    if (!expected_failure(st))
        violation(st == WEFT_ERR_TIMEOUT ? "bounded" : "status", "e=%u r=%u s=%u %s returned %s", s.w.epoch, s.w.round,
                  s.w.step, what, sname(st));
    if (s.first_error == WEFT_OK) s.first_error = st;
}

// Checks a completed receive: status and payload against the sender's.
void check_recv(Step& s, Op& op, weft_status_t st, const weft_msg_status_t& ms) {
    MsgId id = op.id;
    if (op.any_source) {
        if (st == WEFT_OK) {
            if (ms.source < 0 || uint32_t(ms.source) >= s.comm->n()) {
                violation("delivery", "any-source receive e=%u r=%u s=%u: OK with source %d", id.epoch, id.round,
                          id.step, ms.source);
                return;
            }
            id.src = s.comm->members[uint32_t(ms.source)];
        } else {
            logf("P role=recv id=%s kind=%s any=1 st=%s", id.str().c_str(), kname(op.kind), sname(st));
            return;
        }
    }
    logf("P role=recv id=%s kind=%s any=%d st=%s", id.str().c_str(), kname(op.kind), op.any_source ? 1 : 0, sname(st));
    if (st != WEFT_OK) return;
    const size_t len = msg_len(id, op.kind);
    if (ms.bytes != len) violation("delivery", "recv %s: %zu bytes, sender sent %zu", id.str().c_str(), ms.bytes, len);
    if (!op.any_source && s.comm->members[uint32_t(ms.source)] != id.src)
        violation("delivery", "recv %s: status source %d is job rank %u", id.str().c_str(), ms.source,
                  s.comm->members[uint32_t(ms.source)]);
    if (ms.tag != int32_t(id.step * 16 + 1))
        violation("delivery", "recv %s: tag %d, sent %u", id.str().c_str(), ms.tag, id.step * 16 + 1);
    const size_t bad = first_mismatch(op.buf.data(), std::min(len, ms.bytes), id.key());
    if (bad != SIZE_MAX)
        violation("delivery", "recv %s: payload differs at byte %zu of %zu", id.str().c_str(), bad, len);
    for (size_t i = len; i < op.buf.size(); ++i)
        if (op.buf[i] != 0xee) {
            violation("delivery", "recv %s: byte %zu past the message was written", id.str().c_str(), i);
            break;
        }
    if (op.any_source) {
        for (const MsgId& seen : s.anysrc_seen)
            if (seen.src == id.src && seen.seq == id.seq)
                violation("delivery", "recv %s: any-source matched the same message twice", id.str().c_str());
        s.anysrc_seen.push_back(id);
    }
}

// Buffers of requests weft never let go of: kept alive to the end, since
// weft may still write into them.
std::vector<std::vector<uint8_t>> g_graveyard;
std::vector<std::vector<uint64_t>> g_graveyard64;

void bury(Op& op) {
    g_graveyard.push_back(std::move(op.buf));
    g_graveyard64.push_back(std::move(op.out));
    g_graveyard64.push_back(std::move(op.in));
}

void complete(Step& s, Op& op, weft_status_t st, const weft_msg_status_t& ms) {
    op.done = true;
    if (st == WEFT_ERR_TIMEOUT) bury(op);
    switch (op.type) {
        case Op::SEND:
            logf("P role=send id=%s kind=%s st=%s", op.id.str().c_str(), kname(op.kind), sname(st));
            note_error(s, st, "send");
            break;
        case Op::RECV:
            check_recv(s, op, st, ms);
            note_error(s, st, "recv");
            break;
        case Op::COLL:
            if (st == WEFT_OK && !op.expect.empty() && op.out != op.expect)
                violation("result", "e=%u r=%u s=%u %s: result differs from the serial reference", s.w.epoch, s.w.round,
                          s.w.step, op.what.c_str());
            note_error(s, st, op.what.c_str());
            break;
    }
}

// Waits for one request, bounded: a receive pending on an unrecognised
// failure (PEER_FAILED_PENDING keeps the handle) is cancelled and waited
// again.
weft_status_t wait_one(weft_request_t* req, weft_msg_status_t* ms) {
    weft_status_t st = weft_request_wait(req, ms);
    // Kept (PEER_FAILED_PENDING, or TIMEOUT: the wait's deadline passed):
    // cancel it, and report what the first wait said.
    const weft_status_t kept = *req ? st : WEFT_OK;
    for (int i = 0; *req && i < 3; ++i) {
        weft_request_cancel(*req);
        st = weft_request_wait(req, ms);
        if (st == WEFT_OK && ms->cancelled) st = kept;
    }
    if (*req) {
        violation("bounded", "a request stayed pending after cancel (status %s)", sname(st));
        *req = nullptr;  // abandoned: the caller keeps its buffers (bury)
        return WEFT_ERR_TIMEOUT;
    }
    return st;
}

// Completes every op of the step. mode 0: wait each in order; 1: waitany
// loop; 2: test loop (bounded by the job's timeout, not here).
void finish(Step& s, uint32_t mode) {
    const uint64_t test_until = now_ms() + 20000;  // then plain waits (bounded by WEFT_TIMEOUT_MS)
    for (;;) {
        if (mode == 2 && now_ms() > test_until) {
            violation("bounded", "e=%u r=%u s=%u: requests still open after 20 s of weft_request_test", s.w.epoch,
                      s.w.round, s.w.step);
            mode = 0;
        }
        std::vector<size_t> open;
        for (size_t i = 0; i < s.ops.size(); ++i)
            if (!s.ops[i].done) open.push_back(i);
        if (open.empty()) return;
        weft_msg_status_t ms{};
        ms.source = -9;
        if (mode == 1 && s.first_error == WEFT_OK) {
            std::vector<weft_request_t> reqs;
            for (size_t i : open) reqs.push_back(s.ops[i].req);
            size_t idx = SIZE_MAX;
            weft_status_t st = weft_request_waitany(reqs.size(), reqs.data(), &idx, &ms);
            if (idx == SIZE_MAX || idx >= reqs.size()) {
                violation("status", "waitany returned index %zu of %zu (%s)", idx, reqs.size(), sname(st));
                mode = 0;
                continue;
            }
            Op& op = s.ops[open[idx]];
            if (reqs[idx] != nullptr) {  // kept (PENDING): finish it alone
                op.req = reqs[idx];
                st = wait_one(&op.req, &ms);
            }
            op.req = nullptr;
            complete(s, op, st, ms);
        } else if (mode == 2 && s.first_error == WEFT_OK) {
            Op& op = s.ops[open.front()];
            int flag = 0;
            weft_status_t st = weft_request_test(&op.req, &flag, &ms);
            if (!flag && st == WEFT_OK) {
                weft_wait(g_ctx, 1000000);
                continue;
            }
            if (op.req) st = wait_one(&op.req, &ms);
            complete(s, op, st, ms);
        } else {
            Op& op = s.ops[open.front()];
            weft_status_t st = wait_one(&op.req, &ms);
            complete(s, op, st, ms);
        }
        if (s.first_error != WEFT_OK) mode = 0;
    }
}

// ------------------------------------------------------------ the steps
Op& post_send(Step& s, uint32_t dst_rank, uint32_t seq, uint32_t kind) {
    s.ops.push_back(Op(Op::SEND));
    Op& op = s.ops.back();
    op.kind = kind;
    op.id = MsgId{s.w.epoch, s.w.round, s.w.step, g_wrank, s.comm->members[dst_rank], seq};
    fill(op.buf, msg_len(op.id, kind), op.id.key());
    return op;
}
weft_status_t start_send(Step& s, Op& op, uint32_t dst_rank) {
    const int32_t tag = int32_t(s.w.step * 16 + 1);
    const bool sync = op.kind == SSEND_EAGER || op.kind == SSEND_RNDV;
    return sync ? weft_issend(s.comm->c, op.buf.data(), op.buf.size(), WEFT_BYTE, dst_rank, tag, &op.req)
                : weft_isend(s.comm->c, op.buf.data(), op.buf.size(), WEFT_BYTE, dst_rank, tag, &op.req);
}
Op& post_recv(Step& s, int32_t src_rank, uint32_t seq, uint32_t kind, size_t max_len) {
    s.ops.push_back(Op(Op::RECV));
    Op& op = s.ops.back();
    op.kind = kind;
    op.any_source = src_rank < 0;
    op.id = MsgId{s.w.epoch, s.w.round, s.w.step, src_rank < 0 ? 0 : s.comm->members[uint32_t(src_rank)], g_wrank, seq};
    op.want_len = op.any_source ? max_len : msg_len(op.id, kind);
    op.buf.assign(op.want_len + 16, 0xee);
    return op;
}

// Starting an op failed at the call: there is no request to wait for.
void failed_at_call(Step& s, Op& op, weft_status_t st) {
    weft_msg_status_t ms{};
    op.req = nullptr;
    complete(s, op, st, ms);
}

// Ring: every member sends m messages (same tag: non-overtaking) to
// me+shift and receives them from me-shift.
void step_ring(Step& s, Rng& r) {
    const uint32_t n = s.comm->n();
    if (n < 2) return;
    const uint32_t shift = 1 + r.below(n - 1), m = 1 + r.below(3), kind = r.below(4), mode = r.below(3);
    const bool blocking_send = r.percent(30);
    const uint32_t dst = (s.comm->me + shift) % n, src = (s.comm->me + n - shift) % n;
    s.ops.reserve(2 * m);
    for (uint32_t q = 0; q < m; ++q) {
        Op& op = post_recv(s, int32_t(src), q, kind, 0);
        weft_status_t st = weft_irecv(s.comm->c, op.buf.data(), op.buf.size(), WEFT_BYTE, int32_t(src),
                                      int32_t(s.w.step * 16 + 1), &op.req);
        if (st != WEFT_OK) failed_at_call(s, op, st);
    }
    for (uint32_t q = 0; q < m && s.first_error == WEFT_OK; ++q) {
        Op& op = post_send(s, dst, q, kind);
        weft_status_t st;
        if (blocking_send) {
            const int32_t tag = int32_t(s.w.step * 16 + 1);
            st = (kind == SSEND_EAGER || kind == SSEND_RNDV)
                     ? weft_ssend(s.comm->c, op.buf.data(), op.buf.size(), WEFT_BYTE, dst, tag)
                     : weft_send(s.comm->c, op.buf.data(), op.buf.size(), WEFT_BYTE, dst, tag);
            failed_at_call(s, op, st);
        } else {
            st = start_send(s, op, dst);
            if (st != WEFT_OK) failed_at_call(s, op, st);
        }
    }
    logf("S e=%u r=%u s=%u op=ring shift=%u m=%u kind=%s mode=%u", s.w.epoch, s.w.round, s.w.step, shift, m,
         kname(kind), mode);
    finish(s, mode);
}

// Gather by any-source: every member but root sends one message; root
// receives n-1 with WEFT_ANY_SOURCE (posted together or one at a time).
void step_any(Step& s, Rng& r) {
    const uint32_t n = s.comm->n();
    if (n < 2) return;
    const uint32_t root = r.below(n), kind = r.below(4), mode = r.below(2);
    const bool together = r.percent(50), blocking = !together && r.percent(50);
    logf("S e=%u r=%u s=%u op=any root=%u kind=%s together=%d blocking=%d", s.w.epoch, s.w.round, s.w.step, root,
         kname(kind), together ? 1 : 0, blocking ? 1 : 0);
    if (s.comm->me != root) {
        s.ops.reserve(1);
        Op& op = post_send(s, root, 0, kind);
        weft_status_t st = start_send(s, op, root);
        if (st != WEFT_OK) failed_at_call(s, op, st);
        finish(s, 0);
        return;
    }
    size_t max_len = 0;
    for (uint32_t i = 0; i < n; ++i) {
        MsgId id{s.w.epoch, s.w.round, s.w.step, s.comm->members[i], g_wrank, 0};
        if (i != root) max_len = std::max(max_len, msg_len(id, kind));
    }
    s.ops.reserve(n);
    for (uint32_t q = 0; q + 1 < n && s.first_error == WEFT_OK; ++q) {
        Op& op = post_recv(s, -1, 0, kind, max_len);
        if (blocking) {
            weft_msg_status_t ms{};
            ms.source = -9;
            const weft_status_t st = weft_recv(s.comm->c, op.buf.data(), op.buf.size(), WEFT_BYTE, WEFT_ANY_SOURCE,
                                               int32_t(s.w.step * 16 + 1), &ms);
            complete(s, op, st, ms);
            continue;
        }
        weft_status_t st = weft_irecv(s.comm->c, op.buf.data(), op.buf.size(), WEFT_BYTE, WEFT_ANY_SOURCE,
                                      int32_t(s.w.step * 16 + 1), &op.req);
        if (st != WEFT_OK) failed_at_call(s, op, st);
        if (!together) finish(s, mode);
    }
    finish(s, mode);
}

uint64_t contribution(const Where& w, uint32_t job_rank, uint32_t i) {
    return hash({g_seed, w.epoch, w.round, w.step, job_rank, i, 0xc011}) >> 8;
}

// Starts (nonblocking) or runs (blocking) one collective with its reference.
void collective(Step& s, Rng& r, bool nonblocking, uint32_t index) {
    const uint32_t n = s.comm->n(), kind = r.below(nonblocking ? 4 : 5);
    s.ops.push_back(Op(Op::COLL));
    Op& op = s.ops.back();
    Where w = s.w;
    w.step = s.w.step * 8 + index;
    const uint32_t count = r.percent(20) ? 1 + r.below(4096) : 1 + r.below(8);
    weft_status_t st = WEFT_OK;
    char what[64];
    switch (kind) {
        case 0: {  // barrier
            std::snprintf(what, sizeof what, "%sbarrier", nonblocking ? "i" : "");
            st = nonblocking ? weft_ibarrier(s.comm->c, &op.req) : weft_barrier(s.comm->c);
            break;
        }
        case 1: {  // allreduce: sum, max or bor over the members
            const weft_op_t o = weft_op_t(r.below(3) == 0 ? WEFT_OP_SUM : r.below(2) ? WEFT_OP_MAX : WEFT_OP_BOR);
            std::snprintf(what, sizeof what, "%sallreduce(op %d, %u)", nonblocking ? "i" : "", int(o), count);
            op.in.resize(count);
            op.out.assign(count, 0);
            op.expect.assign(count, 0);
            for (uint32_t i = 0; i < count; ++i) {
                op.in[i] = contribution(w, g_wrank, i);
                for (uint32_t m : s.comm->members) {
                    const uint64_t v = contribution(w, m, i);
                    op.expect[i] = o == WEFT_OP_SUM   ? op.expect[i] + v
                                   : o == WEFT_OP_MAX ? std::max(op.expect[i], v)
                                                      : (op.expect[i] | v);
                }
            }
            st = nonblocking ? weft_iallreduce(s.comm->c, op.in.data(), op.out.data(), count, WEFT_UINT64, o, &op.req)
                             : weft_allreduce(s.comm->c, op.in.data(), op.out.data(), count, WEFT_UINT64, o);
            break;
        }
        case 2: {  // bcast from a random root
            const uint32_t root = r.below(n);
            std::snprintf(what, sizeof what, "%sbcast(root %u, %u)", nonblocking ? "i" : "", root, count);
            op.out.resize(count);
            op.expect.resize(count);
            for (uint32_t i = 0; i < count; ++i) op.expect[i] = contribution(w, s.comm->members[root], i);
            for (uint32_t i = 0; i < count; ++i) op.out[i] = s.comm->me == root ? op.expect[i] : 0xbadbadull;
            st = nonblocking ? weft_ibcast(s.comm->c, op.out.data(), count, WEFT_UINT64, root, &op.req)
                             : weft_bcast(s.comm->c, op.out.data(), count, WEFT_UINT64, root);
            break;
        }
        case 3: {  // allgather
            std::snprintf(what, sizeof what, "%sallgather(%u)", nonblocking ? "i" : "", count);
            op.in.resize(count);
            op.out.assign(size_t(count) * n, 0);
            op.expect.resize(size_t(count) * n);
            for (uint32_t i = 0; i < count; ++i) op.in[i] = contribution(w, g_wrank, i);
            for (uint32_t m = 0; m < n; ++m)
                for (uint32_t i = 0; i < count; ++i)
                    op.expect[size_t(m) * count + i] = contribution(w, s.comm->members[m], i);
            st = nonblocking ? weft_iallgather(s.comm->c, op.in.data(), count, WEFT_UINT64, op.out.data(), &op.req)
                             : weft_allgather(s.comm->c, op.in.data(), count, WEFT_UINT64, op.out.data());
            break;
        }
        default: {  // reduce (sum) to a random root
            const uint32_t root = r.below(n);
            std::snprintf(what, sizeof what, "reduce(root %u, %u)", root, count);
            op.in.resize(count);
            op.out.assign(count, 0);
            for (uint32_t i = 0; i < count; ++i) op.in[i] = contribution(w, g_wrank, i);
            if (s.comm->me == root) {
                op.expect.assign(count, 0);
                for (uint32_t i = 0; i < count; ++i)
                    for (uint32_t m : s.comm->members) op.expect[i] += contribution(w, m, i);
            }
            st = weft_reduce(s.comm->c, op.in.data(), op.out.data(), count, WEFT_UINT64, WEFT_OP_SUM, root);
            break;
        }
    }
    op.what = what;
    logf("S e=%u r=%u s=%u op=%s", s.w.epoch, s.w.round, s.w.step, what);
    if (!nonblocking || st != WEFT_OK) failed_at_call(s, op, st);
}

void step_coll(Step& s, Rng& r) {
    s.ops.reserve(1);
    collective(s, r, false, 0);
}

// 1-3 non-blocking collectives, optionally with a ring's messages among
// them, completed in order, by waitany or by tests.
void step_nbcoll(Step& s, Rng& r) {
    const uint32_t k = 1 + r.below(3), mode = r.below(3);
    s.ops.reserve(k);
    for (uint32_t i = 0; i < k && s.first_error == WEFT_OK; ++i) collective(s, r, true, i);
    finish(s, mode);
}

// ------------------------------------------------------------ recovery
void revoke(weft_comm_t c, const char* why) {
    if (!c) return;
    int already = 0;
    weft_comm_is_revoked(c, &already);
    const weft_status_t st = weft_comm_revoke(c);
    logf("X revoke why=%s was=%d st=%s", why, already, sname(st));
}

std::vector<uint32_t> failed_set(weft_comm_t c, weft_failed_set_t which) {
    size_t n = 0;
    std::vector<uint32_t> v;
    if (weft_comm_get_failed(c, which, WEFT_FAILED_ALL, nullptr, 0, &n) != WEFT_OK) return v;
    v.resize(n);
    if (weft_comm_get_failed(c, which, WEFT_FAILED_ALL, v.data(), v.size(), &n) != WEFT_OK) v.clear();
    v.resize(std::min(n, v.size()));
    return v;
}

// Work on a duplicate: a ring and an allreduce, and perhaps a revoke of it
// by one member right after the dup (ULFM's usual moment), then free.
// A dup is used only after the round's agreement said every member ended
// the round cleanly (ULFM's rule for creations: when the parent is revoked
// or a member fails during one, the new communicator may exist at some
// members and not at others, and a member using it would wait for one that
// never made it). The work on it then runs at the round's end; after a
// failed round it is freed unused.
struct PendingDup {
    weft_comm_t d = nullptr;
    Where w;
    bool revoke_it = false;
    uint32_t revoker = 0;
    uint64_t seed = 0;
};
std::vector<PendingDup> g_pending_dups;

void step_dup(Step& s, Rng& r) {
    const bool revoke_it = r.percent(15);
    const uint32_t revoker = r.below(s.comm->n());
    logf("S e=%u r=%u s=%u op=dup revoke=%d revoker=%u", s.w.epoch, s.w.round, s.w.step, revoke_it ? 1 : 0, revoker);
    weft_comm_t d = nullptr;
    weft_status_t st = weft_comm_dup(s.comm->c, &d);
    if (st != WEFT_OK) {
        note_error(s, st, "dup");
        return;
    }
    g_pending_dups.push_back(PendingDup{d, s.w, revoke_it, revoker, r.next()});
}

void use_pending_dups(bool clean_everywhere) {
    for (PendingDup& p : g_pending_dups) {
        if (!clean_everywhere) {
            weft_comm_free(&p.d);
            continue;
        }
        Comm dc;
        if (!describe(p.d, dc)) {
            violation("status", "a dup'd communicator does not describe itself");
            weft_comm_free(&p.d);
            continue;
        }
        if (p.revoke_it && dc.me == p.revoker) revoke(p.d, "planned-dup");
        Step inner{Where{p.w.epoch, p.w.round, p.w.step * 8 + 7}, &dc, {}, WEFT_OK, {}};
        Rng ir{p.seed};
        step_ring(inner, ir);
        if (inner.first_error == WEFT_OK) {
            Step c2{Where{p.w.epoch, p.w.round, p.w.step * 8 + 6}, &dc, {}, WEFT_OK, {}};
            step_coll(c2, ir);
            inner.first_error = c2.first_error;
        }
        if (inner.first_error != WEFT_OK) revoke(p.d, "error-in-dup");
        const weft_status_t st = weft_comm_free(&p.d);
        if (st != WEFT_OK && !expected_failure(st)) violation("status", "free of a dup returned %s", sname(st));
    }
    g_pending_dups.clear();
}

// A drain asked for by every member; its result must come within its bound.
uint64_t g_drain_wait_ms = 30000;
struct QuiescentRecord {
    std::atomic<uint64_t> drain{0}, sent{0}, received{0}, buffered{0}, job_buffered{0};
} g_quiescent;
void on_quiescent(void*, const weft_drain_result_t* res) {
    // The drain thread, at the quiescent point: no weft calls. The counters
    // are this rank's own words (owner-store) in its state window.
    const uint64_t* sw = g_state.load();
    uint64_t sent = 0, received = 0;
    if (sw) {
        sent = std::atomic_ref<const uint64_t>(sw[WEFT_STATE_P2P_SENT_OFF / 8]).load();
        received = std::atomic_ref<const uint64_t>(sw[WEFT_STATE_P2P_RECEIVED_OFF / 8]).load();
    }
    logf("Q drain=%" PRIu64 " sent=%" PRIu64 " received=%" PRIu64 " buffered=%" PRIu64 " job_buffered=%" PRIu64,
         res->drain, sent, received, res->buffered_messages, res->job_buffered_messages);
}
// Every member waits for the same drain: the asker's number is broadcast,
// or, when everyone asks, the highest number asked for (drains run in
// order, so that one ends last). A member that waited alone while the
// others went into collectives it has not started would deadlock the
// drain: the drain needs it to run on to their clocks.
void step_drain(Step& s, Rng& r) {
    const uint32_t asker = r.below(s.comm->n());
    const bool everyone = r.percent(50);
    logf("S e=%u r=%u s=%u op=drain asker=%u everyone=%d", s.w.epoch, s.w.round, s.w.step, asker, everyone ? 1 : 0);
    uint64_t number = 0;
    if (everyone || s.comm->me == asker) {
        const weft_status_t st = weft_drain_request(g_ctx, &number);
        if (st != WEFT_OK) violation("drain", "weft_drain_request returned %s", sname(st));
        weft_fault_point("chaos.drain");
    }
    uint64_t agreed = number;
    const weft_status_t st = everyone ? weft_allreduce(s.comm->c, &number, &agreed, 1, WEFT_UINT64, WEFT_OP_MAX)
                                      : weft_bcast(s.comm->c, &agreed, 1, WEFT_UINT64, asker);
    if (st != WEFT_OK) {
        note_error(s, st, everyone ? "allreduce of drain numbers" : "bcast of the drain number");
        return;
    }
    if (agreed < number)
        violation("result", "drain numbers: max %" PRIu64 " below this rank's %" PRIu64, agreed, number);
    const uint64_t t0 = now_ms();
    weft_drain_result_t res{};
    const weft_status_t ws = weft_drain_wait(g_ctx, agreed, g_drain_wait_ms, &res);
    logf("D drain=%" PRIu64 " wait=%s status=%s attempts=%u buffered=%" PRIu64 " job_buffered=%" PRIu64 " ms=%" PRIu64,
         agreed, sname(ws), sname(res.status), res.attempts, res.buffered_messages, res.job_buffered_messages,
         now_ms() - t0);
    // The drain's own outcome (drain.h): PEER_FAILED naming a member that
    // failed, or TIMEOUT at WEFT_DRAIN_TIMEOUT_MS (a stopped member nobody
    // declared): a failure status within its bound is an allowed end; the
    // driver fails a drain that ended so in a job without a fault (W line).
    if (ws == WEFT_ERR_PEER_FAILED && res.drain == agreed && res.failed_rank != UINT32_MAX) {
        logf("W drain=%" PRIu64 " ended=PEER_FAILED failed_rank=%u", agreed, res.failed_rank);
        return;
    }
    if (ws == WEFT_ERR_TIMEOUT && res.drain == agreed && res.status == WEFT_ERR_TIMEOUT) {
        logf("W drain=%" PRIu64 " ended=TIMEOUT", agreed);
        return;
    }
    if (ws == WEFT_ERR_TIMEOUT) {
        violation("drain-bound", "drain %" PRIu64 " did not end within %" PRIu64 " ms", agreed, g_drain_wait_ms);
        // The drain still runs and holds the job: nothing after it is
        // meaningful. Leave now rather than spend the job's bound.
        logf("B bail after drain-bound");
        std::fflush(nullptr);
        std::_Exit(4);
    }
    if (ws != WEFT_OK)
        violation("drain", "weft_drain_wait(%" PRIu64 ") returned %s", agreed, sname(ws));
    else if (res.drain != agreed)
        violation("drain", "waited for drain %" PRIu64 ", got the result of %" PRIu64, agreed, res.drain);
}

void step_validate_local(Step& s) {
    uint32_t nf = 0, nn = 0;
    weft_status_t st = weft_comm_validate_local(s.comm->c, &nf, &nn);
    const std::vector<uint32_t> l = failed_set(s.comm->c, WEFT_FAILED_LOCAL);
    logf("S e=%u r=%u s=%u op=validate_local st=%s failed=%u", s.w.epoch, s.w.round, s.w.step, sname(st), nf);
    if (st != WEFT_OK)
        violation("status", "validate_local returned %s", sname(st));
    else if (l.size() != nf)
        violation("failed-set", "validate_local said %u failed, get_failed lists %zu", nf, l.size());
}

// ------------------------------------------------------------- a round
enum StepType { RING, ANY, COLL, NBCOLL, DUP, REVOKE, DRAIN, VLOCAL, NSTEP };
StepType pick_step(Rng& r, bool drains) {
    const uint32_t x = r.below(100);
    if (x < 26) return RING;
    if (x < 40) return ANY;
    if (x < 58) return COLL;
    if (x < 74) return NBCOLL;
    if (x < 84) return DUP;
    if (x < 87) return REVOKE;
    if (x < 94) return drains ? DRAIN : COLL;
    return VLOCAL;
}

// The plan of round `round` in epoch `epoch` on an n-member communicator.
struct RoundPlan {
    uint32_t steps;
    std::vector<StepType> types;
    std::vector<uint64_t> seeds;
    bool has_drain = false;
    uint32_t extra;  // after a clean round: 0 none, 1 validate_global, 2 agree, 3 iagree, 4 shrink, 5 ishrink
};
RoundPlan plan_round(uint32_t epoch, uint32_t round, uint32_t n, bool drains) {
    Rng r{hash({g_seed, epoch, round, n, 0x9a11})};
    RoundPlan p;
    p.steps = 2 + r.below(4);
    for (uint32_t i = 0; i < p.steps; ++i) {
        p.types.push_back(pick_step(r, drains));
        p.seeds.push_back(r.next());
        if (p.types.back() == DRAIN) p.has_drain = true;
    }
    const uint32_t x = r.below(100);
    p.extra = x < 45 ? 0 : x < 60 ? 1 : x < 75 ? 2 : x < 85 ? 3 : x < 93 ? 4 : 5;
    return p;
}

// Runs the round's steps; false when a step failed here (the communicator
// is then revoked, so every member's next operation fails too).
bool run_round(Comm& comm, uint32_t epoch, uint32_t round, const RoundPlan& p) {
    for (uint32_t i = 0; i < p.steps; ++i) {
        weft_fault_point("chaos.step");
        Step s{Where{epoch, round, i}, &comm, {}, WEFT_OK, {}};
        Rng r{p.seeds[i]};
        switch (p.types[i]) {
            case RING:
                step_ring(s, r);
                break;
            case ANY:
                step_any(s, r);
                break;
            case COLL:
                step_coll(s, r);
                break;
            case NBCOLL:
                step_nbcoll(s, r);
                break;
            case DUP:
                step_dup(s, r);
                break;
            case REVOKE: {
                const uint32_t who = r.below(comm.n());
                logf("S e=%u r=%u s=%u op=revoke who=%u", epoch, round, i, who);
                if (comm.me == who) {
                    revoke(comm.c, "planned");
                    s.first_error = WEFT_ERR_REVOKED;
                }
                break;
            }
            case DRAIN:
                step_drain(s, r);
                break;
            case VLOCAL:
                step_validate_local(s);
                break;
            default:
                break;
        }
        if (s.first_error != WEFT_OK) {
            logf("E e=%u r=%u s=%u first=%s", epoch, round, i, sname(s.first_error));
            revoke(comm.c, "error");
            return false;
        }
    }
    return true;
}

// Checks an agreement's flag: the AND of what the contributors gave, so it
// holds no bit this rank did not give, and every bit all members gave.
void check_agree_flag(const char* what, int mine, int got, int all) {
    if ((got & mine) != got || (got & all) != all)
        violation("result", "%s: flag %#x, mine %#x, AND of all members %#x", what, unsigned(got), unsigned(mine),
                  unsigned(all));
}

// ULFM's recovery (or a planned shrink): G agreed, a shrunk communicator
// with the same members everywhere, checked by an allgather on it.
// Returns false when the allgather failed at any member (another failure,
// or a member's revoke that overtook the allgather somewhere): every member
// then recovers again. The allgather's outcome is agreed because it can
// differ between members (ULFM: a collective may fail at some members and
// succeed at others); a member that went on to the next round while
// another recovered would call different fault-tolerant operations in
// the same place (seed 1074: an agree against a validate and a shrink).
bool shrink_to(Comm& comm, uint32_t& epoch, const char* why, bool nonblocking) {
    uint32_t nf = 0, nn = 0;
    weft_status_t st = weft_comm_validate_global(comm.c, &nf, &nn);
    if (st != WEFT_OK) violation("status", "validate_global (%s) returned %s", why, sname(st));
    uint64_t fmask = 0;
    for (uint32_t r : failed_set(comm.c, WEFT_FAILED_GLOBAL)) fmask |= 1ull << comm.members.at(r);
    weft_fault_point("chaos.recovery");
    weft_comm_t nc = nullptr;
    const uint64_t t0 = now_ms();
    if (nonblocking) {
        weft_request_t req = nullptr;
        st = weft_comm_ishrink(comm.c, &nc, &req);
        if (st == WEFT_OK) {
            weft_msg_status_t ms{};
            st = weft_request_wait(&req, &ms);
        }
    } else {
        st = weft_comm_shrink(comm.c, &nc);
    }
    if (st != WEFT_OK || !nc) {
        violation("recovery", "%sshrink (%s) returned %s after %" PRIu64 " ms", nonblocking ? "i" : "", why, sname(st),
                  now_ms() - t0);
        return false;
    }
    Comm next;
    if (!describe(nc, next)) {
        violation("status", "the shrunk communicator does not describe itself");
        return false;
    }
    const uint64_t mmask = next.mask();
    if (mmask & fmask)
        violation("membership", "shrink kept failed members (%#" PRIx64 " & %#" PRIx64 ")", mmask, fmask);
    if ((mmask & ~comm.mask()) != 0) violation("membership", "shrink added members");
    if (!(mmask & (1ull << g_wrank))) violation("membership", "shrink left this rank out");
    ++epoch;
    logf("R epoch=%u why=%s failed=%#" PRIx64 " members=%#" PRIx64 " vg=%s", epoch, why, fmask, mmask, "OK");
    // Every survivor's view, compared here (and by chaos.py from the logs).
    uint64_t mine[3] = {epoch, fmask, mmask};
    std::vector<uint64_t> all(3 * size_t(next.n()), 0);
    st = weft_allgather(nc, mine, 3, WEFT_UINT64, all.data());
    weft_comm_t old = comm.c;
    comm = next;
    if (old) {
        weft_comm_t world = nullptr;
        weft_comm_world(g_ctx, &world);
        if (old != world) weft_comm_free(&old);
    }
    if (st != WEFT_OK) {
        if (!expected_failure(st)) violation("status", "allgather after shrink returned %s", sname(st));
        logf("E e=%u after-shrink allgather %s", epoch, sname(st));
        revoke(comm.c, "error");
    }
    int whole = st == WEFT_OK ? 1 : 0;
    const weft_status_t ast = weft_comm_agree(comm.c, &whole);
    logf("A e=%u after-shrink st=%s flag=%d", epoch, sname(ast), whole);
    if (ast != WEFT_OK && ast != WEFT_ERR_PEER_FAILED)
        violation("status", "after-shrink agree returned %s", sname(ast));
    if (ast == WEFT_OK && whole == 1 && st != WEFT_OK)
        violation("result", "after-shrink agree: flag 1 though this rank's allgather failed");
    if (!(ast == WEFT_OK && whole == 1)) return false;
    for (uint32_t i = 0; i < next.n(); ++i)
        if (all[3 * i] != mine[0] || all[3 * i + 1] != mine[1] || all[3 * i + 2] != mine[2])
            violation("agreement",
                      "after shrink, job rank %u saw epoch %" PRIu64 " failed %#" PRIx64 " members %#" PRIx64
                      "; this rank epoch %u failed %#" PRIx64 " members %#" PRIx64,
                      next.members[i], all[3 * i], all[3 * i + 1], all[3 * i + 2], epoch, fmask, mmask);
    return true;
}

// ---------------------------------------------------------------- main
int run(const char* outdir, bool drains) {
    char path[4096];
    std::snprintf(path, sizeof path, "%s/rank.%u.log", outdir, g_wrank);
    g_log = std::fopen(path, "w");
    if (!g_log) {
        std::perror(path);
        return 2;
    }
    weft_caps_t caps{};
    if (weft_query_caps(g_ctx, &caps) == WEFT_OK && caps.am_eager_limit) g_eager = caps.am_eager_limit;
    weft_window_t sw = nullptr;
    void* base = nullptr;
    size_t len = 0;
    if (weft_state_window(g_ctx, &sw) == WEFT_OK && weft_window_local(sw, &base, &len) == WEFT_OK)
        g_state.store(static_cast<const uint64_t*>(base));
    if (drains) weft_drain_set_callback(g_ctx, on_quiescent, nullptr);
    logf("I seed=%" PRIu64 " rank=%u size=%u transport=%s eager=%zu rounds=%u", g_seed, g_wrank, g_wsize,
         caps.transport ? caps.transport : "?", g_eager, g_rounds);

    weft_comm_t world = nullptr;
    weft_comm_world(g_ctx, &world);
    Comm comm;
    describe(world, comm);
    uint32_t epoch = 0, round = 0;
    uint32_t recoveries = 0;
    while (round < g_rounds) {
        const RoundPlan p = plan_round(epoch, round, comm.n(), drains);
        const bool clean = run_round(comm, epoch, round, p);
        weft_fault_point("chaos.round_end");
        logf("T e=%u r=%u clean=%d", epoch, round, clean ? 1 : 0);
        int flag = clean ? 1 : 0;
        weft_status_t st = weft_comm_agree(comm.c, &flag);
        logf("A e=%u r=%u st=%s flag=%d", epoch, round, sname(st), flag);
        if (st != WEFT_OK && st != WEFT_ERR_PEER_FAILED) violation("status", "round-end agree returned %s", sname(st));
        if (st == WEFT_OK && flag == 0 && clean) {
            // Someone else failed: fine. Nothing to check.
        }
        if (st == WEFT_OK && flag == 1 && !clean)
            violation("result", "round-end agree: flag 1 though this rank contributed 0");
        bool recover = !(st == WEFT_OK && flag == 1);
        use_pending_dups(!recover);
        const uint32_t this_round = round++;
        if (!recover) {
            // A clean round everywhere (the agreement says so, uniformly):
            // perhaps a fault-tolerance operation now, the same on every member.
            switch (p.extra) {
                case 1: {
                    uint32_t nf = 0, nn = 0;
                    st = weft_comm_validate_global(comm.c, &nf, &nn);
                    uint64_t fmask = 0;
                    for (uint32_t r : failed_set(comm.c, WEFT_FAILED_GLOBAL)) fmask |= 1ull << comm.members.at(r);
                    logf("G e=%u r=%u op=validate_global st=%s failed=%#" PRIx64, epoch, this_round, sname(st), fmask);
                    if (st != WEFT_OK) violation("status", "validate_global returned %s", sname(st));
                    // With failures in G collectives would go to the survivors:
                    // shrink instead (uniform: G is agreed).
                    recover = fmask != 0;
                    break;
                }
                case 2:
                case 3: {
                    Rng r{hash({g_seed, epoch, this_round, 0xa9ee})};
                    const int base_bits = int(r.next() & 0xff);
                    const int mine = base_bits | int(hash({g_seed, epoch, this_round, g_wrank}) & 0xff00);
                    int all = mine;
                    for (uint32_t m : comm.members)
                        all &= base_bits | int(hash({g_seed, epoch, this_round, m}) & 0xff00);
                    int got = mine;
                    weft_request_t req = nullptr;
                    if (p.extra == 2) {
                        st = weft_comm_agree(comm.c, &got);
                    } else if ((st = weft_comm_iagree(comm.c, &got, &req)) == WEFT_OK) {
                        weft_msg_status_t ms{};
                        st = weft_request_wait(&req, &ms);
                    }
                    logf("G e=%u r=%u op=%s st=%s flag=%#x", epoch, this_round, p.extra == 2 ? "agree" : "iagree",
                         sname(st), unsigned(got));
                    if (st == WEFT_OK || st == WEFT_ERR_PEER_FAILED)
                        check_agree_flag("agree", mine, got, all);
                    else
                        violation("status", "agree returned %s", sname(st));
                    recover = st != WEFT_OK;
                    break;
                }
                case 4:
                case 5:
                    if (!shrink_to(comm, epoch, "planned", p.extra == 5)) recover = true;
                    break;
                default:
                    break;
            }
            if (!recover) continue;
        }
        // Recovery, on every survivor (the agreement made it uniform).
        revoke(comm.c, "recovery");
        if (++recoveries > 8) {
            violation("recovery", "more than 8 recoveries: giving up");
            break;
        }
        shrink_to(comm, epoch, "failure", recoveries % 2 == 0);
    }
    // The last agreement: every survivor is past its last operation.
    int one = 1;
    weft_status_t st = weft_comm_agree(comm.c, &one);
    logf("F st=%s flag=%d members=%#" PRIx64 " epoch=%u recoveries=%u violations=%u", sname(st), one, comm.mask(),
         epoch, recoveries, g_violations);
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    const char* outdir = nullptr;
    bool drains = true;
    for (int i = 1; i < argc; ++i) {
        if (!std::strcmp(argv[i], "--seed") && i + 1 < argc)
            g_seed = std::strtoull(argv[++i], nullptr, 10);
        else if (!std::strcmp(argv[i], "--out") && i + 1 < argc)
            outdir = argv[++i];
        else if (!std::strcmp(argv[i], "--rounds") && i + 1 < argc)
            g_rounds = uint32_t(std::strtoul(argv[++i], nullptr, 10));
        else if (!std::strcmp(argv[i], "--drain-wait-ms") && i + 1 < argc)
            g_drain_wait_ms = std::strtoull(argv[++i], nullptr, 10);
        else if (!std::strcmp(argv[i], "--no-drains"))
            drains = false;
        else {
            std::fprintf(stderr,
                         "usage: chaos_rank --seed S --out DIR [--rounds N] [--drain-wait-ms MS] [--no-drains]\n"
                         "one rank of a chaos job; run by tests/chaos/chaos.py under weft-run\n");
            return 2;
        }
    }
    if (!outdir) {
        std::fprintf(stderr, "chaos_rank: --out DIR is required\n");
        return 2;
    }
    weft_status_t st = weft_init(&g_ctx);
    if (st != WEFT_OK) {
        // A rank killed during start-up makes its peers fail init: that is
        // reported, not hung (chaos.py decides whether it was expected).
        std::fprintf(stderr, "chaos: weft_init: %s\n", weft_strerror(st));
        char path[4096];
        std::snprintf(path, sizeof path, "%s/init.%d.failed", outdir, int(getpid()));
        if (FILE* f = std::fopen(path, "w")) std::fclose(f);
        return 0;
    }
    weft_rank(g_ctx, &g_wrank);
    weft_size(g_ctx, &g_wsize);
    const int rc = run(outdir, drains);
    st = weft_finalize(g_ctx);
    if (g_log) {
        if (st != WEFT_OK) violation("finalize", "weft_finalize returned %s", sname(st));
        logf("Z finalize=%s", sname(st));
        std::fclose(g_log);
    }
    return rc;
}
