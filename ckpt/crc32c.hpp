// crc32c.hpp — CRC-32C (Castagnoli), the checksum of checkpoint images and
// manifests (docs/checkpoint.md). The SSE4.2 instruction when the CPU has
// it (about 8 bytes per cycle and a half), a slicing-by-8 table otherwise;
// both give the same value.
#pragma once

#include <cstddef>
#include <cstdint>

namespace weft::ckpt {

// Continues `crc` (0 to start) over `len` bytes.
uint32_t crc32c(uint32_t crc, const void* data, size_t len);
// The table path whatever the CPU (tests compare the two).
uint32_t crc32c_portable(uint32_t crc, const void* data, size_t len);

}  // namespace weft::ckpt
