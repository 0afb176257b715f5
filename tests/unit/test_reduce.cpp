// test_reduce.cpp — the reduction kernels and datatype table of group/.
#include "group/reduce.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

using weft::group::datatype_size;
using weft::group::reduce_fn;

namespace {

template <typename T>
T reference(weft_op_t op, T a, T b) {
    switch (op) {
        case WEFT_OP_SUM:
            if constexpr (std::is_integral_v<T>)
                return T(std::make_unsigned_t<T>(a) + std::make_unsigned_t<T>(b));
            else
                return a + b;
        case WEFT_OP_MIN:
            return std::min(a, b);
        case WEFT_OP_MAX:
            return std::max(a, b);
        case WEFT_OP_BAND:
            if constexpr (std::is_integral_v<T>)
                return a & b;
            else
                return 0;
        case WEFT_OP_BOR:
            if constexpr (std::is_integral_v<T>)
                return a | b;
            else
                return 0;
        default:
            return 0;
    }
}

template <typename T>
void check_type(weft_datatype_t type) {
    std::mt19937_64 rng(42);
    for (int op = WEFT_OP_SUM; op < WEFT_OP_COUNT_; ++op) {
        auto fn = reduce_fn(type, weft_op_t(op));
        if (!std::is_integral_v<T> && (op == WEFT_OP_BAND || op == WEFT_OP_BOR)) {
            EXPECT_EQ(fn, nullptr) << "op " << op << " must not apply to floating point";
            continue;
        }
        ASSERT_NE(fn, nullptr) << "type " << type << " op " << op;
        // Odd counts and an unaligned start: user buffers may be anything.
        for (size_t count : {size_t(1), size_t(7), size_t(1000)}) {
            std::vector<T> a(count), b(count);
            for (size_t i = 0; i < count; ++i) {
                a[i] = T(rng());
                b[i] = T(rng());
                if (i == 0) a[i] = std::numeric_limits<T>::max();  // sums wrap, no UB
            }
            std::vector<uint8_t> acc(count * sizeof(T) + 1), src(count * sizeof(T) + 1);
            std::memcpy(acc.data() + 1, a.data(), count * sizeof(T));
            std::memcpy(src.data() + 1, b.data(), count * sizeof(T));
            fn(acc.data() + 1, src.data() + 1, count);
            for (size_t i = 0; i < count; ++i) {
                T got;
                std::memcpy(&got, acc.data() + 1 + i * sizeof(T), sizeof(T));
                EXPECT_EQ(got, reference(weft_op_t(op), a[i], b[i])) << "type " << type << " op " << op << " i " << i;
            }
        }
    }
}

}  // namespace

TEST(Reduce, EveryTypeAndOpAgainstAReference) {
    check_type<uint8_t>(WEFT_BYTE);
    check_type<int32_t>(WEFT_INT32);
    check_type<uint32_t>(WEFT_UINT32);
    check_type<int64_t>(WEFT_INT64);
    check_type<uint64_t>(WEFT_UINT64);
    check_type<double>(WEFT_DOUBLE);
}

TEST(Reduce, BadEnumsHaveNoKernelAndNoSize) {
    EXPECT_EQ(reduce_fn(weft_datatype_t(WEFT_DATATYPE_COUNT_), WEFT_OP_SUM), nullptr);
    EXPECT_EQ(reduce_fn(weft_datatype_t(-1), WEFT_OP_SUM), nullptr);
    EXPECT_EQ(reduce_fn(WEFT_INT64, weft_op_t(WEFT_OP_COUNT_)), nullptr);
    EXPECT_EQ(reduce_fn(WEFT_INT64, weft_op_t(-3)), nullptr);
    EXPECT_EQ(datatype_size(weft_datatype_t(WEFT_DATATYPE_COUNT_)), 0u);
    EXPECT_EQ(datatype_size(WEFT_DOUBLE), 8u);
    EXPECT_EQ(datatype_size(WEFT_INT32), 4u);
    EXPECT_EQ(datatype_size(WEFT_BYTE), 1u);
}
