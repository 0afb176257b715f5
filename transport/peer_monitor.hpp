// peer_monitor.hpp — sees the death of processes on this host at once.
//
// One thread per context blocks in poll() on a pidfd per same-host peer
// (Linux ≥ 5.3) plus an eventfd used to stop it. A pidfd becomes readable
// the moment its process exits, however it died, so a SIGKILLed peer is
// declared failed within microseconds — without any heartbeat traffic and
// without the transport noticing (UCX over shm never does).
//
// The same pidfds fence: a same-host peer declared failed while it is only
// stopped could resume and write straight into mapped memory, which no
// transport can refuse, so its peers SIGKILL it through the pidfd (never by
// pid: a pidfd cannot name a recycled process).
#pragma once

#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

namespace weft {

class PeerMonitor {
public:
    ~PeerMonitor() { stop(); }
    // on_death(peer) runs on the monitor thread; with watch false no thread
    // runs and the pidfds only serve kill().
    // Returns false (and logs) if pidfds are unavailable.
    bool start(const std::vector<std::pair<uint32_t, int32_t>>& peer_pids, std::function<void(uint32_t)> on_death,
               bool watch = true);
    void stop();
    // SIGKILLs a watched peer; false if it has no pidfd (another host) or
    // the signal failed (it is gone already).
    bool kill(uint32_t peer) const;

private:
    void run();
    std::thread thread_;
    int stop_fd_ = -1;
    std::vector<int> pidfds_;
    std::vector<uint32_t> peers_;
    std::function<void(uint32_t)> on_death_;
};

}  // namespace weft
