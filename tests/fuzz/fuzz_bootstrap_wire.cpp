// fuzz_bootstrap_wire.cpp — every bootstrap decoder on arbitrary bytes: the
// input is tried as a whole frame (header, then the payload decoder its type
// names) and as a bare payload for each decoder. Decoders must reject, never
// read out of bounds or allocate absurd amounts.
#include "transport/bootstrap/wire.hpp"

#include <cstddef>
#include <cstdint>

using namespace weft::wire;

namespace {
void decode_payload(Type t, std::span<const uint8_t> p) {
    switch (t) {
        case Type::hello: {
            Hello h;
            decode_hello(p, h);
            return;
        }
        case Type::exchange: {
            Exchange e;
            decode_exchange(p, e);
            return;
        }
        case Type::exchange_result: {
            std::vector<std::span<const uint8_t>> blobs;
            if (decode_exchange_result(p, blobs) == WEFT_OK) {
                size_t total = 0;
                for (auto b : blobs) total += b.size();
                if (total > p.size()) __builtin_trap();  // spans must lie inside the payload
            }
            return;
        }
        case Type::error: {
            ErrorMsg e;
            decode_error(p, e);
            return;
        }
        case Type::peer_failed: {
            PeerFailed f;
            decode_peer_failed(p, f);
            return;
        }
        case Type::welcome:
            return;
    }
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::span<const uint8_t> in(data, size);
    Header h;
    if (decode_header(in, h) == WEFT_OK && in.size() - header_size >= h.length)
        decode_payload(h.type, in.subspan(header_size, h.length));
    for (Type t : {Type::hello, Type::exchange, Type::exchange_result, Type::error, Type::peer_failed})
        decode_payload(t, in);
    return 0;
}
