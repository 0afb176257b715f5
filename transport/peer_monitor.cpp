// peer_monitor.cpp — pidfd watcher (see peer_monitor.hpp).
#include "transport/peer_monitor.hpp"

#include "transport/common.hpp"

#include <cerrno>
#include <cstring>
#include <csignal>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace weft {

namespace {
int pidfd_open(int32_t pid) { return static_cast<int>(syscall(SYS_pidfd_open, pid, 0)); }
}  // namespace

bool PeerMonitor::start(const std::vector<std::pair<uint32_t, int32_t>>& peer_pids,
                        std::function<void(uint32_t)> on_death, bool watch) {
    on_death_ = std::move(on_death);
    stop_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (stop_fd_ < 0) {
        WEFT_LOG(error, "eventfd: %s", std::strerror(errno));
        return false;
    }
    for (auto [peer, pid] : peer_pids) {
        int fd = pidfd_open(pid);
        if (fd < 0) {
            if (errno == ESRCH) {
                // Already gone before we looked: report it straight away.
                if (watch) on_death_(peer);
                continue;
            }
            WEFT_LOG(warn, "pidfd_open(%d): %s; local death of peer %u will not be seen at once", static_cast<int>(pid),
                     std::strerror(errno), peer);
            continue;
        }
        pidfds_.push_back(fd);
        peers_.push_back(peer);
    }
    if (watch) thread_ = std::thread([this] { run(); });
    return true;
}

bool PeerMonitor::kill(uint32_t peer) const {
    for (size_t i = 0; i < peers_.size(); ++i) {
        if (peers_[i] != peer) continue;
        if (syscall(SYS_pidfd_send_signal, pidfds_[i], SIGKILL, nullptr, 0) == 0) return true;
        if (errno != ESRCH) WEFT_LOG(warn, "pidfd_send_signal(SIGKILL) to peer %u: %s", peer, std::strerror(errno));
        return false;
    }
    return false;
}

void PeerMonitor::stop() {
    if (thread_.joinable()) {
        uint64_t one = 1;
        ssize_t r = write(stop_fd_, &one, sizeof one);
        (void)r;
        thread_.join();
    }
    for (int fd : pidfds_) close(fd);
    pidfds_.clear();
    peers_.clear();
    if (stop_fd_ >= 0) close(stop_fd_);
    stop_fd_ = -1;
}

void PeerMonitor::run() {
    std::vector<pollfd> fds;
    fds.push_back({stop_fd_, POLLIN, 0});
    for (int fd : pidfds_) fds.push_back({fd, POLLIN, 0});
    // Ends: stop() makes stop_fd_ (fds[0]) readable; a failed poll ends
    // the thread too. poll has no timeout on purpose: this thread has
    // nothing else to do, and stop() wakes it.
    for (;;) {
        int r = poll(fds.data(), fds.size(), -1);
        if (r < 0) {
            if (errno == EINTR) continue;
            WEFT_LOG(error, "peer monitor poll: %s", std::strerror(errno));
            return;
        }
        if (fds[0].revents) return;
        for (size_t i = 1; i < fds.size(); ++i) {
            if (fds[i].fd >= 0 && fds[i].revents) {
                on_death_(peers_[i - 1]);
                fds[i].fd = -fds[i].fd - 1;  // stop watching; poll ignores negative fds
            }
        }
    }
}

}  // namespace weft
