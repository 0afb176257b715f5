// test_wire.cpp — the launcher<->rank frame codec (transport/bootstrap/wire).
//
// Round trips for every encoder/decoder pair, every truncation of every valid
// frame and payload, malformed headers and payloads, and frame I/O over a
// socketpair (peer closing mid-frame, deadlines).
#include "transport/bootstrap/wire.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <fcntl.h>
#include <string>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace wire = weft::wire;
using Bytes = std::vector<uint8_t>;
using Span = std::span<const uint8_t>;

namespace {

wire::Hello sample_hello() {
    wire::Hello h{};
    for (size_t i = 0; i < wire::secret_size; ++i) h.secret[i] = static_cast<uint8_t>(0xA0 + i);
    h.job = 3;
    h.rank = 0x01020304;
    h.pid = -42;  // pid travels as u32: a negative value must survive
    return h;
}

Bytes blob(size_t n, uint8_t seed) {
    Bytes b(n);
    for (size_t i = 0; i < n; ++i) b[i] = static_cast<uint8_t>(seed + 7 * i);
    return b;
}

// Splits a frame into header and payload, checking the header describes it.
Span payload_of(const Bytes& frame, wire::Header& h) {
    EXPECT_GE(frame.size(), wire::header_size);
    EXPECT_EQ(wire::decode_header(Span(frame), h), WEFT_OK);
    EXPECT_EQ(h.length, frame.size() - wire::header_size);
    return Span(frame).subspan(wire::header_size);
}

// One valid frame of every type, with the decoder for its payload.
struct Sample {
    const char* name;
    Bytes frame;
    // Runs the right payload decoder; returns its status.
    weft::Status (*decode)(Span);
    // Whether a strict prefix of the payload can still be a valid payload:
    // an exchange blob is "the rest of the payload", its length comes only
    // from the header, so only the empty prefix is invalid.
    bool prefixes_may_decode;
};

weft::Status dec_hello(Span p) {
    wire::Hello h;
    return wire::decode_hello(p, h);
}
weft::Status dec_exchange(Span p) {
    wire::Exchange e;
    return wire::decode_exchange(p, e);
}
weft::Status dec_exchange_result(Span p) {
    std::vector<Span> v;
    return wire::decode_exchange_result(p, v);
}
weft::Status dec_error(Span p) {
    wire::ErrorMsg e;
    return wire::decode_error(p, e);
}
weft::Status dec_peer_failed(Span p) {
    wire::PeerFailed f;
    return wire::decode_peer_failed(p, f);
}
// welcome has no payload and no decoder: a non-empty one is malformed.
weft::Status dec_welcome(Span p) { return p.empty() ? WEFT_OK : WEFT_ERR_PROTOCOL; }

std::vector<Sample> samples() {
    std::vector<Sample> s;
    {
        Bytes f;
        wire::encode_hello(f, sample_hello());
        s.push_back({"hello", f, dec_hello, false});
    }
    {
        Bytes f;
        wire::encode_welcome(f);
        s.push_back({"welcome", f, dec_welcome, false});
    }
    {
        Bytes f;
        Bytes b = blob(37, 1);
        wire::encode_exchange(f, 9, wire::Scope::universe, b);
        s.push_back({"exchange", f, dec_exchange, true});
    }
    {
        Bytes f;
        wire::encode_exchange_result(f, 11, {blob(5, 2), {}, blob(19, 3)});
        s.push_back({"exchange_result", f, dec_exchange_result, false});
    }
    {
        Bytes f;
        wire::encode_exchange_result(f, 12, {});
        s.push_back({"exchange_result_empty", f, dec_exchange_result, false});
    }
    {
        Bytes f;
        wire::encode_error(f, 13, WEFT_ERR_PEER_FAILED, "rank 2 died");
        s.push_back({"error", f, dec_error, false});
    }
    {
        Bytes f;
        wire::encode_peer_failed(f, {1, 77});
        s.push_back({"peer_failed", f, dec_peer_failed, false});
    }
    return s;
}

// A connected stream socketpair, closed on scope exit.
struct SocketPair {
    int fd[2] = {-1, -1};
    SocketPair() { EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fd), 0); }
    ~SocketPair() {
        for (int f : fd)
            if (f >= 0) close(f);
    }
    void close_end(int i) {
        close(fd[i]);
        fd[i] = -1;
    }
};

weft::Deadline soon() { return weft::Deadline::after_ns(5'000'000'000ull); }         // 5 s: "never"
weft::Deadline short_deadline() { return weft::Deadline::after_ns(50'000'000ull); }  // 50 ms

}  // namespace

// ------------------------------------------------------------- round trips

TEST(WireRoundTrip, Header) {
    Bytes f;
    wire::encode_exchange(f, 0xDEADBEEF, wire::Scope::job, Bytes{1, 2, 3});
    ASSERT_EQ(f.size(), wire::header_size + 4);
    EXPECT_EQ(wire::get_u32(f.data()), wire::magic);
    EXPECT_EQ(wire::get_u16(f.data() + 4), wire::version);
    wire::Header h{};
    ASSERT_EQ(wire::decode_header(Span(f), h), WEFT_OK);
    EXPECT_EQ(h.type, wire::Type::exchange);
    EXPECT_EQ(h.length, 4u);
    EXPECT_EQ(h.seq, 0xDEADBEEFu);
}

TEST(WireRoundTrip, Hello) {
    Bytes f;
    const wire::Hello in = sample_hello();
    wire::encode_hello(f, in);
    wire::Header h{};
    Span p = payload_of(f, h);
    EXPECT_EQ(h.type, wire::Type::hello);
    wire::Hello out{};
    ASSERT_EQ(wire::decode_hello(p, out), WEFT_OK);
    EXPECT_EQ(std::memcmp(out.secret, in.secret, wire::secret_size), 0);
    EXPECT_EQ(out.job, in.job);
    EXPECT_EQ(out.rank, in.rank);
    EXPECT_EQ(out.pid, in.pid);
}

TEST(WireRoundTrip, Welcome) {
    Bytes f;
    wire::encode_welcome(f);
    wire::Header h{};
    Span p = payload_of(f, h);
    EXPECT_EQ(h.type, wire::Type::welcome);
    EXPECT_TRUE(p.empty());
}

TEST(WireRoundTrip, ExchangeBothScopesAndEmptyBlob) {
    for (auto scope : {wire::Scope::job, wire::Scope::universe}) {
        for (size_t n : {size_t(0), size_t(1), size_t(1000)}) {
            Bytes f;
            Bytes b = blob(n, 5);
            wire::encode_exchange(f, 77, scope, b);
            wire::Header h{};
            Span p = payload_of(f, h);
            EXPECT_EQ(h.type, wire::Type::exchange);
            EXPECT_EQ(h.seq, 77u);
            wire::Exchange e{};
            ASSERT_EQ(wire::decode_exchange(p, e), WEFT_OK);
            EXPECT_EQ(e.scope, scope);
            EXPECT_EQ(Bytes(e.blob.begin(), e.blob.end()), b);
        }
    }
}

TEST(WireRoundTrip, ExchangeResult) {
    const std::vector<Bytes> in = {blob(5, 2), {}, blob(300, 3), blob(1, 4)};
    Bytes f;
    wire::encode_exchange_result(f, 5, in);
    wire::Header h{};
    Span p = payload_of(f, h);
    EXPECT_EQ(h.type, wire::Type::exchange_result);
    EXPECT_EQ(h.seq, 5u);
    std::vector<Span> out;
    ASSERT_EQ(wire::decode_exchange_result(p, out), WEFT_OK);
    ASSERT_EQ(out.size(), in.size());
    for (size_t i = 0; i < in.size(); ++i) EXPECT_EQ(Bytes(out[i].begin(), out[i].end()), in[i]) << i;
}

TEST(WireRoundTrip, ExchangeResultEmptyAndDecoderClearsOutput) {
    Bytes f;
    wire::encode_exchange_result(f, 1, {});
    wire::Header h{};
    Span p = payload_of(f, h);
    std::vector<Span> out(3);  // stale content must not survive a decode
    ASSERT_EQ(wire::decode_exchange_result(p, out), WEFT_OK);
    EXPECT_TRUE(out.empty());
}

TEST(WireRoundTrip, Error) {
    Bytes f;
    wire::encode_error(f, 8, WEFT_ERR_TIMEOUT, "launcher gave up");
    wire::Header h{};
    Span p = payload_of(f, h);
    EXPECT_EQ(h.type, wire::Type::error);
    wire::ErrorMsg e{};
    ASSERT_EQ(wire::decode_error(p, e), WEFT_OK);
    EXPECT_EQ(e.status, WEFT_ERR_TIMEOUT);
    EXPECT_EQ(e.text, "launcher gave up");
    EXPECT_FALSE(e.departed);
}

TEST(WireRoundTrip, ErrorOfADeparture) {
    // A member that finalized and exited 0: the rank logs it at debug, not
    // as a death.
    Bytes f;
    wire::encode_error(f, 9, WEFT_ERR_PEER_FAILED, "job 0 rank 1 finalized and exited (status 0)", true);
    wire::Header h{};
    Span p = payload_of(f, h);
    wire::ErrorMsg e{};
    ASSERT_EQ(wire::decode_error(p, e), WEFT_OK);
    EXPECT_EQ(e.status, WEFT_ERR_PEER_FAILED);
    EXPECT_EQ(e.text, "job 0 rank 1 finalized and exited (status 0)");
    EXPECT_TRUE(e.departed);
    // Any other trailing byte is a protocol error.
    Bytes q(p.begin(), p.end());
    q.back() = 2;
    EXPECT_EQ(wire::decode_error(Span(q), e), WEFT_ERR_PROTOCOL);
}

TEST(WireRoundTrip, ErrorTextLongerThan1024IsTruncated) {
    Bytes f;
    std::string text(5000, 'x');
    text[1023] = 'y';
    wire::encode_error(f, 0, WEFT_ERR_BOOTSTRAP, text);
    wire::Header h{};
    Span p = payload_of(f, h);
    wire::ErrorMsg e{};
    ASSERT_EQ(wire::decode_error(p, e), WEFT_OK);
    EXPECT_EQ(e.text, text.substr(0, 1024));
}

TEST(WireRoundTrip, ErrorUnknownStatusBecomesProtocol) {
    // A status the rank does not know is reported as a protocol error rather
    // than passed through as an out-of-range enum value.
    for (uint32_t st : {uint32_t(WEFT_ERR_LAST_) + 1, 1000u, 0xFFFFFFFFu}) {
        Bytes f;
        wire::encode_error(f, 0, static_cast<weft::Status>(0), "t");
        Bytes p(f.begin() + wire::header_size, f.end());
        for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(st >> (8 * i));
        wire::ErrorMsg e{};
        ASSERT_EQ(wire::decode_error(Span(p), e), WEFT_OK);
        EXPECT_EQ(e.status, WEFT_ERR_PROTOCOL) << st;
        EXPECT_EQ(e.text, "t");
    }
}

TEST(WireRoundTrip, PeerFailed) {
    Bytes f;
    wire::encode_peer_failed(f, {0xFFFFFFFF, 12});
    wire::Header h{};
    Span p = payload_of(f, h);
    EXPECT_EQ(h.type, wire::Type::peer_failed);
    wire::PeerFailed out{};
    ASSERT_EQ(wire::decode_peer_failed(p, out), WEFT_OK);
    EXPECT_EQ(out.job, 0xFFFFFFFFu);
    EXPECT_EQ(out.rank, 12u);
}

TEST(WireRoundTrip, EncodersAppend) {
    Bytes f = {0xEE};
    wire::encode_welcome(f);
    wire::encode_peer_failed(f, {1, 2});
    ASSERT_EQ(f.size(), 1 + wire::header_size + wire::header_size + 8);
    EXPECT_EQ(f[0], 0xEE);
    wire::Header h{};
    ASSERT_EQ(wire::decode_header(Span(f).subspan(1), h), WEFT_OK);
    EXPECT_EQ(h.type, wire::Type::welcome);
    ASSERT_EQ(wire::decode_header(Span(f).subspan(1 + wire::header_size), h), WEFT_OK);
    EXPECT_EQ(h.type, wire::Type::peer_failed);
    EXPECT_EQ(h.length, 8u);
}

// -------------------------------------------------------------- truncation

TEST(WireTruncation, EveryHeaderPrefixIsRejected) {
    for (const Sample& s : samples()) {
        for (size_t n = 0; n < wire::header_size; ++n) {
            wire::Header h{};
            EXPECT_EQ(wire::decode_header(Span(s.frame.data(), n), h), WEFT_ERR_PROTOCOL) << s.name << " prefix " << n;
        }
    }
}

TEST(WireTruncation, EveryPayloadPrefixIsRejected) {
    for (const Sample& s : samples()) {
        wire::Header h{};
        Span p = payload_of(s.frame, h);
        ASSERT_EQ(s.decode(p), WEFT_OK) << s.name;
        for (size_t n = 0; n < p.size(); ++n) {
            weft::Status st = s.decode(p.first(n));
            if (s.prefixes_may_decode && n > 0) {
                // exchange: {scope, blob...}; a prefix is a shorter blob.
                EXPECT_EQ(st, WEFT_OK) << s.name << " prefix " << n;
            } else {
                EXPECT_EQ(st, WEFT_ERR_PROTOCOL) << s.name << " prefix " << n;
            }
        }
    }
}

TEST(WireTruncation, EveryFramePrefixIsRejected) {
    // A frame is accepted only when the header decodes and exactly
    // header.length payload bytes follow and the payload decodes. For every
    // strict prefix, one of these must fail.
    for (const Sample& s : samples()) {
        for (size_t n = 0; n < s.frame.size(); ++n) {
            Span f(s.frame.data(), n);
            wire::Header h{};
            weft::Status st = wire::decode_header(f, h);
            if (st == WEFT_OK) {
                EXPECT_NE(size_t(h.length), n - wire::header_size) << s.name << " prefix " << n;
                st = size_t(h.length) == n - wire::header_size ? s.decode(f.subspan(wire::header_size))
                                                               : WEFT_ERR_PROTOCOL;
            }
            EXPECT_EQ(st, WEFT_ERR_PROTOCOL) << s.name << " prefix " << n;
        }
    }
}

TEST(WireTruncation, EveryFramePrefixOverSocketFailsWithBootstrap) {
    // The sender writes a strict prefix of a frame and closes: recv_frame must
    // report the broken stream, not a frame.
    for (const Sample& s : samples()) {
        for (size_t n = 0; n < s.frame.size(); ++n) {
            SocketPair sp;
            ASSERT_EQ(wire::send_all(sp.fd[0], Span(s.frame.data(), n), soon()), WEFT_OK);
            sp.close_end(0);
            wire::Header h{};
            Bytes payload;
            EXPECT_EQ(wire::recv_frame(sp.fd[1], h, payload, soon()), WEFT_ERR_BOOTSTRAP) << s.name << " prefix " << n;
        }
    }
}

// --------------------------------------------------------- malformed input

namespace {
Bytes valid_header_frame() {
    Bytes f;
    wire::encode_peer_failed(f, {1, 2});
    return f;
}
void set_u32(Bytes& b, size_t at, uint32_t v) {
    for (int i = 0; i < 4; ++i) b[at + i] = static_cast<uint8_t>(v >> (8 * i));
}
void set_u16(Bytes& b, size_t at, uint16_t v) {
    b[at] = static_cast<uint8_t>(v);
    b[at + 1] = static_cast<uint8_t>(v >> 8);
}
}  // namespace

TEST(WireMalformed, BadMagic) {
    for (uint32_t m : {0u, wire::magic ^ 1u, wire::magic ^ 0x80000000u, 0x57464254u /* byte-swapped */}) {
        Bytes f = valid_header_frame();
        set_u32(f, 0, m);
        wire::Header h{};
        EXPECT_EQ(wire::decode_header(Span(f), h), WEFT_ERR_PROTOCOL) << std::hex << m;
    }
}

TEST(WireMalformed, BadVersion) {
    for (uint16_t v : {uint16_t(0), uint16_t(2), uint16_t(0x0100), uint16_t(0xFFFF)}) {
        Bytes f = valid_header_frame();
        set_u16(f, 4, v);
        wire::Header h{};
        EXPECT_EQ(wire::decode_header(Span(f), h), WEFT_ERR_PROTOCOL) << v;
    }
}

TEST(WireMalformed, BadType) {
    for (uint16_t t : {uint16_t(0), uint16_t(7), uint16_t(0x0100), uint16_t(0xFFFF)}) {
        Bytes f = valid_header_frame();
        set_u16(f, 6, t);
        wire::Header h{};
        EXPECT_EQ(wire::decode_header(Span(f), h), WEFT_ERR_PROTOCOL) << t;
    }
    for (uint16_t t = 1; t <= 6; ++t) {
        Bytes f = valid_header_frame();
        set_u16(f, 6, t);
        wire::Header h{};
        EXPECT_EQ(wire::decode_header(Span(f), h), WEFT_OK) << t;
        EXPECT_EQ(static_cast<uint16_t>(h.type), t);
    }
}

TEST(WireMalformed, LengthAboveMaxPayload) {
    Bytes f = valid_header_frame();
    wire::Header h{};
    set_u32(f, 8, wire::max_payload);
    EXPECT_EQ(wire::decode_header(Span(f), h), WEFT_OK);
    EXPECT_EQ(h.length, wire::max_payload);
    for (uint32_t len : {wire::max_payload + 1, 0x80000000u, 0xFFFFFFFFu}) {
        set_u32(f, 8, len);
        EXPECT_EQ(wire::decode_header(Span(f), h), WEFT_ERR_PROTOCOL) << len;
    }
}

TEST(WireMalformed, HeaderIgnoresBytesAfterIt) {
    // decode_header reads exactly 16 bytes: what follows is the payload.
    Bytes f = valid_header_frame();
    f.insert(f.end(), {9, 9, 9});
    wire::Header h{};
    EXPECT_EQ(wire::decode_header(Span(f), h), WEFT_OK);
    EXPECT_EQ(h.length, 8u);
}

TEST(WireMalformed, ExchangeBadScope) {
    for (uint8_t sc : {uint8_t(2), uint8_t(0x7F), uint8_t(0xFF)}) {
        Bytes p = {sc, 1, 2, 3};
        wire::Exchange e{};
        EXPECT_EQ(wire::decode_exchange(Span(p), e), WEFT_ERR_PROTOCOL) << int(sc);
    }
}

TEST(WireMalformed, ExchangeResultCountClaimsMoreEntriesThanBytes) {
    std::vector<Span> out;
    // Absurd counts (rejected before any reservation), and counts just one
    // above what the entries provide.
    for (uint32_t n : {0xFFFFFFFFu, 0x40000000u, 1000u}) {
        Bytes p(12, 0);
        set_u32(p, 0, n);
        EXPECT_EQ(wire::decode_exchange_result(Span(p), out), WEFT_ERR_PROTOCOL) << n;
    }
    Bytes f;
    wire::encode_exchange_result(f, 0, {blob(3, 1), blob(4, 2)});
    Bytes p(f.begin() + wire::header_size, f.end());
    set_u32(p, 0, 3);
    EXPECT_EQ(wire::decode_exchange_result(Span(p), out), WEFT_ERR_PROTOCOL);
    // Two empty entries are 8 bytes: count 3 would need 12.
    Bytes q(4 + 8, 0);
    set_u32(q, 0, 3);
    EXPECT_EQ(wire::decode_exchange_result(Span(q), out), WEFT_ERR_PROTOCOL);
}

TEST(WireMalformed, ExchangeResultEntryLengthPastEnd) {
    Bytes f;
    wire::encode_exchange_result(f, 0, {blob(3, 1), blob(4, 2)});
    Bytes p(f.begin() + wire::header_size, f.end());
    std::vector<Span> out;
    // Second entry's length field sits after 4 (count) + 4 + 3 bytes.
    for (uint32_t len : {5u, 0x7FFFFFFFu, 0xFFFFFFFFu}) {
        Bytes q = p;
        set_u32(q, 11, len);
        EXPECT_EQ(wire::decode_exchange_result(Span(q), out), WEFT_ERR_PROTOCOL) << len;
    }
    // A shorter entry length leaves bytes over: also rejected.
    Bytes q = p;
    set_u32(q, 11, 3);
    EXPECT_EQ(wire::decode_exchange_result(Span(q), out), WEFT_ERR_PROTOCOL);
}

TEST(WireMalformed, TrailingGarbageIsRejected) {
    for (const Sample& s : samples()) {
        if (s.prefixes_may_decode) continue;  // exchange: trailing bytes are blob bytes
        wire::Header h{};
        Span p = payload_of(s.frame, h);
        for (size_t extra : {size_t(1), size_t(4), size_t(100)}) {
            Bytes q(p.begin(), p.end());
            q.insert(q.end(), extra, 0x5A);
            EXPECT_EQ(s.decode(Span(q)), WEFT_ERR_PROTOCOL) << s.name << " +" << extra;
        }
    }
}

TEST(WireMalformed, ErrorTextLengthMismatch) {
    Bytes f;
    wire::encode_error(f, 0, WEFT_ERR_BOOTSTRAP, "abc");
    Bytes p(f.begin() + wire::header_size, f.end());
    wire::ErrorMsg e{};
    for (uint16_t n : {uint16_t(0), uint16_t(2), uint16_t(4), uint16_t(0xFFFF)}) {
        Bytes q = p;
        set_u16(q, 4, n);
        EXPECT_EQ(wire::decode_error(Span(q), e), WEFT_ERR_PROTOCOL) << n;
    }
}

// ------------------------------------------------------------- frame I/O

TEST(WireSocket, SendAndReceiveEveryFrameInOrder) {
    SocketPair sp;
    Bytes all;
    const auto ss = samples();
    for (const Sample& s : ss) all.insert(all.end(), s.frame.begin(), s.frame.end());
    ASSERT_EQ(wire::send_all(sp.fd[0], Span(all), soon()), WEFT_OK);
    for (const Sample& s : ss) {
        wire::Header h{}, expect{};
        Span p = payload_of(s.frame, expect);
        Bytes payload = {1, 2, 3};  // must be replaced, not appended to
        ASSERT_EQ(wire::recv_frame(sp.fd[1], h, payload, soon()), WEFT_OK) << s.name;
        EXPECT_EQ(h.type, expect.type) << s.name;
        EXPECT_EQ(h.seq, expect.seq) << s.name;
        EXPECT_EQ(payload, Bytes(p.begin(), p.end())) << s.name;
        EXPECT_EQ(s.decode(Span(payload)), WEFT_OK) << s.name;
    }
}

TEST(WireSocket, LargeFrameLongerThanSocketBuffer) {
    // A 4 MiB frame does not fit the socket buffer: sender and receiver must
    // interleave, so the sender runs on its own thread.
    SocketPair sp;
    Bytes b = blob(4u << 20, 9);
    Bytes f;
    wire::encode_exchange(f, 3, wire::Scope::job, b);
    weft::Status send_st = WEFT_ERR_TRANSPORT;
    std::thread sender([&] { send_st = wire::send_all(sp.fd[0], Span(f), soon()); });
    wire::Header h{};
    Bytes payload;
    weft::Status st = wire::recv_frame(sp.fd[1], h, payload, soon());
    sender.join();
    ASSERT_EQ(send_st, WEFT_OK);
    ASSERT_EQ(st, WEFT_OK);
    wire::Exchange e{};
    ASSERT_EQ(wire::decode_exchange(Span(payload), e), WEFT_OK);
    EXPECT_TRUE(std::equal(e.blob.begin(), e.blob.end(), b.begin(), b.end()));
}

TEST(WireSocket, PeerClosesMidPayload) {
    Bytes f;
    wire::encode_exchange(f, 1, wire::Scope::job, blob(100, 1));
    SocketPair sp;
    ASSERT_EQ(wire::send_all(sp.fd[0], Span(f.data(), wire::header_size + 10), soon()), WEFT_OK);
    sp.close_end(0);
    wire::Header h{};
    Bytes payload;
    EXPECT_EQ(wire::recv_frame(sp.fd[1], h, payload, soon()), WEFT_ERR_BOOTSTRAP);
}

TEST(WireSocket, PeerClosedBeforeAnything) {
    SocketPair sp;
    sp.close_end(0);
    wire::Header h{};
    Bytes payload;
    EXPECT_EQ(wire::recv_frame(sp.fd[1], h, payload, soon()), WEFT_ERR_BOOTSTRAP);
}

TEST(WireSocket, HeaderAboveMaxPayloadRejectedBeforeReading) {
    Bytes f = valid_header_frame();
    set_u32(f, 8, 0xFFFFFFFFu);
    SocketPair sp;
    ASSERT_EQ(wire::send_all(sp.fd[0], Span(f.data(), wire::header_size), soon()), WEFT_OK);
    wire::Header h{};
    Bytes payload;
    EXPECT_EQ(wire::recv_frame(sp.fd[1], h, payload, soon()), WEFT_ERR_PROTOCOL);
    EXPECT_TRUE(payload.empty());  // nothing allocated for the claimed 4 GiB
}

TEST(WireSocket, BadMagicOverSocketIsProtocol) {
    Bytes f = valid_header_frame();
    f[0] ^= 0xFF;
    SocketPair sp;
    ASSERT_EQ(wire::send_all(sp.fd[0], Span(f), soon()), WEFT_OK);
    wire::Header h{};
    Bytes payload;
    EXPECT_EQ(wire::recv_frame(sp.fd[1], h, payload, soon()), WEFT_ERR_PROTOCOL);
}

TEST(WireSocket, RecvDeadlinePassesWithNothingSent) {
    SocketPair sp;
    wire::Header h{};
    Bytes payload;
    EXPECT_EQ(wire::recv_frame(sp.fd[1], h, payload, short_deadline()), WEFT_ERR_TIMEOUT);
}

TEST(WireSocket, RecvDeadlinePassesMidFrame) {
    // The peer stays connected but stops after half a frame.
    Bytes f;
    wire::encode_exchange(f, 1, wire::Scope::job, blob(100, 1));
    SocketPair sp;
    ASSERT_EQ(wire::send_all(sp.fd[0], Span(f.data(), 20), soon()), WEFT_OK);
    wire::Header h{};
    Bytes payload;
    EXPECT_EQ(wire::recv_frame(sp.fd[1], h, payload, short_deadline()), WEFT_ERR_TIMEOUT);
}

TEST(WireSocket, AlreadyPassedDeadline) {
    SocketPair sp;
    Bytes f;
    wire::encode_welcome(f);
    ASSERT_EQ(wire::send_all(sp.fd[0], Span(f), soon()), WEFT_OK);
    wire::Header h{};
    Bytes payload;
    EXPECT_EQ(wire::recv_frame(sp.fd[1], h, payload, weft::Deadline{0}), WEFT_ERR_TIMEOUT);
    EXPECT_EQ(wire::send_all(sp.fd[0], Span(f), weft::Deadline{0}), WEFT_ERR_TIMEOUT);
}

TEST(WireSocket, SendDeadlinePassesWhenPeerDoesNotRead) {
    SocketPair sp;
    int sz = 4096;
    setsockopt(sp.fd[0], SOL_SOCKET, SO_SNDBUF, &sz, sizeof sz);
    // Far more than any socket buffer; nobody reads the other end.
    Bytes big(16u << 20, 0xAB);
    EXPECT_EQ(wire::send_all(sp.fd[0], Span(big), short_deadline()), WEFT_ERR_TIMEOUT);
}

TEST(WireSocket, SendToClosedPeerIsBootstrapNotSigpipe) {
    SocketPair sp;
    sp.close_end(1);
    Bytes f;
    wire::encode_welcome(f);
    EXPECT_EQ(wire::send_all(sp.fd[0], Span(f), soon()), WEFT_ERR_BOOTSTRAP);
}

TEST(WireSocket, ZeroLengthSendIsOk) {
    SocketPair sp;
    EXPECT_EQ(wire::send_all(sp.fd[0], Span(), soon()), WEFT_OK);
}
