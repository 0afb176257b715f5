// api.cpp — the C ABI of comm.h over the Engine.
//
// Every entry validates handles and arguments (a clear status and a log
// line, never a crash), takes the context's lock when it is MULTIPLE, and
// turns any C++ exception into a status.
#include "group/api_entry.hpp"
#include "group/detector.hpp"
#include "group/engine.hpp"
#include "group/ft.hpp"
#include "group/pgroup.hpp"
#include "group/layer.hpp"
#include "group/reduce.hpp"
#include "group/schedule.hpp"

#include <atomic>
#include <cstring>
#include <thread>

using weft::guarded;
using weft::Runtime;
using weft::Status;
using weft::group::Comm;
using weft::group::Engine;
using weft::group::handle_of;
using weft::group::live_comm;
using weft::group::on_comm;
using weft::group::on_usable_comm;
using weft::group::over_survivors;
using weft::group::Request;
using weft::group::routed;
using weft::group::usable_comm;

namespace {

// The context's lock, only when the context is MULTIPLE.
class ApiLock : public weft::RuntimeLock {
public:
    explicit ApiLock(Engine& e) : RuntimeLock(e.rt()) {}
};

using weft::group::comm_of;

// A communicator made from `parent` starts with its error handler.
weft_comm_t new_handle(Engine& e, Comm* c, weft_comm_t parent = nullptr) {
    const weft_comm_t h = weft::group::comm_handle(weft::group::make_comm_shell(e, *c));
    if (parent) weft::group::inherit_errhandler(h, parent);
    return h;
}

using weft::api::raw;
bool type_ok(int t) { return t >= 0 && t < WEFT_DATATYPE_COUNT_; }
bool op_ok(int op) { return op >= 0 && op < WEFT_OP_COUNT_; }

// Bytes of count elements of type, or a status for a bad type / overflow /
// NULL buffer.
Status buffer_bytes(const void* buf, size_t count, int type, size_t& bytes, const char* fn) {
    if (!type_ok(type)) return WEFT_FAIL(WEFT_ERR_INVALID_ARG, "%s: unknown datatype %d", fn, type);
    const size_t es = weft::group::datatype_size(weft_datatype_t(type));
    if (count > SIZE_MAX / es) return WEFT_FAIL(WEFT_ERR_MSG_SIZE, "%s: %zu elements overflow", fn, count);
    bytes = count * es;
    if (!buf && bytes) return WEFT_FAIL(WEFT_ERR_INVALID_ARG, "%s: buffer is NULL with %zu elements", fn, count);
    return WEFT_OK;
}

Status check_dest(const Comm& c, uint32_t dest, int32_t tag, const char* fn) {
    if (dest >= c.size)
        return WEFT_FAIL(WEFT_ERR_INVALID_RANK, "%s: rank %u outside a communicator of %u", fn, dest, c.size);
    if (tag < 0) return WEFT_FAIL(WEFT_ERR_INVALID_ARG, "%s: tag %d is negative", fn, tag);
    return WEFT_OK;
}

Status check_source(const Comm& c, int32_t src, int32_t tag, const char* fn) {
    if (src != WEFT_ANY_SOURCE && (src < 0 || static_cast<uint32_t>(src) >= c.size))
        return WEFT_FAIL(WEFT_ERR_INVALID_RANK, "%s: source %d outside a communicator of %u", fn, src, c.size);
    if (tag != WEFT_ANY_TAG && tag < 0) return WEFT_FAIL(WEFT_ERR_INVALID_ARG, "%s: tag %d is invalid", fn, tag);
    return WEFT_OK;
}

Status check_root(const Comm& c, uint32_t root, const char* fn) {
    if (root >= c.size)
        return WEFT_FAIL(WEFT_ERR_INVALID_RANK, "%s: root %u outside a communicator of %u", fn, root, c.size);
    return WEFT_OK;
}

// The request a handle names; Engine::invalid_request (never live) for a
// handle that names none.
inline Request* req_of(weft_request_t r) { return Engine::request_of(r); }
// A request the program holds (not freed, not one of weft's own).
inline bool held_by_program(const Request& r) { return r.magic == Request::live_magic && r.user; }

void empty_status(weft_msg_status_t* st) {
    if (st) *st = weft_msg_status_t{WEFT_ANY_SOURCE, WEFT_ANY_TAG, 0, WEFT_OK, 0};
}

// A member failed (not departed) and its failure is not recognised
// (cleared: weft/ft.h) on c. One load while no peer has failed.
inline bool unrecognised_failure(Engine& e, const Comm& c) {
    if (__builtin_expect(e.rt().fenced_count() == 0, 1)) return false;
    for (uint32_t r = 0; r < c.size; ++r)
        if (e.rt().peer_fenced(c.members[r]) && !(c.recognised && c.recognised[r])) return true;
    return false;
}

// What an operation with a recognised-failed peer completes with: MPI's
// PROC_NULL status (source PROC_NULL, tag ANY, nothing delivered).
weft_msg_status_t proc_null_status() { return weft_msg_status_t{WEFT_PROC_NULL, WEFT_ANY_TAG, 0, WEFT_OK, 0}; }

// An any-source receive not yet matched on a communicator with an
// unrecognised failure: it might have waited for the failed member
// (weft/ft.h's PENDING). One load when no peer has failed.
bool any_source_pending(Engine& e, const Request& r) {
    return r.kind == weft::group::ReqKind::recv && r.src == WEFT_ANY_SOURCE && !r.done && !r.matched &&
           unrecognised_failure(e, *r.comm);
}

// Waits for r like Engine::wait; an any-source receive stops early, with
// WEFT_ERR_PEER_FAILED_PENDING, when a member's failure makes it pending
// (it looks every 10 ms: a failure is rare, the slices cost nothing). It
// progresses before it looks: a message that arrived from a live sender
// matches the receive, which then completes instead of staying PENDING.
Status wait_receive(Engine& e, Request& r, weft::Deadline d) {
    if (r.kind != weft::group::ReqKind::recv || r.src != WEFT_ANY_SOURCE) return e.wait(r, d);
    for (;;) {  // ends: r done, PENDING, or the deadline
        if (!r.done) e.poll();
        if (r.done) return WEFT_OK;
        if (any_source_pending(e, r)) return WEFT_ERR_PEER_FAILED_PENDING;
        const weft::Deadline slice = weft::Deadline::after_ns(std::min<uint64_t>(d.remaining_ns(), 10000000ull));
        Status st = e.wait(r, slice);
        if (st == WEFT_OK || d.passed()) return st;
    }
}

// Waits for r, then releases it. On timeout the operation is abandoned.
Status wait_and_finish(Engine& e, Request* r, weft_msg_status_t* status) {
    Status st = wait_receive(e, *r, e.rt().op_deadline());
    if (st == WEFT_ERR_PEER_FAILED_PENDING) {
        // A blocking any-source receive: nobody can wait on it again, so it
        // is withdrawn (not matched: nothing was delivered).
        e.p2p().cancel(*r);
        e.p2p().finish(*r, nullptr);
        return WEFT_FAIL(WEFT_ERR_PEER_FAILED_PENDING,
                         "any-source receive withdrawn: a member failed and its failure is not recognised");
    }
    if (st != WEFT_OK) {
        st = WEFT_FAIL(st, "operation did not complete within %llu ms",
                       static_cast<unsigned long long>(e.rt().timeout_ns() / 1000000));
        if (r->kind == weft::group::ReqKind::coll) {
            // Its schedule stops; the request goes when its sends have.
            r->sched->fail(st);
            r->detached = true;
            if (status) *status = weft_msg_status_t{-1, -1, 0, st, 0};
            return st;
        }
        e.p2p().abandon(*r, st);
    }
    return e.p2p().finish(*r, status);
}

Status send_common(weft_comm_t comm, const void* buf, size_t count, int type, uint32_t dest, int32_t tag, bool sync,
                   weft_request_t* req, const char* fn) {
    Comm* c = nullptr;
    if (Status st = usable_comm(comm, c, __func__)) return st;
    Engine& eng = *c->engine;
    size_t bytes = 0;
    Status st = buffer_bytes(buf, count, type, bytes, fn);
    if (st == WEFT_OK) st = check_dest(*c, dest, tag, fn);
    if (st != WEFT_OK) return st;
    ApiLock lock(eng);
    return guarded([&]() -> Status {
        Request* r = nullptr;
        Status s = WEFT_OK;
        // A recognised failure (weft/ft.h) is PROC_NULL: nothing is sent.
        if (__builtin_expect(c->recognised != nullptr, 0) && c->recognised[dest])
            r = eng.p2p().completed_request(*c, weft::group::ReqKind::send, proc_null_status());
        else if (!req && !sync && eng.p2p().fits_send_now(bytes))
            return eng.p2p().send_now(*c, buf, bytes, dest, tag);
        else
            s = eng.p2p().isend(*c, 0, buf, bytes, dest, tag, sync, r);
        if (s != WEFT_OK) return s;
        if (req) {
            *req = handle_of(r);
            return WEFT_OK;
        }
        return wait_and_finish(eng, r, nullptr);
    });
}

Status recv_common(weft_comm_t comm, void* buf, size_t count, int type, int32_t source, int32_t tag,
                   weft_request_t* req, weft_msg_status_t* status, const char* fn) {
    Comm* c = nullptr;
    if (Status st = usable_comm(comm, c, __func__)) return st;
    Engine& eng = *c->engine;
    size_t bytes = 0;
    Status st = buffer_bytes(buf, count, type, bytes, fn);
    if (st == WEFT_OK) st = check_source(*c, source, tag, fn);
    if (st != WEFT_OK) return st;
    ApiLock lock(eng);
    return guarded([&]() -> Status {
        Request* r = nullptr;
        Status s = WEFT_OK;
        // weft/ft.h: an any-source receive while a member's failure is not
        // recognised returns PENDING, unless a message already matches (the
        // failed member might have been the sender it waits for).
        if (source == WEFT_ANY_SOURCE && unrecognised_failure(eng, *c)) {
            weft_msg_status_t probe{};
            eng.poll();
            if (!eng.p2p().iprobe(*c, WEFT_ANY_SOURCE, tag, probe))
                return WEFT_FAIL(WEFT_ERR_PEER_FAILED_PENDING,
                                 "%s: any-source receive on a communicator with an unrecognised failure", fn);
        }
        if (__builtin_expect(c->recognised != nullptr, 0) && source >= 0 && c->recognised[source])
            r = eng.p2p().completed_request(*c, weft::group::ReqKind::recv, proc_null_status());
        else
            s = eng.p2p().irecv(*c, 0, buf, bytes, source, tag, r);
        if (s != WEFT_OK) return s;
        // A receive matched on the spot owes its sender an answer (a
        // synchronous send's acknowledgment, a rendezvous's FIN): it goes
        // now, not at this rank's next progress, which may be far off (the
        // program computes, or waits outside weft) while the sender waits.
        if (!eng.p2p().nothing_deferred()) eng.p2p().flush_deferred();
        if (req) {
            *req = handle_of(r);
            return WEFT_OK;
        }
        while (eng.drain_port().blocking()) {
            // The drain's blocking mode (docs/drain.md): wait inside weft;
            // a drain releases us with a dummy, we leave until it is over
            // and receive again. Ends: a message, or a wait's deadline (each
            // round is one drain that released us).
            r->blocking = true;
            weft::gate::set_blocked(true);
            Status ws = eng.wait(*r, eng.rt().op_deadline());
            weft::gate::set_blocked(false);
            if (ws != WEFT_OK || !r->dummy) {
                r->blocking = false;
                break;
            }
            eng.p2p().finish(*r, nullptr);
            {
                // Out of weft and back in through the door: the drain that
                // released us keeps it until it is over.
                weft::StepOut out(eng.rt(), weft::StepOut::leave_gate);
            }
            s = eng.p2p().irecv(*c, 0, buf, bytes, source, tag, r);
            if (s != WEFT_OK) return s;
        }
        return wait_and_finish(eng, r, status);
    });
}

// Runs a started collective to completion (blocking form) or hands it out.
Status coll_finish(Engine& eng, Request* r, weft_request_t* req) {
    if (req) {
        *req = handle_of(r);
        return WEFT_OK;
    }
    return wait_and_finish(eng, r, nullptr);
}

Status check_reduce(const Comm& c, const void* sendbuf, void* recvbuf, size_t count, int type, int op, bool needs_recv,
                    const char* fn) {
    size_t bytes = 0;
    Status st = buffer_bytes(recvbuf ? recvbuf : reinterpret_cast<void*>(1), count, type, bytes, fn);
    if (st != WEFT_OK) return st;
    if (!op_ok(op)) return WEFT_FAIL(WEFT_ERR_INVALID_ARG, "%s: unknown operation %d", fn, op);
    if (!weft::group::reduce_fn(weft_datatype_t(type), weft_op_t(op)))
        return WEFT_FAIL(WEFT_ERR_INVALID_ARG, "%s: operation %d does not apply to datatype %d", fn, op, type);
    if (bytes && !sendbuf) return WEFT_FAIL(WEFT_ERR_INVALID_ARG, "%s: sendbuf is NULL", fn);
    if (bytes && needs_recv && !recvbuf) return WEFT_FAIL(WEFT_ERR_INVALID_ARG, "%s: recvbuf is NULL", fn);
    (void)c;
    return WEFT_OK;
}

// Once validate_global put failures in G, collectives run over the
// survivors (docs/fault-tolerance.md): the hidden communicator Comm::survivors. A root is
// renumbered into it; a root in G is an error.
Status survivor_root(const Comm& c, uint32_t& root, const char* fn) {
    if (root >= c.size)
        return WEFT_FAIL(WEFT_ERR_INVALID_RANK, "%s: root %u outside a communicator of %u", fn, root, c.size);
    const int32_t j = c.survivors->rank_of_peer(c.members[root]);
    if (j < 0) return WEFT_FAIL(WEFT_ERR_PEER_FAILED, "%s: root %u has failed (it is in G)", fn, root);
    root = static_cast<uint32_t>(j);
    return WEFT_OK;
}

Status allreduce_common(weft_comm_t comm, const void* sendbuf, void* recvbuf, size_t count, int raw_type, int raw_op,
                        weft_request_t* req, const char* fn) {
    Comm* c = nullptr;
    if (Status st = usable_comm(comm, c, __func__)) return st;
    Engine& eng = *c->engine;
    c = over_survivors(c);
    Status st = check_reduce(*c, sendbuf, recvbuf, count, raw_type, raw_op, true, fn);
    if (st != WEFT_OK) return st;
    const auto type = weft_datatype_t(raw_type);
    const auto op = weft_op_t(raw_op);
    ApiLock lock(eng);
    return guarded([&]() -> Status {
        const size_t bytes = count * weft::group::datatype_size(type);
        if (!req && eng.coll().flat_usable(*c, bytes))
            return eng.coll().allreduce_flat(*c, sendbuf, recvbuf, count, type, op);
        if (!req && eng.coll().flags_usable(*c, bytes))
            return eng.coll().allreduce_flags(*c, sendbuf, recvbuf, count, type, op);
        if (!req && eng.coll().bulk_usable(*c, bytes, weft::group::flag_max_bytes))
            return eng.coll().allreduce_bulk(*c, sendbuf, recvbuf, count, type, op);
        Request* r = nullptr;
        Status s = eng.coll().reduce_start(*c, sendbuf, recvbuf, count, type, op, 0, true, r);
        return s != WEFT_OK ? s : coll_finish(eng, r, req);
    });
}

Status allgather_common(weft_comm_t comm, const void* sendbuf, size_t count, int type, void* recvbuf,
                        weft_request_t* req, const char* fn) {
    Comm* c = nullptr;
    if (Status st = usable_comm(comm, c, __func__)) return st;
    Engine& eng = *c->engine;
    size_t bytes = 0;
    Status st = buffer_bytes(recvbuf, count, type, bytes, fn);
    if (st != WEFT_OK) return st;
    if (bytes && !sendbuf) return WEFT_FAIL(WEFT_ERR_INVALID_ARG, "%s: sendbuf is NULL", fn);
    ApiLock lock(eng);
    return guarded([&]() -> Status {
        Request* r = nullptr;
        if (__builtin_expect(c->survivors != nullptr, 0)) {
            // Over the survivors into scratch; when the request is finished
            // (wait, test, or here) each block goes to its rank's place, so
            // the blocks of failed members stay as they were.
            Comm& s = *c->survivors;
            auto scatter = std::make_unique<Request::BlockScatter>();
            scatter->scratch.resize(s.size * bytes);
            scatter->out = static_cast<uint8_t*>(recvbuf);
            scatter->bytes = bytes;
            for (uint32_t j = 0; j < s.size; ++j)
                scatter->place.push_back(static_cast<uint32_t>(c->rank_of_peer(s.members[j])));
            const void* mine = sendbuf == WEFT_IN_PLACE ? scatter->out + c->rank * bytes : sendbuf;
            Status st2 = eng.coll().allgather_start(s, mine, bytes, scatter->scratch.data(), r);
            if (st2 != WEFT_OK) return st2;
            r->scatter = std::move(scatter);
            return coll_finish(eng, r, req);
        }
        if (!req && eng.coll().pair_usable(*c, bytes, weft::group::pair_allgather_max))
            return eng.coll().allgather_pair(*c, sendbuf, bytes, recvbuf);
        if (!req && eng.coll().bulk_usable(*c, bytes)) return eng.coll().allgather_bulk(*c, sendbuf, bytes, recvbuf);
        Status s = eng.coll().allgather_start(*c, sendbuf, bytes, recvbuf, r);
        return s != WEFT_OK ? s : coll_finish(eng, r, req);
    });
}

Status bcast_common(weft_comm_t comm, void* buf, size_t count, int type, uint32_t root, weft_request_t* req,
                    const char* fn) {
    Comm* c = nullptr;
    if (Status st = usable_comm(comm, c, __func__)) return st;
    Engine& eng = *c->engine;
    if (__builtin_expect(c->survivors != nullptr, 0)) {
        Status rs = survivor_root(*c, root, fn);
        if (rs != WEFT_OK) return rs;
        c = c->survivors;
    }
    size_t bytes = 0;
    Status st = buffer_bytes(buf, count, type, bytes, fn);
    if (st == WEFT_OK) st = check_root(*c, root, fn);
    if (st != WEFT_OK) return st;
    ApiLock lock(eng);
    return guarded([&]() -> Status {
        if (!req && bytes <= weft::group::small_bcast_max && eng.coll().bulk_usable(*c, bytes))
            return eng.coll().bcast_small(*c, buf, bytes, root);
        if (!req && eng.coll().pair_usable(*c, bytes)) return eng.coll().bcast_pair(*c, buf, bytes, root);
        if (!req && c->size >= weft::group::bulk_bcast_min_ranks &&
            eng.coll().bulk_usable(*c, bytes, weft::group::bulk_bcast_above))
            return eng.coll().bcast_bulk(*c, buf, bytes, root);
        Request* r = nullptr;
        Status s = eng.coll().bcast_start(*c, buf, bytes, root, r);
        return s != WEFT_OK ? s : coll_finish(eng, r, req);
    });
}

Status barrier_common(weft_comm_t comm, weft_request_t* req) {
    Comm* c = nullptr;
    if (Status st = usable_comm(comm, c, __func__)) return st;
    Engine& eng = *c->engine;
    c = over_survivors(c);
    ApiLock lock(eng);
    return guarded([&]() -> Status {
        if (!req && eng.coll().flat_usable(*c, 0))
            return eng.coll().allreduce_flat(*c, nullptr, nullptr, 0, WEFT_BYTE, WEFT_OP_SUM);
        if (!req && eng.coll().flags_usable(*c, 0)) return eng.coll().barrier_flags(*c);
        Request* r = nullptr;
        Status s = eng.coll().barrier_start(*c, r);
        return s != WEFT_OK ? s : coll_finish(eng, r, req);
    });
}

Status check_requests(size_t n, weft_request_t* reqs, const char* fn) {
    if (n && !reqs) return WEFT_FAIL(WEFT_ERR_INVALID_ARG, "%s: reqs is NULL", fn);
    for (size_t i = 0; i < n; ++i) {
        Request* r = req_of(reqs[i]);
        if (r && !held_by_program(*r))
            return WEFT_FAIL(WEFT_ERR_INVALID_ARG, "%s: request %zu is not a live request", fn, i);
    }
    return WEFT_OK;
}

// Runs body(engine, request) under the lock for a live *req and routes a
// failure to the error handler of the request's communicator (after the
// lock: a handler may call weft); an inactive (NULL) request gets an empty
// status and body is not called. The handle is resolved once, and the
// owner taken before body, which may finish (recycle) the request.
template <typename F>
Status on_request(weft_request_t* req, weft_msg_status_t* status, const char* fn, F&& body) {
    if (!req) return WEFT_FAIL(WEFT_ERR_INVALID_ARG, "%s: req is NULL", fn);
    Request* r = req_of(*req);
    if (!r) {
        empty_status(status);
        return WEFT_OK;
    }
    if (!held_by_program(*r)) return WEFT_FAIL(WEFT_ERR_INVALID_ARG, "%s: the request is not a live request", fn);
    const weft_comm_t owner = r->comm->handle ? weft::group::comm_handle(*r->comm->handle) : nullptr;
    Status st;
    {
        Engine& eng = *r->comm->engine;
        ApiLock lock(eng);
        st = guarded([&]() -> Status { return body(eng, r); });
    }
    return weft::group::route_error(owner, st, fn);
}

// Finishes the first completed request of reqs (its status in `done`).
bool finish_first_done(Engine& eng, size_t n, weft_request_t* reqs, size_t* index, weft_msg_status_t* status,
                       Status& done) {
    for (size_t i = 0; i < n; ++i) {
        Request* r = req_of(reqs[i]);
        if (!r || !r->done) continue;
        *index = i;
        reqs[i] = nullptr;
        done = eng.p2p().finish(*r, status);
        return true;
    }
    return false;
}

// The first not-done request of reqs that is pending (any_source_pending).
bool first_pending(Engine& eng, size_t n, weft_request_t* reqs, size_t* index) {
    for (size_t i = 0; i < n; ++i) {
        Request* r = req_of(reqs[i]);
        if (r && any_source_pending(eng, *r)) {
            *index = i;
            return true;
        }
    }
    return false;
}

// The engine of the first live request in reqs (all must share a context).
Engine* engine_of(size_t n, weft_request_t* reqs) {
    for (size_t i = 0; i < n; ++i) {
        Request* r = req_of(reqs[i]);
        if (r && r->magic == Request::live_magic && r->comm) return r->comm->engine;
    }
    return nullptr;
}

}  // namespace

// ------------------------------------------------------- layer attach
namespace weft::group {

struct Layer {
    std::unique_ptr<Engine> engine;
    std::unique_ptr<Detector> detector;
    std::unique_ptr<Ft> ft;                  // declared after engine and detector: destroyed first
    std::unique_ptr<ProcessGroups> pgroups;  // the same
    std::thread progress_thread;
    std::atomic<bool> stop{false};
};
inline constexpr Runtime::LayerKey<Layer> group_layer{"group"};

namespace {

// Runtime::finalize, after its barrier, before the state window goes: the
// detector stops beating (peers see `finalized` and do not suspect us).
void stop_detector(void* arg) { static_cast<Layer*>(arg)->detector->stop(); }
// weft_ckpt_release / _rebuild: the detector's thread is the layer's only
// user of the fabric that runs by itself (the progress thread waits at the
// closed gate).
void pause_detector(void* arg) { static_cast<Layer*>(arg)->detector->pause(); }
void resume_detector(void* arg) { static_cast<Layer*>(arg)->detector->resume(); }

void progress_loop(Layer* l) {
    Runtime& rt = l->engine->rt();
    // Deadline::never(): the thread's life ends with stop (weft_finalize),
    // looked at after every pause, the longest of which is 1 ms.
    weft::Backoff idle(weft::Backoff::progress_thread);
    while (!l->stop.load(std::memory_order_acquire)) {
        uint32_t n;
        {
            RuntimeLock g(rt);  // MULTIPLE is forced with the thread; the gate keeps it out of a drain
            n = l->engine->poll();
        }
        // Busy while there is traffic (a yield lets the application's
        // threads at the lock); idle, back off to 1 ms so a progress thread
        // does not steal an oversubscribed rank's core.
        if (n) {
            idle.reset();
            std::this_thread::yield();
        } else {
            idle.pause();
        }
    }
}
}  // namespace

Engine* engine_of(Runtime& rt) {
    Layer* l = rt.layer(group_layer);
    return l ? l->engine.get() : nullptr;
}

std::string unsaved_state(Runtime& rt) {
    Layer* l = rt.layer(group_layer);
    if (!l) return {};
    Engine& e = *l->engine;
    char what[128];
    if (const uint32_t failed = e.rt().fenced_count()) {
        std::snprintf(what, sizeof what, "%u failed process(es) (the failed-process sets are not saved)", failed);
        return what;
    }
    if (l->pgroups->ops() || l->pgroups->undecided_tracks()) {
        std::snprintf(what, sizeof what, "%zu group operation(s) in progress here, %zu tracked here undecided",
                      l->pgroups->ops(), l->pgroups->undecided_tracks());
        return what;
    }
    for (const auto& [name, g] : l->pgroups->constructed())
        for (const Proc& p : g.members)
            if (p.job != rt.job()) {
                std::snprintf(what, sizeof what, "process group %s, which has members of job %u", name.c_str(), p.job);
                return what;
            }
    return {};
}

Status attach(Runtime& rt, bool multi_threaded) {
    auto layer = std::make_unique<Layer>();
    layer->engine = std::make_unique<Engine>(rt);
    Status st = layer->engine->init();
    if (st != WEFT_OK) return st;
    // The detector beats from here on (before the init barrier), so no
    // peer can observe us before our first beat.
    layer->detector = std::make_unique<Detector>(rt);
    st = layer->detector->attach();
    if (st != WEFT_OK) return st;
    layer->ft = std::make_unique<Ft>(*layer->engine, *layer->detector);
    st = layer->ft->init();
    if (st != WEFT_OK) return st;
    layer->pgroups = std::make_unique<ProcessGroups>(*layer->engine);
    st = layer->pgroups->init();
    if (st != WEFT_OK) return st;
    st = rt.add_layer(group_layer, layer.get(),
                      {.on_teardown = stop_detector, .on_release = pause_detector, .on_rebuild = resume_detector});
    if (st != WEFT_OK) return st;
    const bool thread = env_u64("WEFT_PROGRESS_THREAD", 0) != 0;
    rt.set_multi_threaded(multi_threaded || thread);
    layer.release();  // owned through the Runtime's layers until destroy()
    return WEFT_OK;
}

void start(Runtime& rt) {
    Layer* layer = rt.layer(group_layer);
    layer->detector->start();
    if (env_u64("WEFT_PROGRESS_THREAD", 0) != 0) layer->progress_thread = std::thread(progress_loop, layer);
}

void detach(Runtime& rt) {
    Layer* layer = rt.layer(group_layer);
    if (!layer) return;
    if (layer->progress_thread.joinable()) {
        layer->stop.store(true, std::memory_order_release);
        layer->progress_thread.join();
    }
    layer->engine->shutdown();
    // Finalize's barrier comes next: the detector's reads still out are
    // answered now, while every peer still serves them.
    if (layer->detector) layer->detector->quiesce();
}

weft_comm_t new_comm_handle(Engine& e, Comm* c, weft_comm_t parent) { return new_handle(e, c, parent); }

void destroy(Runtime& rt) {
    Layer* layer = rt.layer(group_layer);
    if (!layer) return;
    if (layer->detector) layer->detector->stop();
    rt.remove_layer(group_layer);
    delete layer;
}

}  // namespace weft::group

extern "C" {

weft_status_t weft_datatype_size(weft_datatype_t type, size_t* bytes) {
    if (Status st = weft::api::not_null(bytes, "bytes", __func__)) return st;
    if (!type_ok(raw(type)))
        return WEFT_FAIL(WEFT_ERR_INVALID_ARG, "weft_datatype_size: unknown datatype %d", raw(type));
    const size_t n = weft::group::datatype_size(type);
    *bytes = n;
    return WEFT_OK;
}

weft_status_t weft_msg_status_count(const weft_msg_status_t* status, weft_datatype_t type, size_t* count) {
    if (Status st = weft::api::not_null(status, "status", __func__)) return st;
    if (Status st = weft::api::not_null(count, "count", __func__)) return st;
    if (!type_ok(raw(type)))
        return WEFT_FAIL(WEFT_ERR_INVALID_ARG, "weft_msg_status_count: unknown datatype %d", raw(type));
    const size_t n = weft::group::datatype_size(type);
    if (status->bytes % n)
        return WEFT_FAIL(WEFT_ERR_TRUNCATE,
                         "weft_msg_status_count: %zu bytes are not a whole number of %zu-byte elements", status->bytes,
                         n);
    *count = status->bytes / n;
    return WEFT_OK;
}

// ------------------------------------------------------ communicators
weft_status_t weft_comm_world(weft_context_t ctx, weft_comm_t* world) {
    if (Status st = weft::api::not_null(world, "world", __func__)) return st;
    Runtime* rt = weft::runtime_of(ctx);
    Engine* e = rt ? weft::group::engine_of(*rt) : nullptr;
    if (!e) return WEFT_FAIL(WEFT_ERR_NOT_INITIALIZED, "weft_comm_world: context is null or finalized");
    Engine& eng = *e;
    ApiLock lock(eng);
    return guarded([&]() -> Status {
        Comm& w = eng.world();
        *world = weft::group::comm_handle(*w.handle);  // made with the world (Engine::init)
        return WEFT_OK;
    });
}

weft_status_t weft_comm_rank(weft_comm_t comm, uint32_t* rank) {
    const char* fn = __func__;
    return on_comm(comm, fn, [&](Comm* c) -> Status {
        if (Status st = weft::api::not_null(rank, "rank", fn)) return st;
        *rank = c->rank;
        return WEFT_OK;
    });
}

weft_status_t weft_comm_size(weft_comm_t comm, uint32_t* size) {
    const char* fn = __func__;
    return on_comm(comm, fn, [&](Comm* c) -> Status {
        if (Status st = weft::api::not_null(size, "size", fn)) return st;
        *size = c->size;
        return WEFT_OK;
    });
}

weft_status_t weft_comm_context_id(weft_comm_t comm, uint64_t* id) {
    const char* fn = __func__;
    return on_comm(comm, fn, [&](Comm* c) -> Status {
        if (Status st = weft::api::not_null(id, "id", fn)) return st;
        *id = c->id;
        return WEFT_OK;
    });
}

weft_status_t weft_comm_job_rank(weft_comm_t comm, uint32_t rank, uint32_t* job_rank) {
    const char* fn = __func__;
    return on_comm(comm, fn, [&](Comm* c) -> Status {
        if (Status st = weft::api::not_null(job_rank, "job_rank", fn)) return st;
        if (rank >= c->size)
            return WEFT_FAIL(WEFT_ERR_INVALID_RANK, "weft_comm_job_rank: rank %u outside a communicator of %u", rank,
                             c->size);
        const weft::PeerInfo& p = c->engine->rt().peer(c->members[rank]);
        if (c->members[rank] >= c->engine->rt().size())
            return WEFT_FAIL(WEFT_ERR_INVALID_RANK,
                             "weft_comm_job_rank: rank %u is rank %u of job %u, not of this job (weft_comm_proc)", rank,
                             p.rank, p.job);
        *job_rank = c->members[rank];
        return WEFT_OK;
    });
}

weft_status_t weft_comm_proc(weft_comm_t comm, uint32_t rank, weft_proc_t* proc) {
    const char* fn = __func__;
    return on_comm(comm, fn, [&](Comm* c) -> Status {
        if (Status st = weft::api::not_null(proc, "proc", fn)) return st;
        if (rank >= c->size)
            return WEFT_FAIL(WEFT_ERR_INVALID_RANK, "%s: rank %u outside a communicator of %u", fn, rank, c->size);
        const weft::PeerInfo& p = c->engine->rt().peer(c->members[rank]);
        *proc = weft_proc_t{p.job, p.rank};
        return WEFT_OK;
    });
}

weft_status_t weft_comm_clock_slot(weft_comm_t comm, uint32_t* slot) {
    const char* fn = __func__;
    return on_comm(comm, fn, [&](Comm* c) -> Status {
        if (Status st = weft::api::not_null(slot, "slot", fn)) return st;
        if (c->slot == weft::group::no_slot)
            return WEFT_FAIL(WEFT_ERR_NOT_FOUND, "weft_comm_clock_slot: no slot%s",
                             c->spans_jobs ? " (a communicator across jobs has none)" : "");
        *slot = c->slot;
        return WEFT_OK;
    });
}

weft_status_t weft_comm_dup(weft_comm_t comm, weft_comm_t* out) {
    const char* fn = __func__;
    return on_usable_comm(comm, fn, [&](Comm* c) -> Status {
        Engine& eng = *c->engine;
        if (Status st = weft::api::not_null(out, "out", fn)) return st;
        ApiLock lock(eng);
        return guarded([&]() -> Status {
            Comm* n = nullptr;
            Status st = eng.registry().dup(*c, n);
            if (st != WEFT_OK) return st;
            *out = new_handle(eng, n, comm);
            return WEFT_OK;
        });
    });
}

weft_status_t weft_comm_split(weft_comm_t comm, int32_t color, int32_t key, weft_comm_t* out) {
    const char* fn = __func__;
    return on_usable_comm(comm, fn, [&](Comm* c) -> Status {
        Engine& eng = *c->engine;
        if (Status st = weft::api::not_null(out, "out", fn)) return st;
        if (color < 0 && color != WEFT_UNDEFINED)
            return WEFT_FAIL(WEFT_ERR_INVALID_ARG, "weft_comm_split: colour %d is negative (and not WEFT_UNDEFINED)",
                             color);
        ApiLock lock(eng);
        return guarded([&]() -> Status {
            Comm* n = nullptr;
            Status st = eng.registry().split(*c, color, key, n);
            if (st != WEFT_OK) return st;
            *out = n ? new_handle(eng, n, comm) : nullptr;
            return WEFT_OK;
        });
    });
}

weft_status_t weft_comm_create_from_ranks(weft_comm_t comm, const uint32_t* ranks, uint32_t n, int32_t tag,
                                          weft_comm_t* out) {
    const char* fn = __func__;
    return on_usable_comm(comm, fn, [&](Comm* c) -> Status {
        Engine& eng = *c->engine;
        if (Status st = weft::api::not_null(out, "out", fn)) return st;
        if (Status st = weft::api::not_null(ranks, "ranks", fn)) return st;
        if (n == 0) return WEFT_FAIL(WEFT_ERR_INVALID_ARG, "weft_comm_create_from_ranks: no ranks");
        if (tag < 0) return WEFT_FAIL(WEFT_ERR_INVALID_ARG, "weft_comm_create_from_ranks: tag %d is negative", tag);
        std::vector<uint8_t> seen(c->size, 0);
        bool me = false;
        for (uint32_t i = 0; i < n; ++i) {
            if (ranks[i] >= c->size)
                return WEFT_FAIL(WEFT_ERR_INVALID_RANK,
                                 "weft_comm_create_from_ranks: rank %u outside a communicator of %u", ranks[i],
                                 c->size);
            if (seen[ranks[i]]++)
                return WEFT_FAIL(WEFT_ERR_INVALID_ARG, "weft_comm_create_from_ranks: rank %u listed twice", ranks[i]);
            me |= ranks[i] == c->rank;
        }
        if (!me)
            return WEFT_FAIL(WEFT_ERR_INVALID_ARG, "weft_comm_create_from_ranks: the caller (rank %u) is not listed",
                             c->rank);
        ApiLock lock(eng);
        return guarded([&]() -> Status {
            Comm* nc = nullptr;
            Status st = eng.registry().create_from_ranks(*c, ranks, n, tag, nc);
            if (st != WEFT_OK) return st;
            *out = new_handle(eng, nc, comm);
            return WEFT_OK;
        });
    });
}

// ------------------------------------------------------ point-to-point
weft_status_t weft_send(weft_comm_t comm, const void* buf, size_t count, weft_datatype_t type, uint32_t dest,
                        int32_t tag) {
    const char* fn = __func__;
    return routed(comm, fn,
                  [&]() -> Status { return send_common(comm, buf, count, raw(type), dest, tag, false, nullptr, fn); });
}

weft_status_t weft_ssend(weft_comm_t comm, const void* buf, size_t count, weft_datatype_t type, uint32_t dest,
                         int32_t tag) {
    const char* fn = __func__;
    return routed(comm, fn,
                  [&]() -> Status { return send_common(comm, buf, count, raw(type), dest, tag, true, nullptr, fn); });
}

weft_status_t weft_isend(weft_comm_t comm, const void* buf, size_t count, weft_datatype_t type, uint32_t dest,
                         int32_t tag, weft_request_t* req) {
    const char* fn = __func__;
    return routed(comm, fn, [&]() -> Status {
        if (Status st = weft::api::not_null(req, "req", fn)) return st;
        return send_common(comm, buf, count, raw(type), dest, tag, false, req, fn);
    });
}

weft_status_t weft_issend(weft_comm_t comm, const void* buf, size_t count, weft_datatype_t type, uint32_t dest,
                          int32_t tag, weft_request_t* req) {
    const char* fn = __func__;
    return routed(comm, fn, [&]() -> Status {
        if (Status st = weft::api::not_null(req, "req", fn)) return st;
        return send_common(comm, buf, count, raw(type), dest, tag, true, req, fn);
    });
}

weft_status_t weft_recv(weft_comm_t comm, void* buf, size_t count, weft_datatype_t type, int32_t source, int32_t tag,
                        weft_msg_status_t* status) {
    const char* fn = __func__;
    return routed(comm, fn, [&]() -> Status {
        return recv_common(comm, buf, count, raw(type), source, tag, nullptr, status, fn);
    });
}

weft_status_t weft_irecv(weft_comm_t comm, void* buf, size_t count, weft_datatype_t type, int32_t source, int32_t tag,
                         weft_request_t* req) {
    const char* fn = __func__;
    return routed(comm, fn, [&]() -> Status {
        if (Status st = weft::api::not_null(req, "req", fn)) return st;
        return recv_common(comm, buf, count, raw(type), source, tag, req, nullptr, fn);
    });
}

weft_status_t weft_iprobe(weft_comm_t comm, int32_t source, int32_t tag, int* flag, weft_msg_status_t* status) {
    const char* fn = __func__;
    return on_usable_comm(comm, fn, [&](Comm* c) -> Status {
        Engine& eng = *c->engine;
        if (Status st = weft::api::not_null(flag, "flag", fn)) return st;
        Status st = check_source(*c, source, tag, fn);
        if (st != WEFT_OK) return st;
        ApiLock lock(eng);
        return guarded([&]() -> Status {
            eng.poll();
            weft_msg_status_t s{};
            *flag = eng.p2p().iprobe(*c, source, tag, s) ? 1 : 0;
            if (*flag && status) *status = s;
            if (!*flag && source == WEFT_ANY_SOURCE && unrecognised_failure(eng, *c))
                return WEFT_FAIL(WEFT_ERR_PEER_FAILED_PENDING,
                                 "%s: any source, and a member's failure is not recognised", fn);
            return WEFT_OK;
        });
    });
}

weft_status_t weft_probe(weft_comm_t comm, int32_t source, int32_t tag, weft_msg_status_t* status) {
    const char* fn = __func__;
    return on_usable_comm(comm, fn, [&](Comm* c) -> Status {
        Engine& eng = *c->engine;
        Status st = check_source(*c, source, tag, fn);
        if (st != WEFT_OK) return st;
        ApiLock lock(eng);
        return guarded([&]() -> Status {
            const weft::Deadline d = eng.rt().op_deadline();
            weft::Backoff backoff;
            weft_msg_status_t s{};
            while (!eng.p2p().iprobe(*c, source, tag, s)) {
                if (source >= 0 && eng.rt().peer_failed(c->members[source]))
                    return WEFT_FAIL(WEFT_ERR_PEER_FAILED, "weft_probe: source %d has failed", source);
                if (source == WEFT_ANY_SOURCE && unrecognised_failure(eng, *c))
                    return WEFT_FAIL(WEFT_ERR_PEER_FAILED_PENDING,
                                     "weft_probe: any source, and a member's failure is not recognised");
                if (eng.poll() > 0) continue;
                if (d.passed()) return WEFT_FAIL(WEFT_ERR_TIMEOUT, "weft_probe: no matching message in time");
                eng.pause(backoff);
                c = comm_of(comm);  // another thread may have freed it meanwhile
                if (!c) return WEFT_FAIL(WEFT_ERR_NOT_INITIALIZED, "weft_probe: communicator freed while probing");
            }
            if (status) *status = s;
            return WEFT_OK;
        });
    });
}

// ------------------------------------------------------------ requests
weft_status_t weft_request_test(weft_request_t* req, int* flag, weft_msg_status_t* status) {
    if (Status st = weft::api::not_null(flag, "flag", __func__)) return st;
    *flag = 1;  // an inactive request is complete
    return on_request(req, status, __func__, [&](Engine& eng, Request* r) -> Status {
        if (!r->done) eng.poll();
        *flag = r->done ? 1 : 0;
        if (!r->done && any_source_pending(eng, *r))
            return WEFT_FAIL(WEFT_ERR_PEER_FAILED_PENDING,
                             "weft_request_test: any-source receive pending on an unrecognised failure (request kept)");
        if (!r->done) return WEFT_OK;
        *req = nullptr;
        return eng.p2p().finish(*r, status);
    });
}

weft_status_t weft_request_wait(weft_request_t* req, weft_msg_status_t* status) {
    return on_request(req, status, __func__, [&](Engine& eng, Request* r) -> Status {
        Status s = wait_receive(eng, *r, eng.rt().op_deadline());
        if (s == WEFT_ERR_PEER_FAILED_PENDING)
            return WEFT_FAIL(s,
                             "weft_request_wait: any-source receive pending on an unrecognised failure (request kept; "
                             "recognise it, then wait again)");
        if (s != WEFT_OK) return WEFT_FAIL(s, "weft_request_wait: not complete within the deadline (request kept)");
        *req = nullptr;
        return eng.p2p().finish(*r, status);
    });
}

weft_status_t weft_request_waitall(size_t n, weft_request_t* reqs, weft_msg_status_t* statuses) {
    Status st = check_requests(n, reqs, __func__);
    if (st != WEFT_OK) return st;
    Engine* eng = engine_of(n, reqs);
    if (!eng) {
        for (size_t i = 0; statuses && i < n; ++i) empty_status(&statuses[i]);
        return WEFT_OK;
    }
    ApiLock lock(*eng);
    return guarded([&]() -> Status {
        const weft::Deadline d = eng->rt().op_deadline();
        Status first = WEFT_OK;
        for (size_t i = 0; i < n; ++i) {
            Request* r = req_of(reqs[i]);
            if (!r) {
                if (statuses) empty_status(&statuses[i]);
                continue;
            }
            Status s = wait_receive(*eng, *r, d);
            if (s == WEFT_ERR_PEER_FAILED_PENDING) {
                // This one and those after it stay; those before completed.
                if (statuses) statuses[i] = weft_msg_status_t{WEFT_ANY_SOURCE, WEFT_ANY_TAG, 0, s, 0};
                return WEFT_FAIL(s,
                                 "weft_request_waitall: request %zu is an any-source receive pending on an "
                                 "unrecognised failure (it and the later ones kept)",
                                 i);
            }
            if (s != WEFT_OK)
                return WEFT_FAIL(s, "weft_request_waitall: request %zu not complete within the deadline", i);
            reqs[i] = nullptr;
            s = eng->p2p().finish(*r, statuses ? &statuses[i] : nullptr);
            if (s != WEFT_OK && first == WEFT_OK) first = s;
        }
        return first;
    });
}

weft_status_t weft_request_testany(size_t n, weft_request_t* reqs, size_t* index, int* flag,
                                   weft_msg_status_t* status) {
    if (Status st = weft::api::not_null(index, "index", __func__)) return st;
    if (Status st = weft::api::not_null(flag, "flag", __func__)) return st;
    Status st = check_requests(n, reqs, __func__);
    if (st != WEFT_OK) return st;
    Engine* eng = engine_of(n, reqs);
    *index = SIZE_MAX;
    if (!eng) {
        *flag = 1;
        empty_status(status);
        return WEFT_OK;
    }
    ApiLock lock(*eng);
    return guarded([&]() -> Status {
        eng->poll();
        Status done = WEFT_OK;
        *flag = finish_first_done(*eng, n, reqs, index, status, done) ? 1 : 0;
        if (!*flag && first_pending(*eng, n, reqs, index))
            return WEFT_FAIL(WEFT_ERR_PEER_FAILED_PENDING,
                             "weft_request_testany: request %zu is an any-source receive "
                             "pending on an unrecognised failure (kept)",
                             *index);
        return done;
    });
}

weft_status_t weft_request_waitany(size_t n, weft_request_t* reqs, size_t* index, weft_msg_status_t* status) {
    if (Status st = weft::api::not_null(index, "index", __func__)) return st;
    Status st = check_requests(n, reqs, __func__);
    if (st != WEFT_OK) return st;
    Engine* eng = engine_of(n, reqs);
    *index = SIZE_MAX;
    if (!eng) {
        empty_status(status);
        return WEFT_OK;
    }
    ApiLock lock(*eng);
    return guarded([&]() -> Status {
        const weft::Deadline d = eng->rt().op_deadline();
        weft::Backoff backoff;
        for (;;) {  // ends: a request done, one PENDING, or the deadline
            // Progress first: a message that already arrived completes its
            // receive (named or any-source) before PENDING is considered.
            const uint32_t progressed = eng->poll();
            Status done = WEFT_OK;
            if (finish_first_done(*eng, n, reqs, index, status, done)) return done;
            if (first_pending(*eng, n, reqs, index))
                return WEFT_FAIL(WEFT_ERR_PEER_FAILED_PENDING,
                                 "weft_request_waitany: request %zu is an any-source "
                                 "receive pending on an unrecognised failure (kept)",
                                 *index);
            if (progressed > 0) continue;
            if (d.passed())
                return WEFT_FAIL(WEFT_ERR_TIMEOUT, "weft_request_waitany: nothing completed within the deadline");
            eng->pause(backoff);
        }
    });
}

weft_status_t weft_request_cancel(weft_request_t req) {
    Request* r = req_of(req);
    if (!r || !held_by_program(*r)) return WEFT_FAIL(WEFT_ERR_INVALID_ARG, "weft_request_cancel: not a live request");
    Engine& eng = *r->comm->engine;
    ApiLock lock(eng);
    return guarded([&]() -> Status { return eng.p2p().cancel(*r); });
}

// --------------------------------------------------------- collectives
weft_status_t weft_barrier(weft_comm_t comm) {
    const char* fn = __func__;
    return routed(comm, fn, [&]() -> Status { return barrier_common(comm, nullptr); });
}

weft_status_t weft_ibarrier(weft_comm_t comm, weft_request_t* req) {
    const char* fn = __func__;
    return routed(comm, fn, [&]() -> Status {
        if (Status st = weft::api::not_null(req, "req", fn)) return st;
        return barrier_common(comm, req);
    });
}

weft_status_t weft_bcast(weft_comm_t comm, void* buf, size_t count, weft_datatype_t type, uint32_t root) {
    const char* fn = __func__;
    return routed(comm, fn, [&]() -> Status { return bcast_common(comm, buf, count, raw(type), root, nullptr, fn); });
}

weft_status_t weft_ibcast(weft_comm_t comm, void* buf, size_t count, weft_datatype_t type, uint32_t root,
                          weft_request_t* req) {
    const char* fn = __func__;
    return routed(comm, fn, [&]() -> Status {
        if (Status st = weft::api::not_null(req, "req", fn)) return st;
        return bcast_common(comm, buf, count, raw(type), root, req, fn);
    });
}

weft_status_t weft_reduce(weft_comm_t comm, const void* sendbuf, void* recvbuf, size_t count, weft_datatype_t type,
                          weft_op_t op, uint32_t root) {
    const char* fn = __func__;
    return on_usable_comm(comm, fn, [&](Comm* c) -> Status {
        Engine& eng = *c->engine;
        if (__builtin_expect(c->survivors != nullptr, 0)) {
            Status rs = survivor_root(*c, root, fn);
            if (rs != WEFT_OK) return rs;
            c = c->survivors;
        }
        Status st = check_root(*c, root, fn);
        if (st == WEFT_OK) st = check_reduce(*c, sendbuf, recvbuf, count, raw(type), raw(op), c->rank == root, fn);
        if (st == WEFT_OK && sendbuf == WEFT_IN_PLACE && c->rank != root)
            st = WEFT_FAIL(WEFT_ERR_INVALID_ARG, "weft_reduce: WEFT_IN_PLACE is for the root only");
        if (st != WEFT_OK) return st;
        ApiLock lock(eng);
        return guarded([&]() -> Status {
            Request* r = nullptr;
            Status s = eng.coll().reduce_start(*c, sendbuf, recvbuf, count, type, op, root, false, r);
            return s != WEFT_OK ? s : coll_finish(eng, r, nullptr);
        });
    });
}

weft_status_t weft_allreduce(weft_comm_t comm, const void* sendbuf, void* recvbuf, size_t count, weft_datatype_t type,
                             weft_op_t op) {
    const char* fn = __func__;
    return routed(comm, fn, [&]() -> Status {
        return allreduce_common(comm, sendbuf, recvbuf, count, raw(type), raw(op), nullptr, fn);
    });
}

weft_status_t weft_iallreduce(weft_comm_t comm, const void* sendbuf, void* recvbuf, size_t count, weft_datatype_t type,
                              weft_op_t op, weft_request_t* req) {
    const char* fn = __func__;
    return routed(comm, fn, [&]() -> Status {
        if (Status st = weft::api::not_null(req, "req", fn)) return st;
        return allreduce_common(comm, sendbuf, recvbuf, count, raw(type), raw(op), req, fn);
    });
}

weft_status_t weft_allgather(weft_comm_t comm, const void* sendbuf, size_t count, weft_datatype_t type, void* recvbuf) {
    const char* fn = __func__;
    return routed(comm, fn,
                  [&]() -> Status { return allgather_common(comm, sendbuf, count, raw(type), recvbuf, nullptr, fn); });
}

weft_status_t weft_iallgather(weft_comm_t comm, const void* sendbuf, size_t count, weft_datatype_t type, void* recvbuf,
                              weft_request_t* req) {
    const char* fn = __func__;
    return routed(comm, fn, [&]() -> Status {
        if (Status st = weft::api::not_null(req, "req", fn)) return st;
        return allgather_common(comm, sendbuf, count, raw(type), recvbuf, req, fn);
    });
}

weft_status_t weft_comm_free(weft_comm_t* comm) {
    const char* fn = __func__;
    // A failure leaves the handle alive: its handler sees it.
    return routed(comm ? *comm : nullptr, fn, [&]() -> Status {
        if (Status st = weft::api::not_null(comm, "comm", fn)) return st;
        Comm* c = nullptr;
        if (Status st = live_comm(*comm, c, fn)) return st;
        Engine& eng = *c->engine;
        if (c->world)
            return WEFT_FAIL(WEFT_ERR_INVALID_ARG, "weft_comm_free: the world communicator belongs to the context");
        ApiLock lock(eng);
        return guarded([&]() -> Status {
            weft::group::release_errhandler(*comm);
            c->handle->magic =
                weft::group::CommShell::dead_magic;  // the handle dies now, the communicator after its barrier
            *comm = nullptr;
            if (c->survivors) eng.registry().free_comm(*c->survivors);  // its hidden survivors' communicator (group/ft)
            return eng.registry().free_comm(*c);
        });
    });
}

}  // extern "C"
