// format.hpp — the bytes of a checkpoint: one image per rank and one
// manifest per generation (docs/checkpoint.md "On disk"). Encoders and
// verifying parsers only, no I/O. The parsers take untrusted bytes (a fuzz
// target feeds them anything): each returns a status and logs what is
// wrong, and nothing they return points outside the input.
//
// Image:    [file header, 64 B] then per section [section header, 32 B]
//           [payload][zeros to a multiple of 8]. Every header carries the
//           CRC-32C of its own bytes; a section header also that of its
//           payload. The image's digest is the CRC-32C of all its headers
//           in order: it covers every byte of the file, since each header
//           holds its payload's checksum.
// Manifest: [manifest header, 32 B][per rank: image bytes, digest][CRC-32C
//           of all of it]. Written last, by rank 0, once every rank's image
//           is on disk: a generation without a valid manifest does not exist.
// Integers are little-endian (weft runs on little-endian hosts only).
#pragma once

#include "transport/common.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace weft::ckpt {

// 2: the runtime state section (snapshot); 3: communicators and process
// groups in it (a version 2 image is refused with UNSUPPORTED when its
// runtime state is read). Version 1 images (no runtime state) are still read.
constexpr uint32_t format_version = 3;
constexpr size_t file_header_bytes = 64;
constexpr size_t section_header_bytes = 32;
constexpr size_t manifest_header_bytes = 32;
constexpr size_t manifest_entry_bytes = 16;
constexpr size_t transport_name_max = 15;

// Who wrote an image, and of which generation.
struct ImageHeader {
    uint64_t generation = 0;
    uint32_t job_size = 0;
    uint32_t rank = 0;
    uint32_t job_id = 0;
    uint32_t section_count = 0;
    uint32_t thread_level = 0;
    std::string transport;  // at most transport_name_max bytes
};

enum class SectionKind : uint32_t {
    runtime = 1,   // the runtime's own state (RuntimeState below)
    region = 2,    // a protected region; the section's id is the region's
    snapshot = 3,  // the group layer's requests and buffered messages (group/snapshot.hpp)
};

// What the runtime section holds in this format version: the job's shape as
// the checkpoint saw it (restart checks it against the new job).
struct RuntimeState {
    uint32_t universe_size = 0;
    uint32_t communicators = 0;  // live communicators (the world only, in version 1)
};
constexpr size_t runtime_state_bytes = 8;

// A section of a parsed image: its bytes are inside the parsed buffer.
struct Section {
    SectionKind kind{};
    uint32_t id = 0;
    const uint8_t* data = nullptr;
    uint64_t len = 0;
};

struct ParsedImage {
    ImageHeader header;
    std::vector<Section> sections;
    uint32_t digest = 0;
};

// ------------------------------------------------------------- encoders
std::vector<uint8_t> encode_file_header(const ImageHeader& h);
// A section's header, its payload's checksum computed here.
std::vector<uint8_t> encode_section_header(SectionKind kind, uint32_t id, const void* payload, uint64_t len);
std::vector<uint8_t> encode_runtime_state(const RuntimeState& s);
// Zero bytes after a payload of `len` bytes.
inline size_t padding_after(uint64_t len) { return static_cast<size_t>((8 - len % 8) % 8); }

struct ManifestEntry {
    uint64_t image_bytes = 0;
    uint32_t digest = 0;
};
struct Manifest {
    uint64_t generation = 0;
    uint32_t job_size = 0;
    uint32_t job_id = 0;
    std::vector<ManifestEntry> ranks;  // job_size of them
};
std::vector<uint8_t> encode_manifest(const Manifest& m);

// ---------------------------------------------------------------- parsers
// WEFT_ERR_CORRUPT for anything malformed or failing its checksum (the log
// line names `what`, the section and the offset), WEFT_ERR_UNSUPPORTED for
// a newer format version.
Status parse_image(const uint8_t* data, size_t len, const char* what, ParsedImage& out);
Status parse_manifest(const uint8_t* data, size_t len, const char* what, Manifest& out);
Status parse_runtime_state(const Section& s, const char* what, RuntimeState& out);

}  // namespace weft::ckpt
