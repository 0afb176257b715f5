// fuzz_bootstrap_wire.cpp — every bootstrap decoder on arbitrary bytes: the
// input is tried as a whole frame (header, then the payload decoder its type
// names) and as a bare payload for each decoder. Decoders must reject, never
// read out of bounds or allocate absurd amounts; whatever they accept must
// re-encode to the same bytes (so a decoder cannot silently accept a
// payload the encoder would never produce, e.g. trailing garbage).
#include "transport/bootstrap/wire.hpp"

#include <cstddef>
#include <cstdint>
#include <cstring>

using namespace weft::wire;

namespace {

// Re-encodes with the same seq and compares the payload bytes.
bool same_payload(const std::vector<uint8_t>& frame, std::span<const uint8_t> p) {
    if (frame.size() != header_size + p.size()) return false;
    return p.empty() || std::memcmp(frame.data() + header_size, p.data(), p.size()) == 0;
}

#define CHECK(cond)                    \
    do {                               \
        if (!(cond)) __builtin_trap(); \
    } while (0)

void decode_payload(Type t, std::span<const uint8_t> p) {
    std::vector<uint8_t> re;
    switch (t) {
        case Type::hello: {
            Hello h;
            if (decode_hello(p, h) != WEFT_OK) return;
            encode_hello(re, h);
            CHECK(same_payload(re, p));
            return;
        }
        case Type::exchange: {
            Exchange e;
            if (decode_exchange(p, e) != WEFT_OK) return;
            CHECK(e.blob.data() >= p.data() && e.blob.data() + e.blob.size() <= p.data() + p.size());
            encode_exchange(re, 0, e.scope, e.blob);
            CHECK(same_payload(re, p));
            return;
        }
        case Type::exchange_result: {
            std::vector<std::span<const uint8_t>> blobs;
            if (decode_exchange_result(p, blobs) != WEFT_OK) return;
            std::vector<std::vector<uint8_t>> copies;
            for (auto b : blobs) {
                // Spans must lie inside the payload.
                CHECK(b.data() >= p.data() && b.data() + b.size() <= p.data() + p.size());
                copies.emplace_back(b.begin(), b.end());
            }
            encode_exchange_result(re, 0, copies);
            CHECK(same_payload(re, p));
            return;
        }
        case Type::error: {
            ErrorMsg e;
            if (decode_error(p, e) != WEFT_OK) return;
            CHECK(e.status >= WEFT_OK && e.status <= WEFT_ERR_LAST_);
            CHECK(e.text.size() == p.size() - 6 - (e.departed ? 1 : 0));
            // The encoder caps texts at 1024 bytes and unknown statuses decode
            // as PROTOCOL: compare only where the round trip is exact.
            const uint32_t st = get_u32(p.data());
            if (e.text.size() <= 1024 && st <= WEFT_ERR_LAST_) {
                encode_error(re, 0, e.status, e.text, e.departed);
                CHECK(same_payload(re, p));
            }
            return;
        }
        case Type::peer_failed: {
            PeerFailed f;
            if (decode_peer_failed(p, f) != WEFT_OK) return;
            encode_peer_failed(re, f);
            CHECK(same_payload(re, p));
            return;
        }
        case Type::welcome:
            return;  // no payload, no decoder
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::span<const uint8_t> in(data, size);
    Header h;
    if (decode_header(in, h) == WEFT_OK) {
        CHECK(size >= header_size && h.length <= max_payload);
        const uint16_t t = static_cast<uint16_t>(h.type);
        CHECK(t >= static_cast<uint16_t>(Type::hello) && t <= static_cast<uint16_t>(Type::peer_failed));
        if (in.size() - header_size >= h.length) decode_payload(h.type, in.subspan(header_size, h.length));
    }
    for (Type t : {Type::hello, Type::exchange, Type::exchange_result, Type::error, Type::peer_failed})
        decode_payload(t, in);
    return 0;
}
