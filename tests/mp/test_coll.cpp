// test_coll.cpp — collectives (weft/comm.h) against a serial reference,
// run by ctest under weft-run at 2, 4 and 8 ranks over shm, ucx+shm and
// ucx+tcp.
//
// Inputs are random but seeded per case: rank r's input is a function of
// (seed, r), so every rank can compute the reference of any collective.
// Results are compared byte for byte: integer inputs avoid signed overflow,
// double inputs are multiples of 1/4 small enough that every sum is exact
// whatever order the implementation adds in.
#include "tests/mp/comm_util.hpp"
#include "tests/mp/raw_enums.h"

#include <algorithm>
#include <limits>
#include <sstream>
#include <type_traits>
#include <unistd.h>

using namespace mp;

namespace {

// --------------------------------------------------------- typed reference

template <typename F>
void visit_type(weft_datatype_t t, F&& f) {
    switch (t) {
        case WEFT_BYTE:
            return f(uint8_t{});
        case WEFT_INT32:
            return f(int32_t{});
        case WEFT_UINT32:
            return f(uint32_t{});
        case WEFT_INT64:
            return f(int64_t{});
        case WEFT_UINT64:
            return f(uint64_t{});
        case WEFT_DOUBLE:
            return f(double{});
        default:
            FAIL() << "no C type for datatype " << int(t);
    }
}

const char* type_name(weft_datatype_t t) {
    static const char* names[] = {"BYTE", "INT32", "UINT32", "INT64", "UINT64", "DOUBLE"};
    return t >= 0 && t < WEFT_DATATYPE_COUNT_ ? names[t] : "?";
}

const char* op_name(weft_op_t op) {
    static const char* names[] = {"SUM", "MIN", "MAX", "BAND", "BOR"};
    return op >= 0 && op < WEFT_OP_COUNT_ ? names[op] : "?";
}

// Element i of rank r's input for a case.
template <typename T>
T input_value(uint64_t seed, uint32_t r, size_t i, weft_op_t op) {
    const uint64_t x = mix(seed ^ mix(uint64_t(r) << 40 ^ i));
    if constexpr (std::is_floating_point_v<T>) {
        return double(int64_t(x % (1u << 22)) - (1 << 21)) * 0.25;
    } else if constexpr (std::is_signed_v<T>) {
        if (op == WEFT_OP_SUM)  // |sum| of 4096 ranks' values stays in range
            return T(int64_t(x % (uint64_t(std::numeric_limits<T>::max()) >> 12)) * (x >> 63 ? -1 : 1));
        return T(x);
    } else {
        return T(x);  // unsigned sums wrap, by definition
    }
}

template <typename T>
std::vector<T> input(uint64_t seed, uint32_t r, size_t n, weft_op_t op) {
    std::vector<T> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = input_value<T>(seed, r, i, op);
    return v;
}

template <typename T>
T apply(weft_op_t op, T a, T b) {
    switch (op) {
        case WEFT_OP_SUM:
            return T(a + b);
        case WEFT_OP_MIN:
            return std::min(a, b);
        case WEFT_OP_MAX:
            return std::max(a, b);
        default:
            break;
    }
    if constexpr (std::is_integral_v<T>) return op == WEFT_OP_BAND ? T(a & b) : T(a | b);
    ADD_FAILURE() << "op " << op_name(op) << " on a floating type";
    return a;
}

// The reduction of every rank's input, in rank order.
template <typename T>
std::vector<T> reference(uint64_t seed, uint32_t nranks, size_t n, weft_op_t op) {
    std::vector<T> acc = input<T>(seed, 0, n, op);
    for (uint32_t r = 1; r < nranks; ++r)
        for (size_t i = 0; i < n; ++i) acc[i] = apply(op, acc[i], input_value<T>(seed, r, i, op));
    return acc;
}

// Index of the first element where got differs (bytewise) from want, or SIZE_MAX.
template <typename T>
size_t first_difference(const T* got, const std::vector<T>& want) {
    for (size_t i = 0; i < want.size(); ++i)
        if (std::memcmp(&got[i], &want[i], sizeof(T)) != 0) return i;
    return SIZE_MAX;
}

template <typename T>
std::string at(const T* got, const std::vector<T>& want, size_t i) {
    if (i == SIZE_MAX) return "";
    std::ostringstream os;
    os << "element " << i << ": got " << +got[i] << ", want " << +want[i];
    return os.str();
}

// A typed receive buffer with guards.
template <typename T>
struct Buf {
    Guarded g;
    explicit Buf(size_t n) : g(n * sizeof(T)) {}
    T* data() { return reinterpret_cast<T*>(g.data()); }
};

// Checks a result buffer against the reference, guards included.
template <typename T>
void expect_result(Buf<T>& got, const std::vector<T>& want, const std::string& what) {
    const size_t bad = first_difference(got.data(), want);
    EXPECT_EQ(bad, SIZE_MAX) << what << ": " << at(got.data(), want, bad);
    EXPECT_TRUE(got.g.guards_intact()) << what << ": written outside the buffer";
}

std::vector<size_t> counts() { return {1, 7, 1000, slow_fabric() ? 10000u : 100000u}; }

// Every data collective runs on the world and on all ranks but the last
// (sizes 1, 3, 7: the non-power-of-two paths). Members of both are job ranks
// 0..n-1 in order, so inputs depend on the rank the same way in both.
struct Target {
    weft_comm_t comm;
    uint32_t n;  // members
    const char* name;
};

class CollTest : public CommTest {
public:
    // Once per suite: creating and freeing it around every test would also
    // test clock-slot reuse, which DupSplitFreeRaces and the barrier test do
    // on purpose.
    static void SetUpTestSuite() {
        ASSERT_EQ(weft_comm_split(world(), rank + 1 < size ? 0 : WEFT_UNDEFINED, 0, &part_), WEFT_OK);
    }
    static void TearDownTestSuite() {
        if (part_) {
            EXPECT_EQ(weft_comm_free(&part_), WEFT_OK);
        }
    }

protected:
    void SetUp() override {
        targets_.push_back({w_, size, "world"});
        if (part_) targets_.push_back({part_, size - 1, "all but the last rank"});
    }
    static inline weft_comm_t part_ = nullptr;
    std::vector<Target> targets_;
};

// ---------------------------------------------------------- reductions

struct Reduction {
    weft_datatype_t type;
    weft_op_t op;
};

std::vector<Reduction> every_reduction() {
    std::vector<Reduction> v;
    for (weft_datatype_t t : {WEFT_INT32, WEFT_UINT32, WEFT_INT64, WEFT_UINT64})
        for (int op = 0; op < WEFT_OP_COUNT_; ++op) v.push_back({t, weft_op_t(op)});
    for (weft_op_t op : {WEFT_OP_SUM, WEFT_OP_MIN, WEFT_OP_MAX}) v.push_back({WEFT_DOUBLE, op});
    return v;
}

class Reduce : public CollTest, public testing::WithParamInterface<Reduction> {
protected:
    uint64_t seed(size_t n, uint64_t salt) const {
        return mix((uint64_t(GetParam().type) << 56) ^ (uint64_t(GetParam().op) << 48) ^ (n << 8) ^ salt);
    }
    std::string what(const Target& t, const char* coll, size_t n, uint64_t salt) const {
        return std::string(coll) + " " + type_name(GetParam().type) + " " + op_name(GetParam().op) + " count " +
               std::to_string(n) + " on " + t.name + " (case " + std::to_string(salt) + ")";
    }
};

TEST_P(Reduce, AllreduceMatchesReference) {
    const weft_datatype_t type = GetParam().type;
    const weft_op_t op = GetParam().op;
    visit_type(type, [&](auto zero) {
        using T = decltype(zero);
        for (const Target& t : targets_)
            for (size_t n : counts())
                for (uint64_t in_place = 0; in_place < 2; ++in_place) {
                    const uint64_t s = seed(n, in_place);
                    const std::string w = what(t, in_place ? "allreduce IN_PLACE" : "allreduce", n, in_place);
                    auto mine = input<T>(s, rank, n, op);
                    Buf<T> out(n);
                    if (in_place) std::memcpy(out.data(), mine.data(), n * sizeof(T));
                    ASSERT_EQ(weft_allreduce(t.comm, in_place ? WEFT_IN_PLACE : mine.data(), out.data(), n, type, op),
                              WEFT_OK)
                        << w;
                    expect_result(out, reference<T>(s, t.n, n, op), w);
                    EXPECT_EQ(mine, input<T>(s, rank, n, op)) << w << ": the send buffer changed";
                }
    });
}

// Every root, every count; IN_PLACE at the root on odd roots. Non-roots pass
// no receive buffer (it matters only at the root).
TEST_P(Reduce, ReduceToEveryRoot) {
    const weft_datatype_t type = GetParam().type;
    const weft_op_t op = GetParam().op;
    visit_type(type, [&](auto zero) {
        using T = decltype(zero);
        for (const Target& t : targets_)
            for (size_t n : counts())
                for (uint32_t root = 0; root < t.n; ++root) {
                    const uint64_t s = seed(n, 100 + root);
                    const bool in_place = root % 2 == 1 && rank == root;
                    const std::string w = what(t, "reduce", n, root) + " root " + std::to_string(root);
                    auto mine = input<T>(s, rank, n, op);
                    if (rank != root) {
                        ASSERT_EQ(weft_reduce(t.comm, mine.data(), nullptr, n, type, op, root), WEFT_OK) << w;
                        continue;
                    }
                    Buf<T> out(n);
                    if (in_place) std::memcpy(out.data(), mine.data(), n * sizeof(T));
                    ASSERT_EQ(
                        weft_reduce(t.comm, in_place ? WEFT_IN_PLACE : mine.data(), out.data(), n, type, op, root),
                        WEFT_OK)
                        << w;
                    expect_result(out, reference<T>(s, t.n, n, op), w);
                }
    });
}

std::string reduction_name(const testing::TestParamInfo<Reduction>& info) {
    return std::string(type_name(info.param.type)) + "_" + op_name(info.param.op);
}

INSTANTIATE_TEST_SUITE_P(Coll, Reduce, testing::ValuesIn(every_reduction()), reduction_name);

// ------------------------------------------------------ bcast, allgather

using Coll = CollTest;

const weft_datatype_t kMoved[] = {WEFT_BYTE, WEFT_INT32, WEFT_DOUBLE, WEFT_UINT64};

// Every root, every count, several types: non-roots' buffers start as junk.
TEST_F(Coll, BcastFromEveryRoot) {
    for (weft_datatype_t type : kMoved)
        visit_type(type, [&](auto zero) {
            using T = decltype(zero);
            for (const Target& t : targets_)
                for (size_t n : counts())
                    for (uint32_t root = 0; root < t.n; ++root) {
                        const uint64_t s = mix(0xbca57ull ^ (uint64_t(type) << 40) ^ (n << 8) ^ root);
                        const std::string w = std::string("bcast ") + type_name(type) + " count " + std::to_string(n) +
                                              " root " + std::to_string(root) + " on " + t.name;
                        const auto want = input<T>(s, root, n, WEFT_OP_MIN);
                        Buf<T> buf(n);
                        if (rank == root)
                            std::memcpy(buf.data(), want.data(), n * sizeof(T));
                        else
                            std::memset(buf.data(), 0x5c, n * sizeof(T));
                        ASSERT_EQ(weft_bcast(t.comm, buf.data(), n, type, root), WEFT_OK) << w;
                        expect_result(buf, want, w);
                    }
        });
}

// Every rank's part lands at rank * count; IN_PLACE on odd cases.
TEST_F(Coll, AllgatherMatchesReference) {
    uint64_t k = 0;
    for (weft_datatype_t type : kMoved)
        visit_type(type, [&](auto zero) {
            using T = decltype(zero);
            for (const Target& t : targets_)
                for (size_t n : counts()) {
                    const bool in_place = ++k % 2 == 0;
                    const uint64_t s = mix(0xa11ull ^ (uint64_t(type) << 40) ^ (n << 8));
                    const std::string w = std::string("allgather") + (in_place ? " IN_PLACE " : " ") + type_name(type) +
                                          " count " + std::to_string(n) + " on " + t.name;
                    std::vector<T> want;
                    for (uint32_t r = 0; r < t.n; ++r) {
                        const auto part = input<T>(s, r, n, WEFT_OP_MIN);
                        want.insert(want.end(), part.begin(), part.end());
                    }
                    const auto mine = input<T>(s, rank, n, WEFT_OP_MIN);
                    Buf<T> out(n * t.n);
                    std::memset(out.data(), 0x5c, n * t.n * sizeof(T));
                    if (in_place) std::memcpy(out.data() + rank * n, mine.data(), n * sizeof(T));
                    ASSERT_EQ(weft_allgather(t.comm, in_place ? WEFT_IN_PLACE : mine.data(), n, type, out.data()),
                              WEFT_OK)
                        << w;
                    expect_result(out, want, w);
                }
        });
}

// ------------------------------------------------ back to back, large

// One bcast of n bytes of seeded data from root, checked on every rank.
// `scribble`: the root overwrites its buffer the moment the bcast returns
// (a root that returned before every member had its data would hand out
// garbage).
void bcast_bytes(weft_comm_t comm, size_t n, uint32_t root, uint64_t seed, const std::string& at,
                 bool scribble = false) {
    uint32_t me = 0;
    ASSERT_EQ(weft_comm_rank(comm, &me), WEFT_OK);
    const auto want = input<uint8_t>(seed, root, n, WEFT_OP_MIN);
    Buf<uint8_t> buf(n);
    if (me == root)
        std::memcpy(buf.data(), want.data(), n);
    else
        std::memset(buf.data(), 0x5c, n);
    ASSERT_EQ(weft_bcast(comm, buf.data(), n, WEFT_BYTE, root), WEFT_OK) << "bcast" << at;
    if (me == root && scribble)
        std::memset(buf.data(), 0xee, n);
    else
        expect_result(buf, want, "bcast" + at);
}

// The shm bulk path (coll_shm.cpp) stages every collective's chunks in two
// buffers per rank that peers read in place, so a rank that runs ahead into
// the next collective must never overwrite data a slower one still reads.
// Here allreduce (sum of doubles and max of int32, IN_PLACE every other
// time), bcast (every root in turn) and allgather follow one another with
// no barrier between them, in sizes around the 256 KiB chunk and not
// divisible by the ranks, on the world, on all ranks but the last (odd
// sizes), and on more dups than have a bulk area (the rest use schedules).
TEST_F(Coll, LargeBackToBackKeepsEveryResult) {
    const size_t chunk = 256 * 1024;
    const std::vector<size_t> sizes = {33 * 8, chunk - 8, chunk + 8, 3 * chunk + 40, chunk / 2 + 24};
    std::vector<weft_comm_t> dups(10, nullptr);
    for (auto& d : dups) ASSERT_EQ(weft_comm_dup(w_, &d), WEFT_OK);
    // Target ids the same on every member (a rank outside "all but the last"
    // has no such target): world 0, that one 1, dup k 2 + k.
    std::vector<std::pair<Target, uint64_t>> all;
    for (const Target& t : targets_) all.push_back({t, t.comm == w_ ? 0u : 1u});
    for (size_t k = 0; k < dups.size(); ++k) all.push_back({{dups[k], size, "a dup"}, 2 + k});
    const int rounds = slow_fabric() ? 1 : 3;
    for (int round = 0; round < rounds; ++round)
        for (const auto& [t, id] : all)
            for (size_t si = 0; si < sizes.size(); ++si) {
                const size_t bytes = sizes[si];
                const uint64_t step = (uint64_t(round) * 16 + id) * 16 + si;
                const std::string at =
                    " of " + std::to_string(bytes) + " bytes on " + t.name + " (step " + std::to_string(step) + ")";
                {  // allreduce, double sum
                    const size_t n = bytes / 8;
                    const uint64_t s = mix(0xb01dull ^ step);
                    auto mine = input<double>(s, rank, n, WEFT_OP_SUM);
                    Buf<double> out(n);
                    const bool in_place = step % 2 == 0;
                    if (in_place) std::memcpy(out.data(), mine.data(), n * 8);
                    ASSERT_EQ(weft_allreduce(t.comm, in_place ? WEFT_IN_PLACE : mine.data(), out.data(), n, WEFT_DOUBLE,
                                             WEFT_OP_SUM),
                              WEFT_OK)
                        << "allreduce" << at;
                    expect_result(out, reference<double>(s, t.n, n, WEFT_OP_SUM), "allreduce" + at);
                }
                {  // allreduce, int32 max, an odd element count
                    const size_t n = bytes / 4 - 1;
                    const uint64_t s = mix(0xb02dull ^ step);
                    auto mine = input<int32_t>(s, rank, n, WEFT_OP_MAX);
                    Buf<int32_t> out(n);
                    ASSERT_EQ(weft_allreduce(t.comm, mine.data(), out.data(), n, WEFT_INT32, WEFT_OP_MAX), WEFT_OK)
                        << "allreduce max" << at;
                    expect_result(out, reference<int32_t>(s, t.n, n, WEFT_OP_MAX), "allreduce max" + at);
                }
                {  // bcast of odd bytes, the root moving round
                    const uint32_t root = uint32_t(step % t.n);
                    const size_t n = bytes + 3;
                    bcast_bytes(t.comm, n, root, mix(0xbcull ^ step), at);
                    if (HasFatalFailure()) return;
                }
                {  // allgather, bytes / ranks + 1 per rank, IN_PLACE every other time
                    const size_t n = bytes / t.n + 1;
                    const uint64_t s = mix(0xa9ull ^ step);
                    std::vector<uint8_t> want;
                    for (uint32_t r = 0; r < t.n; ++r) {
                        const auto part = input<uint8_t>(s, r, n, WEFT_OP_MIN);
                        want.insert(want.end(), part.begin(), part.end());
                    }
                    const auto mine = input<uint8_t>(s, rank, n, WEFT_OP_MIN);
                    Buf<uint8_t> out(n * t.n);
                    std::memset(out.data(), 0x5c, n * t.n);
                    const bool in_place = step % 2 == 1;
                    if (in_place) std::memcpy(out.data() + rank * n, mine.data(), n);
                    ASSERT_EQ(weft_allgather(t.comm, in_place ? WEFT_IN_PLACE : mine.data(), n, WEFT_BYTE, out.data()),
                              WEFT_OK)
                        << "allgather" << at;
                    expect_result(out, want, "allgather" + at);
                }
            }
    for (auto& d : dups) ASSERT_EQ(weft_comm_free(&d), WEFT_OK);
}

// Small bcasts on shm (coll_shm.cpp, bcast_small) return at the root as
// soon as its cell is written, so a root runs up to the ring's 64 cells
// ahead of the slowest member and must then wait before it reuses a cell
// that member has not read. Here 300 bcasts per target follow one another
// with no barrier, the root moving on every 100 and the size changing (1 byte to
// one past the small path's 1016, the next path's first size), while one
// member now and then stops for a while, so every other root laps it; each
// result is checked. Over more dups than have a bulk area, too (the rest use
// the tree).
TEST_F(Coll, SmallBcastsRunAheadAndKeepEveryResult) {
    std::vector<weft_comm_t> dups(9, nullptr);
    for (auto& d : dups) ASSERT_EQ(weft_comm_dup(w_, &d), WEFT_OK);
    std::vector<std::pair<Target, uint64_t>> all;
    for (const Target& t : targets_) all.push_back({t, t.comm == w_ ? 0u : 1u});
    for (size_t k = 0; k < dups.size(); ++k) all.push_back({{dups[k], size, "a dup"}, 2 + k});
    const std::vector<size_t> sizes = {8, 1, 1016, 77, 1017, 256, 8, 3};
    const int count = slow_fabric() ? 60 : 300;
    for (const auto& [t, id] : all) {
        const uint32_t sleeper = uint32_t((id + 1) % t.n);
        for (int k = 0; k < count; ++k) {
            // One root for 100 bcasts: while the sleeper stops, the root laps it.
            const uint32_t root = uint32_t((k / 100 + id) % t.n);
            const size_t n = sizes[size_t(k) % sizes.size()];
            const std::string at = " " + std::to_string(k) + " of " + std::to_string(n) + " bytes from " +
                                   std::to_string(root) + " on " + t.name;
            if (rank == sleeper && k % 100 == 7) usleep(3000);
            bcast_bytes(t.comm, n, root, mix(0x5bcull ^ (id << 20) ^ uint64_t(k)), at);
            if (HasFatalFailure()) return;
        }
    }
    for (auto& d : dups) ASSERT_EQ(weft_comm_free(&d), WEFT_OK);
}

// Between two members on shm, bcasts and allgathers above 16 KiB copy
// straight between the members' own buffers, a bcast's root pushing half
// while the receiver pulls the other half (coll_shm.cpp, bcast_pair and
// allgather_pair). Neither member may return before the other's copy is
// done: here every member overwrites its buffers the moment the call
// returns (a root that left early would hand out the garbage) and checks
// what it received at once (a receiver that left early would miss the
// root's half). Pairs of the world (split by rank / 2; an odd last rank
// has none), sizes around pages and the blocks' staging limit, the root
// moving, one member stopping now and then so that either arrives first.
TEST_F(Coll, PairCopiesEndBeforeEitherReturns) {
    weft_comm_t pair = nullptr;
    ASSERT_EQ(weft_comm_split(w_, int32_t(rank / 2), 0, &pair), WEFT_OK);
    uint32_t n = 0, me = 0;
    ASSERT_EQ(weft_comm_size(pair, &n), WEFT_OK);
    ASSERT_EQ(weft_comm_rank(pair, &me), WEFT_OK);
    const std::vector<size_t> sizes = {16 * 1024 + 1, 128 * 1024, 128 * 1024 + 1, 1 << 20, 300000, 20000, 3 * 4096 + 5};
    const int count = n == 2 ? (slow_fabric() ? 20 : 60) : 0;
    for (int k = 0; k < count; ++k) {
        const size_t bytes = sizes[size_t(k) % sizes.size()];
        const uint32_t root = uint32_t(k / 3) % 2;
        const std::string at = " " + std::to_string(k) + " of " + std::to_string(bytes) + " bytes";
        if (me == uint32_t(k / 5) % 2 && k % 5 == 2) usleep(2000);
        bcast_bytes(pair, bytes, root, mix(0x9a1bull ^ uint64_t(k)), " on a pair" + at, true);
        if (HasFatalFailure()) return;
        {
            const uint64_t s = mix(0x9a1cull ^ uint64_t(k));
            auto mine = input<uint8_t>(s, me, bytes, WEFT_OP_MIN);
            std::vector<uint8_t> want;
            for (uint32_t r = 0; r < 2; ++r) {
                const auto part = input<uint8_t>(s, r, bytes, WEFT_OP_MIN);
                want.insert(want.end(), part.begin(), part.end());
            }
            Buf<uint8_t> out(2 * bytes);
            std::memset(out.data(), 0x5c, 2 * bytes);
            const bool in_place = k % 2 == 1;
            if (in_place) std::memcpy(out.data() + me * bytes, mine.data(), bytes);
            ASSERT_EQ(weft_allgather(pair, in_place ? WEFT_IN_PLACE : mine.data(), bytes, WEFT_BYTE, out.data()),
                      WEFT_OK)
                << "allgather" << at;
            std::vector<uint8_t> got(out.data(), out.data() + 2 * bytes);
            std::memset(in_place ? out.data() + me * bytes : mine.data(), 0xee, bytes);
            EXPECT_TRUE(got == want) << "pair allgather" << at;
            EXPECT_TRUE(out.g.guards_intact()) << "pair allgather" << at << ": written outside the buffer";
        }
        if (HasFailure()) break;
    }
    ASSERT_EQ(weft_comm_free(&pair), WEFT_OK);
}

// A member that gives up on a pair bcast (the deadline) has returned, and
// its buffer may be gone: a root that comes later must not push into it
// (coll_shm.cpp, pair_exchange). Run with WEFT_TIMEOUT_MS=2000 on 2 ranks
// (its own ctest entry): rank 1 waits out the deadline, then keeps its
// buffer and looks at it after the root, 3 s late, has come and gone. Then
// both run one more pair bcast, which must work.
using CollTimeout = CommTest;
TEST_F(CollTimeout, LateRootWritesNothingIntoAPeerThatGaveUp) {
    ASSERT_EQ(size, 2u) << "its ctest entry, mp.coll_pair_timeout, runs it on 2 ranks";
    const size_t n = 1 << 20;
    Buf<uint8_t> buf(n);
    barrier();  // the root's 3 s and our 2 s deadline start together
    if (rank == 1) {
        std::memset(buf.data(), 0x5c, n);
        EXPECT_EQ(weft_bcast(w_, buf.data(), n, WEFT_BYTE, 0), WEFT_ERR_TIMEOUT);
        usleep(2500 * 1000);  // the root comes at 3 s and finds we gave up
        const std::vector<uint8_t> want(n, 0x5c);
        expect_result(buf, want, "the buffer of a bcast that timed out, after the root came");
    } else {
        usleep(3000 * 1000);
        std::memset(buf.data(), 0xab, n);
        EXPECT_NE(weft_bcast(w_, buf.data(), n, WEFT_BYTE, 0), WEFT_OK) << "the peer had given up";
    }
    barrier();
    bcast_bytes(w_, n, 0, mix(0x1a7eull), " after a timed-out one");
}

// Barriers and small allreduces on shm among up to 16 members
// (coll_shm.cpp, allreduce_flat) reuse each member's two cells every other
// collective, so a member that finished one must not overwrite a cell a
// slower member still reads. 300 of them per target back to back (sizes
// from one element to the path's 256 bytes, a barrier every fifth), one
// member stopping now and then, every result checked.
TEST_F(Coll, SmallAllreducesBackToBackKeepEveryResult) {
    const std::vector<size_t> counts = {1, 32, 3, 17, 1};
    const int rounds = slow_fabric() ? 60 : 300;
    for (const Target& t : targets_) {
        const uint32_t sleeper = (t.comm == w_ ? 1u : 0u) % t.n;
        for (int k = 0; k < rounds; ++k) {
            const std::string at = " " + std::to_string(k) + " on " + t.name;
            if (rank == sleeper && k % 50 == 9) usleep(3000);
            if (k % 5 == 4) {
                ASSERT_EQ(weft_barrier(t.comm), WEFT_OK) << "barrier" << at;
                continue;
            }
            const size_t n = counts[size_t(k) % counts.size()];
            const uint64_t s = mix(0xf1a7ull ^ uint64_t(k));
            auto mine = input<uint64_t>(s, rank, n, WEFT_OP_SUM);
            Buf<uint64_t> out(n);
            const bool in_place = k % 3 == 0;
            if (in_place) std::memcpy(out.data(), mine.data(), n * 8);
            ASSERT_EQ(
                weft_allreduce(t.comm, in_place ? WEFT_IN_PLACE : mine.data(), out.data(), n, WEFT_UINT64, WEFT_OP_SUM),
                WEFT_OK)
                << "allreduce" << at;
            expect_result(out, reference<uint64_t>(s, t.n, n, WEFT_OP_SUM), "allreduce" + at);
        }
    }
}

// ---------------------------------------------- non-blocking, overlapping

// On each of several dups: ibarrier, ibcast, iallreduce and iallgather all
// outstanding at once, comms posted in a different order on each rank (only
// the order per communicator must agree), a blocking allreduce on the world
// in the middle; then one waitall.
TEST_F(Coll, NonBlockingOverlapOnSeveralCommunicators) {
    const size_t ncomm = 4, n = slow_fabric() ? 2000 : 20000;
    std::vector<weft_comm_t> cs(ncomm, nullptr);
    for (auto& c : cs) ASSERT_EQ(weft_comm_dup(w_, &c), WEFT_OK);
    for (uint64_t round = 0; round < 3; ++round) {
        struct Ops {
            std::vector<int64_t> bc, red_in, red_out;
            std::vector<double> ga_in, ga_out;
        };
        std::vector<Ops> ops(ncomm);
        std::vector<weft_request_t> reqs;
        auto seed = [&](size_t k, uint64_t what) { return mix(round << 32 ^ k << 8 ^ what); };
        for (size_t j = 0; j < ncomm; ++j) {
            const size_t k = (j + rank) % ncomm;  // rotated posting order
            Ops& o = ops[k];
            const uint32_t root = uint32_t((k + round) % size);
            o.bc = rank == root ? input<int64_t>(seed(k, 1), root, n, WEFT_OP_MIN) : std::vector<int64_t>(n, -1);
            o.red_in = input<int64_t>(seed(k, 2), rank, n + k, WEFT_OP_SUM);
            o.red_out.assign(n + k, 0);
            o.ga_in = input<double>(seed(k, 3), rank, 7, WEFT_OP_MIN);
            o.ga_out.assign(7 * size, -1.0);
            weft_request_t r[4] = {};
            ASSERT_EQ(weft_ibarrier(cs[k], &r[0]), WEFT_OK);
            ASSERT_EQ(weft_ibcast(cs[k], o.bc.data(), n, WEFT_INT64, root, &r[1]), WEFT_OK);
            ASSERT_EQ(weft_iallreduce(cs[k], o.red_in.data(), o.red_out.data(), n + k, WEFT_INT64, WEFT_OP_SUM, &r[2]),
                      WEFT_OK);
            ASSERT_EQ(weft_iallgather(cs[k], o.ga_in.data(), 7, WEFT_DOUBLE, o.ga_out.data(), &r[3]), WEFT_OK);
            reqs.insert(reqs.end(), r, r + 4);
            if (j == ncomm / 2) {
                uint64_t one = 1, total = 0;
                ASSERT_EQ(weft_allreduce(w_, &one, &total, 1, WEFT_UINT64, WEFT_OP_SUM), WEFT_OK);
                EXPECT_EQ(total, size) << "blocking allreduce amid non-blocking ones";
            }
        }
        std::vector<weft_msg_status_t> st(reqs.size(), blank_status());
        ASSERT_EQ(weft_request_waitall(reqs.size(), reqs.data(), st.data()), WEFT_OK) << "round " << round;
        for (size_t k = 0; k < ncomm; ++k) {
            const std::string w = "round " + std::to_string(round) + " comm " + std::to_string(k);
            const uint32_t root = uint32_t((k + round) % size);
            EXPECT_EQ(ops[k].bc, input<int64_t>(seed(k, 1), root, n, WEFT_OP_MIN)) << w << ": ibcast";
            EXPECT_EQ(ops[k].red_out, reference<int64_t>(seed(k, 2), size, n + k, WEFT_OP_SUM)) << w << ": iallreduce";
            std::vector<double> ga;
            for (uint32_t r = 0; r < size; ++r) {
                const auto part = input<double>(seed(k, 3), r, 7, WEFT_OP_MIN);
                ga.insert(ga.end(), part.begin(), part.end());
            }
            EXPECT_EQ(ops[k].ga_out, ga) << w << ": iallgather";
        }
    }
    for (auto& c : cs) ASSERT_EQ(weft_comm_free(&c), WEFT_OK);
}

// Non-blocking collectives completed one by one with testany while the
// rank also serves point-to-point traffic.
TEST_F(Coll, NonBlockingCompletedByTestany) {
    weft_comm_t d = nullptr;
    ASSERT_EQ(weft_comm_dup(w_, &d), WEFT_OK);
    std::vector<uint64_t> sums(8, 0);
    std::vector<weft_request_t> reqs(8, nullptr);
    for (size_t i = 0; i < reqs.size(); ++i) {
        const uint64_t v = rank + i;
        ASSERT_EQ(weft_iallreduce(i % 2 ? d : w_, &v, &sums[i], 1, WEFT_UINT64, WEFT_OP_SUM, &reqs[i]), WEFT_OK);
    }
    size_t done = 0;
    ASSERT_TRUE(poll_until([&] {
        size_t index = SIZE_MAX;
        int flag = 0;
        EXPECT_EQ(weft_request_testany(reqs.size(), reqs.data(), &index, &flag, nullptr), WEFT_OK);
        if (flag && index != SIZE_MAX) ++done;
        return done == reqs.size();
    })) << done
        << " of " << reqs.size() << " completed";
    for (size_t i = 0; i < sums.size(); ++i) EXPECT_EQ(sums[i], uint64_t(size) * i + size * (size - 1) / 2) << i;
    ASSERT_EQ(weft_comm_free(&d), WEFT_OK);
}

// ---------------------------------------------------------- clock hooks

// Each collective enters with commit_begin (seq + 1) and leaves with
// commit_finish (finished + 1) on its communicator's record, and only there.
// (Slots are reused without a reset, so only differences are comparable.)
TEST_F(Coll, EveryCollectiveTicksItsClock) {
    weft_comm_t d = nullptr;
    ASSERT_EQ(weft_comm_dup(w_, &d), WEFT_OK);
    const uint64_t seq0 = clock_word(d, WEFT_STATE_CLOCK_SEQ), fin0 = clock_word(d, WEFT_STATE_CLOCK_FINISHED);
    const uint64_t world0 = clock_word(w_, WEFT_STATE_CLOCK_SEQ);
    EXPECT_EQ(seq0, fin0) << "not inside a collective";
    uint64_t v = rank, out = 0;
    std::vector<uint64_t> all(size);
    weft_request_t req = nullptr;
    ASSERT_EQ(weft_barrier(d), WEFT_OK);
    ASSERT_EQ(weft_bcast(d, &v, 1, WEFT_UINT64, 0), WEFT_OK);
    ASSERT_EQ(weft_reduce(d, &v, &out, 1, WEFT_UINT64, WEFT_OP_MAX, 0), WEFT_OK);
    ASSERT_EQ(weft_allreduce(d, &v, &out, 1, WEFT_UINT64, WEFT_OP_MAX), WEFT_OK);
    ASSERT_EQ(weft_allgather(d, &v, 1, WEFT_UINT64, all.data()), WEFT_OK);
    ASSERT_EQ(weft_ibarrier(d, &req), WEFT_OK);
    wait_ok(&req, "ibarrier");
    ASSERT_EQ(weft_iallreduce(d, &v, &out, 1, WEFT_UINT64, WEFT_OP_SUM, &req), WEFT_OK);
    wait_ok(&req, "iallreduce");
    const uint64_t seq1 = clock_word(d, WEFT_STATE_CLOCK_SEQ);
    EXPECT_EQ(seq1 - seq0, 7u) << "seven collectives begun";
    EXPECT_EQ(clock_word(d, WEFT_STATE_CLOCK_FINISHED) - fin0, 7u) << "seven collectives finished";
    EXPECT_EQ(clock_word(w_, WEFT_STATE_CLOCK_SEQ), world0) << "the world's clock moved";
    ASSERT_EQ(weft_comm_free(&d), WEFT_OK);
}

// -------------------------------------------------------------- barrier
// (Last of the Coll suite: it also reuses freed clock slots, the riskiest.)

// Before barrier i every rank puts i into its slot of every rank's window
// and flushes; after it, every slot of the local window must read i. On the
// world, then on a series of fresh dups (a new communicator may inherit a
// freed one's clock slot, and whatever flags that slot had).
TEST_F(Coll, BarrierSeparatesPhases) {
    const uint64_t rounds = slow_fabric() ? 50 : 300, dups = 20;
    void* base = nullptr;
    weft_window_t win = nullptr;
    ASSERT_EQ(weft_window_allocate(ctx, 64 * size, &base, &win), WEFT_OK);
    auto* slots = static_cast<uint64_t*>(base);
    barrier();
    uint64_t i = 0;
    auto phase = [&](weft_comm_t c, const std::string& on) {
        ++i;
        const std::string what = "barrier " + std::to_string(i) + " on " + on;
        for (uint32_t t = 0; t < size; ++t) ASSERT_EQ(weft_put(win, t, 64 * rank, &i, 8), WEFT_OK);
        ASSERT_EQ(weft_flush(win, WEFT_RANK_ALL), WEFT_OK);
        if (i % 2) {
            ASSERT_EQ(weft_barrier(c), WEFT_OK) << what;
        } else {
            weft_request_t req = nullptr;
            ASSERT_EQ(weft_ibarrier(c, &req), WEFT_OK) << what;
            wait_ok(&req, what);
        }
        for (uint32_t o = 0; o < size; ++o)
            ASSERT_EQ(std::atomic_ref<uint64_t>(slots[8 * o]).load(), i)
                << what << ": rank " << o << " had not arrived";
        // Nobody may overwrite the slots before everyone checked them.
        ASSERT_EQ(weft_barrier(c), WEFT_OK) << what << " (second)";
    };
    for (uint64_t r = 0; r < rounds; ++r) ASSERT_NO_FATAL_FAILURE(phase(w_, "the world"));
    for (uint64_t k = 0; k < dups; ++k) {
        weft_comm_t d = nullptr;
        ASSERT_EQ(weft_comm_dup(w_, &d), WEFT_OK);
        for (uint64_t r = 0; r < 3; ++r) ASSERT_NO_FATAL_FAILURE(phase(d, "dup " + std::to_string(k)));
        ASSERT_EQ(weft_comm_free(&d), WEFT_OK);
    }
    barrier();
    ASSERT_EQ(weft_window_free(win), WEFT_OK);
}

// ------------------------------------------------------------ bad input

using CollBadInput = CommTest;

// Every rank passes the same bad argument: each gets the error at once.
TEST_F(CollBadInput, RejectedByEveryRank) {
    int64_t v = 1, out = 0;
    double dv = 1.0, dout = 0;
    weft_request_t req = nullptr;
    for (weft_op_t op : {WEFT_OP_BAND, WEFT_OP_BOR}) {
        EXPECT_EQ(weft_allreduce(w_, &dv, &dout, 1, WEFT_DOUBLE, op), WEFT_ERR_INVALID_ARG) << op_name(op);
        EXPECT_EQ(weft_reduce(w_, &dv, &dout, 1, WEFT_DOUBLE, op, 0), WEFT_ERR_INVALID_ARG) << op_name(op);
        EXPECT_EQ(weft_iallreduce(w_, &dv, &dout, 1, WEFT_DOUBLE, op, &req), WEFT_ERR_INVALID_ARG) << op_name(op);
    }
    for (int op : {-1, int(WEFT_OP_COUNT_), 77})
        EXPECT_EQ(mp_raw_allreduce(w_, &v, &out, 1, WEFT_INT64, op), WEFT_ERR_INVALID_ARG) << "op " << op;
    for (int t : {-1, int(WEFT_DATATYPE_COUNT_), 99}) {
        EXPECT_EQ(mp_raw_allreduce(w_, &v, &out, 1, t, WEFT_OP_SUM), WEFT_ERR_INVALID_ARG) << "type " << t;
        EXPECT_EQ(mp_raw_bcast(w_, &v, 1, t, 0), WEFT_ERR_INVALID_ARG) << "type " << t;
        EXPECT_EQ(mp_raw_allgather(w_, &v, 1, t, &out), WEFT_ERR_INVALID_ARG) << "type " << t;
    }
    EXPECT_EQ(weft_bcast(w_, &v, 1, WEFT_INT64, size), WEFT_ERR_INVALID_RANK);
    EXPECT_EQ(weft_ibcast(w_, &v, 1, WEFT_INT64, UINT32_MAX, &req), WEFT_ERR_INVALID_RANK);
    EXPECT_EQ(weft_reduce(w_, &v, &out, 1, WEFT_INT64, WEFT_OP_SUM, size + 1), WEFT_ERR_INVALID_RANK);
    EXPECT_EQ(weft_bcast(w_, nullptr, 3, WEFT_INT64, 0), WEFT_ERR_INVALID_ARG);
    EXPECT_EQ(weft_allreduce(w_, nullptr, &out, 1, WEFT_INT64, WEFT_OP_SUM), WEFT_ERR_INVALID_ARG);
    EXPECT_EQ(weft_allreduce(w_, &v, nullptr, 1, WEFT_INT64, WEFT_OP_SUM), WEFT_ERR_INVALID_ARG);
    EXPECT_EQ(weft_allgather(w_, &v, 1, WEFT_INT64, nullptr), WEFT_ERR_INVALID_ARG);
    EXPECT_EQ(weft_allgather(w_, nullptr, 1, WEFT_INT64, &out), WEFT_ERR_INVALID_ARG);
    EXPECT_EQ(weft_ibarrier(w_, nullptr), WEFT_ERR_INVALID_ARG);
    EXPECT_EQ(weft_iallgather(w_, &v, 1, WEFT_INT64, &out, nullptr), WEFT_ERR_INVALID_ARG);
    EXPECT_EQ(req, nullptr) << "no request from a rejected call";
    // Nothing was started: the next collectives line up on every rank.
    ASSERT_EQ(weft_allreduce(w_, &v, &out, 1, WEFT_INT64, WEFT_OP_SUM), WEFT_OK);
    EXPECT_EQ(out, int64_t(size));
    // Zero elements are a valid, empty collective.
    EXPECT_EQ(weft_allreduce(w_, nullptr, nullptr, 0, WEFT_INT64, WEFT_OP_SUM), WEFT_OK);
    EXPECT_EQ(weft_bcast(w_, nullptr, 0, WEFT_INT64, 0), WEFT_OK);
    EXPECT_EQ(weft_allgather(w_, nullptr, 0, WEFT_INT64, nullptr), WEFT_OK);
    ASSERT_EQ(weft_barrier(w_), WEFT_OK);
}

}  // namespace

int main(int argc, char** argv) { return mp::run_all(argc, argv); }
