// ckpt.hpp — the checkpoint layer of one context: its protected regions,
// and the collective checkpoint and restart of weft/ckpt.h
// (docs/checkpoint.md).
//
// Thread affinity: the region calls from any thread (mu_); checkpoint and
// restart from one thread per rank, holding mu_ for their whole length (a
// region is neither moved nor removed while it is written or restored).
// Neither holds the context's API lock across the collectives they run:
// those are ordinary entries on the world communicator.
#pragma once

#include <weft/ckpt.h>

#include "ckpt/transparent.hpp"
#include "group/snapshot.hpp"
#include "transport/runtime.hpp"

#include <map>
#include <memory>
#include <mutex>
#include <string>

namespace weft::ckpt {

class Flusher;

class Ckpt {
public:
    explicit Ckpt(Runtime& rt);
    ~Ckpt();  // finishes a flush in progress (flush.hpp)

    Status region_register(uint32_t id, void* base, size_t size);
    Status region_resize(uint32_t id, void* base, size_t size);
    Status region_remove(uint32_t id);

    // ctx is this layer's own context, for the collectives on its world.
    // An empty dir: the launcher's (WEFT_CKPT_DIR), or INVALID_ARG.
    Status checkpoint(weft_context_t ctx, const std::string& dir, weft_ckpt_profile_t& out);
    Status restart(weft_context_t ctx, const std::string& dir, weft_restart_info_t& out);
    Status need(weft_context_t ctx, int& out);
    // The second directory committed generations are flushed to; empty: none.
    Status set_flush_dir(const std::string& dir);
    Status flush_wait(uint64_t generation, uint64_t timeout_ms, weft_ckpt_flush_info_t& out);
    // weft_ckpt_release / weft_ckpt_rebuild (transparent.hpp).
    Transparent& transparent() { return transparent_; }

private:
    struct Region {
        void* base = nullptr;
        size_t size = 0;
    };
    // One directory's restart (restart() tries the flush directory after).
    Status restart_from(weft_context_t ctx, const std::string& dir, weft_restart_info_t& out);
    // Writes this rank's image of `generation` (the runtime state in
    // `snapshot`); bytes and digest for the manifest.
    Status write_image(const std::string& dir, uint64_t generation, const std::vector<uint8_t>& snapshot,
                       weft_ckpt_profile_t& prof, uint32_t& digest);
    // The regions as group/snapshot.hpp sees them (under mu_).
    group::RegionMap region_map();
    // Rank 0, once every image is on disk: the manifest, then pruning.
    Status commit(const std::string& dir, uint64_t generation, const std::vector<uint64_t>& gathered);
    void prune(const std::string& dir, uint64_t newest);

    // The directory to use: dir, or the launcher's.
    Status directory(const std::string& dir, std::string& out, const char* fn) const;

    Runtime& rt_;
    std::mutex mu_;
    std::map<uint32_t, Region> regions_;
    uint32_t keep_;                     // committed generations kept (WEFT_CKPT_KEEP)
    std::string launcher_dir_;          // WEFT_CKPT_DIR (weft-run --checkpoint-dir / --restart)
    bool launcher_restart_ = false;     // WEFT_CKPT_RESTART (weft-run --restart)
    int request_fd_ = -1;               // WEFT_CKPT_FD: weft-run's eventfd (--checkpoint-on)
    uint64_t interval_ns_ = 0;          // WEFT_CKPT_INTERVAL_S; 0: none
    uint64_t last_ns_ = 0;              // this rank's last checkpoint (or init)
    std::string last_dir_;              // where this job last checkpointed or restarted for
    uint64_t last_generation_ = 0;      // ... and that generation: the next one there is after it
    std::string flush_dir_;             // WEFT_CKPT_FLUSH_DIR or weft_ckpt_flush_dir; empty: no flush
    uint64_t flush_timeout_ns_ = 0;     // WEFT_CKPT_FLUSH_TIMEOUT_S: rank 0's wait for the others' copies
    std::unique_ptr<Flusher> flusher_;  // made at the first flush
    Transparent transparent_{rt_};      // declared last: stopped first (a held point ends before the rest goes)
};

}  // namespace weft::ckpt
