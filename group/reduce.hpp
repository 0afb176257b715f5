// reduce.hpp — datatypes and the reduction kernels of the collectives.
#pragma once

#include <weft/comm.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace weft::group {

// acc[i] = acc[i] op src[i] for count elements. Buffers may be unaligned
// (user buffers), so elements are loaded with memcpy; the compiler turns
// that into plain loads and vectorises the loop.
using ReduceFn = void (*)(void* acc, const void* src, size_t count);

inline size_t datatype_size(weft_datatype_t t) {
    switch (t) {
        case WEFT_BYTE: return 1;
        case WEFT_INT32:
        case WEFT_UINT32: return 4;
        case WEFT_INT64:
        case WEFT_UINT64:
        case WEFT_DOUBLE: return 8;
        default: return 0;
    }
}

namespace detail {
template <typename T, typename F>
void apply(void* acc, const void* src, size_t count) {
    auto* a = static_cast<uint8_t*>(acc);
    const auto* s = static_cast<const uint8_t*>(src);
    for (size_t i = 0; i < count; ++i) {
        T x, y;
        std::memcpy(&x, a + i * sizeof(T), sizeof(T));
        std::memcpy(&y, s + i * sizeof(T), sizeof(T));
        x = F{}(x, y);
        std::memcpy(a + i * sizeof(T), &x, sizeof(T));
    }
}
struct Sum { template <typename T> T operator()(T a, T b) const { return a + b; } };
struct Min { template <typename T> T operator()(T a, T b) const { return std::min(a, b); } };
struct Max { template <typename T> T operator()(T a, T b) const { return std::max(a, b); } };
struct Band { template <typename T> T operator()(T a, T b) const { return a & b; } };
struct Bor { template <typename T> T operator()(T a, T b) const { return a | b; } };

template <typename T>
ReduceFn for_type(weft_op_t op) {
    switch (op) {
        case WEFT_OP_SUM: return apply<T, Sum>;
        case WEFT_OP_MIN: return apply<T, Min>;
        case WEFT_OP_MAX: return apply<T, Max>;
        case WEFT_OP_BAND: if constexpr (std::is_integral_v<T>) return apply<T, Band>; else return nullptr;
        case WEFT_OP_BOR: if constexpr (std::is_integral_v<T>) return apply<T, Bor>; else return nullptr;
        default: return nullptr;
    }
}
}  // namespace detail

// nullptr when op does not apply to type (band/bor on double, bad enums).
// Unsigned integer sums wrap; signed sums are computed as unsigned (two's
// complement wrap, no undefined behaviour on overflow).
inline ReduceFn reduce_fn(weft_datatype_t t, weft_op_t op) {
    switch (t) {
        case WEFT_BYTE: return detail::for_type<uint8_t>(op);
        case WEFT_INT32: return op == WEFT_OP_SUM ? detail::apply<uint32_t, detail::Sum> : detail::for_type<int32_t>(op);
        case WEFT_UINT32: return detail::for_type<uint32_t>(op);
        case WEFT_INT64: return op == WEFT_OP_SUM ? detail::apply<uint64_t, detail::Sum> : detail::for_type<int64_t>(op);
        case WEFT_UINT64: return detail::for_type<uint64_t>(op);
        case WEFT_DOUBLE: return detail::for_type<double>(op);
        default: return nullptr;
    }
}

}  // namespace weft::group
