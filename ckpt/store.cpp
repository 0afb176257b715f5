// store.cpp — see store.hpp.
#include "ckpt/store.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <climits>
#include <cstring>

namespace weft::ckpt {
namespace {

constexpr const char* generation_prefix = "gen-";
// Bytes per read or write call. On this kind of machine one call's cost
// grows faster than its size past 1 MiB (dd, 64 MiB from the page cache:
// 15.6 GB/s in 256 KiB calls, 684 MB/s in 32 MiB calls; writes 6.8 GB/s
// against 351 MB/s in one 64 MiB call; bench/RESULTS.md "Checkpoint").
constexpr size_t io_chunk = 256 * 1024;
// Bytes written between two starts of writeback (write_all).
constexpr uint64_t writeback_every = 8ull << 20;

// Closes a descriptor when it goes out of scope.
struct Fd {
    int fd = -1;
    explicit Fd(int f) : fd(f) {}
    ~Fd() {
        if (fd >= 0) ::close(fd);
    }
    Fd(const Fd&) = delete;
    Fd& operator=(const Fd&) = delete;
};

Status io_failure(const char* call, const std::string& path, int err) {
    return WEFT_FAIL(WEFT_ERR_IO, "checkpoint: %s %s: %s", call, path.c_str(), std::strerror(err));
}

std::string folder_of(const std::string& path) {
    const size_t slash = path.rfind('/');
    if (slash == std::string::npos) return ".";
    return slash == 0 ? "/" : path.substr(0, slash);
}

Status write_all(int fd, const std::vector<Piece>& pieces, const std::string& path) {
    uint64_t written = 0, flushed = 0;
    for (const Piece& p : pieces) {
        const auto* at = static_cast<const uint8_t*>(p.data);
        size_t left = p.len;
        while (left > 0) {
            const ssize_t n = ::write(fd, at, std::min(left, io_chunk));
            if (n < 0) {
                if (errno == EINTR) continue;
                return io_failure("write", path, errno);
            }
            at += n;
            left -= static_cast<size_t>(n);
            written += static_cast<uint64_t>(n);
            // Start the disk on what is written while the rest is: the
            // fsync then waits for the tail only, and the page cache never
            // holds enough dirty pages to throttle the writer.
            if (written - flushed >= writeback_every) {
                ::sync_file_range(fd, static_cast<off_t>(flushed), static_cast<off_t>(written - flushed),
                                  SYNC_FILE_RANGE_WRITE);
                flushed = written;
            }
        }
    }
    return WEFT_OK;
}

// Opens an existing regular file to read it. WEFT_ERR_NOT_FOUND, logged at
// debug only (a generation may lack a file: never committed), or WEFT_ERR_IO.
Status open_regular(const std::string& path, Fd& f, size_t& size) {
    f.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (f.fd < 0) {
        if (errno == ENOENT) {
            WEFT_LOG(debug, "checkpoint: %s does not exist", path.c_str());
            return WEFT_ERR_NOT_FOUND;
        }
        return io_failure("open", path, errno);
    }
    struct stat st {};
    if (::fstat(f.fd, &st) != 0) return io_failure("fstat", path, errno);
    if (!S_ISREG(st.st_mode)) return WEFT_FAIL(WEFT_ERR_IO, "checkpoint: %s is not a regular file", path.c_str());
    size = static_cast<size_t>(st.st_size);
    return WEFT_OK;
}

}  // namespace

Status sync_folder(const std::string& folder) {
    Fd d(::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (d.fd < 0) return io_failure("open", folder, errno);
    if (::fsync(d.fd) != 0) return io_failure("fsync", folder, errno);
    return WEFT_OK;
}

std::string generation_dir(const std::string& dir, uint64_t generation) {
    char name[32];
    std::snprintf(name, sizeof name, "%s%020" PRIu64, generation_prefix, generation);
    return dir + "/" + name;
}

std::string image_path(const std::string& dir, uint64_t generation, uint32_t rank) {
    char name[32];
    std::snprintf(name, sizeof name, "/rank-%06u.img", rank);
    return generation_dir(dir, generation) + name;
}

std::string manifest_path(const std::string& dir, uint64_t generation) {
    return generation_dir(dir, generation) + "/MANIFEST";
}

Status make_dirs(const std::string& path) {
    if (path.empty()) return WEFT_FAIL(WEFT_ERR_INVALID_ARG, "checkpoint: an empty directory name");
    for (size_t i = 1; i <= path.size(); ++i) {
        if (i != path.size() && path[i] != '/') continue;
        const std::string prefix = path.substr(0, i);
        if (::mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST) return io_failure("mkdir", prefix, errno);
    }
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) return io_failure("stat", path, errno);
    if (!S_ISDIR(st.st_mode)) return WEFT_FAIL(WEFT_ERR_IO, "checkpoint: %s is not a directory", path.c_str());
    return WEFT_OK;
}

Status list_generations(const std::string& dir, std::vector<uint64_t>& out) {
    out.clear();
    DIR* d = ::opendir(dir.c_str());
    if (!d) {
        if (errno == ENOENT) return WEFT_OK;
        return io_failure("opendir", dir, errno);
    }
    const size_t prefix = std::strlen(generation_prefix);
    while (const dirent* e = ::readdir(d)) {
        const char* name = e->d_name;
        if (std::strncmp(name, generation_prefix, prefix) != 0) continue;
        const char* digits = name + prefix;
        if (!*digits || std::strspn(digits, "0123456789") != std::strlen(digits) || std::strlen(digits) > 20)
            continue;  // not ours
        errno = 0;
        const unsigned long long g = std::strtoull(digits, nullptr, 10);
        if (errno == 0 && g > 0) out.push_back(g);
    }
    ::closedir(d);
    std::sort(out.rbegin(), out.rend());
    return WEFT_OK;
}

Status write_durably(const std::string& path, const std::vector<Piece>& pieces, WriteTimes& times, bool sync_folder_too,
                     const char* fault_point) {
    const std::string tmp = path + ".tmp";
    Status st = WEFT_OK;
    {
        Fd f(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
        if (f.fd < 0) return io_failure("open", tmp, errno);
        const uint64_t t0 = now_ns();
        st = write_all(f.fd, pieces, tmp);
        const uint64_t t1 = now_ns();
        times.write_ns += t1 - t0;
        if (fault_point) WEFT_FAULT_POINT(fault_point);
        if (st == WEFT_OK && ::fsync(f.fd) != 0) st = io_failure("fsync", tmp, errno);
        const int closed = ::close(f.fd);  // NFS reports late write errors here
        f.fd = -1;
        if (st == WEFT_OK && closed != 0) st = io_failure("close", tmp, errno);
        times.fsync_ns += now_ns() - t1;
    }
    if (st == WEFT_OK) {
        const uint64_t t0 = now_ns();
        if (::rename(tmp.c_str(), path.c_str()) != 0) st = io_failure("rename", tmp, errno);
        if (st == WEFT_OK && sync_folder_too) st = sync_folder(folder_of(path));
        times.fsync_ns += now_ns() - t0;
    }
    if (st != WEFT_OK) ::unlink(tmp.c_str());
    return st;
}

Status read_file(const std::string& path, std::vector<uint8_t>& out) {
    out.clear();
    Fd f(-1);
    size_t size = 0;
    if (Status st = open_regular(path, f, size)) return st;
    out.resize(size);
    size_t got = 0;
    while (got < out.size()) {
        const ssize_t n = ::read(f.fd, out.data() + got, std::min(out.size() - got, io_chunk));
        if (n < 0) {
            if (errno == EINTR) continue;
            return io_failure("read", path, errno);
        }
        if (n == 0) break;  // shrank while we read: the parser sees the truncation
        got += static_cast<size_t>(n);
    }
    out.resize(got);
    return WEFT_OK;
}

Status MappedFile::open(const std::string& path) {
    close();
    Fd f(-1);
    size_t size = 0;
    if (Status st = open_regular(path, f, size)) return st;
    if (size == 0) return WEFT_OK;  // empty: nothing to map (the parser says truncated)
    void* p = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, f.fd, 0);
    if (p == MAP_FAILED) return io_failure("mmap", path, errno);
    data_ = static_cast<const uint8_t*>(p);
    size_ = size;
    return WEFT_OK;
}

void MappedFile::close() {
    if (data_) ::munmap(const_cast<uint8_t*>(data_), size_);
    data_ = nullptr;
    size_ = 0;
}

void remove_generation(const std::string& dir, uint64_t generation) {
    const std::string folder = generation_dir(dir, generation);
    DIR* d = ::opendir(folder.c_str());
    if (!d) return;
    std::vector<std::string> names;
    while (const dirent* e = ::readdir(d))
        if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) names.emplace_back(e->d_name);
    ::closedir(d);
    for (const std::string& n : names) {
        const std::string p = folder + "/" + n;
        if (::unlink(p.c_str()) != 0 && errno != ENOENT)
            WEFT_LOG(warn, "checkpoint: cannot remove %s: %s", p.c_str(), std::strerror(errno));
    }
    if (::rmdir(folder.c_str()) != 0 && errno != ENOENT)
        WEFT_LOG(warn, "checkpoint: cannot remove %s: %s", folder.c_str(), std::strerror(errno));
}

}  // namespace weft::ckpt
