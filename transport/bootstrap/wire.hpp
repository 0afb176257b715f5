// wire.hpp — the framing between a rank and weft-run's bootstrap server.
//
// Every frame: a 16-byte header {magic, version, type, length, seq}, little
// endian, then `length` payload bytes. Decoders never trust a length: each
// field is bounds-checked against the bytes actually received, and any
// mismatch is WEFT_ERR_PROTOCOL. The same code runs in the launcher and in
// every rank (and under libFuzzer: tests/fuzz/fuzz_bootstrap_wire.cpp).
#pragma once

#include "transport/common.hpp"

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace weft::wire {

inline constexpr uint32_t magic = 0x42544657;  // "WFTB"
inline constexpr uint16_t version = 1;
inline constexpr size_t header_size = 16;
inline constexpr uint32_t max_payload = 64u << 20;
inline constexpr size_t secret_size = 32;
// The launcher's refusal of a hello while it still holds that rank's
// connection (a rank reconnecting after weft_ckpt_release tries again).
inline constexpr const char* already_connected = "rank already connected";

enum class Type : uint16_t {
    hello = 1,            // rank -> launcher: who I am, the launch secret
    welcome = 2,          // launcher -> rank: accepted
    exchange = 3,         // rank -> launcher: my contribution to collective `seq`
    exchange_result = 4,  // launcher -> rank: every member's contribution
    error = 5,            // launcher -> rank: a status and a text
    peer_failed = 6,      // launcher -> rank: a process of the launch died
};

enum class Scope : uint8_t { job = 0, universe = 1 };

struct Header {
    Type type;
    uint32_t length;
    uint32_t seq;
};

struct Hello {
    uint8_t secret[secret_size];
    uint32_t job;
    uint32_t rank;
    int32_t pid;
};

struct Exchange {
    Scope scope;
    std::span<const uint8_t> blob;
};

struct ErrorMsg {
    Status status;
    std::string text;
    // An exchange failed because a member finalized and exited (a departure,
    // logged at debug), not because it died. On the wire: one byte 1 after
    // the text, absent otherwise.
    bool departed = false;
};

struct PeerFailed {
    uint32_t job;
    uint32_t rank;
};

// Encoders append a whole frame (header + payload) to `out`.
void encode_hello(std::vector<uint8_t>& out, const Hello& h);
void encode_welcome(std::vector<uint8_t>& out);
void encode_exchange(std::vector<uint8_t>& out, uint32_t seq, Scope scope, std::span<const uint8_t> blob);
void encode_exchange_result(std::vector<uint8_t>& out, uint32_t seq, const std::vector<std::vector<uint8_t>>& blobs);
void encode_error(std::vector<uint8_t>& out, uint32_t seq, Status status, std::string_view text, bool departed = false);
void encode_peer_failed(std::vector<uint8_t>& out, const PeerFailed& p);

// Decoders: `bytes` is exactly one payload (header already consumed).
Status decode_header(std::span<const uint8_t> bytes, Header& h);
Status decode_hello(std::span<const uint8_t> payload, Hello& h);
Status decode_exchange(std::span<const uint8_t> payload, Exchange& e);
Status decode_exchange_result(std::span<const uint8_t> payload, std::vector<std::span<const uint8_t>>& blobs);
Status decode_error(std::span<const uint8_t> payload, ErrorMsg& e);
Status decode_peer_failed(std::span<const uint8_t> payload, PeerFailed& p);

// Little-endian helpers, shared with the other wire formats in transport/.
inline void put_u32(std::vector<uint8_t>& o, uint32_t v) {
    for (int i = 0; i < 4; ++i) o.push_back(static_cast<uint8_t>(v >> (8 * i)));
}
inline void put_u16(std::vector<uint8_t>& o, uint16_t v) {
    o.push_back(static_cast<uint8_t>(v));
    o.push_back(static_cast<uint8_t>(v >> 8));
}
inline uint32_t get_u32(const uint8_t* p) {
    return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
}
inline uint16_t get_u16(const uint8_t* p) { return uint16_t(p[0] | p[1] << 8); }

// Blocking whole-frame I/O on a stream socket with a deadline. recv_frame
// rejects payloads above max_payload before allocating them.
Status send_all(int fd, std::span<const uint8_t> bytes, Deadline deadline);
Status recv_frame(int fd, Header& h, std::vector<uint8_t>& payload, Deadline deadline);

}  // namespace weft::wire
