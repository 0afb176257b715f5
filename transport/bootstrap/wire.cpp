// wire.cpp — encoders, bounds-checked decoders and frame I/O (see wire.hpp).
#include "transport/bootstrap/wire.hpp"

#include <cerrno>
#include <cstring>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

namespace weft::wire {

namespace {
void begin(std::vector<uint8_t>& out, Type t, uint32_t seq, size_t& len_pos) {
    put_u32(out, magic);
    put_u16(out, version);
    put_u16(out, static_cast<uint16_t>(t));
    len_pos = out.size();
    put_u32(out, 0);
    put_u32(out, seq);
}
void finish(std::vector<uint8_t>& out, size_t len_pos) {
    uint32_t len = static_cast<uint32_t>(out.size() - len_pos - 8);
    for (int i = 0; i < 4; ++i) out[len_pos + i] = static_cast<uint8_t>(len >> (8 * i));
}
}  // namespace

void encode_hello(std::vector<uint8_t>& out, const Hello& h) {
    size_t lp;
    begin(out, Type::hello, 0, lp);
    out.insert(out.end(), h.secret, h.secret + secret_size);
    put_u32(out, h.job);
    put_u32(out, h.rank);
    put_u32(out, static_cast<uint32_t>(h.pid));
    finish(out, lp);
}

void encode_welcome(std::vector<uint8_t>& out) {
    size_t lp;
    begin(out, Type::welcome, 0, lp);
    finish(out, lp);
}

void encode_exchange(std::vector<uint8_t>& out, uint32_t seq, Scope scope, std::span<const uint8_t> blob) {
    size_t lp;
    begin(out, Type::exchange, seq, lp);
    out.push_back(static_cast<uint8_t>(scope));
    out.insert(out.end(), blob.begin(), blob.end());
    finish(out, lp);
}

void encode_exchange_result(std::vector<uint8_t>& out, uint32_t seq, const std::vector<std::vector<uint8_t>>& blobs) {
    size_t lp;
    begin(out, Type::exchange_result, seq, lp);
    put_u32(out, static_cast<uint32_t>(blobs.size()));
    for (const auto& b : blobs) {
        put_u32(out, static_cast<uint32_t>(b.size()));
        out.insert(out.end(), b.begin(), b.end());
    }
    finish(out, lp);
}

void encode_error(std::vector<uint8_t>& out, uint32_t seq, Status status, std::string_view text, bool departed) {
    size_t lp;
    begin(out, Type::error, seq, lp);
    put_u32(out, static_cast<uint32_t>(status));
    uint16_t n = static_cast<uint16_t>(text.size() > 1024 ? 1024 : text.size());
    put_u16(out, n);
    out.insert(out.end(), text.begin(), text.begin() + n);
    if (departed) out.push_back(1);
    finish(out, lp);
}

void encode_peer_failed(std::vector<uint8_t>& out, const PeerFailed& p) {
    size_t lp;
    begin(out, Type::peer_failed, 0, lp);
    put_u32(out, p.job);
    put_u32(out, p.rank);
    finish(out, lp);
}

Status decode_header(std::span<const uint8_t> b, Header& h) {
    if (b.size() < header_size) return WEFT_ERR_PROTOCOL;
    if (get_u32(b.data()) != magic) return WEFT_ERR_PROTOCOL;
    if (get_u16(b.data() + 4) != version) return WEFT_ERR_PROTOCOL;
    uint16_t t = get_u16(b.data() + 6);
    if (t < static_cast<uint16_t>(Type::hello) || t > static_cast<uint16_t>(Type::peer_failed))
        return WEFT_ERR_PROTOCOL;
    uint32_t len = get_u32(b.data() + 8);
    if (len > max_payload) return WEFT_ERR_PROTOCOL;
    h.type = static_cast<Type>(t);
    h.length = len;
    h.seq = get_u32(b.data() + 12);
    return WEFT_OK;
}

Status decode_hello(std::span<const uint8_t> p, Hello& h) {
    if (p.size() != secret_size + 12) return WEFT_ERR_PROTOCOL;
    std::memcpy(h.secret, p.data(), secret_size);
    h.job = get_u32(p.data() + secret_size);
    h.rank = get_u32(p.data() + secret_size + 4);
    h.pid = static_cast<int32_t>(get_u32(p.data() + secret_size + 8));
    return WEFT_OK;
}

Status decode_exchange(std::span<const uint8_t> p, Exchange& e) {
    if (p.empty()) return WEFT_ERR_PROTOCOL;
    if (p[0] > static_cast<uint8_t>(Scope::universe)) return WEFT_ERR_PROTOCOL;
    e.scope = static_cast<Scope>(p[0]);
    e.blob = p.subspan(1);
    return WEFT_OK;
}

Status decode_exchange_result(std::span<const uint8_t> p, std::vector<std::span<const uint8_t>>& blobs) {
    if (p.size() < 4) return WEFT_ERR_PROTOCOL;
    uint32_t n = get_u32(p.data());
    // Each entry needs at least its 4-byte length: reject absurd counts
    // before reserving anything.
    if (n > (p.size() - 4) / 4) return WEFT_ERR_PROTOCOL;
    blobs.clear();
    blobs.reserve(n);
    size_t pos = 4;
    for (uint32_t i = 0; i < n; ++i) {
        if (p.size() - pos < 4) return WEFT_ERR_PROTOCOL;
        uint32_t len = get_u32(p.data() + pos);
        pos += 4;
        if (p.size() - pos < len) return WEFT_ERR_PROTOCOL;
        blobs.emplace_back(p.data() + pos, len);
        pos += len;
    }
    if (pos != p.size()) return WEFT_ERR_PROTOCOL;
    return WEFT_OK;
}

Status decode_error(std::span<const uint8_t> p, ErrorMsg& e) {
    if (p.size() < 6) return WEFT_ERR_PROTOCOL;
    uint32_t st = get_u32(p.data());
    uint16_t n = get_u16(p.data() + 4);
    // The text, then nothing or the departure byte (1).
    if (p.size() != 6u + n && !(p.size() == 7u + n && p[6u + n] == 1)) return WEFT_ERR_PROTOCOL;
    if (st > WEFT_ERR_LAST_) st = WEFT_ERR_PROTOCOL;
    e.status = static_cast<Status>(st);
    e.text.assign(reinterpret_cast<const char*>(p.data() + 6), n);
    e.departed = p.size() == 7u + n;
    return WEFT_OK;
}

Status decode_peer_failed(std::span<const uint8_t> p, PeerFailed& f) {
    if (p.size() != 8) return WEFT_ERR_PROTOCOL;
    f.job = get_u32(p.data());
    f.rank = get_u32(p.data() + 4);
    return WEFT_OK;
}

namespace {
Status wait_fd(int fd, short events, Deadline d) {
    for (;;) {
        uint64_t rem = d.remaining_ns();
        if (rem == 0) return WEFT_ERR_TIMEOUT;
        pollfd p{fd, events, 0};
        const uint64_t want_ms = rem / 1000000 + 1;
        int ms = want_ms > 1000000000ull ? 1000000000 : static_cast<int>(want_ms);
        int r = poll(&p, 1, ms);
        if (r > 0) {
            if (p.revents & (POLLERR | POLLNVAL)) return WEFT_ERR_BOOTSTRAP;
            return WEFT_OK;  // POLLHUP: let the read return 0
        }
        if (r < 0 && errno != EINTR) return WEFT_ERR_BOOTSTRAP;
    }
}

Status recv_exact(int fd, uint8_t* buf, size_t n, Deadline d) {
    size_t got = 0;
    while (got < n) {
        Status st = wait_fd(fd, POLLIN, d);
        if (st != WEFT_OK) return st;
        ssize_t r = recv(fd, buf + got, n - got, MSG_DONTWAIT);
        if (r == 0) return WEFT_ERR_BOOTSTRAP;  // peer closed
        if (r < 0) {
            if (errno == EINTR || errno == EAGAIN) continue;
            return WEFT_ERR_BOOTSTRAP;
        }
        got += static_cast<size_t>(r);
    }
    return WEFT_OK;
}
}  // namespace

Status send_all(int fd, std::span<const uint8_t> bytes, Deadline d) {
    size_t sent = 0;
    while (sent < bytes.size()) {
        Status st = wait_fd(fd, POLLOUT, d);
        if (st != WEFT_OK) return st;
        // MSG_DONTWAIT: on a blocking socket a large send would block past the
        // deadline once poll() said "writable".
        ssize_t r = send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (r < 0) {
            if (errno == EINTR || errno == EAGAIN) continue;
            return WEFT_ERR_BOOTSTRAP;
        }
        sent += static_cast<size_t>(r);
    }
    return WEFT_OK;
}

Status recv_frame(int fd, Header& h, std::vector<uint8_t>& payload, Deadline d) {
    uint8_t hdr[header_size];
    Status st = recv_exact(fd, hdr, header_size, d);
    if (st != WEFT_OK) return st;
    st = decode_header(std::span<const uint8_t>(hdr, header_size), h);
    if (st != WEFT_OK) return st;
    payload.resize(h.length);
    if (h.length == 0) return WEFT_OK;
    return recv_exact(fd, payload.data(), h.length, d);
}

}  // namespace weft::wire
