// The backend registry (transport/registry.hpp): one entry per backend with
// built from the build's configuration and a viability probe; auto's rule
// (docs/transports.md); an explicit choice that cannot run here fails with
// a status and the probe's reason.
#include "transport/registry.hpp"

#include <weft/config.hpp>
#include <weft/weft.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>

namespace {

// An RDMA device as the kernel lists it; verbs is viable only with one.
bool rdma_device_present() {
    std::error_code ec;
    return std::filesystem::exists("/sys/class/infiniband", ec) &&
           !std::filesystem::is_empty("/sys/class/infiniband", ec);
}

void clear_launcher_env() {
    for (const char* v : {"WEFT_BOOTSTRAP", "WEFT_SECRET", "WEFT_JOB_SIZES", "WEFT_JOB", "WEFT_RANK", "PMIX_RANK",
                          "PMIX_NAMESPACE", "WEFT_TRANSPORT", "WEFT_FAULT_POINTS", "WEFT_VERBS_DEVICE"})
        unsetenv(v);
}

TEST(Registry, ListsEveryBackendWithItsBuild) {
    const auto reg = weft::backend_registry();
    ASSERT_EQ(reg.size(), 3u);
    EXPECT_STREQ(reg[0].name, "shm");
    EXPECT_STREQ(reg[1].name, "ucx");
    EXPECT_STREQ(reg[2].name, "verbs");
    EXPECT_TRUE(reg[0].built);
    EXPECT_EQ(reg[1].built, WEFT_HAVE_UCX != 0);
    EXPECT_EQ(reg[2].built, WEFT_HAVE_VERBS != 0);
    EXPECT_EQ(weft::find_backend("ucx"), &reg[1]);
    EXPECT_EQ(weft::find_backend("rdma"), nullptr);
    EXPECT_EQ(weft::backend_names(), "shm, ucx, verbs");
}

TEST(Registry, ShmIsViable) {
    std::string why;
    EXPECT_EQ(weft::find_backend("shm")->viable(why), WEFT_OK);
    EXPECT_FALSE(why.empty());
}

TEST(Registry, VerbsViableOnlyWithADevice) {
    const weft::BackendEntry* v = weft::find_backend("verbs");
    if (!v->built) GTEST_SKIP() << "verbs not built";
    clear_launcher_env();
    std::string why;
    const weft_status_t st = v->viable(why);
    EXPECT_FALSE(why.empty());
    if (!rdma_device_present()) {
        EXPECT_EQ(st, WEFT_ERR_UNSUPPORTED) << why;
    }
    setenv("WEFT_VERBS_DEVICE", "no_such_dev0", 1);
    EXPECT_EQ(v->viable(why), rdma_device_present() ? WEFT_ERR_NOT_FOUND : WEFT_ERR_UNSUPPORTED) << why;
    setenv("WEFT_VERBS_DEVICE", "rxe0:0", 1);
    EXPECT_EQ(v->viable(why), WEFT_ERR_INVALID_ARG) << why;
    unsetenv("WEFT_VERBS_DEVICE");
}

TEST(Registry, AutoRule) {
    // One host: shm, whatever the devices.
    EXPECT_STREQ(weft::auto_backend(true, false)->name, "shm");
    EXPECT_STREQ(weft::auto_backend(true, true)->name, "shm");
    // Several hosts: verbs where every rank can use it, else ucx if built.
    EXPECT_STREQ(weft::auto_backend(false, true)->name, "verbs");
    const weft::BackendEntry* fallback = weft::auto_backend(false, false);
    if (WEFT_HAVE_UCX) {
        ASSERT_NE(fallback, nullptr);
        EXPECT_STREQ(fallback->name, "ucx");
    } else {
        EXPECT_EQ(fallback, nullptr);
    }
}

TEST(Registry, AutoPicksShmForASingleton) {
    clear_launcher_env();
    weft_context_t ctx = nullptr;
    ASSERT_EQ(weft_init(&ctx), WEFT_OK);
    weft_caps_t caps;
    ASSERT_EQ(weft_query_caps(ctx, &caps), WEFT_OK);
    EXPECT_STREQ(caps.transport, "shm");
    EXPECT_EQ(weft_finalize(ctx), WEFT_OK);
}

TEST(Registry, UnviableExplicitChoiceFailsWithItsReason) {
    if (!WEFT_HAVE_VERBS) GTEST_SKIP() << "verbs not built";
    if (rdma_device_present()) GTEST_SKIP() << "this host has an RDMA device: verbs is viable";
    clear_launcher_env();
    setenv("WEFT_TRANSPORT", "verbs", 1);
    weft_context_t ctx = nullptr;
    testing::internal::CaptureStderr();
    const weft_status_t st = weft_init(&ctx);
    const std::string err = testing::internal::GetCapturedStderr();
    unsetenv("WEFT_TRANSPORT");
    EXPECT_EQ(st, WEFT_ERR_UNSUPPORTED);
    EXPECT_EQ(ctx, nullptr);
    EXPECT_NE(err.find("WEFT_TRANSPORT=verbs cannot run on this host: "), std::string::npos) << err;
}

}  // namespace
