// reduce.hpp — datatypes and the reduction kernels of the collectives.
#pragma once

#include <weft/comm.h>

#include <cstddef>
#include <cstdint>

namespace weft::group {

// acc[i] = acc[i] op src[i] for count elements; acc and src do not overlap
// and may be unaligned (user buffers).
using ReduceFn = void (*)(void* acc, const void* src, size_t count);

inline size_t datatype_size(weft_datatype_t t) {
    switch (t) {
        case WEFT_BYTE:
            return 1;
        case WEFT_INT32:
        case WEFT_UINT32:
            return 4;
        case WEFT_INT64:
        case WEFT_UINT64:
        case WEFT_DOUBLE:
            return 8;
        default:
            return 0;
    }
}

// nullptr when op does not apply to type (band/bor on double, bad enums).
// Unsigned integer sums wrap; signed sums are computed as unsigned (two's
// complement wrap, no undefined behaviour on overflow). The kernels live in
// reduce.cpp, compiled for vectorisation.
ReduceFn reduce_fn(weft_datatype_t t, weft_op_t op);

}  // namespace weft::group
