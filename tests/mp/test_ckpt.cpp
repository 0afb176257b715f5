// test_ckpt.cpp — weft/ckpt.h across ranks: protected regions through a
// checkpoint and a restart, generations kept and pruned, damaged or
// uncommitted generations skipped by every rank together, refusals.
// CkptJob.* run one at a time from tests/mp/ckpt_test.sh, each in its own
// job: a checkpoint written by one job and restarted by the next (also
// after a rank was killed inside the write, and into another job size).
#include "tests/mp/mp_main.hpp"

#include <weft/ckpt.h>
#include <weft/comm.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

using namespace mp;

namespace {

weft_comm_t world() {
    weft_comm_t w = nullptr;
    EXPECT_EQ(weft_comm_world(ctx, &w), WEFT_OK);
    return w;
}

// A folder every rank names the same: rank 0 makes it.
std::string shared_temp_dir() {
    char name[64] = "/tmp/weft-ckpt-mp-XXXXXX";
    if (rank == 0) {
        EXPECT_NE(mkdtemp(name), nullptr);
    }
    EXPECT_EQ(weft_bcast(world(), name, sizeof name, WEFT_BYTE, 0), WEFT_OK);
    return name;
}

std::string gen_dir(const std::string& dir, uint64_t g) {
    char name[32];
    std::snprintf(name, sizeof name, "/gen-%020llu", static_cast<unsigned long long>(g));
    return dir + name;
}

std::string image(const std::string& dir, uint64_t g, uint32_t r) {
    char name[32];
    std::snprintf(name, sizeof name, "/rank-%06u.img", r);
    return gen_dir(dir, g) + name;
}

bool exists(const std::string& path) { return access(path.c_str(), F_OK) == 0; }

// The state of rank r at step s: what a region holds.
std::vector<uint64_t> state_of(uint32_t r, uint64_t step, size_t words) {
    std::vector<uint64_t> v(words);
    for (size_t i = 0; i < words; ++i) v[i] = (uint64_t(r) << 48) ^ (step << 32) ^ (i * 0x9e3779b97f4a7c15ull);
    return v;
}

void all_meet() { ASSERT_EQ(weft_barrier(world()), WEFT_OK); }

// Regions 1 (1 MiB) and 2 (24 bytes) registered for a test, removed after.
struct Regions {
    std::vector<uint64_t> big = std::vector<uint64_t>(131072), small = std::vector<uint64_t>(3);
    Regions() {
        EXPECT_EQ(weft_ckpt_region_register(ctx, 1, big.data(), big.size() * 8), WEFT_OK);
        EXPECT_EQ(weft_ckpt_region_register(ctx, 2, small.data(), small.size() * 8), WEFT_OK);
    }
    ~Regions() {
        EXPECT_EQ(weft_ckpt_region_remove(ctx, 1), WEFT_OK);
        EXPECT_EQ(weft_ckpt_region_remove(ctx, 2), WEFT_OK);
    }
    void set(uint64_t step) {  // in place: the registered addresses stay
        const auto b = state_of(rank, step, big.size()), s = state_of(rank, step + 1000, small.size());
        std::copy(b.begin(), b.end(), big.begin());
        std::copy(s.begin(), s.end(), small.begin());
    }
    bool holds(uint64_t step) const {
        return big == state_of(rank, step, big.size()) && small == state_of(rank, step + 1000, small.size());
    }
};

void remove_tree(const std::string& dir) {
    if (rank == 0) {
        const std::string cmd = "rm -rf '" + dir + "'";
        EXPECT_EQ(std::system(cmd.c_str()), 0);
    }
}

}  // namespace

TEST(Ckpt, RegionsComeBackFromTheNewestGeneration) {
    const std::string dir = shared_temp_dir();
    Regions regions;
    weft_restart_info_t info{};
    EXPECT_EQ(weft_restart(ctx, dir.c_str(), &info), WEFT_ERR_NOT_FOUND) << "nothing to restart from: a first start";
    EXPECT_EQ(info.restarted, 0);
    for (uint64_t step = 1; step <= 3; ++step) {
        regions.set(step);
        weft_ckpt_profile_t prof{};
        ASSERT_EQ(weft_checkpoint(ctx, dir.c_str(), &prof), WEFT_OK);
        EXPECT_EQ(prof.generation, step);
        EXPECT_GT(prof.bytes, (131072 + 3) * 8u);
        EXPECT_GT(prof.total_ns, 0u);
        EXPECT_GE(prof.total_ns, prof.drain_ns);
    }
    all_meet();
    // The last two generations are kept (WEFT_CKPT_KEEP's default).
    EXPECT_FALSE(exists(gen_dir(dir, 1)));
    EXPECT_TRUE(exists(gen_dir(dir, 2) + "/MANIFEST"));
    EXPECT_TRUE(exists(gen_dir(dir, 3) + "/MANIFEST"));
    EXPECT_TRUE(exists(image(dir, 3, rank)));
    regions.set(77);
    ASSERT_EQ(weft_restart(ctx, dir.c_str(), &info), WEFT_OK);
    EXPECT_EQ(info.restarted, 1);
    EXPECT_EQ(info.generation, 3u);
    EXPECT_EQ(info.skipped, 0u);
    EXPECT_TRUE(regions.holds(3));
    // A checkpoint after a restart continues the numbering.
    weft_ckpt_profile_t prof{};
    ASSERT_EQ(weft_checkpoint(ctx, dir.c_str(), &prof), WEFT_OK);
    EXPECT_EQ(prof.generation, 4u);
    all_meet();
    EXPECT_FALSE(exists(gen_dir(dir, 2)));
    remove_tree(dir);
}

// One rank's damage makes every rank skip that generation together.
TEST(Ckpt, DamagedNewestGenerationIsSkippedByAll) {
    struct Damage {
        const char* what;
        void (*apply)(const std::string& dir);
    };
    const Damage damages[] = {
        {"a bit flipped in the last rank's image",
         [](const std::string& dir) {
             const std::string p = image(dir, 2, size - 1);
             const int fd = open(p.c_str(), O_RDWR);
             ASSERT_GE(fd, 0);
             uint8_t b = 0;
             ASSERT_EQ(pread(fd, &b, 1, 5000), 1);
             b ^= 0x04;
             ASSERT_EQ(pwrite(fd, &b, 1, 5000), 1);
             close(fd);
         }},
        {"rank 0's image truncated",
         [](const std::string& dir) { ASSERT_EQ(truncate(image(dir, 2, 0).c_str(), 100000), 0); }},
        {"the manifest gone (never committed)",
         [](const std::string& dir) { ASSERT_EQ(unlink((gen_dir(dir, 2) + "/MANIFEST").c_str()), 0); }},
        {"the manifest damaged",
         [](const std::string& dir) {
             const std::string p = gen_dir(dir, 2) + "/MANIFEST";
             const int fd = open(p.c_str(), O_WRONLY);
             ASSERT_GE(fd, 0);
             ASSERT_EQ(pwrite(fd, "X", 1, 20), 1);
             close(fd);
         }},
        {"an image gone", [](const std::string& dir) { ASSERT_EQ(unlink(image(dir, 2, size - 1).c_str()), 0); }},
    };
    Regions regions;
    for (const Damage& d : damages) {
        SCOPED_TRACE(d.what);
        const std::string dir = shared_temp_dir();
        regions.set(10);
        ASSERT_EQ(weft_checkpoint(ctx, dir.c_str(), nullptr), WEFT_OK);
        regions.set(20);
        ASSERT_EQ(weft_checkpoint(ctx, dir.c_str(), nullptr), WEFT_OK);
        all_meet();
        if (rank == 0) d.apply(dir);
        all_meet();
        regions.set(30);
        weft_restart_info_t info{};
        ASSERT_EQ(weft_restart(ctx, dir.c_str(), &info), WEFT_OK);
        EXPECT_EQ(info.generation, 1u);
        EXPECT_EQ(info.skipped, 1u);
        EXPECT_TRUE(regions.holds(10));
        // With the older one damaged too, nothing is restored and the
        // regions are left as they were.
        all_meet();
        if (rank == 0) {
            ASSERT_EQ(truncate(image(dir, 1, 0).c_str(), 64), 0);
        }
        all_meet();
        regions.set(40);
        EXPECT_EQ(weft_restart(ctx, dir.c_str(), &info), WEFT_ERR_NOT_FOUND);
        EXPECT_EQ(info.restarted, 0);
        EXPECT_EQ(info.skipped, 2u);
        EXPECT_TRUE(regions.holds(40));
        all_meet();
        remove_tree(dir);
    }
}

// State this version cannot save fails the checkpoint on every rank, before
// anything is written; once it is gone the checkpoint works.
TEST(Ckpt, UnsavedStateRefusesTheCheckpointEverywhere) {
    const std::string dir = shared_temp_dir();
    Regions regions;
    // A receive posted on one rank only.
    weft_request_t req = nullptr;
    uint64_t in = 0;
    if (rank == size - 1) {
        ASSERT_EQ(weft_irecv(world(), &in, 1, WEFT_UINT64, 0, 4242, &req), WEFT_OK);
    }
    EXPECT_EQ(weft_checkpoint(ctx, dir.c_str(), nullptr), WEFT_ERR_UNSUPPORTED);
    all_meet();
    EXPECT_FALSE(exists(gen_dir(dir, 1))) << "nothing written";
    if (rank == 0) {
        const uint64_t out = 5;
        ASSERT_EQ(weft_send(world(), &out, 1, WEFT_UINT64, size - 1, 4242), WEFT_OK);
    }
    if (rank == size - 1) {
        ASSERT_EQ(weft_request_wait(&req, nullptr), WEFT_OK);
        EXPECT_EQ(in, 5u);
    }
    // A communicator besides the world.
    weft_comm_t dup = nullptr;
    ASSERT_EQ(weft_comm_dup(world(), &dup), WEFT_OK);
    EXPECT_EQ(weft_checkpoint(ctx, dir.c_str(), nullptr), WEFT_ERR_UNSUPPORTED);
    ASSERT_EQ(weft_comm_free(&dup), WEFT_OK);
    // A message buffered at its receiver.
    if (rank == 0) {
        const uint64_t out = 6;
        ASSERT_EQ(weft_send(world(), &out, 1, WEFT_UINT64, size - 1, 4243), WEFT_OK);
    }
    EXPECT_EQ(weft_checkpoint(ctx, dir.c_str(), nullptr), WEFT_ERR_UNSUPPORTED);
    if (rank == size - 1) {
        ASSERT_EQ(weft_recv(world(), &in, 1, WEFT_UINT64, 0, 4243, nullptr), WEFT_OK);
        EXPECT_EQ(in, 6u);
    }
    weft_ckpt_profile_t prof{};
    ASSERT_EQ(weft_checkpoint(ctx, dir.c_str(), &prof), WEFT_OK);
    EXPECT_EQ(prof.generation, 1u);
    all_meet();
    remove_tree(dir);
}

TEST(Ckpt, RestartNeedsEverySavedRegionAtItsSize) {
    const std::string dir = shared_temp_dir();
    std::vector<uint8_t> a(64, 1), b(32, 2);
    ASSERT_EQ(weft_ckpt_region_register(ctx, 5, a.data(), a.size()), WEFT_OK);
    ASSERT_EQ(weft_ckpt_region_register(ctx, 6, nullptr, 0), WEFT_OK) << "an empty region";
    ASSERT_EQ(weft_checkpoint(ctx, dir.c_str(), nullptr), WEFT_OK);
    // Another size, on one rank only: refused everywhere, nothing copied.
    if (rank == 0) {
        ASSERT_EQ(weft_ckpt_region_resize(ctx, 5, b.data(), b.size()), WEFT_OK);
    }
    a.assign(64, 9);
    EXPECT_EQ(weft_restart(ctx, dir.c_str(), nullptr), WEFT_ERR_INVALID_ARG);
    EXPECT_EQ(a, std::vector<uint8_t>(64, 9));
    // Not registered at all.
    ASSERT_EQ(weft_ckpt_region_remove(ctx, 5), WEFT_OK);
    EXPECT_EQ(weft_restart(ctx, dir.c_str(), nullptr), WEFT_ERR_INVALID_ARG);
    ASSERT_EQ(weft_ckpt_region_register(ctx, 5, a.data(), a.size()), WEFT_OK);
    ASSERT_EQ(weft_restart(ctx, dir.c_str(), nullptr), WEFT_OK);
    EXPECT_EQ(a, std::vector<uint8_t>(64, 1));
    // A region registered now but not saved is left alone.
    std::vector<uint8_t> c(8, 3);
    ASSERT_EQ(weft_ckpt_region_register(ctx, 7, c.data(), c.size()), WEFT_OK);
    ASSERT_EQ(weft_restart(ctx, dir.c_str(), nullptr), WEFT_OK);
    EXPECT_EQ(c, std::vector<uint8_t>(8, 3));
    for (uint32_t id : {5u, 6u, 7u}) EXPECT_EQ(weft_ckpt_region_remove(ctx, id), WEFT_OK);
    all_meet();
    remove_tree(dir);
}

TEST(Ckpt, BadInputIsRefusedClearly) {
    uint64_t x = 0;
    EXPECT_EQ(weft_ckpt_region_register(nullptr, 1, &x, 8), WEFT_ERR_NOT_INITIALIZED);
    EXPECT_EQ(weft_ckpt_region_register(ctx, 1, nullptr, 8), WEFT_ERR_INVALID_ARG);
    EXPECT_EQ(weft_ckpt_region_resize(ctx, 99, &x, 8), WEFT_ERR_NOT_FOUND);
    EXPECT_EQ(weft_ckpt_region_remove(ctx, 99), WEFT_ERR_NOT_FOUND);
    EXPECT_EQ(weft_checkpoint(ctx, nullptr, nullptr), WEFT_ERR_INVALID_ARG);
    EXPECT_EQ(weft_checkpoint(ctx, "", nullptr), WEFT_ERR_INVALID_ARG);
    EXPECT_EQ(weft_restart(ctx, nullptr, nullptr), WEFT_ERR_INVALID_ARG);
    EXPECT_EQ(weft_checkpoint(nullptr, "/tmp", nullptr), WEFT_ERR_NOT_INITIALIZED);
    // A directory that cannot be made: every rank fails, the job goes on.
    EXPECT_EQ(weft_checkpoint(ctx, "/proc/weft-cannot-be-here", nullptr), WEFT_ERR_IO);
    // A file where the directory should be.
    const std::string dir = shared_temp_dir();
    if (rank == 0) {
        FILE* f = std::fopen((dir + "/file").c_str(), "w");
        ASSERT_NE(f, nullptr);
        std::fclose(f);
    }
    all_meet();
    EXPECT_EQ(weft_checkpoint(ctx, (dir + "/file").c_str(), nullptr), WEFT_ERR_IO);
    EXPECT_EQ(weft_restart(ctx, (dir + "/file").c_str(), nullptr), WEFT_ERR_IO);
    all_meet();
    remove_tree(dir);
}

// ------------------------------------------------- one job after another
// Run by tests/mp/ckpt_test.sh with WEFT_TEST_CKPT_DIR (and WEFT_TEST_STEP:
// the step a writer saves).
namespace {
std::string job_dir() {
    const char* d = std::getenv("WEFT_TEST_CKPT_DIR");
    return d ? d : "";
}
uint64_t job_step() {
    const char* s = std::getenv("WEFT_TEST_STEP");
    return s ? std::strtoull(s, nullptr, 10) : 1;
}
}  // namespace

TEST(CkptJob, Write) {
    if (job_dir().empty()) GTEST_SKIP() << "run by tests/mp/ckpt_test.sh (WEFT_TEST_CKPT_DIR)";
    Regions regions;
    regions.set(job_step());
    weft_ckpt_profile_t prof{};
    ASSERT_EQ(weft_checkpoint(ctx, job_dir().c_str(), &prof), WEFT_OK);
    if (rank == 0)
        std::printf("CKPT generation %llu: %llu bytes, drain %.1f us, write %.1f us, fsync %.1f us, commit %.1f us\n",
                    static_cast<unsigned long long>(prof.generation), static_cast<unsigned long long>(prof.bytes),
                    prof.drain_ns / 1e3, prof.write_ns / 1e3, prof.fsync_ns / 1e3, prof.commit_ns / 1e3);
}

// A rank is killed inside the write (fault point ckpt.image.written): the
// survivors' checkpoint fails and leaves no valid generation.
TEST(CkptJob, WriteWhileARankDies) {
    if (job_dir().empty()) GTEST_SKIP() << "run by tests/mp/ckpt_test.sh (WEFT_TEST_CKPT_DIR)";
    Regions regions;
    regions.set(job_step());
    const weft_status_t st = weft_checkpoint(ctx, job_dir().c_str(), nullptr);
    EXPECT_NE(st, WEFT_OK) << "a checkpoint that lost a rank cannot succeed";
    std::printf("CKPT rank %u: the checkpoint failed with %s\n", rank, weft_strerror(st));
}

TEST(CkptJob, Restart) {
    if (job_dir().empty()) GTEST_SKIP() << "run by tests/mp/ckpt_test.sh (WEFT_TEST_CKPT_DIR)";
    Regions regions;
    weft_restart_info_t info{};
    ASSERT_EQ(weft_restart(ctx, job_dir().c_str(), &info), WEFT_OK);
    EXPECT_TRUE(regions.holds(job_step())) << "rank " << rank << " restored generation " << info.generation;
    if (rank == 0)
        std::printf("CKPT restarted from generation %llu (%u skipped): find %.1f us, verify %.1f us, load %.1f us\n",
                    static_cast<unsigned long long>(info.generation), info.skipped, info.find_ns / 1e3,
                    info.verify_ns / 1e3, info.load_ns / 1e3);
}

// WEFT_TEST_CKPT_DIR is a 2 MiB tmpfs (ckpt_test.sh): 1 MiB per rank does
// not fit. The checkpoint fails cleanly everywhere, leaves no generation,
// and the job goes on; a checkpoint that fits then works.
TEST(CkptJob, DiskFull) {
    if (job_dir().empty()) GTEST_SKIP() << "run by tests/mp/ckpt_test.sh (WEFT_TEST_CKPT_DIR)";
    {
        Regions regions;
        regions.set(1);
        EXPECT_EQ(weft_checkpoint(ctx, job_dir().c_str(), nullptr), WEFT_ERR_IO);
        EXPECT_EQ(weft_restart(ctx, job_dir().c_str(), nullptr), WEFT_ERR_NOT_FOUND) << "no generation is valid";
        uint64_t one = 1, n = 0;
        ASSERT_EQ(weft_allreduce(world(), &one, &n, 1, WEFT_UINT64, WEFT_OP_SUM), WEFT_OK) << "the job goes on";
        EXPECT_EQ(n, size);
    }
    uint64_t small[8] = {rank, 2, 3, 4, 5, 6, 7, 8};
    ASSERT_EQ(weft_ckpt_region_register(ctx, 3, small, sizeof small), WEFT_OK);
    weft_ckpt_profile_t prof{};
    ASSERT_EQ(weft_checkpoint(ctx, job_dir().c_str(), &prof), WEFT_OK);
    EXPECT_EQ(prof.generation, 1u) << "the failed generation left nothing behind";
    small[0] = 99;
    ASSERT_EQ(weft_restart(ctx, job_dir().c_str(), nullptr), WEFT_OK);
    EXPECT_EQ(small[0], rank);
    EXPECT_EQ(weft_ckpt_region_remove(ctx, 3), WEFT_OK);
}

// Under weft-run --checkpoint-dir DIR with WEFT_CKPT_INTERVAL_S=1: NULL
// names DIR, and weft_ckpt_need says a checkpoint is due a second after the
// last one, on every rank at once (rank 0 alone waits: the allreduce
// carries its answer to the others).
TEST(CkptJob, NeedAfterTheIntervalAndTheLaunchersDirectory) {
    if (job_dir().empty()) GTEST_SKIP() << "run by tests/mp/ckpt_test.sh (WEFT_TEST_CKPT_DIR)";
    uint64_t x = rank;
    ASSERT_EQ(weft_ckpt_region_register(ctx, 4, &x, sizeof x), WEFT_OK);
    int need = -1;
    ASSERT_EQ(weft_ckpt_need(ctx, &need), WEFT_OK);
    EXPECT_EQ(need, 0) << "no time has passed";
    if (rank == 0) usleep(1200000);
    ASSERT_EQ(weft_ckpt_need(ctx, &need), WEFT_OK);
    EXPECT_EQ(need, 1) << "a second passed on rank 0";
    weft_ckpt_profile_t prof{};
    ASSERT_EQ(weft_checkpoint(ctx, nullptr, &prof), WEFT_OK);
    ASSERT_EQ(weft_ckpt_need(ctx, &need), WEFT_OK);
    EXPECT_EQ(need, 0) << "just checkpointed";
    EXPECT_EQ(weft_ckpt_need(ctx, nullptr), WEFT_ERR_INVALID_ARG);
    x = 77;
    ASSERT_EQ(weft_restart(ctx, nullptr, nullptr), WEFT_OK);
    EXPECT_EQ(x, rank);
    all_meet();
    if (rank == 0) {
        EXPECT_TRUE(exists(gen_dir(job_dir(), prof.generation) + "/MANIFEST"))
            << "written into the launcher's directory";
    }
    EXPECT_EQ(weft_ckpt_region_remove(ctx, 4), WEFT_OK);
}

TEST(CkptJob, RestartIntoAnotherSizeIsRefused) {
    if (job_dir().empty()) GTEST_SKIP() << "run by tests/mp/ckpt_test.sh (WEFT_TEST_CKPT_DIR)";
    Regions regions;
    regions.set(5);
    EXPECT_EQ(weft_restart(ctx, job_dir().c_str(), nullptr), WEFT_ERR_BAD_PARAM);
    EXPECT_TRUE(regions.holds(5));
}

int main(int argc, char** argv) { return mp::run_all(argc, argv); }
