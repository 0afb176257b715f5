// test_arrivals.cpp — the arrivals queue (transport/arrivals.hpp) the ucx and
// verbs backends deliver through: FIFO per source, a rendezvous holding back
// only its own source, records recycled, a handler that dispatches again.
#include "transport/arrivals.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <initializer_list>
#include <utility>
#include <string>
#include <vector>

namespace {

struct Pull {
    bool done = false;
    int tag = 0;
};
using Queue = weft::Arrivals<Pull>;
using Rec = Queue::Record;

// "source:id" of every delivered message, in delivery order.
struct Log {
    std::vector<std::string> seen;
    bool operator()(Rec& r) {
        seen.push_back(std::to_string(r.source) + ":" + std::to_string(r.id));
        return true;
    }
};

bool pulled(Rec& r) { return r.pull.done; }

void push(Queue& q, uint32_t src, uint32_t id) {
    const uint64_t v = id;
    q.push_eager(src, id, &v, sizeof v);
}

// Eager messages {source, id}, in this order.
void push_all(Queue& q, std::initializer_list<std::pair<uint32_t, uint32_t>> msgs) {
    for (auto [src, id] : msgs) push(q, src, id);
}

TEST(Arrivals, EagerInArrivalOrder) {
    Queue q(64);
    q.resize(3);
    push_all(q, {{0, 1}, {1, 2}, {0, 3}, {2, 4}});
    Log log;
    EXPECT_EQ(q.dispatch(pulled, log), 4u);
    EXPECT_EQ(log.seen, (std::vector<std::string>{"0:1", "1:2", "0:3", "2:4"}));
    EXPECT_TRUE(q.empty());
}

TEST(Arrivals, RendezvousHoldsBackOnlyItsSource) {
    Queue q(64);
    q.resize(3);
    push(q, 0, 1);
    Rec& big = q.push_rndv(0, 2);
    push(q, 0, 3);  // behind the rendezvous: same source
    push(q, 1, 4);  // another source: not held
    push(q, 2, 5);
    EXPECT_EQ(q.unstarted(), 1u);
    uint32_t started = 0;
    q.start_pulls([&](Rec& r) {
        ++started;
        q.mark_started(r);
    });
    EXPECT_EQ(started, 1u);
    EXPECT_EQ(q.unstarted(), 0u);
    EXPECT_TRUE(q.deliverable(pulled));
    Log log;
    EXPECT_EQ(q.dispatch(pulled, log), 3u);
    EXPECT_EQ(log.seen, (std::vector<std::string>{"0:1", "1:4", "2:5"}));
    EXPECT_FALSE(q.idle(0));
    EXPECT_TRUE(q.idle(1));
    EXPECT_FALSE(q.deliverable(pulled));
    // A later message of another source is still not held.
    push(q, 1, 6);
    EXPECT_EQ(q.dispatch(pulled, log), 1u);
    EXPECT_EQ(log.seen.back(), "1:6");
    big.pull.done = true;
    EXPECT_EQ(q.dispatch(pulled, log), 2u);
    EXPECT_EQ(log.seen, (std::vector<std::string>{"0:1", "1:4", "2:5", "1:6", "0:2", "0:3"}));
    EXPECT_TRUE(q.empty());
}

TEST(Arrivals, PullsStartInArrivalOrderAndMayWait) {
    Queue q(64);
    q.resize(2);
    q.push_rndv(0, 1).pull.tag = 1;
    q.push_rndv(1, 2).pull.tag = 2;
    q.push_rndv(0, 3).pull.tag = 3;
    std::vector<int> order;
    // No resources for tag 2 this round: it stays unstarted.
    q.start_pulls([&](Rec& r) {
        order.push_back(r.pull.tag);
        if (r.pull.tag != 2) q.mark_started(r);
    });
    EXPECT_EQ(order, (std::vector<int>{1, 2, 3}));
    EXPECT_EQ(q.unstarted(), 1u);
    order.clear();
    q.start_pulls([&](Rec& r) {
        order.push_back(r.pull.tag);
        q.mark_started(r);
    });
    EXPECT_EQ(order, (std::vector<int>{2}));
    EXPECT_EQ(q.unstarted(), 0u);
    // Walk one source in order, stopping early.
    std::vector<int> of0;
    q.for_each_of(0, [&](Rec& r) {
        of0.push_back(r.pull.tag);
        return true;
    });
    EXPECT_EQ(of0, (std::vector<int>{1, 3}));
    q.clear();
    EXPECT_TRUE(q.empty());
}

TEST(Arrivals, HandlerMayDispatchAgain) {
    Queue q(64);
    q.resize(2);
    push_all(q, {{0, 1}, {1, 2}, {0, 3}});
    Log log;
    std::function<bool(Rec&)> deliver = [&](Rec& r) {
        log(r);
        if (r.id == 1) {
            push(q, 1, 4);  // arrives while the handler runs
            q.dispatch(pulled, deliver);
        }
        return true;
    };
    q.dispatch(pulled, deliver);
    // Per source in order whatever the nesting: 0:1 before 0:3, 1:2 before 1:4.
    EXPECT_EQ(log.seen, (std::vector<std::string>{"0:1", "1:2", "0:3", "1:4"}));
    EXPECT_TRUE(q.empty());
}

TEST(Arrivals, RecordsAndBuffersAreRecycled) {
    Queue q(64);
    q.resize(1);
    std::vector<uint8_t> payload(48, 7);
    q.push_eager(0, 1, payload.data(), payload.size());
    const void* first = nullptr;
    q.for_each([&](Rec& r) { first = &r; });
    Log log;
    q.dispatch(pulled, log);
    q.push_eager(0, 2, payload.data(), payload.size());
    const void* second = nullptr;
    const uint8_t* data = nullptr;
    q.for_each([&](Rec& r) {
        second = &r;
        data = r.eager.data();
    });
    EXPECT_EQ(first, second);  // the same record, no new allocation
    ASSERT_NE(data, nullptr);
    EXPECT_EQ(std::memcmp(data, payload.data(), payload.size()), 0);
    q.dispatch(pulled, log);
}

}  // namespace
