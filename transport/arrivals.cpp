// arrivals.cpp — the two intrusive orders of the arrivals queue (see
// arrivals.hpp).
#include "transport/arrivals.hpp"

#include "transport/common.hpp"

namespace weft {

void ArrivalOrder::resize(uint32_t nsources) { queues_.assign(nsources, Queue{}); }

void ArrivalOrder::append(ArrivalNode* n) {
    n->next = nullptr;
    n->next_same = nullptr;
    n->prev = tail_;
    if (tail_)
        tail_->next = n;
    else
        head_ = n;
    tail_ = n;
    WEFT_ASSERT(n->source < queues_.size());
    Queue& q = queues_[n->source];
    if (q.tail)
        q.tail->next_same = n;
    else
        q.head = n;
    q.tail = n;
}

void ArrivalOrder::remove_oldest_of_source(ArrivalNode* n) {
    if (n->prev)
        n->prev->next = n->next;
    else
        head_ = n->next;
    if (n->next)
        n->next->prev = n->prev;
    else
        tail_ = n->prev;
    Queue& q = queues_[n->source];
    q.head = n->next_same;
    if (!q.head) q.tail = nullptr;
    n->prev = n->next = n->next_same = nullptr;
}

}  // namespace weft
