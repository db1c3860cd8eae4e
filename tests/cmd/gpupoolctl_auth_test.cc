// End to end: bearer tokens on a real gpupoold (config file with API tokens, embedded
// PostgreSQL) as the real gpupoolctl meets them — no token, a tenant's token, an admin's — with
// the exit codes scripts rely on (6 = denied) and nothing stored by a refused call.
#include <gtest/gtest.h>

#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "tests/cmd/run_ctl.h"
#include "tests/support/daemon_process.h"

namespace gpupool::ctltest {
namespace {

using gpupool::testing::DaemonProcess;

constexpr const char* kAdminToken = "admin-token-0123456789";
constexpr const char* kTenantToken = "acme-research-token-0123";

class GpupoolctlAuth : public ::testing::Test {
 protected:
  void SetUp() override {
    Result<std::string> dir = gpupool::testing::MakeTempDir("gpupoolctl-auth");
    ASSERT_TRUE(dir.ok());
    const std::string config = *dir + "/gpupoold.yaml";
    std::ofstream(config) << "auth:\n"
                          << "  api_tokens:\n"
                          << "    - {token: \"" << kAdminToken
                          << "\", principal: ops, admin: true}\n"
                          << "    - {token: \"" << kTenantToken
                          << "\", principal: acme/research}\n";
    Result<std::unique_ptr<DaemonProcess>> d =
        DaemonProcess::Start({.data_dir = "", .extra_args = {"--config", config}, .secure = false});
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    daemon_ = std::move(d).value();
  }

  // gpupoolctl --server ADDR [--token TOKEN] ARGS...
  Outcome Ctl(const std::string& token, std::vector<std::string> args) {
    std::vector<std::string> full = {"--server", daemon_->grpc_address()};
    if (!token.empty()) full.insert(full.end(), {"--token", token});
    full.insert(full.end(), args.begin(), args.end());
    return RunCtl(full);
  }

  std::unique_ptr<DaemonProcess> daemon_;
};

TEST_F(GpupoolctlAuth, TokensDecideWhoMayDoWhat) {
  // No token, or a wrong one: UNAUTHENTICATED, exit 6.
  Outcome o = Ctl("", {"pools", "list"});
  EXPECT_EQ(o.exit, 6) << Dump(o);
  EXPECT_NE(o.err.find("UNAUTHENTICATED"), std::string::npos) << Dump(o);
  o = Ctl("not-a-known-token-at-all", {"pools", "list"});
  EXPECT_EQ(o.exit, 6) << Dump(o);

  // A tenant's token may not administer: PERMISSION_DENIED, exit 6, and nothing is created.
  o = Ctl(kTenantToken, {"pools", "create", "gpu", "--sharing", "fractional"});
  EXPECT_EQ(o.exit, 6) << Dump(o);
  EXPECT_NE(o.err.find("PERMISSION_DENIED"), std::string::npos) << Dump(o);
  o = Ctl(kAdminToken, {"pools", "get", "gpu"});
  EXPECT_EQ(o.exit, 3) << Dump(o);
  o = Ctl(kTenantToken, {"tenants", "create", "acme"});
  EXPECT_EQ(o.exit, 6) << Dump(o);

  // The admin sets up a pool and the tenant tree.
  for (std::vector<std::string> args :
       std::vector<std::vector<std::string>>{{"pools", "create", "gpu", "--sharing", "fractional"},
                                             {"tenants", "create", "acme"},
                                             {"tenants", "create", "acme/research"},
                                             {"tenants", "create", "globex"}}) {
    o = Ctl(kAdminToken, args);
    EXPECT_EQ(o.exit, 0) << Dump(o);
  }

  // The tenant submits for itself and below, not for another tenant.
  o = Ctl(kTenantToken, {"jobs", "submit", "--tenant", "acme/research/alice", "--pool", "gpu",
                         "--tflops", "10", "--vram", "1GiB", "--", "/bin/true"});
  EXPECT_EQ(o.exit, 0) << Dump(o);
  o = Ctl(kTenantToken, {"jobs", "submit", "--tenant", "globex/llm", "--pool", "gpu", "--tflops",
                         "10", "--vram", "1GiB", "--", "/bin/true"});
  EXPECT_EQ(o.exit, 6) << Dump(o);
  EXPECT_NE(o.err.find("PERMISSION_DENIED"), std::string::npos) << Dump(o);

  // It sees its own subtree's tenants and jobs only; the admin sees every job.
  o = Ctl(kTenantToken, {"tenants", "list", "-o", "json"});
  EXPECT_EQ(o.exit, 0) << Dump(o);
  EXPECT_NE(o.out.find("acme/research"), std::string::npos) << Dump(o);
  EXPECT_EQ(o.out.find("globex"), std::string::npos) << Dump(o);
  o = Ctl(kAdminToken, {"jobs", "list", "-o", "json"});
  EXPECT_EQ(o.exit, 0) << Dump(o);
  EXPECT_NE(o.out.find("acme/research/alice"), std::string::npos) << Dump(o);
  EXPECT_EQ(o.out.find("globex/llm"), std::string::npos) << "the refused job was not stored";
}

}  // namespace
}  // namespace gpupool::ctltest
