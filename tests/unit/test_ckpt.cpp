// test_ckpt.cpp — checkpoint images and manifests on their own (ckpt/format,
// ckpt/store, ckpt/crc32c): round trips, and every damage a file on disk
// can suffer found by the parsers. The collective sequence runs in
// tests/mp/test_ckpt.cpp.
#include "ckpt/crc32c.hpp"
#include "ckpt/format.hpp"
#include "ckpt/store.hpp"

#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <random>

using namespace weft;
using namespace weft::ckpt;

namespace {

// One image as Ckpt::write_image lays it out: header, runtime, regions.
struct Built {
    std::vector<uint8_t> bytes;
    uint32_t digest = 0;
};

Built build_image(uint64_t generation, uint32_t rank, uint32_t size,
                  const std::vector<std::pair<uint32_t, std::vector<uint8_t>>>& regions) {
    ImageHeader h;
    h.generation = generation;
    h.rank = rank;
    h.job_size = size;
    h.job_id = 3;
    h.section_count = static_cast<uint32_t>(1 + regions.size());
    h.transport = "shm";
    Built b;
    auto append = [&](const std::vector<uint8_t>& v) { b.bytes.insert(b.bytes.end(), v.begin(), v.end()); };
    const auto fh = encode_file_header(h);
    append(fh);
    b.digest = crc32c(0, fh.data(), fh.size());
    auto section = [&](SectionKind k, uint32_t id, const std::vector<uint8_t>& payload) {
        const auto sh = encode_section_header(k, id, payload.data(), payload.size());
        b.digest = crc32c(b.digest, sh.data(), sh.size());
        append(sh);
        append(payload);
        b.bytes.resize(b.bytes.size() + padding_after(payload.size()), 0);
    };
    section(SectionKind::runtime, 0, encode_runtime_state(RuntimeState{size, 1}));
    for (const auto& [id, payload] : regions) section(SectionKind::region, id, payload);
    return b;
}

std::vector<uint8_t> pattern(size_t n, uint32_t seed) {
    std::vector<uint8_t> v(n);
    std::mt19937 g(seed);
    for (auto& x : v) x = static_cast<uint8_t>(g());
    return v;
}

std::string temp_dir() {
    char name[] = "/tmp/weft-ckpt-unit-XXXXXX";
    EXPECT_NE(mkdtemp(name), nullptr);
    return name;
}

}  // namespace

TEST(Crc32c, KnownValueAndBothPathsAgree) {
    const char* check = "123456789";
    EXPECT_EQ(crc32c(0, check, 9), 0xE3069283u) << "the CRC-32C check value";
    EXPECT_EQ(crc32c_portable(0, check, 9), 0xE3069283u);
    const auto data = pattern(4099, 1);
    for (size_t len : {0u, 1u, 7u, 8u, 9u, 63u, 4099u}) {
        EXPECT_EQ(crc32c(0, data.data(), len), crc32c_portable(0, data.data(), len)) << len << " bytes";
        // Continuing over two parts gives the one-part value.
        const size_t half = len / 2;
        EXPECT_EQ(crc32c(crc32c(0, data.data(), half), data.data() + half, len - half), crc32c(0, data.data(), len));
    }
}

TEST(CkptFormat, ImageRoundTrip) {
    const auto a = pattern(1000, 2), c = pattern(13, 3);
    const Built b = build_image(5, 2, 4, {{1, a}, {9, {}}, {4, c}});
    ParsedImage p;
    ASSERT_EQ(parse_image(b.bytes.data(), b.bytes.size(), "image", p), WEFT_OK);
    EXPECT_EQ(p.digest, b.digest);
    EXPECT_EQ(p.header.generation, 5u);
    EXPECT_EQ(p.header.rank, 2u);
    EXPECT_EQ(p.header.job_size, 4u);
    EXPECT_EQ(p.header.job_id, 3u);
    EXPECT_EQ(p.header.transport, "shm");
    ASSERT_EQ(p.sections.size(), 4u);
    RuntimeState rs;
    ASSERT_EQ(parse_runtime_state(p.sections[0], "image", rs), WEFT_OK);
    EXPECT_EQ(rs.universe_size, 4u);
    EXPECT_EQ(p.sections[1].id, 1u);
    ASSERT_EQ(p.sections[1].len, a.size());
    EXPECT_EQ(std::memcmp(p.sections[1].data, a.data(), a.size()), 0);
    EXPECT_EQ(p.sections[2].len, 0u);
    EXPECT_EQ(p.sections[3].id, 4u);
    EXPECT_EQ(std::memcmp(p.sections[3].data, c.data(), c.size()), 0);
}

// Every single-bit flip anywhere in an image is found (by a header's or a
// payload's checksum, as a malformed file, or as non-zero padding).
TEST(CkptFormat, EveryBitFlipIsFound) {
    const Built b = build_image(1, 0, 2, {{1, pattern(40, 4)}, {2, pattern(17, 5)}});
    for (size_t byte = 0; byte < b.bytes.size(); ++byte) {
        for (int bit = 0; bit < 8; ++bit) {
            std::vector<uint8_t> d = b.bytes;
            d[byte] ^= uint8_t(1u << bit);
            ParsedImage p;
            const Status st = parse_image(d.data(), d.size(), "flipped", p);
            EXPECT_TRUE(st == WEFT_ERR_CORRUPT || st == WEFT_ERR_UNSUPPORTED)
                << "a flip at byte " << byte << " bit " << bit << ": " << weft_strerror(st);
        }
    }
}

TEST(CkptFormat, EveryTruncationIsFound) {
    const Built b = build_image(1, 0, 1, {{1, pattern(100, 6)}});
    for (size_t len = 0; len < b.bytes.size(); ++len) {
        ParsedImage p;
        EXPECT_EQ(parse_image(b.bytes.data(), len, "truncated", p), WEFT_ERR_CORRUPT) << len << " bytes";
    }
    std::vector<uint8_t> longer = b.bytes;
    longer.push_back(0);
    ParsedImage p;
    EXPECT_EQ(parse_image(longer.data(), longer.size(), "longer", p), WEFT_ERR_CORRUPT);
}

TEST(CkptFormat, NewerVersionIsUnsupportedNotCorrupt) {
    Built b = build_image(1, 0, 1, {});
    const uint32_t v = format_version + 1;
    std::memcpy(&b.bytes[8], &v, 4);
    ParsedImage p;
    EXPECT_EQ(parse_image(b.bytes.data(), b.bytes.size(), "newer", p), WEFT_ERR_UNSUPPORTED);
    Manifest m{7, 2, 0, {{100, 1}, {200, 2}}};
    auto mb = encode_manifest(m);
    std::memcpy(&mb[8], &v, 4);
    Manifest out;
    EXPECT_EQ(parse_manifest(mb.data(), mb.size(), "newer", out), WEFT_ERR_UNSUPPORTED);
}

TEST(CkptFormat, ManifestRoundTripAndDamage) {
    const Manifest m{42, 3, 9, {{100, 0xdead}, {200, 0xbeef}, {300, 7}}};
    const auto b = encode_manifest(m);
    Manifest out;
    ASSERT_EQ(parse_manifest(b.data(), b.size(), "manifest", out), WEFT_OK);
    EXPECT_EQ(out.generation, 42u);
    EXPECT_EQ(out.job_size, 3u);
    EXPECT_EQ(out.job_id, 9u);
    ASSERT_EQ(out.ranks.size(), 3u);
    EXPECT_EQ(out.ranks[1].image_bytes, 200u);
    EXPECT_EQ(out.ranks[1].digest, 0xbeefu);
    for (size_t byte = 0; byte < b.size(); ++byte) {
        auto d = b;
        d[byte] ^= 0x10;
        EXPECT_NE(parse_manifest(d.data(), d.size(), "flipped", out), WEFT_OK) << "byte " << byte;
    }
    for (size_t len = 0; len < b.size(); ++len) EXPECT_NE(parse_manifest(b.data(), len, "truncated", out), WEFT_OK);
    EXPECT_EQ(parse_manifest(nullptr, 0, "null", out), WEFT_ERR_CORRUPT);
}

TEST(CkptStore, DurableWriteListAndRemove) {
    const std::string dir = temp_dir() + "/a/b";
    ASSERT_EQ(make_dirs(dir), WEFT_OK);
    ASSERT_EQ(make_dirs(dir), WEFT_OK) << "again: nothing to do";
    std::vector<uint64_t> gens;
    ASSERT_EQ(list_generations(dir, gens), WEFT_OK);
    EXPECT_TRUE(gens.empty());
    for (uint64_t g : {3u, 1u, 12u}) {
        ASSERT_EQ(make_dirs(generation_dir(dir, g)), WEFT_OK);
        const auto payload = pattern(5000, uint32_t(g));
        const std::vector<uint8_t> head = {1, 2, 3};
        WriteTimes t;
        ASSERT_EQ(
            write_durably(image_path(dir, g, 0), {{head.data(), head.size()}, {payload.data(), payload.size()}}, t),
            WEFT_OK);
        std::vector<uint8_t> back;
        ASSERT_EQ(read_file(image_path(dir, g, 0), back), WEFT_OK);
        ASSERT_EQ(back.size(), 5003u);
        EXPECT_EQ(std::memcmp(back.data() + 3, payload.data(), payload.size()), 0);
        EXPECT_NE(access((image_path(dir, g, 0) + ".tmp").c_str(), F_OK), 0) << "no temporary file stays";
    }
    ASSERT_EQ(mkdir((dir + "/gen-x").c_str(), 0755), 0);  // not ours: ignored
    ASSERT_EQ(list_generations(dir, gens), WEFT_OK);
    EXPECT_EQ(gens, (std::vector<uint64_t>{12, 3, 1}));
    remove_generation(dir, 3);
    ASSERT_EQ(list_generations(dir, gens), WEFT_OK);
    EXPECT_EQ(gens, (std::vector<uint64_t>{12, 1}));
    std::vector<uint8_t> none;
    EXPECT_EQ(read_file(image_path(dir, 3, 0), none), WEFT_ERR_NOT_FOUND);
    EXPECT_EQ(list_generations(dir + "/missing", gens), WEFT_OK);
    EXPECT_TRUE(gens.empty());
}

TEST(CkptStore, UnwritablePlacesFailWithIo) {
    WriteTimes t;
    const uint8_t byte = 1;
    EXPECT_EQ(write_durably("/proc/weft-no-such-dir/x", {{&byte, 1}}, t), WEFT_ERR_IO);
    EXPECT_EQ(make_dirs("/proc/weft-no-such-dir"), WEFT_ERR_IO);
    EXPECT_EQ(make_dirs(""), WEFT_ERR_INVALID_ARG);
    // A file where a folder should be.
    const std::string dir = temp_dir();
    const std::string file = dir + "/f";
    ASSERT_EQ(write_durably(file, {{&byte, 1}}, t), WEFT_OK);
    EXPECT_EQ(make_dirs(file), WEFT_ERR_IO);
    std::vector<uint8_t> out;
    EXPECT_EQ(read_file(dir, out), WEFT_ERR_IO) << "a folder is not an image";
}
