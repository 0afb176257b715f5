// store.hpp — a checkpoint directory on disk: one folder per generation,
// durable writes, listing and pruning (docs/checkpoint.md "On disk").
//
//   DIR/gen-00000000000000000007/rank-000003.img   one per rank
//   DIR/gen-00000000000000000007/MANIFEST          last, by rank 0
//
// Every file is written under a temporary name, fsynced, renamed into
// place, and its folder fsynced: a file with its final name is whole.
#pragma once

#include "transport/common.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace weft::ckpt {

std::string generation_dir(const std::string& dir, uint64_t generation);
std::string image_path(const std::string& dir, uint64_t generation, uint32_t rank);
std::string manifest_path(const std::string& dir, uint64_t generation);

// mkdir -p.
Status make_dirs(const std::string& path);

// The generations under dir (folders named gen-N, with or without a
// manifest), newest first. A missing dir has none (WEFT_OK).
Status list_generations(const std::string& dir, std::vector<uint64_t>& out);

struct Piece {
    const void* data;
    size_t len;
};
struct WriteTimes {
    uint64_t write_ns = 0;  // the write calls
    uint64_t fsync_ns = 0;  // the file's fsync, its rename and the folder's fsync
};
// Writes the pieces, in order, to path durably (see above). On failure
// (WEFT_ERR_IO naming the call: disk full, permissions) the temporary file
// is removed and nothing has the final name. With sync_folder false the
// rename is not yet durable: the caller fsyncs the folder later, once for
// many files (sync_folder below).
// fault_point, when given, is passed after the write calls and before the
// fsync (weft-run --fault ...:at=NAME kills the rank there).
Status write_durably(const std::string& path, const std::vector<Piece>& pieces, WriteTimes& times,
                     bool sync_folder = true, const char* fault_point = nullptr);
// fsync of a folder: makes the renames into it durable.
Status sync_folder(const std::string& folder);

// The whole file. WEFT_ERR_NOT_FOUND when it does not exist, WEFT_ERR_IO
// when it cannot be read.
Status read_file(const std::string& path, std::vector<uint8_t>& out);

// A whole file mapped read-only, its pages populated at once. Restart reads
// images this way: a 64 MiB image is mapped and checksummed in about 30 ms
// here, where reading it into fresh memory took 260 ms (page faults, one
// per 4 KiB; bench/RESULTS.md "Checkpoint"). A file truncated by someone
// else while it is mapped would fault (SIGBUS): images are not written
// while a restart reads them.
class MappedFile {
public:
    MappedFile() = default;
    MappedFile(const MappedFile&) = delete;
    MappedFile& operator=(const MappedFile&) = delete;
    ~MappedFile() { close(); }
    // WEFT_ERR_NOT_FOUND when it does not exist, WEFT_ERR_IO otherwise.
    Status open(const std::string& path);
    void close();
    const uint8_t* data() const { return data_; }
    size_t size() const { return size_; }

private:
    const uint8_t* data_ = nullptr;
    size_t size_ = 0;
};

// Removes a generation's folder and its files; logs what could not go.
void remove_generation(const std::string& dir, uint64_t generation);

}  // namespace weft::ckpt
