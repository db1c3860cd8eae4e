// End to end: `priority-classes list`, `skus list` and `catalog list --fleet` — the real
// gpupoolctl against a real gpupoold whose config gives the tenant acme its own class list, as a
// script sees them (tables, JSON, exit codes): an admin sees every class, a tenant the ones it
// may use, and no tenant may look at another's.
#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>

#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "gpupool/v1/pools.pb.h"
#include "tests/cmd/run_ctl.h"
#include "tests/support/daemon_process.h"

namespace gpupool::ctltest {
namespace {

using gpupool::testing::DaemonProcess;

constexpr const char* kAdminToken = "admin-token-0123456789";
constexpr const char* kAcmeToken = "acme-ml-token-0123456789";
constexpr const char* kGlobexToken = "globex-token-0123456789";

class GpupoolctlCatalog : public ::testing::Test {
 protected:
  void SetUp() override {
    Result<std::string> dir = gpupool::testing::MakeTempDir("gpupoolctl-catalog");
    ASSERT_TRUE(dir.ok());
    const std::string config = *dir + "/gpupoold.yaml";
    std::ofstream(config) << "auth:\n  api_tokens:\n"
                          << "    - {token: " << kAdminToken << ", principal: ops, admin: true}\n"
                          << "    - {token: " << kAcmeToken << ", principal: acme/ml}\n"
                          << "    - {token: " << kGlobexToken << ", principal: globex}\n"
                          << "tenants:\n"
                          << "  - {path: acme, priority_classes: [low, normal]}\n"
                          << "  - {path: acme/ml}\n"
                          << "  - {path: globex}\n";
    Result<std::unique_ptr<DaemonProcess>> d =
        DaemonProcess::Start({.data_dir = "", .extra_args = {"--config", config}});
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    daemon_ = std::move(d).value();
  }

  Outcome Ctl(const std::string& token, std::vector<std::string> args) {
    std::vector<std::string> full = {"--server", daemon_->grpc_address(), "--token", token};
    full.insert(full.end(), args.begin(), args.end());
    return RunCtl(full);
  }

  std::unique_ptr<DaemonProcess> daemon_;
};

TEST_F(GpupoolctlCatalog, PriorityClassesAreCutToWhatTheCallerMayUse) {
  Outcome o = Ctl(kAdminToken, {"priority-classes", "list"});
  ASSERT_EQ(o.exit, 0) << Dump(o);
  EXPECT_EQ(o.out,
            "NAME     VALUE   PREEMPTIBLE   MAY PREEMPT   MIN RUNTIME   DEFAULT\n"
            "system   10000   no            yes           -\n"
            "high     1000    yes           yes           1m\n"
            "normal   100     yes           no            1m            yes\n"
            "low      0       yes           no            -\n");

  // acme/ml inherits acme's list; globex has none, so the defaults (the preemptible classes up
  // to the default one).
  o = Ctl(kAcmeToken, {"-o", "json", "priority-classes", "list"});
  ASSERT_EQ(o.exit, 0) << Dump(o);
  v1::ListPriorityClassesResponse resp;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(o.out, &resp).ok()) << o.out;
  ASSERT_EQ(resp.priority_classes_size(), 2) << o.out;
  EXPECT_EQ(resp.priority_classes(0).name(), "normal");
  EXPECT_TRUE(resp.priority_classes(0).is_default());
  EXPECT_EQ(resp.priority_classes(1).name(), "low");
  EXPECT_EQ(resp.default_class(), "normal");
  o = Ctl(kGlobexToken, {"priority-classes", "list"});
  ASSERT_EQ(o.exit, 0) << Dump(o);
  EXPECT_EQ(o.out.find("system"), std::string::npos) << o.out;
  EXPECT_EQ(o.out.find("high"), std::string::npos) << o.out;  // granted, not a default
  EXPECT_NE(o.out.find("normal"), std::string::npos) << o.out;

  // An admin may ask for any tenant; a tenant not for another.
  o = Ctl(kAdminToken, {"priority-classes", "list", "--tenant", "acme/ml"});
  ASSERT_EQ(o.exit, 0) << Dump(o);
  EXPECT_EQ(o.out.find("high"), std::string::npos) << o.out;
  o = Ctl(kGlobexToken, {"priority-classes", "list", "--tenant", "acme"});
  EXPECT_EQ(o.exit, 6) << Dump(o);
  EXPECT_EQ(o.err,
            "gpupoolctl: PERMISSION_DENIED: tenant: tenant 'acme' is not 'globex' or below it\n");
}

TEST_F(GpupoolctlCatalog, SkusAndTheFleet) {
  Outcome o = Ctl(kAcmeToken, {"skus", "list"});
  ASSERT_EQ(o.exit, 0) << Dump(o);
  EXPECT_EQ(o.out,
            "NAME     REQUEST\n"
            "large    1 GPU, 16 CPU, 128GiB RAM\n"
            "medium   200 TFLOPS, 40GiB VRAM, 8 CPU, 32GiB RAM\n"
            "small    50 TFLOPS, 10GiB VRAM, 2 CPU, 8GiB RAM\n");
  o = Ctl(kAcmeToken, {"-o", "json", "skus", "list"});
  ASSERT_EQ(o.exit, 0) << Dump(o);
  v1::ListSkusResponse skus;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(o.out, &skus).ok()) << o.out;
  ASSERT_EQ(skus.skus_size(), 3);
  EXPECT_EQ(skus.skus(0).request().whole_gpus().count(), 1);

  // No agent has joined: the fleet has no GPU of any model.
  o = Ctl(kAdminToken, {"catalog", "list", "--fleet"});
  ASSERT_EQ(o.exit, 0) << Dump(o);
  EXPECT_EQ(o.out, "MODEL   VENDOR   BF16 TFLOPS   FP16 TFLOPS   VRAM   MIG PROFILES   FLEET\n");
}

TEST_F(GpupoolctlCatalog, HelpNamesTheCommands) {
  Outcome o = RunCtl({"--help"});
  ASSERT_EQ(o.exit, 0) << Dump(o);
  EXPECT_NE(o.out.find("  priority-classes list"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("  skus list"), std::string::npos) << o.out;
  o = RunCtl({"priority-classes", "list", "--help"});
  ASSERT_EQ(o.exit, 0) << Dump(o);
  EXPECT_NE(o.out.find("--tenant PATH"), std::string::npos) << o.out;
}

}  // namespace
}  // namespace gpupool::ctltest
