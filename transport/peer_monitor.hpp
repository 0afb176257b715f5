// peer_monitor.hpp — sees the death of processes on this host at once.
//
// One thread per context blocks in poll() on a pidfd per same-host peer
// (Linux ≥ 5.3) plus an eventfd used to stop it. A pidfd becomes readable
// the moment its process exits, however it died, so a SIGKILLed peer is
// declared failed within microseconds — without any heartbeat traffic and
// without the transport noticing (UCX over shm never does).
#pragma once

#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

namespace weft {

class PeerMonitor {
public:
    ~PeerMonitor() { stop(); }
    // on_death(peer) runs on the monitor thread.
    // Returns false (and logs) if pidfds are unavailable.
    bool start(const std::vector<std::pair<uint32_t, int32_t>>& peer_pids,
               std::function<void(uint32_t)> on_death);
    void stop();

private:
    void run();
    std::thread thread_;
    int stop_fd_ = -1;
    std::vector<int> pidfds_;
    std::vector<uint32_t> peers_;
    std::function<void(uint32_t)> on_death_;
};

}  // namespace weft
