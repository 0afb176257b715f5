// test_common.cpp — transport/common (env parsing, status texts, Backoff,
// Deadline) and the bootstrap environment parsers (parse_job_sizes,
// parse_secret).
#include "transport/bootstrap/bootstrap.hpp"
#include "transport/common.hpp"

#include <gtest/gtest.h>
#include <weft/config.hpp>
#include <weft/version.h>

#include <cstdlib>
#include <cstring>
#include <set>
#include <string>
#include <vector>

using weft::parse_job_sizes;
using weft::parse_secret;

namespace {
// Sets an environment variable for one scope.
class ScopedEnv {
public:
    ScopedEnv(const char* name, const char* value) : name_(name) {
        const char* old = std::getenv(name);
        if (old) old_ = old, had_ = true;
        if (value)
            setenv(name, value, 1);
        else
            unsetenv(name);
    }
    ~ScopedEnv() {
        if (had_)
            setenv(name_.c_str(), old_.c_str(), 1);
        else
            unsetenv(name_.c_str());
    }

private:
    std::string name_, old_;
    bool had_ = false;
};
}  // namespace

// --------------------------------------------------------- parse_job_sizes

TEST(ParseJobSizes, Good) {
    std::vector<uint32_t> v;
    ASSERT_TRUE(parse_job_sizes("4", v));
    EXPECT_EQ(v, (std::vector<uint32_t>{4}));
    ASSERT_TRUE(parse_job_sizes("4,2", v));
    EXPECT_EQ(v, (std::vector<uint32_t>{4, 2}));
    ASSERT_TRUE(parse_job_sizes("1,1,1,1048576", v));
    EXPECT_EQ(v, (std::vector<uint32_t>{1, 1, 1, 1u << 20}));
    // Output is replaced, not appended to.
    v = {9, 9, 9};
    ASSERT_TRUE(parse_job_sizes("3", v));
    EXPECT_EQ(v, (std::vector<uint32_t>{3}));
}

TEST(ParseJobSizes, ExactlyMaxJobs) {
    std::string s = "1";
    for (int i = 1; i < 1024; ++i) s += ",1";
    std::vector<uint32_t> v;
    ASSERT_TRUE(parse_job_sizes(s.c_str(), v));
    EXPECT_EQ(v.size(), 1024u);
    s += ",1";
    EXPECT_FALSE(parse_job_sizes(s.c_str(), v));
}

TEST(ParseJobSizes, Bad) {
    std::vector<uint32_t> v;
    EXPECT_FALSE(parse_job_sizes(nullptr, v));
    for (const char* bad : {"", "0", "4,0", ",4", "4,", "4,,2", "a", "4a", "4 ,2", "4;2", "1048577",
                            "99999999999999999999999", "4,2,", "0x10", "4.0"}) {
        v = {7};
        EXPECT_FALSE(parse_job_sizes(bad, v)) << '"' << bad << '"';
    }
}

TEST(ParseJobSizes, SignsAndSpacesAreRejected) {
    // "false on anything else" than "4,2": strtoul would skip spaces, accept
    // a sign and wrap a negative number ("-18446744073709551615" is 1).
    std::vector<uint32_t> v;
    for (const char* bad : {"-1", "-18446744073709551615", "4,-18446744073709551615", "+4", " 4", "4, 2", "\t4"}) {
        EXPECT_FALSE(parse_job_sizes(bad, v)) << '"' << bad << '"';
    }
}

// ----------------------------------------------------------- parse_secret

TEST(ParseSecret, Good) {
    std::string hex;
    for (int i = 0; i < 32; ++i) {
        char b[3];
        std::snprintf(b, sizeof b, "%02x", i * 8 + 1);
        hex += b;
    }
    uint8_t out[weft::wire::secret_size];
    ASSERT_TRUE(parse_secret(hex.c_str(), out));
    for (int i = 0; i < 32; ++i) EXPECT_EQ(out[i], static_cast<uint8_t>(i * 8 + 1)) << i;
    // Upper case and mixed case decode the same.
    std::string upper = hex;
    for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    uint8_t out2[weft::wire::secret_size];
    ASSERT_TRUE(parse_secret(upper.c_str(), out2));
    EXPECT_EQ(std::memcmp(out, out2, sizeof out), 0);
    ASSERT_TRUE(parse_secret(std::string(64, 'F').c_str(), out));
    for (uint8_t b : out) EXPECT_EQ(b, 0xFF);
}

TEST(ParseSecret, Bad) {
    uint8_t out[weft::wire::secret_size];
    EXPECT_FALSE(parse_secret(nullptr, out));
    EXPECT_FALSE(parse_secret("", out));
    EXPECT_FALSE(parse_secret(std::string(63, 'a').c_str(), out));
    EXPECT_FALSE(parse_secret(std::string(65, 'a').c_str(), out));
    EXPECT_FALSE(parse_secret(std::string(128, 'a').c_str(), out));
    for (char c : {'g', 'G', ' ', '-', 'x', '\x7f', '\xff'}) {
        for (size_t at : {size_t(0), size_t(1), size_t(31), size_t(63)}) {
            std::string s(64, '0');
            s[at] = c;
            EXPECT_FALSE(parse_secret(s.c_str(), out)) << "char " << int(c) << " at " << at;
        }
    }
}

// ---------------------------------------------------------------- env_u64

TEST(EnvU64, GoodValues) {
    {
        ScopedEnv e("WEFT_UNIT_TEST_U64", "12345");
        EXPECT_EQ(weft::env_u64("WEFT_UNIT_TEST_U64", 7), 12345u);
    }
    {
        ScopedEnv e("WEFT_UNIT_TEST_U64", "0");
        EXPECT_EQ(weft::env_u64("WEFT_UNIT_TEST_U64", 7), 0u);
    }
    {
        ScopedEnv e("WEFT_UNIT_TEST_U64", "0x10");  // base 0: hex and octal are accepted
        EXPECT_EQ(weft::env_u64("WEFT_UNIT_TEST_U64", 7), 16u);
    }
    {
        ScopedEnv e("WEFT_UNIT_TEST_U64", "18446744073709551615");
        EXPECT_EQ(weft::env_u64("WEFT_UNIT_TEST_U64", 7), UINT64_MAX);
    }
}

TEST(EnvU64, UnsetOrEmptyFallsBack) {
    {
        ScopedEnv e("WEFT_UNIT_TEST_U64", nullptr);
        EXPECT_EQ(weft::env_u64("WEFT_UNIT_TEST_U64", 99), 99u);
    }
    {
        ScopedEnv e("WEFT_UNIT_TEST_U64", "");
        EXPECT_EQ(weft::env_u64("WEFT_UNIT_TEST_U64", 99), 99u);
    }
}

TEST(EnvU64, BadValuesFallBack) {
    ScopedEnv quiet("WEFT_LOG", "error");  // the warnings are expected
    for (const char* bad :
         {"abc", "12abc", "12 ", "1.5", "0x", "0xZZ", "18446744073709551616", "99999999999999999999999", "--1", "+"}) {
        ScopedEnv e("WEFT_UNIT_TEST_U64", bad);
        EXPECT_EQ(weft::env_u64("WEFT_UNIT_TEST_U64", 42), 42u) << '"' << bad << '"';
    }
}

TEST(EnvU64, NegativeValuesFallBack) {
    // strtoull("-1") is ULLONG_MAX with errno 0: WEFT_TIMEOUT_MS=-1 would
    // otherwise become an effectively infinite timeout (and overflow when
    // scaled to ns).
    for (const char* bad : {"-1", "-0x10", " -5"}) {
        ScopedEnv e("WEFT_UNIT_TEST_U64", bad);
        EXPECT_EQ(weft::env_u64("WEFT_UNIT_TEST_U64", 42), 42u) << '"' << bad << '"';
    }
}

TEST(EnvString, ValueOrFallback) {
    {
        ScopedEnv e("WEFT_UNIT_TEST_STR", "hello");
        EXPECT_EQ(weft::env_string("WEFT_UNIT_TEST_STR", "x"), "hello");
    }
    {
        ScopedEnv e("WEFT_UNIT_TEST_STR", "");
        EXPECT_EQ(weft::env_string("WEFT_UNIT_TEST_STR", "x"), "x");
    }
    {
        ScopedEnv e("WEFT_UNIT_TEST_STR", nullptr);
        EXPECT_EQ(weft::env_string("WEFT_UNIT_TEST_STR", "fallback"), "fallback");
    }
}

// ----------------------------------------------------------- weft_strerror

TEST(Strerror, EveryStatusHasItsOwnText) {
    const char* unknown = weft_strerror(static_cast<weft_status_t>(WEFT_ERR_LAST_ + 1));
    ASSERT_NE(unknown, nullptr);
    std::set<std::string> seen;
    for (int s = WEFT_OK; s <= WEFT_ERR_LAST_; ++s) {
        const char* t = weft_strerror(static_cast<weft_status_t>(s));
        ASSERT_NE(t, nullptr) << s;
        EXPECT_GT(std::strlen(t), 0u) << s;
        EXPECT_STRNE(t, unknown) << "status " << s << " has no text of its own";
        EXPECT_TRUE(seen.insert(t).second) << "status " << s << " shares its text: " << t;
    }
}

TEST(Strerror, OutOfRangeValues) {
    // 17 and 31 lie inside the enum's value range for C++ (the C test,
    // c_abi_check.c, passes values like -1 and 1000 the way C callers can).
    for (int s : {17, 18, 31}) {
        const char* t = weft_strerror(static_cast<weft_status_t>(s));
        ASSERT_NE(t, nullptr) << s;
        EXPECT_GT(std::strlen(t), 0u) << s;
    }
}

// ----------------------------------------------------------------- Backoff

TEST(Backoff, EscalatesToShouldBlock) {
    weft::Backoff b;
    EXPECT_FALSE(b.should_block());
    const uint32_t steps = weft::Backoff::spin_steps + weft::Backoff::yield_steps;
    for (uint32_t i = 0; i < steps; ++i) {
        ASSERT_FALSE(b.should_block()) << "blocked after only " << i << " pauses";
        b.pause();
    }
    EXPECT_TRUE(b.should_block());
    b.pause();  // one step into the sleeping stage (20 us)
    EXPECT_TRUE(b.should_block());
    b.reset();
    EXPECT_FALSE(b.should_block());
}

// ---------------------------------------------------------------- Deadline

TEST(Deadline, PassedAndRemaining) {
    weft::Deadline past{0};
    EXPECT_TRUE(past.passed());
    EXPECT_EQ(past.remaining_ns(), 0u);
    weft::Deadline far = weft::Deadline::after_ns(3600ull * 1000000000ull);
    EXPECT_FALSE(far.passed());
    EXPECT_GT(far.remaining_ns(), 0u);
    EXPECT_LE(far.remaining_ns(), 3600ull * 1000000000ull);
}

TEST(Deadline, ShortDeadlineEventuallyPasses) {
    weft::Deadline d = weft::Deadline::after_ns(1000000);  // 1 ms
    weft::Backoff b;
    for (uint64_t i = 0; i < 100000000 && !d.passed(); ++i) b.pause();
    EXPECT_TRUE(d.passed());
    EXPECT_EQ(d.remaining_ns(), 0u);
}

// weft/version.h is written by hand; it must name the version CMake builds.
TEST(Version, HeaderMatchesTheBuild) {
    const std::string header = std::to_string(WEFT_VERSION_MAJOR) + "." + std::to_string(WEFT_VERSION_MINOR) + "." +
                               std::to_string(WEFT_VERSION_PATCH);
    EXPECT_EQ(header, WEFT_VERSION);
}
