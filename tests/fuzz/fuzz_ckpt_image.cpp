// fuzz_ckpt_image.cpp — the checkpoint image and manifest parsers
// (ckpt/format.cpp) and the runtime state's (group/snapshot_format.cpp) on
// arbitrary bytes, as a restart reads them from a disk that may hold
// anything. Three properties:
//   1. raw input: parse_image, parse_manifest and parse_snapshot return a
//      status, never read outside the input, and what they accept stays
//      inside it; a snapshot they accept encodes back to the same bytes;
//   2. structure: an image built from the input (regions cut from it) parses
//      back to exactly those regions, and the same image with one byte
//      changed (where and how the input says) is refused.
#include "ckpt/format.hpp"

#include "ckpt/crc32c.hpp"
#include "group/snapshot_format.hpp"

#include <cstdlib>
#include <cstring>
#include <vector>

using namespace weft::ckpt;

namespace {

void check(bool ok) {
    if (!ok) std::abort();
}

std::vector<uint8_t> build(const uint8_t* data, size_t size, std::vector<std::vector<uint8_t>>& regions) {
    // Region lengths come from the first bytes, contents from the rest.
    size_t at = 0;
    while (at < size && regions.size() < 4) {
        const size_t len = std::min<size_t>(data[at] % 64, size - at - 1);
        regions.emplace_back(data + at + 1, data + at + 1 + len);
        at += 1 + len;
    }
    ImageHeader h;
    h.generation = 1;
    h.job_size = 2;
    h.rank = 1;
    h.section_count = static_cast<uint32_t>(1 + regions.size());
    h.transport = "fuzz";
    std::vector<uint8_t> img = encode_file_header(h);
    auto section = [&](SectionKind k, uint32_t id, const std::vector<uint8_t>& p) {
        const auto sh = encode_section_header(k, id, p.data(), p.size());
        img.insert(img.end(), sh.begin(), sh.end());
        img.insert(img.end(), p.begin(), p.end());
        img.resize(img.size() + padding_after(p.size()), 0);
    };
    section(SectionKind::runtime, 0, encode_runtime_state(RuntimeState{2, 1}));
    for (size_t i = 0; i < regions.size(); ++i) section(SectionKind::region, uint32_t(i + 10), regions[i]);
    return img;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    // 1. Raw bytes, copied to a buffer of exactly their size (ASan sees any
    //    read past it).
    std::vector<uint8_t> raw(data, data + size);
    ParsedImage p;
    if (parse_image(raw.data(), raw.size(), "fuzz", p) == WEFT_OK)
        for (const Section& s : p.sections)
            check(s.data >= raw.data() && s.len <= size_t(raw.data() + raw.size() - s.data));
    Manifest m;
    if (parse_manifest(raw.data(), raw.size(), "fuzz", m) == WEFT_OK) check(m.ranks.size() == m.job_size);
    weft::group::Snapshot snap;
    if (weft::group::parse_snapshot(raw.data(), raw.size(), 8, "fuzz", snap) == WEFT_OK) {
        for (const auto& msg : snap.messages)
            check(msg.len == 0 || (msg.data >= raw.data() && msg.len <= size_t(raw.data() + raw.size() - msg.data)));
        for (uint32_t place : snap.posted) check(place < snap.requests.size());
        check(weft::group::encode_snapshot(snap) == raw);  // the format has one spelling per state
    }

    // 2. A valid image from the input, then one byte of it changed.
    if (size < 3) return 0;
    std::vector<std::vector<uint8_t>> regions;
    std::vector<uint8_t> img = build(data + 2, size - 2, regions);
    check(parse_image(img.data(), img.size(), "built", p) == WEFT_OK);
    check(p.sections.size() == 1 + regions.size());
    for (size_t i = 0; i < regions.size(); ++i) {
        const Section& s = p.sections[i + 1];
        check(s.id == i + 10 && s.len == regions[i].size());
        check(s.len == 0 || std::memcmp(s.data, regions[i].data(), s.len) == 0);
    }
    const size_t where = (size_t(data[0]) * 131 + data[1]) % img.size();
    const uint8_t flip = data[1] ? data[1] : 1;
    img[where] ^= flip;
    check(parse_image(img.data(), img.size(), "changed", p) != WEFT_OK);
    return 0;
}
