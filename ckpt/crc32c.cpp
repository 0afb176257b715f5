// crc32c.cpp — see crc32c.hpp.
#include "ckpt/crc32c.hpp"

#include <array>
#include <cstring>

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

namespace weft::ckpt {
namespace {

constexpr uint32_t poly = 0x82f63b78u;  // Castagnoli, reflected

using Tables = std::array<std::array<uint32_t, 256>, 8>;

constexpr Tables make_tables() {
    Tables t{};
    for (uint32_t i = 0; i < 256; ++i) {
        uint32_t c = i;
        for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ poly : c >> 1;
        t[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; ++i)
        for (size_t s = 1; s < 8; ++s) t[s][i] = (t[s - 1][i] >> 8) ^ t[0][t[s - 1][i] & 0xff];
    return t;
}
constexpr Tables tables = make_tables();

uint32_t crc_table(uint32_t crc, const uint8_t* p, size_t len) {
    while (len >= 8) {
        uint64_t v;
        std::memcpy(&v, p, 8);
        v ^= crc;
        crc = tables[7][v & 0xff] ^ tables[6][(v >> 8) & 0xff] ^ tables[5][(v >> 16) & 0xff] ^
              tables[4][(v >> 24) & 0xff] ^ tables[3][(v >> 32) & 0xff] ^ tables[2][(v >> 40) & 0xff] ^
              tables[1][(v >> 48) & 0xff] ^ tables[0][v >> 56];
        p += 8;
        len -= 8;
    }
    while (len--) crc = (crc >> 8) ^ tables[0][(crc ^ *p++) & 0xff];
    return crc;
}

#if defined(__x86_64__)
[[gnu::target("sse4.2")]] uint32_t crc_sse42(uint32_t crc, const uint8_t* p, size_t len) {
    uint64_t c = crc;
    while (len >= 8) {
        uint64_t v;
        std::memcpy(&v, p, 8);
        c = _mm_crc32_u64(c, v);
        p += 8;
        len -= 8;
    }
    uint32_t c32 = static_cast<uint32_t>(c);
    while (len--) c32 = _mm_crc32_u8(c32, *p++);
    return c32;
}
bool detect_sse42() {
    __builtin_cpu_init();  // this runs from a static initialiser, maybe before the library's own
    return __builtin_cpu_supports("sse4.2");
}
const bool have_sse42 = detect_sse42();
#endif

}  // namespace

uint32_t crc32c(uint32_t crc, const void* data, size_t len) {
    const auto* p = static_cast<const uint8_t*>(data);
    crc = ~crc;
#if defined(__x86_64__)
    if (have_sse42) return ~crc_sse42(crc, p, len);
#endif
    return ~crc_table(crc, p, len);
}

uint32_t crc32c_portable(uint32_t crc, const void* data, size_t len) {
    return ~crc_table(~crc, static_cast<const uint8_t*>(data), len);
}

}  // namespace weft::ckpt
