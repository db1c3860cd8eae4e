// End to end: the real gpupoolctl binary against a real gpupoold (its embedded PostgreSQL, gRPC
// on loopback): `tenants` and `quotas` as a script sees them — stdout, stderr, exit codes and
// JSON — and the same state after the daemon restarts.
#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "gpupool/v1/tenants.pb.h"
#include "tests/cmd/run_ctl.h"
#include "tests/support/daemon_process.h"

namespace gpupool::ctltest {
namespace {

using gpupool::testing::DaemonProcess;

class GpupoolctlTenants : public ::testing::Test {
 protected:
  // The secure default end to end: gpupoold with TLS and its generated admin credential, and
  // gpupoolctl finding both through the settings file `login --data-dir` wrote.
  void SetUp() override {
    Result<std::unique_ptr<DaemonProcess>> d =
        DaemonProcess::Start({.data_dir = "", .extra_args = {}, .secure = true});
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    daemon_ = std::move(d).value();
    Result<std::string> home = gpupool::testing::MakeTempDir("gpupoolctl-home");
    ASSERT_TRUE(home.ok());
    env_ = {"HOME=" + *home};
    Outcome o = RunCtl(
        {"login", "--server", daemon_->grpc_address(), "--data-dir", daemon_->data_dir()}, env_);
    ASSERT_EQ(o.exit, 0) << Dump(o);
  }

  // gpupoolctl ARGS... with the saved settings (server, CA, admin credential).
  Outcome Ctl(std::vector<std::string> args) { return RunCtl(args, env_); }

  std::vector<std::string> env_;
  // Runs a command that must succeed and returns its stdout.
  std::string Ok(std::vector<std::string> args) {
    Outcome o = Ctl(std::move(args));
    EXPECT_EQ(o.exit, 0) << Dump(o);
    return o.out;
  }

  std::unique_ptr<DaemonProcess> daemon_;
};

TEST_F(GpupoolctlTenants, TenantsAndQuotasLifecycleSurvivesARestart) {
  Ok({"pools", "create", "gpu", "--sharing", "fractional"});
  EXPECT_EQ(Ok({"tenants", "create", "acme"}), "tenant acme created\n");
  Ok({"tenants", "create", "acme/research"});
  Ok({"tenants", "create", "acme/research/alice"});

  Outcome o = Ctl({"tenants", "create", "acme"});
  EXPECT_EQ(o.exit, 7) << Dump(o);
  EXPECT_EQ(o.err, "gpupoolctl: ALREADY_EXISTS: tenant 'acme' already exists\n");
  o = Ctl({"tenants", "create", "globex/llm"});
  EXPECT_EQ(o.exit, 4) << Dump(o);
  EXPECT_EQ(o.err,
            "gpupoolctl: FAILED_PRECONDITION: tenant 'globex/llm': parent 'globex' does not "
            "exist; create it first\n");
  o = Ctl({"tenants", "create", "Acme"});
  EXPECT_EQ(o.exit, 4) << Dump(o);
  EXPECT_EQ(o.err,
            "gpupoolctl: INVALID_ARGUMENT: tenant.path: 'Acme': segment 1 'Acme' must match "
            "[a-z0-9][a-z0-9-_.]*\n");

  EXPECT_EQ(
      Ok({"quotas", "set", "acme", "gpu", "--guaranteed", "tflops=1000,vram=400GiB", "--limit",
          "tflops=4000,devices=8"}),
      "quota of acme in pool gpu set: guaranteed 1000 TFLOPS, 400GiB VRAM; limit 4000 TFLOPS, "
      "8 devices\n");
  // A child above its parent: refused (exit 4), naming the quota.
  o = Ctl({"quotas", "set", "acme/research", "gpu", "--limit", "tflops=5000"});
  EXPECT_EQ(o.exit, 4) << Dump(o);
  EXPECT_EQ(o.err,
            "gpupoolctl: FAILED_PRECONDITION: quota of acme/research in pool gpu: limit 5000 "
            "TFLOPS exceeds the limit of parent acme (4000 TFLOPS)\n");
  EXPECT_EQ(Ok({"quotas", "set", "acme/research", "gpu", "--guaranteed", "sku=medium,count=2"}),
            "quota of acme/research in pool gpu set: guaranteed 400 TFLOPS, 80GiB VRAM; limit "
            "unlimited\n");
  o = Ctl({"quotas", "set", "acme", "gpu"});  // usage: nothing sent
  EXPECT_EQ(o.exit, 2) << Dump(o);

  EXPECT_EQ(
      Ok({"quotas", "list"}),
      "TENANT          POOL   GUARANTEED                 LIMIT                    USED   "
      "BORROWED\n"
      "acme            gpu    1000 TFLOPS, 400GiB VRAM   4000 TFLOPS, 8 devices   0      0\n"
      "acme/research   gpu    400 TFLOPS, 80GiB VRAM     unlimited                0      0\n");
  v1::ListQuotasResponse quotas;
  std::string json = Ok({"-o", "json", "quotas", "list", "--tenant", "acme/research"});
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(json, &quotas).ok()) << json;
  ASSERT_EQ(quotas.quotas_size(), 1);
  EXPECT_EQ(quotas.quotas(0).guaranteed().resources().vram_mib(), 81'920);
  EXPECT_NE(Ok({"-o", "yaml", "quotas", "get", "acme", "gpu"}).find("tenant: acme\n"),
            std::string::npos);
  o = Ctl({"quotas", "get", "acme/research/alice", "gpu"});
  EXPECT_EQ(o.exit, 3) << Dump(o);
  EXPECT_EQ(o.err,
            "gpupoolctl: NOT_FOUND: quota of 'acme/research/alice' in pool 'gpu' not found\n");

  std::string acme = Ok({"tenants", "get", "acme"});
  EXPECT_EQ(acme.rfind("Path:     acme\nCreated:  ", 0), 0u) << acme;
  EXPECT_NE(acme.find("Quotas:   1\n\n"
                      "POOL   GUARANTEED                 LIMIT                    USED   BORROWED\n"
                      "gpu    1000 TFLOPS, 400GiB VRAM   4000 TFLOPS, 8 devices   0      0\n"),
            std::string::npos)
      << acme;
  std::string list = Ok({"tenants", "list", "--prefix", "acme/research"});
  EXPECT_EQ(list.rfind("PATH                  QUOTAS   AGE\n"
                       "acme/research         gpu      ",
                       0),
            0u)
      << list;
  EXPECT_NE(list.find("\nacme/research/alice   -        "), std::string::npos) << list;

  o = Ctl({"tenants", "delete", "acme"});
  EXPECT_EQ(o.exit, 4) << Dump(o);
  EXPECT_EQ(o.err,
            "gpupoolctl: FAILED_PRECONDITION: tenant 'acme' still has child 'acme/research'; "
            "delete the children first\n");
  EXPECT_EQ(Ok({"quotas", "delete", "acme/research", "gpu"}),
            "quota of acme/research in pool gpu deleted\n");
  EXPECT_EQ(Ok({"tenants", "delete", "acme/research/alice"}),
            "tenant acme/research/alice deleted\n");

  // What was acknowledged is there after a restart.
  ASSERT_EQ(daemon_->Stop(), 0) << daemon_->LogTail(20);
  Status restarted = daemon_->Restart();
  ASSERT_TRUE(restarted.ok()) << restarted.ToString();
  v1::ListTenantsResponse tenants;
  json = Ok({"-o", "json", "tenants", "list"});
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(json, &tenants).ok()) << json;
  ASSERT_EQ(tenants.tenants_size(), 2);
  EXPECT_EQ(tenants.tenants(0).path(), "acme");
  EXPECT_EQ(tenants.tenants(1).path(), "acme/research");
  ASSERT_EQ(tenants.tenants(0).quotas_size(), 1);
  EXPECT_EQ(tenants.tenants(0).quotas(0).limit().devices(), 8);
  EXPECT_EQ(tenants.tenants(1).quotas_size(), 0);
}

}  // namespace
}  // namespace gpupool::ctltest
