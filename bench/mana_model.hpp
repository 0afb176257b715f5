// mana_model.hpp — a faithful model of MANA's drain for the comparison in
// drain_bench.cpp: the same Collective Clock and counter-sum algorithm, with
// its state in one single-threaded coordinator process that every rank
// reaches over TCP (DMTCP's coordinator and its key-value database).
//
// Best case for that design: TCP_NODELAY on every socket (DMTCP 4.2 does not
// set it and pays ~88 ms per operation to Nagle), loopback, a coordinator
// that does nothing else. Each key-value operation is one request and one
// response; a barrier is counted at the coordinator, which answers every
// rank when the last one arrives.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <vector>

namespace mana_model {

enum Op : uint32_t { op_max = 1, op_add = 2, op_get = 3, op_barrier = 4, op_quit = 5 };

struct Request {
    uint32_t op;
    uint32_t key;
    uint64_t value;
};

inline bool full_io(int fd, void* buf, size_t n, bool writing) {
    auto* p = static_cast<uint8_t*>(buf);
    while (n) {
        const ssize_t k = writing ? ::write(fd, p, n) : ::read(fd, p, n);
        if (k <= 0) return false;
        p += k;
        n -= static_cast<size_t>(k);
    }
    return true;
}

inline void nodelay(int fd) {
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

// The coordinator: serves `ranks` connections on `listen_fd` until every
// rank sent op_quit. Single-threaded, like DMTCP's.
inline void serve(int listen_fd, uint32_t ranks) {
    std::vector<int> fds;
    while (fds.size() < ranks) {
        int fd = accept(listen_fd, nullptr, nullptr);
        if (fd < 0) std::exit(2);
        nodelay(fd);
        fds.push_back(fd);
    }
    std::map<uint32_t, uint64_t> kv;
    std::vector<int> at_barrier;
    uint32_t quit = 0;
    std::vector<pollfd> p(fds.size());
    while (quit < ranks) {
        for (size_t i = 0; i < fds.size(); ++i) p[i] = {fds[i], static_cast<short>(fds[i] >= 0 ? POLLIN : 0), 0};
        if (poll(p.data(), p.size(), -1) < 0) std::exit(2);
        for (size_t i = 0; i < fds.size(); ++i) {
            if (fds[i] < 0 || !(p[i].revents & (POLLIN | POLLHUP))) continue;
            Request rq;
            if (!full_io(fds[i], &rq, sizeof rq, false)) std::exit(2);
            uint64_t reply = 0;
            switch (rq.op) {
                case op_max:
                    reply = kv[rq.key] = std::max(kv[rq.key], rq.value);
                    break;
                case op_add:
                    reply = kv[rq.key] += rq.value;
                    break;
                case op_get:
                    reply = kv[rq.key];
                    break;
                case op_barrier:
                    at_barrier.push_back(fds[i]);
                    if (at_barrier.size() == ranks) {
                        for (int fd : at_barrier) full_io(fd, &reply, sizeof reply, true);
                        at_barrier.clear();
                    }
                    continue;
                case op_quit:
                    ++quit;
                    break;
            }
            full_io(fds[i], &reply, sizeof reply, true);
            if (rq.op == op_quit) {
                close(fds[i]);
                fds[i] = -1;
            }
        }
    }
}

// One rank's connection.
class Client {
public:
    explicit Client(uint16_t port) {
        fd_ = socket(AF_INET, SOCK_STREAM, 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_port = htons(port);
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
            std::perror("mana model: connect");
            std::exit(2);
        }
        nodelay(fd_);
    }
    ~Client() {
        call(op_quit, 0, 0);
        close(fd_);
    }
    uint64_t call(Op op, uint32_t key, uint64_t value) {
        Request rq{op, key, value};
        uint64_t reply = 0;
        if (!full_io(fd_, &rq, sizeof rq, true) || !full_io(fd_, &reply, sizeof reply, false)) std::exit(2);
        return reply;
    }

private:
    int fd_ = -1;
};

// MANA's drain as the issue describes its cost: per round, each rank makes
// four key-value round trips and a barrier. The collective phase uploads
// seq (a max: the target), its "still busy" flag (below target, inside a
// collective, or raised), waits at the barrier, then reads both; it ends
// after a round in which nobody was busy. The point-to-point phase adds
// the sent and received counters, waits, reads both sums; it ends when they
// agree. Keys are fresh per drain and round, as MANA's KVDB names are.
struct Result {
    uint32_t rounds = 0;
};

inline Result drain(Client& c, uint32_t drain_no, uint64_t seq, bool busy_first_round, uint64_t sent,
                    uint64_t received) {
    Result r;
    const uint32_t base = drain_no << 12;
    for (uint32_t round = 0;; ++round) {
        ++r.rounds;
        const uint32_t k = base + round * 4;
        c.call(op_max, k, seq);
        c.call(op_add, k + 1, busy_first_round && round == 0 ? 1 : 0);
        c.call(op_barrier, 0, 0);
        const uint64_t target = c.call(op_get, k, 0);
        const uint64_t busy = c.call(op_get, k + 1, 0);
        if (busy == 0 && target == seq) break;
    }
    for (uint32_t round = 0;; ++round) {
        ++r.rounds;
        const uint32_t k = base + 2048 + round * 4;
        c.call(op_add, k, sent);
        c.call(op_add, k + 1, received);
        c.call(op_barrier, 0, 0);
        if (c.call(op_get, k, 0) == c.call(op_get, k + 1, 0)) break;
    }
    c.call(op_barrier, 0, 0);  // quiescent: every rank is done before anyone resumes
    return r;
}

}  // namespace mana_model
