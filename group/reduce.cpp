// reduce.cpp — the reduction kernels. Built with the dynamic vectoriser
// cost model (CMakeLists.txt): at -O2 GCC's default leaves these loops
// scalar, and they are the inner loop of every large allreduce.
#include "group/reduce.hpp"

#include <algorithm>
#include <cstring>
#include <type_traits>

namespace weft::group {

namespace {

template <typename T, typename F>
void apply(void* acc, const void* src, size_t count) {
    auto* a = static_cast<uint8_t*>(acc);
    const auto* s = static_cast<const uint8_t*>(src);
    if ((reinterpret_cast<uintptr_t>(a) | reinterpret_cast<uintptr_t>(s)) % alignof(T) == 0) {
        // The usual case: typed, non-aliasing pointers (acc and src never
        // overlap: src is an inbox or scratch).
        T* __restrict x = reinterpret_cast<T*>(a);
        const T* __restrict y = reinterpret_cast<const T*>(s);
        for (size_t i = 0; i < count; ++i) x[i] = F{}(x[i], y[i]);
        return;
    }
    // User buffers may be unaligned: memcpy loads, still plain moves.
    for (size_t i = 0; i < count; ++i) {
        T x, y;
        std::memcpy(&x, a + i * sizeof(T), sizeof(T));
        std::memcpy(&y, s + i * sizeof(T), sizeof(T));
        x = F{}(x, y);
        std::memcpy(a + i * sizeof(T), &x, sizeof(T));
    }
}
struct Sum {
    template <typename T>
    T operator()(T a, T b) const {
        return T(a + b);
    }
};
struct Min {
    template <typename T>
    T operator()(T a, T b) const {
        return std::min(a, b);
    }
};
struct Max {
    template <typename T>
    T operator()(T a, T b) const {
        return std::max(a, b);
    }
};
struct Band {
    template <typename T>
    T operator()(T a, T b) const {
        return a & b;
    }
};
struct Bor {
    template <typename T>
    T operator()(T a, T b) const {
        return a | b;
    }
};

template <typename T>
ReduceFn for_type(weft_op_t op) {
    switch (op) {
        case WEFT_OP_SUM:
            return apply<T, Sum>;
        case WEFT_OP_MIN:
            return apply<T, Min>;
        case WEFT_OP_MAX:
            return apply<T, Max>;
        case WEFT_OP_BAND:
            if constexpr (std::is_integral_v<T>)
                return apply<T, Band>;
            else
                return nullptr;
        case WEFT_OP_BOR:
            if constexpr (std::is_integral_v<T>)
                return apply<T, Bor>;
            else
                return nullptr;
        default:
            return nullptr;
    }
}

}  // namespace

ReduceFn reduce_fn(weft_datatype_t t, weft_op_t op) {
    switch (t) {
        case WEFT_BYTE:
            return for_type<uint8_t>(op);
        case WEFT_INT32:
            return op == WEFT_OP_SUM ? apply<uint32_t, Sum> : for_type<int32_t>(op);
        case WEFT_UINT32:
            return for_type<uint32_t>(op);
        case WEFT_INT64:
            return op == WEFT_OP_SUM ? apply<uint64_t, Sum> : for_type<int64_t>(op);
        case WEFT_UINT64:
            return for_type<uint64_t>(op);
        case WEFT_DOUBLE:
            return for_type<double>(op);
        default:
            return nullptr;
    }
}

}  // namespace weft::group
