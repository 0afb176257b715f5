// arrivals.hpp — active messages that arrived but wait for the backend's
// progress() to run their handlers, kept in order per source.
//
// The ucx and verbs backends cannot always run a handler where a message
// arrives (UCX: inside a callback; verbs: inside a handler's own wait), and a
// rendezvous message must first be pulled. Both queue the message here. The
// rule the layers above rely on is FIFO per source (weft_am_send in
// include/weft/weft.h; matching in docs/communicators.md): a message never
// overtakes an earlier one from the same peer. Nothing is promised across
// peers, so a rendezvous still being pulled from one peer
// holds back only that peer's later messages; the others are delivered at
// once. Among deliverable messages the order of arrival is kept.
//
// Records are recycled: once the pool has grown to the number of messages
// in flight, queuing a message allocates nothing (an eager payload is copied
// into the capacity its record kept).
//
// Thread affinity: the backend's progress thread (one at a time). dispatch()
// is reentrant: a handler may progress and dispatch again.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace weft {

// What every queued message has; the backend's pull state is in Arrivals::Record.
struct ArrivalNode {
    uint32_t source = 0;          // peer index
    uint32_t id = 0;              // weft handler id
    bool rndv = false;            // rendezvous: deliverable once its pull is done
    bool started = false;         // rendezvous: its pull was started (or given up)
    ArrivalNode* prev = nullptr;  // arrival order, every source
    ArrivalNode* next = nullptr;
    ArrivalNode* next_same = nullptr;  // arrival order, this source only
};

// The two orders the queue keeps: of arrival, and of arrival per source.
class ArrivalOrder {
public:
    // Sources are 0..n-1 (peer indices); called before the first append.
    void resize(uint32_t nsources);
    void append(ArrivalNode* n);
    // Unlinks n, which must be its source's oldest.
    void remove_oldest_of_source(ArrivalNode* n);

    bool empty() const { return head_ == nullptr; }
    ArrivalNode* oldest() const { return head_; }
    ArrivalNode* oldest_of(uint32_t source) const { return queues_[source].head; }
    bool is_oldest_of_source(const ArrivalNode* n) const { return queues_[n->source].head == n; }

private:
    struct Queue {
        ArrivalNode* head = nullptr;
        ArrivalNode* tail = nullptr;
    };
    ArrivalNode* head_ = nullptr;
    ArrivalNode* tail_ = nullptr;
    std::vector<Queue> queues_;  // by source
};

// Pull: the backend's rendezvous state (default-constructible; reset to
// Pull{} when its record is recycled, so it must own nothing the backend
// still needs by then).
template <typename Pull>
class Arrivals {
public:
    struct Record : ArrivalNode {
        std::vector<uint8_t> eager;  // eager: the copied payload
        Pull pull{};
    };

    // eager_limit: a record keeps an eager buffer up to twice this big.
    explicit Arrivals(size_t eager_limit) : keep_capacity_(2 * eager_limit) {}
    Arrivals(const Arrivals&) = delete;
    Arrivals& operator=(const Arrivals&) = delete;
    ~Arrivals() {
        clear();
        while (free_) {
            Record* r = free_;
            free_ = static_cast<Record*>(r->next);
            delete r;
        }
    }

    void resize(uint32_t nsources) { order_.resize(nsources); }

    void push_eager(uint32_t source, uint32_t id, const void* data, size_t len) {
        Record* r = take(source, id);
        const auto* p = static_cast<const uint8_t*>(data);
        r->eager.assign(p, p + len);
        order_.append(r);
    }
    // A rendezvous whose pull start_pulls() will start.
    Record& push_rndv(uint32_t source, uint32_t id) {
        Record* r = take(source, id);
        r->rndv = true;
        ++unstarted_;
        order_.append(r);
        return *r;
    }

    bool empty() const { return order_.empty(); }
    // Nothing queued from source: a message from it may be delivered at once.
    bool idle(uint32_t source) const { return order_.oldest_of(source) == nullptr; }
    uint32_t unstarted() const { return unstarted_; }

    // start(r) for each rendezvous not started yet, in order of arrival.
    // start calls mark_started(r) once it takes r on (before anything that
    // looks at r.started); one it leaves waits for the next call (no
    // resources now).
    template <typename Start>
    void start_pulls(Start&& start) {
        for (ArrivalNode* n = order_.oldest(); n && unstarted_; n = n->next)
            if (n->rndv && !n->started) start(static_cast<Record&>(*n));
    }
    // r's pull is started, or will never be (it failed, its source failed).
    void mark_started(Record& r) {
        r.started = true;
        --unstarted_;
    }

    // f(r) for source's messages in order of arrival, while it returns true.
    template <typename F>
    void for_each_of(uint32_t source, F&& f) {
        for (ArrivalNode* n = order_.oldest_of(source); n; n = n->next_same)
            if (!f(static_cast<Record&>(*n))) return;
    }
    template <typename F>
    void for_each(F&& f) {
        for (ArrivalNode* n = order_.oldest(); n; n = n->next) f(static_cast<Record&>(*n));
    }

    // Whether dispatch() would deliver something now.
    template <typename Ready>
    bool deliverable(Ready&& ready) {
        for (ArrivalNode* n = order_.oldest(); n; n = n->next)
            if (order_.is_oldest_of_source(n) && (!n->rndv || ready(static_cast<Record&>(*n)))) return true;
        return false;
    }

    // Delivers every message that is the oldest of its source and, for a
    // rendezvous, ready(r); deliver(r) runs the handler (true if it did).
    // Returns how many handlers ran.
    template <typename Ready, typename Deliver>
    uint32_t dispatch(Ready&& ready, Deliver&& deliver) {
        uint32_t n = 0;
        ArrivalNode* a = order_.oldest();
        while (a) {
            // A later message of a source waits for its older ones, a
            // rendezvous for its pull; other sources go on.
            if (!order_.is_oldest_of_source(a) || (a->rndv && !ready(static_cast<Record&>(*a)))) {
                a = a->next;
                continue;
            }
            // Unlink before the handler: it may progress (and dispatch) again.
            order_.remove_oldest_of_source(a);
            auto* r = static_cast<Record*>(a);
            if (deliver(*r)) ++n;
            recycle(r);
            a = order_.oldest();  // the handler may have changed the queue
        }
        return n;
    }

    // Drops every queued message (the backend released their pulls).
    void clear() {
        while (ArrivalNode* n = order_.oldest()) {
            order_.remove_oldest_of_source(n);  // the oldest of all is its source's oldest
            recycle(static_cast<Record*>(n));
        }
        unstarted_ = 0;
    }

private:
    static constexpr uint32_t max_free = 64;

    Record* take(uint32_t source, uint32_t id) {
        Record* r = free_;
        if (r) {
            free_ = static_cast<Record*>(r->next);
            --nfree_;
        } else {
            r = new Record;  // the pool grows to the messages in flight
        }
        r->source = source;
        r->id = id;
        return r;
    }
    void recycle(Record* r) {
        if (nfree_ >= max_free) {
            delete r;
            return;
        }
        r->rndv = r->started = false;
        r->pull = Pull{};
        r->eager.clear();
        if (r->eager.capacity() > keep_capacity_) std::vector<uint8_t>().swap(r->eager);
        r->prev = r->next_same = nullptr;
        r->next = free_;
        free_ = r;
        ++nfree_;
    }

    ArrivalOrder order_;
    uint32_t unstarted_ = 0;
    Record* free_ = nullptr;  // linked through next
    uint32_t nfree_ = 0;
    size_t keep_capacity_;
};

}  // namespace weft
