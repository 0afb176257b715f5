// wake_latency.cpp — the floor under a drain's request delivery: how long a
// thread asleep on a futex in shared memory takes to run after another
// process changes the word and wakes it (what Drain::request does to every
// drain thread on shm). Needs no weft:
//   build/bench/wake_latency [wakes]
// Prints the median and p90 of the wake-to-running time over `wakes` (200).
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

uint64_t now_ns() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

struct Shared {
    std::atomic<uint32_t> word;      // the futex: the wake number
    std::atomic<uint64_t> woke_at;   // when the sleeper ran again
    std::atomic<uint32_t> sleeping;  // the sleeper is about to wait for this number
};

}  // namespace

int main(int argc, char** argv) {
    const int wakes = argc > 1 ? std::atoi(argv[1]) : 200;
    auto* sh =
        static_cast<Shared*>(mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
    if (sh == MAP_FAILED) return 1;
    new (sh) Shared{};
    const pid_t child = fork();
    if (child == 0) {
        for (uint32_t i = 0; i < uint32_t(wakes); ++i) {
            sh->sleeping.store(i + 1);
            // A bounded wait (1 s): a lost wake-up ends it, the sample is then an outlier.
            while (sh->word.load() == i) {
                timespec ts{1, 0};
                syscall(SYS_futex, &sh->word, FUTEX_WAIT, i, &ts, nullptr, 0);
            }
            sh->woke_at.store(now_ns());
        }
        _exit(0);
    }
    std::vector<double> us;
    for (uint32_t i = 0; i < uint32_t(wakes); ++i) {
        // Let the sleeper get into the kernel, as an idle drain thread is.
        while (sh->sleeping.load() != i + 1) usleep(100);
        usleep(2000);
        sh->woke_at.store(0);
        const uint64_t t0 = now_ns();
        sh->word.store(i + 1);
        syscall(SYS_futex, &sh->word, FUTEX_WAKE, 1, nullptr, nullptr, 0);
        while (sh->woke_at.load() == 0) usleep(50);
        us.push_back((sh->woke_at.load() - t0) / 1e3);
    }
    waitpid(child, nullptr, 0);
    std::sort(us.begin(), us.end());
    std::printf("futex wake to running, another process: median %.1f us, p90 %.1f us (%d wakes)\n", us[us.size() / 2],
                us[us.size() * 9 / 10], wakes);
    return 0;
}
