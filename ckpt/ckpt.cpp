// ckpt.cpp — see ckpt.hpp; the sequence is in docs/checkpoint.md.
#include "ckpt/ckpt.hpp"

#include "ckpt/crc32c.hpp"
#include "ckpt/flush.hpp"
#include "ckpt/format.hpp"
#include "ckpt/store.hpp"
#include "group/layer.hpp"

#include <weft/comm.h>
#include <weft/drain.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>

#include <unistd.h>

namespace weft::ckpt {
namespace {

// Generations a restart considers, newest first (rank 0 lists them).
constexpr size_t max_candidates = 64;

// The job's world communicator and the collectives both sequences run on
// it. A failed member fails them (WEFT_ERR_PEER_FAILED) on every survivor.
struct World {
    weft_comm_t comm = nullptr;
    uint32_t rank = 0;
    uint32_t size = 0;

    Status open(weft_context_t ctx) {
        if (Status st = weft_comm_world(ctx, &comm)) return st;
        if (Status st = weft_comm_rank(comm, &rank)) return st;
        return weft_comm_size(comm, &size);
    }
    Status bcast(uint64_t* v, size_t n) { return weft_bcast(comm, v, n, WEFT_UINT64, 0); }
    Status max(uint64_t& v) {
        const uint64_t mine = v;
        return weft_allreduce(comm, &mine, &v, 1, WEFT_UINT64, WEFT_OP_MAX);
    }
};

}  // namespace

Ckpt::Ckpt(Runtime& rt) : rt_(rt) {
    keep_ = static_cast<uint32_t>(std::clamp<uint64_t>(env_u64("WEFT_CKPT_KEEP", 2), 1, 1u << 20));
    launcher_dir_ = env_string("WEFT_CKPT_DIR", "");
    launcher_restart_ = env_u64("WEFT_CKPT_RESTART", 0) != 0;
    if (std::getenv("WEFT_CKPT_FD")) request_fd_ = static_cast<int>(env_u64("WEFT_CKPT_FD", 0));
    interval_ns_ = env_u64("WEFT_CKPT_INTERVAL_S", 0) * 1000000000ull;
    flush_dir_ = env_string("WEFT_CKPT_FLUSH_DIR", "");
    flush_timeout_ns_ = env_u64("WEFT_CKPT_FLUSH_TIMEOUT_S", 120) * 1000000000ull;
    last_ns_ = now_ns();
}

Status Ckpt::directory(const std::string& dir, std::string& out, const char* fn) const {
    out = dir.empty() ? launcher_dir_ : dir;
    if (out.empty())
        return WEFT_FAIL(WEFT_ERR_INVALID_ARG,
                         "%s: no directory: pass one, or run under weft-run --checkpoint-dir DIR (WEFT_CKPT_DIR)", fn);
    return WEFT_OK;
}

Status Ckpt::need(weft_context_t ctx, int& out) {
    out = 0;
    World w;
    if (Status st = w.open(ctx)) return st;
    uint64_t due = 0;
    if (request_fd_ >= 0) {
        uint64_t v = 0;  // non-blocking: another rank may have taken it, or nobody asked
        if (::read(request_fd_, &v, sizeof v) == static_cast<ssize_t>(sizeof v) && v) {
            WEFT_LOG(debug, "checkpoint: the launcher asked for one");
            due = 1;
        }
    }
    if (interval_ns_ && now_ns() - last_ns_ >= interval_ns_) due = 1;
    if (Status st = w.max(due)) return st;
    out = due != 0;
    return WEFT_OK;
}

Ckpt::~Ckpt() = default;

// ---------------------------------------------------------------- flush
Status Ckpt::set_flush_dir(const std::string& dir) {
    std::lock_guard<std::mutex> g(mu_);
    flush_dir_ = dir;
    return WEFT_OK;
}

Status Ckpt::flush_wait(uint64_t generation, uint64_t timeout_ms, weft_ckpt_flush_info_t& out) {
    out = weft_ckpt_flush_info_t{};
    Flusher* f = nullptr;
    {
        std::lock_guard<std::mutex> g(mu_);
        f = flusher_.get();
    }
    if (!f)
        return WEFT_FAIL(WEFT_ERR_NOT_FOUND,
                         "weft_ckpt_flush_wait: no generation was handed to a flush (no flush "
                         "directory: weft_ckpt_flush_dir or WEFT_CKPT_FLUSH_DIR)");
    const Deadline d = Deadline::after_ns(std::min<uint64_t>(timeout_ms, uint64_t(1) << 40) * 1000000ull);
    return f->wait(generation, d, &out.copy_ns, &out.verify_ns);
}

// ------------------------------------------------------------- regions
Status Ckpt::region_register(uint32_t id, void* base, size_t size) {
    if (!base && size) return WEFT_FAIL(WEFT_ERR_INVALID_ARG, "weft_ckpt_region_register: region %u: base is NULL", id);
    std::lock_guard<std::mutex> g(mu_);
    if (!regions_.try_emplace(id, Region{base, size}).second)
        return WEFT_FAIL(WEFT_ERR_BUSY, "weft_ckpt_region_register: region %u is registered already", id);
    return WEFT_OK;
}

Status Ckpt::region_resize(uint32_t id, void* base, size_t size) {
    if (!base && size) return WEFT_FAIL(WEFT_ERR_INVALID_ARG, "weft_ckpt_region_resize: region %u: base is NULL", id);
    std::lock_guard<std::mutex> g(mu_);
    auto it = regions_.find(id);
    if (it == regions_.end()) return WEFT_FAIL(WEFT_ERR_NOT_FOUND, "weft_ckpt_region_resize: no region %u", id);
    it->second = Region{base, size};
    return WEFT_OK;
}

Status Ckpt::region_remove(uint32_t id) {
    std::lock_guard<std::mutex> g(mu_);
    if (regions_.erase(id) == 0) return WEFT_FAIL(WEFT_ERR_NOT_FOUND, "weft_ckpt_region_remove: no region %u", id);
    return WEFT_OK;
}

// ---------------------------------------------------------- checkpoint
Status Ckpt::checkpoint(weft_context_t ctx, const std::string& dir_arg, weft_ckpt_profile_t& prof) {
    prof = weft_ckpt_profile_t{};
    const uint64_t t0 = now_ns();
    std::string dir;
    if (Status st = directory(dir_arg, dir, "weft_checkpoint")) return st;
    std::lock_guard<std::mutex> g(mu_);
    World w;
    if (Status st = w.open(ctx)) return st;

    // 1. Every rank is inside the call before the drain starts: a rank
    //    still on its way would send after the quiescent point. Then rank 0
    //    makes the folder, names the generation and asks for a drain;
    //    everyone learns all three (a failure there ends it for all).
    if (Status st = weft_barrier(w.comm)) return st;
    std::array<uint64_t, 3> plan{};  // status, generation, drain number
    if (w.rank == 0) {
        std::vector<uint64_t> gens;
        Status st = make_dirs(dir);
        if (st == WEFT_OK) st = list_generations(dir, gens);
        uint64_t number = 0;
        if (st == WEFT_OK) st = weft_drain_request(ctx, &number);
        // After the newest here, and after the one this job last wrote
        // here or restarted from for here (a restart from the flush
        // directory: this one may hold only older ones, or none).
        plan = {uint64_t(st),
                std::max<uint64_t>(gens.empty() ? 0 : gens.front(), dir == last_dir_ ? last_generation_ : 0) + 1,
                number};
    }
    if (Status st = w.bcast(plan.data(), plan.size())) return st;
    if (plan[0] != WEFT_OK) {
        if (w.rank != 0) WEFT_LOG(error, "checkpoint of %s: rank 0 could not start it", dir.c_str());
        return static_cast<Status>(plan[0]);
    }
    const uint64_t generation = plan[1];
    prof.generation = generation;

    // 2. The quiescent point, then the runtime state that every rank saves:
    //    agreed, so that either every rank writes or none does.
    weft_drain_result_t drained{};
    Status drain_st = weft_drain_wait(ctx, plan[2], 0, &drained);
    std::vector<uint8_t> snapshot;
    group::SnapshotCounts counts;
    Status save_st = WEFT_OK;
    if (drain_st == WEFT_OK) {
        RuntimeLock lock(rt_);
        save_st = group::save_snapshot(rt_, region_map(), snapshot, counts);
    }
    // Worst first: a drain that failed, then a receive into no region (the
    // program's to fix), then state weft cannot save yet.
    enum : uint64_t { can_write = 0, cannot_save = 1, unregistered_receive = 2, drain_failed = 3 };
    uint64_t verdict = drain_st != WEFT_OK               ? drain_failed
                       : save_st == WEFT_OK              ? can_write
                       : save_st == WEFT_ERR_INVALID_ARG ? unregistered_receive
                                                         : cannot_save;
    if (Status st = w.max(verdict)) return st;
    prof.drain_ns = now_ns() - t0;
    if (verdict == drain_failed)
        return drain_st != WEFT_OK ? drain_st
                                   : WEFT_FAIL(WEFT_ERR_PEER_FAILED, "checkpoint: the drain failed on another rank");
    if (verdict == unregistered_receive)
        return save_st != WEFT_OK ? save_st
                                  : WEFT_FAIL(WEFT_ERR_INVALID_ARG,
                                              "checkpoint: another rank has a posted receive outside every protected "
                                              "region; nothing was written");
    if (verdict == cannot_save)
        return save_st != WEFT_OK
                   ? save_st
                   : WEFT_FAIL(WEFT_ERR_UNSUPPORTED, "checkpoint: another rank holds state weft cannot save yet");
    prof.requests = counts.requests;
    prof.receives = counts.posted;
    prof.messages = counts.buffered;
    prof.communicators = counts.comms;
    prof.groups = counts.groups;

    // 3. Every rank writes its image; rank 0 gathers how each went.
    uint32_t digest = 0;
    Status wst = write_image(dir, generation, snapshot, prof, digest);
    const uint64_t mine[3] = {uint64_t(wst), prof.bytes, digest};
    std::vector<uint64_t> gathered(3 * size_t(w.size));
    const uint64_t t_commit = now_ns();
    if (Status st = weft_allgather(w.comm, mine, 3, WEFT_UINT64, gathered.data())) {
        // A rank died: the others may still be writing, so nobody removes
        // the folder (it has no manifest: invalid, and pruned by the next
        // commit); each survivor takes back only its own image.
        ::unlink(image_path(dir, generation, rt_.rank()).c_str());
        return st;
    }
    Status first_failure = WEFT_OK;
    for (uint32_t r = 0; r < w.size && first_failure == WEFT_OK; ++r)
        first_failure = static_cast<Status>(gathered[3 * size_t(r)]);
    if (first_failure != WEFT_OK) {
        if (w.rank == 0) remove_generation(dir, generation);
        if (wst != WEFT_OK) return wst;
        return WEFT_FAIL(first_failure, "checkpoint: generation %llu: another rank could not write its image",
                         static_cast<unsigned long long>(generation));
    }

    // 4. Commit: the manifest exists only once every image does.
    uint64_t committed = WEFT_OK;
    if (w.rank == 0) committed = commit(dir, generation, gathered);
    if (Status st = w.bcast(&committed, 1)) return st;
    prof.commit_ns = now_ns() - t_commit;
    prof.total_ns = now_ns() - t0;
    if (committed != WEFT_OK) {
        if (w.rank != 0)
            WEFT_LOG(error, "checkpoint: generation %llu: rank 0 could not commit it",
                     static_cast<unsigned long long>(generation));
        return static_cast<Status>(committed);
    }
    last_ns_ = now_ns();
    last_dir_ = dir;
    last_generation_ = generation;
    if (!flush_dir_.empty()) {
        if (!flusher_) flusher_ = std::make_unique<Flusher>(rt_.rank(), rt_.size(), keep_, flush_timeout_ns_);
        flusher_->submit(dir, flush_dir_, generation);
    }
    WEFT_LOG(debug, "checkpoint: generation %llu of %s committed (%llu bytes here)",
             static_cast<unsigned long long>(generation), dir.c_str(), static_cast<unsigned long long>(prof.bytes));
    return WEFT_OK;
}

group::RegionMap Ckpt::region_map() {
    group::RegionMap m;
    m.arg = this;
    m.locate = [](void* arg, const void* addr, size_t bytes, uint32_t& id, uint64_t& offset) {
        const auto a = reinterpret_cast<uintptr_t>(addr);
        for (const auto& [rid, r] : static_cast<Ckpt*>(arg)->regions_) {
            const auto base = reinterpret_cast<uintptr_t>(r.base);
            if (a >= base && a - base <= r.size && bytes <= r.size - (a - base)) {
                id = rid;
                offset = a - base;
                return true;
            }
        }
        return false;
    };
    m.resolve = [](void* arg, uint32_t id, uint64_t offset, size_t bytes) -> void* {
        auto& regions = static_cast<Ckpt*>(arg)->regions_;
        auto it = regions.find(id);
        if (it == regions.end() || offset > it->second.size || bytes > it->second.size - offset) return nullptr;
        return static_cast<uint8_t*>(it->second.base) + offset;
    };
    return m;
}

Status Ckpt::write_image(const std::string& dir, uint64_t generation, const std::vector<uint8_t>& snapshot,
                         weft_ckpt_profile_t& prof, uint32_t& digest) {
    const uint64_t t0 = now_ns();
    Status st = make_dirs(generation_dir(dir, generation));
    if (st != WEFT_OK) return st;
    ImageHeader h;
    h.generation = generation;
    h.job_size = rt_.size();
    h.rank = rt_.rank();
    h.job_id = rt_.job();
    const bool has_snapshot = !snapshot.empty();
    h.section_count = static_cast<uint32_t>(1 + has_snapshot + regions_.size());
    h.thread_level = rt_.multi_threaded() ? 1 : 0;
    h.transport = rt_.backend().name();
    const std::vector<uint8_t> file_header = encode_file_header(h);
    const std::vector<uint8_t> runtime = encode_runtime_state(RuntimeState{rt_.universe_size(), 1});

    // The headers are built first (each holds its payload's checksum); the
    // payloads are written from where they live, never copied.
    static const uint8_t zeros[8] = {};
    std::vector<std::vector<uint8_t>> headers;
    headers.reserve(2 + regions_.size());
    headers.push_back(encode_section_header(SectionKind::runtime, 0, runtime.data(), runtime.size()));
    if (has_snapshot)
        headers.push_back(encode_section_header(SectionKind::snapshot, 0, snapshot.data(), snapshot.size()));
    for (const auto& [id, r] : regions_)
        headers.push_back(encode_section_header(SectionKind::region, id, r.base, r.size));
    std::vector<Piece> pieces{{file_header.data(), file_header.size()}};
    digest = crc32c(0, file_header.data(), file_header.size());
    auto add = [&](const std::vector<uint8_t>& header, const void* payload, size_t len) {
        digest = crc32c(digest, header.data(), header.size());
        pieces.push_back({header.data(), header.size()});
        if (len) pieces.push_back({payload, len});
        if (const size_t pad = padding_after(len)) pieces.push_back({zeros, pad});
    };
    add(headers[0], runtime.data(), runtime.size());
    size_t i = 1;
    if (has_snapshot) add(headers[i++], snapshot.data(), snapshot.size());
    for (const auto& [id, r] : regions_) add(headers[i++], r.base, r.size);
    prof.bytes = 0;
    for (const Piece& p : pieces) prof.bytes += p.len;

    WriteTimes times;
    const uint64_t t_build = now_ns() - t0;
    // The folder is fsynced once, by rank 0 before the manifest (commit),
    // not once per rank.
    st = write_durably(image_path(dir, generation, rt_.rank()), pieces, times, false, "ckpt.image.written");
    prof.write_ns = t_build + times.write_ns;
    prof.fsync_ns = times.fsync_ns;
    return st;
}

Status Ckpt::commit(const std::string& dir, uint64_t generation, const std::vector<uint64_t>& gathered) {
    Manifest m;
    m.generation = generation;
    m.job_size = rt_.size();
    m.job_id = rt_.job();
    m.ranks.resize(rt_.size());
    for (uint32_t r = 0; r < rt_.size(); ++r)
        m.ranks[r] = ManifestEntry{gathered[3 * size_t(r) + 1], static_cast<uint32_t>(gathered[3 * size_t(r) + 2])};
    const std::vector<uint8_t> bytes = encode_manifest(m);
    WriteTimes times;
    WEFT_FAULT_POINT("ckpt.commit.before");
    // Every image was renamed into the folder before the gather: one fsync
    // makes all those renames durable, then the manifest follows them.
    Status st = sync_folder(generation_dir(dir, generation));
    if (st == WEFT_OK) st = write_durably(manifest_path(dir, generation), {{bytes.data(), bytes.size()}}, times);
    if (st != WEFT_OK) {
        remove_generation(dir, generation);
        return st;
    }
    prune(dir, generation);
    return WEFT_OK;
}

void Ckpt::prune(const std::string& dir, uint64_t newest) {
    // Keeps the newest keep_ generations with a valid manifest (`newest`
    // among them); removes older committed ones and every uncommitted one
    // (left by a checkpoint that failed, or a job that died inside one).
    std::vector<uint64_t> gens;
    if (list_generations(dir, gens) != WEFT_OK) return;
    uint32_t kept = 0;
    for (uint64_t g : gens) {
        if (g > newest) continue;  // not ours to judge
        std::vector<uint8_t> bytes;
        Manifest m;
        const bool valid = read_file(manifest_path(dir, g), bytes) == WEFT_OK &&
                           parse_manifest(bytes.data(), bytes.size(), "manifest", m) == WEFT_OK;
        if (valid && kept < keep_) {
            ++kept;
            continue;
        }
        WEFT_LOG(debug, "checkpoint: removing %s generation %llu", valid ? "old" : "uncommitted",
                 static_cast<unsigned long long>(g));
        remove_generation(dir, g);
    }
}

// -------------------------------------------------------------- restart
Status Ckpt::restart(weft_context_t ctx, const std::string& dir_arg, weft_restart_info_t& info) {
    std::string dir;
    if (Status st = directory(dir_arg, dir, "weft_restart")) return st;
    std::lock_guard<std::mutex> g(mu_);
    Status st = restart_from(ctx, dir, info);
    // Nothing valid here: the second directory, when there is one (every
    // rank learnt NOT_FOUND together, so every rank tries it).
    if (st == WEFT_ERR_NOT_FOUND && !flush_dir_.empty() && flush_dir_ != dir) {
        WEFT_LOG(info, "restart: no valid generation in %s; trying the flush directory %s", dir.c_str(),
                 flush_dir_.c_str());
        const uint32_t skipped = info.skipped;
        st = restart_from(ctx, flush_dir_, info);
        info.skipped += skipped;
        if (st == WEFT_ERR_NOT_FOUND) dir += " or " + flush_dir_;
    }
    if (st == WEFT_OK) {
        // The next checkpoint into dir numbers on from here, even if it came
        // from the flush directory and dir holds only older ones.
        last_dir_ = dir;
        last_generation_ = info.generation;
    }
    if (st != WEFT_ERR_NOT_FOUND) return st;
    if (launcher_restart_)  // weft-run --restart DIR: a restart was asked for, and cannot be
        return WEFT_FAIL(WEFT_ERR_NOT_FOUND, "restart: weft-run --restart %s: no valid generation there (%u skipped)",
                         dir.c_str(), info.skipped);
    WEFT_LOG(debug, "restart: no valid generation in %s (%u skipped)", dir.c_str(), info.skipped);
    return WEFT_ERR_NOT_FOUND;
}

Status Ckpt::restart_from(weft_context_t ctx, const std::string& dir, weft_restart_info_t& info) {
    info = weft_restart_info_t{};
    const uint64_t t0 = now_ns();
    World w;
    if (Status st = w.open(ctx)) return st;

    // 1. Rank 0 lists the generations; everyone tries them in that order.
    std::array<uint64_t, 2 + max_candidates> list{};  // status, count, generations
    if (w.rank == 0) {
        std::vector<uint64_t> gens;
        const Status st = list_generations(dir, gens);
        list[0] = st;
        list[1] = std::min(gens.size(), max_candidates);
        std::copy_n(gens.begin(), list[1], list.begin() + 2);
    }
    if (Status st = w.bcast(list.data(), list.size())) return st;
    info.find_ns = now_ns() - t0;
    if (list[0] != WEFT_OK) return static_cast<Status>(list[0]);

    // 2. Newest first: every rank verifies its part; all agree on the worst.
    enum : uint64_t { valid = 0, invalid = 1, other_job_size = 2, region_mismatch = 3, state_held = 4 };
    for (uint64_t i = 0; i < list[1]; ++i) {
        const uint64_t generation = list[2 + i];
        const uint64_t t_verify = now_ns();
        const std::string image_name = image_path(dir, generation, rt_.rank());
        std::vector<uint8_t> manifest_bytes;
        MappedFile image;
        Manifest m;
        ParsedImage parsed;
        const Section* snapshot = nullptr;
        uint64_t verdict = valid;
        Status st = read_file(manifest_path(dir, generation), manifest_bytes);
        if (st == WEFT_ERR_NOT_FOUND)
            WEFT_LOG(info, "restart: generation %llu of %s was never committed (no manifest); skipped",
                     static_cast<unsigned long long>(generation), dir.c_str());
        if (st == WEFT_OK) st = parse_manifest(manifest_bytes.data(), manifest_bytes.size(), "manifest", m);
        if (st == WEFT_OK && m.generation != generation)
            st = WEFT_FAIL(WEFT_ERR_CORRUPT, "restart: the manifest of generation %llu names generation %llu",
                           static_cast<unsigned long long>(generation), static_cast<unsigned long long>(m.generation));
        if (st == WEFT_OK && m.job_size != rt_.size()) {
            WEFT_LOG(error, "restart: generation %llu of %s was written by a job of %u ranks; this job has %u",
                     static_cast<unsigned long long>(generation), dir.c_str(), m.job_size, rt_.size());
            verdict = other_job_size;
        }
        if (st == WEFT_OK && verdict == valid) {
            st = image.open(image_name);
            if (st == WEFT_ERR_NOT_FOUND)
                st = WEFT_FAIL(WEFT_ERR_CORRUPT, "restart: %s is missing from a committed generation",
                               image_name.c_str());
            const ManifestEntry& e = m.ranks[rt_.rank()];
            if (st == WEFT_OK && image.size() != e.image_bytes)
                st = WEFT_FAIL(WEFT_ERR_CORRUPT, "restart: %s has %zu bytes; its manifest says %llu (truncated?)",
                               image_name.c_str(), image.size(), static_cast<unsigned long long>(e.image_bytes));
            if (st == WEFT_OK) st = parse_image(image.data(), image.size(), image_name.c_str(), parsed);
            if (st == WEFT_OK && parsed.digest != e.digest)
                st =
                    WEFT_FAIL(WEFT_ERR_CORRUPT, "restart: %s does not match its manifest's digest", image_name.c_str());
            const ImageHeader& h = parsed.header;
            if (st == WEFT_OK && (h.generation != generation || h.rank != rt_.rank() || h.job_size != rt_.size()))
                st = WEFT_FAIL(WEFT_ERR_CORRUPT, "restart: %s holds rank %u of %u, generation %llu", image_name.c_str(),
                               h.rank, h.job_size, static_cast<unsigned long long>(h.generation));
            RuntimeState rs;
            if (st == WEFT_OK && (parsed.sections.empty() || parsed.sections[0].kind != SectionKind::runtime))
                st = WEFT_FAIL(WEFT_ERR_CORRUPT, "restart: %s has no runtime section first", image_name.c_str());
            if (st == WEFT_OK) st = parse_runtime_state(parsed.sections[0], image_name.c_str(), rs);
            // Every saved region must have a place to go, of its size.
            for (size_t s = 1; st == WEFT_OK && verdict == valid && s < parsed.sections.size(); ++s) {
                const Section& sec = parsed.sections[s];
                if (sec.kind == SectionKind::snapshot) {
                    if (snapshot)
                        st = WEFT_FAIL(WEFT_ERR_CORRUPT, "restart: %s has two runtime state sections",
                                       image_name.c_str());
                    snapshot = &sec;
                    continue;
                }
                auto it = regions_.find(sec.id);
                if (it == regions_.end() || it->second.size != sec.len) {
                    WEFT_LOG(error, "restart: generation %llu saved region %u of %llu bytes; here it is %s%zu%s",
                             static_cast<unsigned long long>(generation), sec.id,
                             static_cast<unsigned long long>(sec.len), it == regions_.end() ? "not registered" : "",
                             it == regions_.end() ? size_t(0) : it->second.size, it == regions_.end() ? "" : " bytes");
                    verdict = region_mismatch;
                }
            }
        }
        // The saved requests' buffers must have places too, and the
        // runtime must hold no state of its own to mix with them.
        group::SnapshotCounts counts;
        group::Snapshot saved_state;  // parsed once: verified here, replayed in step 4
        if (st == WEFT_OK && verdict == valid && snapshot) {
            RuntimeLock lock(rt_);
            const Status cs = group::check_snapshot(rt_, snapshot->data, snapshot->len, region_map(),
                                                    image_name.c_str(), saved_state, counts);
            if (cs == WEFT_ERR_INVALID_ARG)
                verdict = region_mismatch;
            else if (cs == WEFT_ERR_BUSY)
                verdict = state_held;
            else
                st = cs;
        }
        if (st != WEFT_OK && verdict == valid) verdict = invalid;
        if (Status ast = w.max(verdict)) return ast;
        info.verify_ns += now_ns() - t_verify;
        if (verdict == other_job_size)
            return WEFT_FAIL(WEFT_ERR_BAD_PARAM, "restart: generation %llu of %s is from a job of another size",
                             static_cast<unsigned long long>(generation), dir.c_str());
        if (verdict == region_mismatch)
            return WEFT_FAIL(WEFT_ERR_INVALID_ARG,
                             "restart: generation %llu's regions do not match the registered ones",
                             static_cast<unsigned long long>(generation));
        if (verdict == state_held)
            return WEFT_FAIL(WEFT_ERR_BUSY,
                             "restart: a rank already holds requests or messages of its own; nothing was restored");
        if (verdict == invalid) {
            WEFT_LOG(warn, "restart: generation %llu of %s is not valid on every rank; trying an older one",
                     static_cast<unsigned long long>(generation), dir.c_str());
            ++info.skipped;
            continue;
        }

        // 3. Valid everywhere: the regions take their saved bytes.
        const uint64_t t_load = now_ns();
        for (size_t s = 1; s < parsed.sections.size(); ++s) {
            const Section& sec = parsed.sections[s];
            if (sec.kind == SectionKind::region && sec.len) std::memcpy(regions_[sec.id].base, sec.data, sec.len);
        }
        info.load_ns = now_ns() - t_load;

        // 4. Replay: the requests at their places, the posted receives in
        //    posting order, the buffered messages in arrival order. The
        //    agreement after it is also the barrier that keeps every
        //    peer's new traffic behind every rank's saved messages.
        const uint64_t t_replay = now_ns();
        uint64_t replayed = WEFT_OK;
        if (snapshot) {
            RuntimeLock lock(rt_);
            replayed = group::restore_snapshot(rt_, saved_state, region_map());
        }
        if (Status ast = w.max(replayed)) return ast;
        info.replay_ns = now_ns() - t_replay;
        if (replayed != WEFT_OK)
            return WEFT_FAIL(static_cast<Status>(replayed),
                             "restart: generation %llu: the runtime state could not be put back on every rank",
                             static_cast<unsigned long long>(generation));
        info.requests = counts.requests;
        info.receives = counts.posted;
        info.messages = counts.buffered;
        info.communicators = counts.comms;
        info.groups = counts.groups;
        info.restarted = 1;
        info.generation = generation;
        info.bytes = image.size();
        info.total_ns = now_ns() - t0;
        WEFT_LOG(debug, "restart: generation %llu of %s restored", static_cast<unsigned long long>(generation),
                 dir.c_str());
        return WEFT_OK;
    }
    info.total_ns = now_ns() - t0;
    return WEFT_ERR_NOT_FOUND;
}

}  // namespace weft::ckpt
