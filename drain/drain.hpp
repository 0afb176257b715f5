// drain.hpp — the drain thread of one context: MANA's Collective Clock and
// point-to-point drain over the pinned state windows (docs/drain.md).
#pragma once

#include <weft/drain.h>

#include "group/drain_port.hpp"
#include "transport/state_window_view.hpp"

#include <condition_variable>
#include <initializer_list>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

namespace weft::drain {

class Drain {
public:
    Drain(Runtime& rt, group::DrainPort& port);
    ~Drain();
    Drain(const Drain&) = delete;
    Drain& operator=(const Drain&) = delete;

    void start();
    // Finishes a drain in progress, then stops the thread.
    void stop();

    // Any thread (the drain thread sends it).
    Status request(uint64_t& number);
    // Outside weft (no entry held).
    Status wait(uint64_t number, uint64_t timeout_ms, weft_drain_result_t& out);
    // The first drain numbered above `after` that finished here without
    // reaching its quiescent point (its status), or WEFT_OK; never waits.
    Status failed_since(uint64_t after);
    // Whether drain `number` has finished here; never waits.
    bool finished(uint64_t number);
    // The highest drain number started here.
    uint64_t started() const { return started_.load(std::memory_order_acquire); }
    // Any thread: the profile of a finished drain (drain.h).
    Status profile(uint64_t number, weft_drain_profile_t& out);
    void set_callback(weft_drain_quiescent_fn fn, void* arg);
    void set_hooks(const weft_drain_hooks_t& h);
    // A held quiescent point (weft_ckpt_release, ckpt/transparent.cpp):
    // `fn(arg)` runs on the drain thread, holding weft, at the quiescent
    // point of the first drain whose every rank had asked for it when it
    // got there (each says so in its HOLD word before its QUIESCENT word;
    // every rank reads the same words, so all hold or none does). Until
    // fn returns no application thread enters weft on this rank. One
    // request at a time, any thread; fn null withdraws it.
    void set_hold(void (*fn)(void*), void* arg);

private:
    // Outcomes of an attempt, settled in the decision word. failed: the
    // drain's deadline passed (WEFT_ERR_TIMEOUT); member_failed: a member
    // failed or left (WEFT_ERR_PEER_FAILED); refused: a member is in a
    // communicator across jobs (WEFT_ERR_UNSUPPORTED: a drain spans one
    // job, and that communicator's traffic is in no job's sums). stopped is never written
    // there: this rank is finalizing and leaves the drain alone.
    enum Code : uint64_t {
        undecided = 0,
        coll_done = 1,
        retry = 2,
        p2p_done = 3,
        failed = 4,
        member_failed = 5,
        stopped = 6,
        refused = 7
    };
    // The outcomes that end the drain without a quiescent point, whichever
    // rank settled them.
    static bool ends_unquiet(Code c) { return c == failed || c == member_failed || c == refused; }
    enum Phase : uint64_t { phase_collective = 1, phase_p2p = 2 };

    void run();
    void run_drain(uint64_t number);
    // One attempt of the collective phase; returns the decision's code.
    Code collective_attempt(uint64_t attempt, weft_drain_result_t& res);
    Code p2p_phase(uint64_t attempt, weft_drain_result_t& res);
    Code quiescent_barrier(uint64_t number, weft_drain_result_t& res);
    // Why this drain must end now, whatever the others do: a member known
    // failed here (member_failed; failed_rank_ names it), the drain's
    // deadline (failed), or finalize (stopped); undecided otherwise.
    Code must_end();
    // The first member this rank knows failed (job rank), or UINT32_MAX.
    uint32_t failed_member() const;
    // Settles the attempt as `to` unless it is settled already (from: what
    // the word must hold, see decide()) and returns the settled outcome, or
    // `to` when the decision word cannot be read (rank 0 failed).
    Code settle(uint64_t attempt, Code from, Code to);
    // The outcome of `attempt` if it is final for this phase, else undecided.
    static Code final_for(uint64_t dec, uint64_t attempt, bool p2p);
    void serve_trigger();
    void send_request(uint64_t number);

    // commit_begin's slow path (application threads, inside an entry).
    static void on_commit(void* arg, group::Comm& c);
    static void on_slots_learned(void* arg, group::Comm& c);
    void slots_learned(group::Comm& c);
    void commit(group::Comm& c);
    bool all_at_target(uint64_t attempt);
    void log_unconverged(uint64_t attempt);
    void raise(group::Comm& c, uint64_t value, uint64_t attempt);

    // The whole of weft for this thread: gate closed, context lock held
    // (held_, a WeftHold; hold and unhold alternate across the phases).
    void hold();
    void unhold();

    // One-sided access to rank r's state window: consecutive words, or
    // named ones (in order). A word that cannot be read reads as all ones.
    // Each counts one operation into ops_ when r is another rank.
    uint64_t load_remote(uint32_t r, uint64_t off);
    void read_remote(uint32_t r, uint64_t off, uint64_t* dst, size_t words);
    void read_remote(uint32_t r, std::initializer_list<uint64_t> offs, uint64_t* dst);
    bool read_gone(uint32_t r, uint64_t* dst, size_t words);
    void read_failed(uint32_t r, Status st, uint64_t* dst, size_t words);
    uint64_t load_mapped(uint32_t r, uint64_t off);
    template <typename Enough>
    // `ops`: the profile counter its compare-swaps count into, null when an
    // application thread raises (commit's slow path: the profile and ops_
    // are the drain thread's).
    Status cas_raise(uint32_t r, uint64_t off, uint64_t want, Enough enough, uint64_t expect, uint64_t* ops);
    void cas_max_target(uint32_t r, uint32_t slot, uint64_t use, uint64_t attempt, uint64_t value, uint64_t* ops);
    uint64_t decision();
    // A member some drain thread saw failed (job rank), written next to the
    // decision before it settles member_failed; UINT32_MAX when none.
    uint32_t reported_failure();
    void decide(uint64_t attempt, Code from, Code to);
    void publish(uint64_t field, uint64_t v);
    // Everything the collective phase's termination looks at, all ranks.
    // Returns the deepest chain of dependent reads (the round's depth).
    uint32_t snapshot_clocks(std::vector<uint64_t>& out);
    // Returns the length of the chain of dependent reads it made on r (0
    // for this rank: its own words are not operations).
    uint32_t snapshot_rank(uint32_t r, std::vector<uint64_t>& out);
    bool clocks_converged(const std::vector<uint64_t>& s, uint64_t attempt, uint32_t ranks) const;
    bool progress_if_open();
    void progress_stack();
    Code observe_by_reads(uint64_t attempt, weft_drain_result_t& res, const Deadline& deadline);
    Code observe_by_tree(uint64_t attempt, weft_drain_result_t& res, const Deadline& deadline);
    // An inbox word: tag (24 bits of attempt, 32 of round), 6 bits of hops,
    // changed, converged.
    static constexpr uint32_t tree_tag_shift = 8;
    static constexpr uint64_t tree_hops_mask = 63;
    static uint64_t tree_tag(uint64_t attempt, uint64_t round) {
        return ((attempt & 0xffffffull) << 32) | (round & 0xffffffffull);
    }
    static_assert(24 + 32 + tree_tag_shift == 64, "the tag fills the word above the hops and flags");
    // A rank can be one round ahead of another (it needs only that everyone
    // started the round), never two: two parities of inboxes suffice.
    static uint64_t inbox_off(uint32_t step, uint64_t round) {
        return WEFT_STATE_DRAIN_INBOX_OFF +
               ((round & 1) * WEFT_STATE_DRAIN_INBOX_STEPS + step) * uint64_t(WEFT_STATE_LINE);
    }

    Runtime& rt_;
    group::DrainPort& port_;  // all the drain uses of group
    weft_window* win_;
    StateWindowView sw_;
    bool direct_ = false;          // every rank's window is mapped here (shm)
    bool needs_progress_ = false;  // atomics move only when the target progresses
    // An external stack with a progress hook (an MPI): its collectives move
    // only inside its calls, and one open at a peer may wait for this
    // rank's part, though nothing is open here.
    std::atomic<bool> stack_progress_{false};
    uint64_t attempt_ns_, free_run_ns_, timeout_ns_, idle_ns_;
    int trigger_fd_ = -1, report_fd_ = -1;
    bool report_next_ = false;
    bool blocking_ = false;  // WEFT_DRAIN_MODE=blocking
    bool by_tree_ = false;   // WEFT_DRAIN_OBSERVE=tree

    std::thread thread_;
    std::atomic<bool> stop_{false};
    std::atomic<uint64_t> phase_{0};  // Phase of the running attempt, 0 when none
    uint64_t attempts_total_ = 0;     // same on every rank: attempts of all drains
    uint64_t completed_ = 0;          // drains finished here
    std::atomic<uint64_t> started_{0};
    std::atomic<uint64_t> raises_{0};
    std::atomic<uint64_t> asked_{0};  // highest drain number asked for here
    uint64_t sent_request_ = 0;
    std::optional<WeftHold> held_;
    // The running drain's profile (drain.h): the clock read at each phase
    // boundary, and the one-sided operations counted where they are made,
    // into the counter ops_ points at (the phase's; null: not counted).
    weft_drain_profile_t prof_{};
    uint64_t* ops_ = nullptr;
    // The drain thread only.
    void count_op(uint32_t r) { count_op(r, ops_); }
    void count_op(uint32_t r, uint64_t* ops) {
        if (ops && r != rt_.rank()) ++*ops;
    }
    // The highest request delivered by request() itself (shm: the asking
    // thread raises every rank's EPOCH word and wakes its drain thread).
    std::atomic<uint64_t> delivered_{0};
    Deadline deadline_{UINT64_MAX};      // of the running drain: WEFT_DRAIN_TIMEOUT_MS from its start
    uint32_t failed_rank_ = UINT32_MAX;  // the member this drain ended for (member_failed)

    std::mutex mutex_;  // results, callback
    std::condition_variable done_cv_;
    std::map<uint64_t, weft_drain_result_t> results_;
    std::map<uint64_t, weft_drain_profile_t> profiles_;
    weft_drain_quiescent_fn callback_ = nullptr;
    void* callback_arg_ = nullptr;
    weft_drain_hooks_t hooks_{};        // an external stack's (under mutex_; copied per use)
    void (*hold_fn_)(void*) = nullptr;  // set_hold (under mutex_)
    void* hold_arg_ = nullptr;
    // Whether every rank asked to hold drain `number` (after its quiescent barrier).
    bool all_hold(uint64_t number);
    void run_hold(uint64_t number);
    // While a held quiescent point runs, request() leaves peers' words
    // alone (they may be unmapped): the drain thread sends it afterwards.
    std::mutex request_mu_;
    bool holding_ = false;  // under request_mu_
    weft_drain_hooks_t hooks();
    // Progress for weft and the external stack (holding weft).
    uint32_t progress_all();
};

// The drain's entry in its Runtime's layers (state only: no hooks).
inline constexpr Runtime::LayerKey<Drain> drain_layer{"drain"};

}  // namespace weft::drain
