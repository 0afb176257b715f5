// flush.hpp — committed generations copied, in the background, to a second
// directory (a parallel file system in production, where the first is a
// node-local or faster one), each copy verified on its own
// (docs/checkpoint.md "Flush to a second directory").
//
// After a checkpoint commits, every rank hands the generation to its
// Flusher and goes on: a thread of the Flusher copies this rank's image
// into the second directory the durable way (temporary name, fsync,
// rename) and verifies the copy (parsed, every checksum, the digest the
// manifest holds). Rank 0's thread then waits for every rank's copy to
// appear, verifies each the same way, and only then writes the manifest
// there: a flushed generation is valid only when every rank's copy is,
// exactly as in the first directory. It keeps the newest K there too.
//
// The thread touches no weft state, only files: nothing of the runtime
// waits for it. A generation still waiting when a newer one is committed is
// skipped (the newer one supersedes it). Destruction finishes the copy in
// progress (rank 0 waits for the other ranks' copies at most the flush
// timeout) and stops.
#pragma once

#include "ckpt/format.hpp"
#include "transport/common.hpp"

#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace weft::ckpt {

class Flusher {
public:
    // rank, job size, generations kept (WEFT_CKPT_KEEP), how long rank 0
    // waits for the other ranks' copies of one generation.
    Flusher(uint32_t rank, uint32_t size, uint32_t keep, uint64_t peer_timeout_ns);
    ~Flusher();
    Flusher(const Flusher&) = delete;
    Flusher& operator=(const Flusher&) = delete;

    // Generation `generation` of `from` is committed: copy it to `to`.
    void submit(const std::string& from, const std::string& to, uint64_t generation);
    // This rank's part of generation's flush: OK once done (rank 0: once
    // the manifest is written there), its failure (IO, CORRUPT, TIMEOUT),
    // NOT_FOUND for a generation never submitted or skipped, TIMEOUT if the
    // deadline passes first. Times of this rank's part in *copy_ns (copy
    // and fsync) and *verify_ns when given.
    Status wait(uint64_t generation, Deadline d, uint64_t* copy_ns = nullptr, uint64_t* verify_ns = nullptr);

private:
    struct Job {
        std::string from, to;
        uint64_t generation = 0;
    };
    struct Outcome {
        Status status = WEFT_OK;
        bool done = false;
        uint64_t copy_ns = 0, verify_ns = 0;
    };
    void run();
    // One generation: this rank's copy, then (rank 0) the others' and the manifest.
    Status flush(const Job& j, Outcome& out);
    Status copy_own(const Job& j, const Manifest& m, Outcome& out);
    Status commit(const Job& j, const Manifest& m, const std::vector<uint8_t>& manifest_bytes, Outcome& out);
    // Verifies a flushed image against the generation's manifest entry.
    Status verify(const std::string& path, uint64_t generation, uint32_t rank, uint64_t bytes, uint32_t digest);
    bool superseded(uint64_t generation);

    const uint32_t rank_, size_, keep_;
    const uint64_t peer_timeout_ns_;
    std::mutex mu_;
    std::condition_variable cv_;
    bool stop_ = false;
    bool has_job_ = false;
    Job next_;                              // the newest generation not yet started
    std::map<uint64_t, Outcome> outcomes_;  // by generation (the last few)
    std::thread thread_;
};

}  // namespace weft::ckpt
