// p2p.cpp — weft-bench's point-to-point rows, between ranks 0 and 1 (any
// other rank only joins the barriers that frame each row). Each row: both
// sides prepare their own memory, a barrier, the warm-up and timed loops,
// the end signal, a barrier. perftest's conventions: put, active messages
// and tagged send/recv are ping-pongs reported as half a round trip
// (write_lat, ucp_put_lat, tag_lat); get and the atomics are one blocking
// operation, a full round trip (read_lat, atomic_lat). Bandwidth rows keep
// a window of operations outstanding and report the time per operation,
// MB/s and the message rate. Every operation's result is checked after its
// timing: the bytes a put, get, message or receive delivered, the previous
// value an atomic returned; the bandwidth rows check the last window's data.
#include "session.hpp"

#include <algorithm>
#include <atomic>
#include <cstring>

namespace weft_bench {

namespace {

uint64_t slot(const Session& s, uint64_t iteration) { return data_off + (iteration & 1) * s.slot_bytes; }

uint8_t load_byte(const uint8_t* p) {
    return std::atomic_ref<uint8_t>(*const_cast<uint8_t*>(p)).load(std::memory_order_acquire);
}

// How many operations a bandwidth row keeps outstanding: -W, but no more
// than the two slots hold.
uint64_t window_for(const Session& s, uint64_t size) {
    return std::max<uint64_t>(1, std::min<uint64_t>(s.p.window, 2 * s.slot_bytes / size));
}

Row bandwidth_row(const Samples& smp, const char* op, uint64_t size, uint64_t window) {
    Row r = smp.row(op, "op", size, 2);
    const double ns = static_cast<double>(smp.sum_ns());  // per-operation samples: sum = total / window
    const double ops = static_cast<double>(smp.count());
    if (ns > 0) {
        r.mb_s = ops * static_cast<double>(size) / ns * 1e3;
        r.mmsg_s = ops / ns * 1e3;
    }
    r.window = window;
    return r;
}

// Rank 1 waits (progressing: emulated one-sided operations move only then)
// until rank 0 says its loop is over.
void await_ctl(Session& s) {
    wait_for(
        s, [&] { return s.ctl >= 1; }, "rank 0's end of row", row_limit_ns);
}
void send_ctl(Session& s) {
    const uint64_t x = 1;
    check(s, weft_am_send(s.ctx, 1, am_ctl, &x, sizeof x), "weft_am_send (end of row)");
}

// ------------------------------------------------------------------ rows
// The target's notice. A put of up to 8 bytes (a power of two, aligned) is
// one store and its own notice: the target polls its last byte, as
// perftest's write_lat does. A larger put is not: a CPU copy (shm, UCX's
// shared memory) may write the tail before the head — seen here with 2 KiB
// over shm — so, as a weft program must, the origin follows the data with an
// 8-byte flag put, which weft's ordered_puts lands after it (without that
// capability, a flush first), and the target polls the flag.
void notify_put(Session& s, uint32_t peer, uint64_t off, const uint8_t* m, uint64_t size, const uint64_t& seq) {
    check(s, weft_put(s.win, peer, off, m, size), "weft_put");
    if (size <= 8) return;
    if (!s.caps.ordered_puts) check(s, weft_flush(s.win, peer), "weft_flush");
    check(s, weft_put(s.win, peer, flag_off, &seq, sizeof seq), "weft_put (flag)");
}

bool noticed(const Session& s, uint64_t off, const uint8_t* m, uint64_t size, uint64_t seq) {
    if (size <= 8) return load_byte(s.base + off + size - 1) == m[size - 1];
    return std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(s.base + flag_off)).load(std::memory_order_acquire) ==
           seq;
}

void put_pingpong(Session& s, uint64_t size, Row* out) {
    const uint64_t warm = s.warmup_for(size), total = warm + s.iters_for(size);
    if (s.rank <= 1) {
        std::memset(s.base + slot(s, 0), 0, size);
        std::memset(s.base + slot(s, 1), 0, size);
        std::memset(s.base + flag_off, 0, 8);
    }
    check(s, weft_barrier(s.world), "barrier");
    if (s.rank > 1) return;
    const uint32_t peer = s.rank == 0 ? 1 : 0;
    Samples smp;
    Stopwatch sw(smp, warm, 1, s.p.sample_every);
    for (uint64_t it = 0; it < total; ++it) {
        const uint64_t off = slot(s, it), seq = it + 1;
        const uint8_t* m = s.pat(seq);
        if (s.rank == 0) {
            sw.start(it);
            notify_put(s, peer, off, m, size, seq);
            wait_for(
                s, [&] { return noticed(s, off, m, size, seq); }, "rank 1's put");
            sw.lap(it);
        } else {
            wait_for(
                s, [&] { return noticed(s, off, m, size, seq); }, "rank 0's put");
            notify_put(s, peer, off, m, size, seq);
        }
        verify(s, s.base + off, m, size, "put", it);
    }
    check(s, weft_flush(s.win, peer), "weft_flush");
    if (s.rank == 0) *out = smp.row("put", "half", size, 2, 0.5);
}

// Rank 1's two slots hold pat(1) and pat(2); rank 0 reads them alternately,
// so every byte of each get must change.
void get_latency(Session& s, uint64_t size, Row* out) {
    const uint64_t warm = s.warmup_for(size), total = warm + s.iters_for(size);
    if (s.rank == 1) {
        std::memcpy(s.base + slot(s, 0), s.pat(1), size);
        std::memcpy(s.base + slot(s, 1), s.pat(2), size);
    }
    check(s, weft_barrier(s.world), "barrier");
    if (s.rank == 0) {
        std::vector<uint8_t> dst(size, 0);
        Samples smp;
        Stopwatch sw(smp, warm, 1, s.p.sample_every);
        for (uint64_t it = 0; it < total; ++it) {
            sw.start(it);
            check(s, weft_get(s.win, 1, slot(s, it), dst.data(), size), "weft_get");
            sw.lap(it);
            verify(s, dst.data(), s.pat(1 + (it & 1)), size, "get", it);
        }
        send_ctl(s);
        *out = smp.row("get", "full", size, 2);
    } else if (s.rank == 1) {
        await_ctl(s);
    }
}

enum class Atomic { fadd, cswap, swap };

void atomic_latency(Session& s, Atomic kind, Row* out) {
    const uint64_t warm = s.p.warmup, total = warm + s.p.iterations;
    check(s, weft_barrier(s.world), "barrier");
    if (s.rank == 0) {
        Samples smp;
        Stopwatch sw(smp, warm, 1, s.p.sample_every);
        const char* name = kind == Atomic::fadd ? "fadd" : kind == Atomic::cswap ? "cswap" : "swap";
        for (uint64_t it = 0; it < total; ++it) {
            uint64_t old = 0, want = 0;
            weft_status_t st = WEFT_OK;
            sw.start(it);
            switch (kind) {
                case Atomic::fadd:
                    st = weft_atomic_fetch_add(s.win, 1, fadd_off, 1, &old);
                    break;
                case Atomic::cswap:  // always succeeds: rank 0 alone writes the word
                    st = weft_atomic_compare_swap(s.win, 1, cswap_off, s.cswap_value, s.cswap_value + 1, &old);
                    break;
                case Atomic::swap:
                    st = weft_atomic_swap(s.win, 1, swap_off, s.swap_value + 1, &old);
                    break;
            }
            sw.lap(it);
            check(s, st, name);
            switch (kind) {
                case Atomic::fadd:
                    want = s.fadd_value++;
                    break;
                case Atomic::cswap:
                    want = s.cswap_value++;
                    break;
                case Atomic::swap:
                    want = s.swap_value++;
                    break;
            }
            if (old != want) {
                char buf[128];
                std::snprintf(buf, sizeof buf, "%s iteration %llu returned %llu, expected %llu", name,
                              static_cast<unsigned long long>(it), static_cast<unsigned long long>(old),
                              static_cast<unsigned long long>(want));
                die(s, buf);
            }
        }
        send_ctl(s);
        *out = smp.row(name, "full", 8, 2);
    } else if (s.rank == 1) {
        await_ctl(s);
    }
}

void am_pingpong(Session& s, uint64_t size, Row* out) {
    const uint64_t warm = s.warmup_for(size), total = warm + s.iters_for(size);
    check(s, weft_barrier(s.world), "barrier");
    if (s.rank == 0) {
        Samples smp;
        Stopwatch sw(smp, warm, 1, s.p.sample_every);
        for (uint64_t it = 0; it < total; ++it) {
            sw.start(it);
            check(s, weft_am_send(s.ctx, 1, am_ping, s.pat(it + 1), size), "weft_am_send");
            wait_for(
                s, [&] { return s.pongs > it; }, "rank 1's reply message");
            sw.lap(it);
        }
        *out = smp.row("am", "half", size, 2, 0.5);
    } else if (s.rank == 1) {
        for (uint64_t it = 0; it < total; ++it) {
            wait_for(
                s, [&] { return s.pings > it; }, "rank 0's message");
            check(s, weft_am_send(s.ctx, 0, am_pong, s.pat(it + 1), size), "weft_am_send");
        }
    }
}

void send_pingpong(Session& s, uint64_t size, Row* out) {
    const uint64_t warm = s.warmup_for(size), total = warm + s.iters_for(size);
    constexpr int32_t tag = 7;
    check(s, weft_barrier(s.world), "barrier");
    if (s.rank > 1) return;
    std::vector<uint8_t> rbuf(size, 0);
    weft_msg_status_t st{};
    const uint32_t peer = s.rank == 0 ? 1 : 0;
    Samples smp;
    Stopwatch sw(smp, warm, 1, s.p.sample_every);
    for (uint64_t it = 0; it < total; ++it) {
        const uint8_t* m = s.pat(it + 1);
        if (s.rank == 0) {
            sw.start(it);
            check(s, weft_send(s.world, m, size, WEFT_BYTE, peer, tag), "weft_send");
            check(s, weft_recv(s.world, rbuf.data(), size, WEFT_BYTE, static_cast<int32_t>(peer), tag, &st),
                  "weft_recv");
            sw.lap(it);
        } else {
            check(s, weft_recv(s.world, rbuf.data(), size, WEFT_BYTE, static_cast<int32_t>(peer), tag, &st),
                  "weft_recv");
            check(s, weft_send(s.world, m, size, WEFT_BYTE, peer, tag), "weft_send");
        }
        if (st.bytes != size) die(s, "send/recv delivered a wrong length");
        verify(s, rbuf.data(), m, size, "send/recv", it);
    }
    if (s.rank == 0) *out = smp.row("send", "half", size, 2, 0.5);
}

void put_bandwidth(Session& s, uint64_t size, Row* out) {
    const uint64_t warm = s.warmup_for(size), total = warm + s.iters_for(size), w = window_for(s, size);
    if (s.rank == 1) std::memset(s.base + data_off, 0, w * size);
    check(s, weft_barrier(s.world), "barrier");
    if (s.rank == 0) {
        Samples smp;
        Stopwatch sw(smp, warm, w);
        for (uint64_t it = 0; it < total; ++it) {
            sw.start();
            for (uint64_t j = 0; j < w; ++j)
                check(s, weft_put(s.win, 1, data_off + j * size, s.pat(it * w + j + 1), size), "weft_put");
            check(s, weft_flush(s.win, 1), "weft_flush");
            sw.lap(it);
        }
        send_ctl(s);
        *out = bandwidth_row(smp, "put_bw", size, w);
    } else if (s.rank == 1) {
        await_ctl(s);
        for (uint64_t j = 0; j < w; ++j)
            verify(s, s.base + data_off + j * size, s.pat((total - 1) * w + j + 1), size, "put_bw", total - 1);
    }
}

// OSU's bandwidth shape: a window of messages, then one acknowledgement.
void am_bandwidth(Session& s, uint64_t size, Row* out) {
    const uint64_t warm = s.warmup_for(size), total = warm + s.iters_for(size), w = window_for(s, size);
    check(s, weft_barrier(s.world), "barrier");
    const uint64_t ack = 0;
    if (s.rank == 0) {
        Samples smp;
        Stopwatch sw(smp, warm, w);
        for (uint64_t it = 0; it < total; ++it) {
            sw.start();
            for (uint64_t j = 0; j < w; ++j)
                check(s, weft_am_send(s.ctx, 1, am_data, s.pat(it * w + j + 1), size), "weft_am_send");
            wait_for(
                s, [&] { return s.acks > it; }, "rank 1's acknowledgement");
            sw.lap(it);
        }
        *out = bandwidth_row(smp, "am_bw", size, w);
    } else if (s.rank == 1) {
        for (uint64_t it = 0; it < total; ++it) {
            wait_for(
                s, [&] { return s.data_msgs >= (it + 1) * w; }, "rank 0's window of messages");
            check(s, weft_am_send(s.ctx, 0, am_ack, &ack, sizeof ack), "weft_am_send");
        }
    }
}

void send_bandwidth(Session& s, uint64_t size, Row* out) {
    const uint64_t warm = s.warmup_for(size), total = warm + s.iters_for(size), w = window_for(s, size);
    constexpr int32_t data_tag = 8, ack_tag = 9;
    check(s, weft_barrier(s.world), "barrier");
    if (s.rank > 1) return;
    std::vector<weft_request_t> reqs(w);
    std::vector<weft_msg_status_t> sts(w);
    uint64_t ack = 0;
    if (s.rank == 0) {
        Samples smp;
        Stopwatch sw(smp, warm, w);
        for (uint64_t it = 0; it < total; ++it) {
            sw.start();
            for (uint64_t j = 0; j < w; ++j)
                check(s, weft_isend(s.world, s.pat(it * w + j + 1), size, WEFT_BYTE, 1, data_tag, &reqs[j]),
                      "weft_isend");
            check(s, weft_request_waitall(w, reqs.data(), sts.data()), "weft_request_waitall");
            check(s, weft_recv(s.world, &ack, 1, WEFT_UINT64, 1, ack_tag, nullptr), "weft_recv");
            sw.lap(it);
        }
        *out = bandwidth_row(smp, "send_bw", size, w);
    } else {
        std::vector<uint8_t> rbuf(w * size, 0);
        for (uint64_t it = 0; it < total; ++it) {
            for (uint64_t j = 0; j < w; ++j)
                check(s, weft_irecv(s.world, rbuf.data() + j * size, size, WEFT_BYTE, 0, data_tag, &reqs[j]),
                      "weft_irecv");
            check(s, weft_request_waitall(w, reqs.data(), sts.data()), "weft_request_waitall");
            check(s, weft_send(s.world, &ack, 1, WEFT_UINT64, 0, ack_tag), "weft_send");
            for (uint64_t j = 0; j < w; ++j) {
                if (sts[j].bytes != size) die(s, "send_bw delivered a wrong length");
                verify(s, rbuf.data() + j * size, s.pat(it * w + j + 1), size, "send_bw", it);
            }
        }
    }
}

void fadd_latency(Session& s, uint64_t, Row* out) { atomic_latency(s, Atomic::fadd, out); }
void cswap_latency(Session& s, uint64_t, Row* out) { atomic_latency(s, Atomic::cswap, out); }
void swap_latency(Session& s, uint64_t, Row* out) { atomic_latency(s, Atomic::swap, out); }

// The point-to-point rows in the order they run, and over which sizes.
enum class Sizes { all, am, atomic };
struct P2pTest {
    Test test;
    void (*fn)(Session&, uint64_t size, Row* out);
    Sizes sizes;
};
constexpr P2pTest p2p_tests[] = {
    {t_put, put_pingpong, Sizes::all},     {t_get, get_latency, Sizes::all},
    {t_fadd, fadd_latency, Sizes::atomic}, {t_cswap, cswap_latency, Sizes::atomic},
    {t_swap, swap_latency, Sizes::atomic}, {t_am, am_pingpong, Sizes::am},
    {t_send, send_pingpong, Sizes::all},   {t_put_bw, put_bandwidth, Sizes::all},
    {t_am_bw, am_bandwidth, Sizes::am},    {t_send_bw, send_bandwidth, Sizes::all},
};

}  // namespace

void run_p2p(Session& s) {
    if (s.size < 2) {
        if (s.rank == 0) std::fprintf(stderr, "weft-bench: point-to-point rows need 2 ranks: skipped\n");
        return;
    }
    // Each row starts from zeroed counters; the previous row's messages were
    // all consumed before its closing barrier.
    auto row = [&](auto&& body) {
        s.ctl = s.pings = s.pongs = s.data_msgs = s.acks = 0;
        s.am_bad = false;
        Row r;
        body(&r);
        row_barrier(s);
        if (s.am_bad) die(s, "an active message carried a wrong payload");
        if (s.rank == 0) s.rows.push_back(r);
    };
    for (const P2pTest& t : p2p_tests) {
        if (!s.has(t.test)) continue;
        if (t.sizes == Sizes::atomic) {
            row([&](Row* r) { t.fn(s, 8, r); });
            continue;
        }
        // Active messages stop at the transport's largest message.
        const uint64_t limit = t.sizes == Sizes::am ? s.caps.am_max_size : UINT64_MAX;
        for (uint64_t size = s.p.min_size; size <= s.p.max_size && size <= limit; size *= 2) {
            s.am_size = size;
            row([&](Row* r) { t.fn(s, size, r); });
        }
    }
}

}  // namespace weft_bench
