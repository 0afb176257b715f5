// format.cpp — see format.hpp.
#include "ckpt/format.hpp"

#include "ckpt/crc32c.hpp"

#include <cstring>

namespace weft::ckpt {
namespace {

constexpr char image_magic[8] = {'W', 'E', 'F', 'T', 'C', 'K', 'P', 'T'};
constexpr char manifest_magic[8] = {'W', 'E', 'F', 'T', 'M', 'A', 'N', 'I'};
// A sanity bound, not a feature limit: no job has more ranks than this, so
// a manifest that claims more is corrupt (and is not allocated for).
constexpr uint32_t max_job_size = 1u << 24;

void put32(uint8_t* p, uint32_t v) { std::memcpy(p, &v, 4); }
void put64(uint8_t* p, uint64_t v) { std::memcpy(p, &v, 8); }
uint32_t get32(const uint8_t* p) {
    uint32_t v;
    std::memcpy(&v, p, 4);
    return v;
}
uint64_t get64(const uint8_t* p) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    return v;
}

// Offsets in the file header.
enum : size_t {
    fh_magic = 0,
    fh_version = 8,
    fh_bytes = 12,
    fh_generation = 16,
    fh_job_size = 24,
    fh_rank = 28,
    fh_job_id = 32,
    fh_sections = 36,
    fh_transport = 40,
    fh_thread_level = 56,
    fh_crc = 60
};
// Offsets in a section header.
enum : size_t { sh_kind = 0, sh_id = 4, sh_len = 8, sh_payload_crc = 16, sh_crc = 28 };
// Offsets in the manifest header.
enum : size_t { mh_magic = 0, mh_version = 8, mh_job_size = 12, mh_generation = 16, mh_job_id = 24 };

}  // namespace

std::vector<uint8_t> encode_file_header(const ImageHeader& h) {
    std::vector<uint8_t> b(file_header_bytes, 0);
    std::memcpy(&b[fh_magic], image_magic, sizeof image_magic);
    put32(&b[fh_version], format_version);
    put32(&b[fh_bytes], file_header_bytes);
    put64(&b[fh_generation], h.generation);
    put32(&b[fh_job_size], h.job_size);
    put32(&b[fh_rank], h.rank);
    put32(&b[fh_job_id], h.job_id);
    put32(&b[fh_sections], h.section_count);
    std::memcpy(&b[fh_transport], h.transport.data(), std::min(h.transport.size(), transport_name_max));
    put32(&b[fh_thread_level], h.thread_level);
    put32(&b[fh_crc], crc32c(0, b.data(), fh_crc));
    return b;
}

std::vector<uint8_t> encode_section_header(SectionKind kind, uint32_t id, const void* payload, uint64_t len) {
    std::vector<uint8_t> b(section_header_bytes, 0);
    put32(&b[sh_kind], static_cast<uint32_t>(kind));
    put32(&b[sh_id], id);
    put64(&b[sh_len], len);
    put32(&b[sh_payload_crc], crc32c(0, payload, len));
    put32(&b[sh_crc], crc32c(0, b.data(), sh_crc));
    return b;
}

std::vector<uint8_t> encode_runtime_state(const RuntimeState& s) {
    std::vector<uint8_t> b(runtime_state_bytes, 0);
    put32(&b[0], s.universe_size);
    put32(&b[4], s.communicators);
    return b;
}

std::vector<uint8_t> encode_manifest(const Manifest& m) {
    std::vector<uint8_t> b(manifest_header_bytes + manifest_entry_bytes * m.ranks.size() + 8, 0);
    std::memcpy(&b[mh_magic], manifest_magic, sizeof manifest_magic);
    put32(&b[mh_version], format_version);
    put32(&b[mh_job_size], static_cast<uint32_t>(m.ranks.size()));
    put64(&b[mh_generation], m.generation);
    put32(&b[mh_job_id], m.job_id);
    uint8_t* e = &b[manifest_header_bytes];
    for (const ManifestEntry& r : m.ranks) {
        put64(e, r.image_bytes);
        put32(e + 8, r.digest);
        e += manifest_entry_bytes;
    }
    put32(e, crc32c(0, b.data(), static_cast<size_t>(e - b.data())));
    return b;
}

Status parse_image(const uint8_t* data, size_t len, const char* what, ParsedImage& out) {
    out = ParsedImage{};
    if (!data || len < file_header_bytes)
        return WEFT_FAIL(WEFT_ERR_CORRUPT, "%s: %zu bytes, shorter than an image header (truncated)", what, len);
    if (std::memcmp(data + fh_magic, image_magic, sizeof image_magic) != 0)
        return WEFT_FAIL(WEFT_ERR_CORRUPT, "%s: not a weft checkpoint image (bad magic)", what);
    // The version first: a newer format may lay its header out otherwise.
    const uint32_t version = get32(data + fh_version);
    if (version > format_version)
        return WEFT_FAIL(WEFT_ERR_UNSUPPORTED, "%s: image format version %u is newer than this weft's (%u)", what,
                         version, format_version);
    if (get32(data + fh_crc) != crc32c(0, data, fh_crc))
        return WEFT_FAIL(WEFT_ERR_CORRUPT, "%s: the image header fails its checksum", what);
    if (version == 0 || get32(data + fh_bytes) != file_header_bytes)
        return WEFT_FAIL(WEFT_ERR_CORRUPT, "%s: image format version %u with a %u-byte header", what, version,
                         get32(data + fh_bytes));
    ImageHeader& h = out.header;
    h.generation = get64(data + fh_generation);
    h.job_size = get32(data + fh_job_size);
    h.rank = get32(data + fh_rank);
    h.job_id = get32(data + fh_job_id);
    h.section_count = get32(data + fh_sections);
    h.thread_level = get32(data + fh_thread_level);
    const char* name = reinterpret_cast<const char*>(data + fh_transport);
    h.transport.assign(name, strnlen(name, transport_name_max));
    if (h.job_size == 0 || h.job_size > max_job_size || h.rank >= h.job_size)
        return WEFT_FAIL(WEFT_ERR_CORRUPT, "%s: rank %u of a job of %u", what, h.rank, h.job_size);

    uint32_t digest = crc32c(0, data, file_header_bytes);
    size_t off = file_header_bytes;
    for (uint32_t i = 0; i < h.section_count; ++i) {
        if (len - off < section_header_bytes)
            return WEFT_FAIL(WEFT_ERR_CORRUPT, "%s: truncated in the header of section %u of %u (offset %zu)", what, i,
                             h.section_count, off);
        const uint8_t* sh = data + off;
        if (get32(sh + sh_crc) != crc32c(0, sh, sh_crc))
            return WEFT_FAIL(WEFT_ERR_CORRUPT, "%s: the header of section %u (offset %zu) fails its checksum", what, i,
                             off);
        digest = crc32c(digest, sh, section_header_bytes);
        Section s;
        s.kind = static_cast<SectionKind>(get32(sh + sh_kind));
        s.id = get32(sh + sh_id);
        s.len = get64(sh + sh_len);
        off += section_header_bytes;
        const uint64_t room = len - off;
        if (s.len > room || padding_after(s.len) > room - s.len)
            return WEFT_FAIL(WEFT_ERR_CORRUPT, "%s: section %u claims %llu bytes, %llu remain (truncated)", what, i,
                             static_cast<unsigned long long>(s.len), static_cast<unsigned long long>(room));
        s.data = data + off;
        if (get32(sh + sh_payload_crc) != crc32c(0, s.data, s.len))
            return WEFT_FAIL(WEFT_ERR_CORRUPT,
                             "%s: the payload of section %u (kind %u, id %u, %llu bytes) fails its "
                             "checksum",
                             what, i, static_cast<uint32_t>(s.kind), s.id, static_cast<unsigned long long>(s.len));
        if (s.kind != SectionKind::runtime && s.kind != SectionKind::region && s.kind != SectionKind::snapshot)
            return WEFT_FAIL(WEFT_ERR_CORRUPT, "%s: section %u has unknown kind %u", what, i,
                             static_cast<uint32_t>(s.kind));
        off += s.len;
        for (size_t pad = padding_after(s.len); pad > 0; --pad, ++off)
            if (data[off] != 0) return WEFT_FAIL(WEFT_ERR_CORRUPT, "%s: padding after section %u is not zero", what, i);
        out.sections.push_back(s);
    }
    if (off != len)
        return WEFT_FAIL(WEFT_ERR_CORRUPT, "%s: %zu bytes after the last of %u sections", what, len - off,
                         h.section_count);
    out.digest = digest;
    return WEFT_OK;
}

Status parse_manifest(const uint8_t* data, size_t len, const char* what, Manifest& out) {
    out = Manifest{};
    if (!data || len < manifest_header_bytes + 8)
        return WEFT_FAIL(WEFT_ERR_CORRUPT, "%s: %zu bytes, shorter than a manifest (truncated)", what, len);
    if (std::memcmp(data + mh_magic, manifest_magic, sizeof manifest_magic) != 0)
        return WEFT_FAIL(WEFT_ERR_CORRUPT, "%s: not a weft checkpoint manifest (bad magic)", what);
    const uint32_t version = get32(data + mh_version);
    if (version > format_version)
        return WEFT_FAIL(WEFT_ERR_UNSUPPORTED, "%s: manifest format version %u is newer than this weft's (%u)", what,
                         version, format_version);
    const uint32_t n = get32(data + mh_job_size);
    if (n == 0 || n > max_job_size || len != manifest_header_bytes + manifest_entry_bytes * size_t(n) + 8)
        return WEFT_FAIL(WEFT_ERR_CORRUPT, "%s: %zu bytes for a job of %u ranks", what, len, n);
    const size_t body = len - 8;
    if (get32(data + body) != crc32c(0, data, body) || get32(data + body + 4) != 0)
        return WEFT_FAIL(WEFT_ERR_CORRUPT, "%s: the manifest fails its checksum", what);
    if (version == 0) return WEFT_FAIL(WEFT_ERR_CORRUPT, "%s: manifest format version 0", what);
    out.job_size = n;
    out.generation = get64(data + mh_generation);
    out.job_id = get32(data + mh_job_id);
    out.ranks.resize(n);
    const uint8_t* e = data + manifest_header_bytes;
    for (ManifestEntry& r : out.ranks) {
        r.image_bytes = get64(e);
        r.digest = get32(e + 8);
        e += manifest_entry_bytes;
    }
    return WEFT_OK;
}

Status parse_runtime_state(const Section& s, const char* what, RuntimeState& out) {
    if (s.kind != SectionKind::runtime || s.len != runtime_state_bytes)
        return WEFT_FAIL(WEFT_ERR_CORRUPT, "%s: a runtime section of %llu bytes (expected %zu)", what,
                         static_cast<unsigned long long>(s.len), runtime_state_bytes);
    out.universe_size = get32(s.data);
    out.communicators = get32(s.data + 4);
    return WEFT_OK;
}

}  // namespace weft::ckpt
