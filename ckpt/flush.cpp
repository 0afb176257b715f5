// flush.cpp — see flush.hpp.
#include "ckpt/flush.hpp"

#include "ckpt/format.hpp"
#include "ckpt/store.hpp"

#include <unistd.h>

namespace weft::ckpt {

Flusher::Flusher(uint32_t rank, uint32_t size, uint32_t keep, uint64_t peer_timeout_ns)
    : rank_(rank), size_(size), keep_(keep), peer_timeout_ns_(peer_timeout_ns) {}

Flusher::~Flusher() {
    {
        std::lock_guard<std::mutex> g(mu_);
        stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
}

void Flusher::submit(const std::string& from, const std::string& to, uint64_t generation) {
    {
        std::lock_guard<std::mutex> g(mu_);
        if (has_job_)  // not started: the newer generation supersedes it
            outcomes_[next_.generation] = Outcome{WEFT_ERR_NOT_FOUND, true, 0, 0};
        next_ = Job{from, to, generation};
        has_job_ = true;
        outcomes_.erase(generation);
        // Only the last few outcomes are asked for.
        while (outcomes_.size() > 16) outcomes_.erase(outcomes_.begin());
        if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
    }
    cv_.notify_all();
}

Status Flusher::wait(uint64_t generation, Deadline d, uint64_t* copy_ns, uint64_t* verify_ns) {
    std::unique_lock<std::mutex> g(mu_);
    for (;;) {
        auto it = outcomes_.find(generation);
        if (it != outcomes_.end() && it->second.done) {
            if (copy_ns) *copy_ns = it->second.copy_ns;
            if (verify_ns) *verify_ns = it->second.verify_ns;
            return it->second.status;
        }
        const bool pending = (has_job_ && next_.generation == generation) || it != outcomes_.end();
        if (!pending)
            return WEFT_FAIL(WEFT_ERR_NOT_FOUND, "checkpoint flush: generation %llu was never handed to the flush",
                             static_cast<unsigned long long>(generation));
        if (d.passed())
            return WEFT_FAIL(WEFT_ERR_TIMEOUT, "checkpoint flush: generation %llu not flushed within the deadline",
                             static_cast<unsigned long long>(generation));
        cv_.wait_for(g, std::chrono::nanoseconds(std::min<uint64_t>(d.remaining_ns(), 100000000)));
    }
}

bool Flusher::superseded(uint64_t generation) {
    std::lock_guard<std::mutex> g(mu_);
    return has_job_ && next_.generation > generation;
}

void Flusher::run() {
    for (;;) {
        Job j;
        {
            std::unique_lock<std::mutex> g(mu_);
            cv_.wait(g, [&] { return stop_ || has_job_; });
            if (!has_job_) return;  // stopping, nothing left
            j = next_;
            has_job_ = false;
            outcomes_[j.generation] = Outcome{};  // started, not done
        }
        Outcome out;
        out.status = flush(j, out);
        out.done = true;
        {
            std::lock_guard<std::mutex> g(mu_);
            outcomes_[j.generation] = out;
        }
        cv_.notify_all();
        if (out.status == WEFT_OK)
            WEFT_LOG(debug, "checkpoint flush: generation %llu of %s is in %s",
                     static_cast<unsigned long long>(j.generation), j.from.c_str(), j.to.c_str());
    }
}

Status Flusher::flush(const Job& j, Outcome& out) {
    // The manifest names every rank's image size and digest: each copy must
    // match them, and it is the last file the flush writes.
    const uint64_t t0 = now_ns();
    std::vector<uint8_t> manifest_bytes;
    Manifest m;
    Status st = read_file(manifest_path(j.from, j.generation), manifest_bytes);
    if (st == WEFT_OK) st = parse_manifest(manifest_bytes.data(), manifest_bytes.size(), "flush: manifest", m);
    if (st == WEFT_OK && (m.generation != j.generation || m.ranks.size() != size_))
        st = WEFT_FAIL(WEFT_ERR_CORRUPT, "checkpoint flush: the manifest of generation %llu of %s is not its own",
                       static_cast<unsigned long long>(j.generation), j.from.c_str());
    out.copy_ns = now_ns() - t0;
    if (st == WEFT_OK) st = copy_own(j, m, out);
    if (st == WEFT_OK && rank_ == 0) st = commit(j, m, manifest_bytes, out);
    return st;
}

Status Flusher::copy_own(const Job& j, const Manifest& m, Outcome& out) {
    const uint64_t t0 = now_ns();
    MappedFile image;
    Status st = image.open(image_path(j.from, j.generation, rank_));
    if (st == WEFT_OK) st = make_dirs(generation_dir(j.to, j.generation));
    WriteTimes times;
    const std::string to = image_path(j.to, j.generation, rank_);
    if (st == WEFT_OK) st = write_durably(to, {{image.data(), image.size()}}, times);
    image.close();
    out.copy_ns += now_ns() - t0;
    if (st != WEFT_OK) return st;
    const uint64_t t1 = now_ns();
    st = verify(to, j.generation, rank_, m.ranks[rank_].image_bytes, m.ranks[rank_].digest);
    out.verify_ns = now_ns() - t1;
    return st;
}

Status Flusher::verify(const std::string& path, uint64_t generation, uint32_t rank, uint64_t bytes, uint32_t digest) {
    MappedFile f;
    Status st = f.open(path);
    if (st != WEFT_OK) return st;
    ParsedImage p;
    if (f.size() != bytes)
        return WEFT_FAIL(WEFT_ERR_CORRUPT, "checkpoint flush: %s has %zu bytes, its manifest says %llu", path.c_str(),
                         f.size(), static_cast<unsigned long long>(bytes));
    st = parse_image(f.data(), f.size(), path.c_str(), p);
    if (st == WEFT_OK && (p.digest != digest || p.header.generation != generation || p.header.rank != rank))
        st = WEFT_FAIL(WEFT_ERR_CORRUPT, "checkpoint flush: %s is not the image its manifest names", path.c_str());
    return st;
}

Status Flusher::commit(const Job& j, const Manifest& m, const std::vector<uint8_t>& manifest_bytes, Outcome& out) {
    const uint64_t t0 = now_ns();
    Status st = WEFT_OK;
    // Every other rank's copy, verified here once it has its final name
    // (whole: renamed only after its fsync).
    const Deadline d = Deadline::after_ns(peer_timeout_ns_);
    for (uint32_t r = 1; r < size_ && st == WEFT_OK; ++r) {
        const std::string path = image_path(j.to, j.generation, r);
        while (::access(path.c_str(), F_OK) != 0) {
            if (superseded(j.generation))
                return WEFT_FAIL(WEFT_ERR_NOT_FOUND,
                                 "checkpoint flush: generation %llu superseded before rank %u's copy arrived",
                                 static_cast<unsigned long long>(j.generation), r);
            if (d.passed())
                return WEFT_FAIL(WEFT_ERR_TIMEOUT,
                                 "checkpoint flush: rank %u's copy of generation %llu did not arrive in %s within "
                                 "WEFT_CKPT_FLUSH_TIMEOUT_S; the generation stays uncommitted there",
                                 r, static_cast<unsigned long long>(j.generation), j.to.c_str());
            ::usleep(5000);
        }
        st = verify(path, j.generation, r, m.ranks[r].image_bytes, m.ranks[r].digest);
    }
    out.verify_ns += now_ns() - t0;
    if (st != WEFT_OK) return st;
    // The images' renames are durable before the manifest exists.
    WriteTimes times;
    st = sync_folder(generation_dir(j.to, j.generation));
    if (st == WEFT_OK)
        st = write_durably(manifest_path(j.to, j.generation), {{manifest_bytes.data(), manifest_bytes.size()}}, times);
    if (st != WEFT_OK) return st;
    // Keep the newest keep_ committed generations there, as in the first
    // directory; uncommitted older ones go.
    std::vector<uint64_t> gens;
    if (list_generations(j.to, gens) == WEFT_OK) {
        uint32_t kept = 0;
        for (uint64_t g : gens) {
            if (g > j.generation) continue;
            std::vector<uint8_t> b;
            Manifest gm;
            const bool valid = read_file(manifest_path(j.to, g), b) == WEFT_OK &&
                               parse_manifest(b.data(), b.size(), "flush: manifest", gm) == WEFT_OK;
            if (valid && kept < keep_) {
                ++kept;
                continue;
            }
            remove_generation(j.to, g);
        }
    }
    return WEFT_OK;
}

}  // namespace weft::ckpt
