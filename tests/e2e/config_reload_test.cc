// SIGHUP on a real gpupoold: the config file is edited, the signal sent, and the change observed
// through the API — a new priority class and pool, a changed quota, a replaced token. A broken
// file, and one the core refuses half-way, are refused naming file:line and key, and nothing of
// them is applied (the pool created before the refusal is undone). /metrics counts each outcome.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <fstream>

#include "gpupool/v1/pools.grpc.pb.h"
#include "gpupool/v1/tenants.grpc.pb.h"
#include "tests/api/http_client.h"
#include "tests/support/daemon_process.h"
#include "tests/support/wait_for.h"

namespace gpupool {
namespace {

using api::testing::HttpCall;
namespace http = boost::beast::http;

constexpr char kAdmin[] = "admin-token-0123456789";
constexpr char kAcmeOld[] = "acme-token-old-0123456789";
constexpr char kAcmeNew[] = "acme-token-new-0123456789";

// The config as a function of what the test changes.
std::string Config(const std::string& acme_token, const std::string& extra_class,
                   const std::string& extra_pool, int64_t acme_tflops,
                   const std::string& quota_pool = "train") {
  std::string y = "auth:\n  api_tokens:\n";
  y += "    - {token: " + std::string(kAdmin) + ", principal: ops, admin: true}\n";
  y += "    - {token: " + acme_token + ", principal: acme}\n";
  y += "priority_classes:\n";
  y += "  - {name: low, value: 0}\n";
  y += "  - {name: normal, value: 100}\n";
  if (!extra_class.empty()) y += "  - {name: " + extra_class + ", value: 50}\n";
  y += "pools:\n  - {name: train}\n";
  if (!extra_pool.empty()) y += "  - {name: " + extra_pool + "}\n";
  y += "tenants:\n  - path: acme\n    quotas:\n";
  y += "      - {pool: " + quota_pool + ", guaranteed: {tflops: " + std::to_string(acme_tflops) +
       "}, limit: {tflops: " + std::to_string(acme_tflops * 2) + "}}\n";
  return y;
}

class ConfigReloadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto dir = testing::MakeTempDir("gpupool-reload");
    ASSERT_TRUE(dir.ok()) << dir.status().ToString();
    dir_ = *dir;
    path_ = dir_ + "/gpupoold.yaml";
    Write(Config(kAcmeOld, "", "", 100));
    testing::DaemonProcess::Options o;
    o.extra_args = {"--config", path_};
    auto d = testing::DaemonProcess::Start(o);
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    daemon_ = std::move(d).value();
    channel_ = grpc::CreateChannel(daemon_->grpc_address(), grpc::InsecureChannelCredentials());
  }
  void TearDown() override {
    if (HasFailure() && daemon_) std::cerr << daemon_->LogTail(40);
  }

  void Write(const std::string& text) { std::ofstream(path_, std::ios::trunc) << text; }
  void Hup() { ASSERT_EQ(::kill(daemon_->pid(), SIGHUP), 0); }

  std::unique_ptr<grpc::ClientContext> Ctx(const char* token = kAdmin) {
    auto ctx = std::make_unique<grpc::ClientContext>();
    ctx->AddMetadata("authorization", std::string("Bearer ") + token);
    ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    return ctx;
  }
  std::vector<std::string> Classes(const char* token = kAdmin) {
    v1::ListPriorityClassesResponse resp;
    auto st = v1::CatalogService::NewStub(channel_)->ListPriorityClasses(
        Ctx(token).get(), v1::ListPriorityClassesRequest{}, &resp);
    std::vector<std::string> out;
    if (!st.ok()) out.push_back("error: " + st.error_message());
    for (const auto& c : resp.priority_classes()) out.push_back(c.name());
    return out;
  }
  bool HasPool(const std::string& name) {
    v1::GetPoolRequest req;
    req.set_name(name);
    v1::Pool pool;
    return v1::PoolService::NewStub(channel_)->GetPool(Ctx().get(), req, &pool).ok();
  }
  int64_t AcmeGuaranteedMilli() {
    v1::GetQuotaRequest req;
    req.set_tenant("acme");
    req.set_pool("train");
    v1::Quota q;
    auto st = v1::TenantService::NewStub(channel_)->GetQuota(Ctx().get(), req, &q);
    return st.ok() ? q.guaranteed().resources().milli_tflops() : -1;
  }
  std::string Metrics() { return HttpCall(daemon_->http_port(), http::verb::get, "/metrics").body; }
  bool Counted(const std::string& outcome, int n) {
    return Metrics().find("gpupool_config_reloads_total{outcome=\"" + outcome + "\"} " +
                          std::to_string(n)) != std::string::npos;
  }

  std::string dir_, path_;
  std::unique_ptr<testing::DaemonProcess> daemon_;
  std::shared_ptr<grpc::Channel> channel_;
};

TEST_F(ConfigReloadTest, AnEditedFileIsAppliedOnSighupAndABrokenOneChangesNothing) {
  using V = std::vector<std::string>;
  ASSERT_EQ(Classes(), (V{"normal", "low"}));
  ASSERT_EQ(Classes(kAcmeOld), (V{"normal", "low"}));
  ASSERT_EQ(AcmeGuaranteedMilli(), 100'000);
  ASSERT_FALSE(HasPool("infer"));
  EXPECT_TRUE(Counted("applied", 0)) << Metrics();

  // A new class, a new pool, a bigger quota and acme's token replaced.
  Write(Config(kAcmeNew, "batch", "infer", 300));
  Hup();
  ASSERT_TRUE(testing::WaitFor([&] { return Counted("applied", 1); }, std::chrono::seconds(30)))
      << Metrics();
  EXPECT_EQ(Classes(), (V{"normal", "batch", "low"}));
  EXPECT_TRUE(HasPool("infer"));
  EXPECT_EQ(AcmeGuaranteedMilli(), 300'000);
  EXPECT_EQ(Classes(kAcmeNew), (V{"normal", "batch", "low"}));
  EXPECT_EQ(Classes(kAcmeOld).at(0).rfind("error: ", 0), 0u) << "the old token still works";

  // A broken file: refused, naming the file, the line and the key; nothing changes.
  std::string broken = Config(kAcmeNew, "", "", 500);
  broken.replace(broken.find("{name: train}"), 13, "{name: train, colour: blue}");
  Write(broken);
  Hup();
  ASSERT_TRUE(testing::WaitFor([&] { return Counted("refused", 1); }, std::chrono::seconds(30)))
      << Metrics();
  const std::string log = daemon_->LogTail(200);
  EXPECT_NE(log.find(path_ + ":9: pools[0].colour"), std::string::npos) << log;
  EXPECT_EQ(Classes(), (V{"normal", "batch", "low"}));
  EXPECT_EQ(AcmeGuaranteedMilli(), 300'000);

  // A file that parses but that the core refuses half-way: the new pool is created, then the
  // quota in a pool that does not exist is refused — and the pool creation is undone.
  std::string half = Config(kAcmeNew, "batch", "infer", 300, "nowhere");
  half.replace(half.find("  - {name: infer}\n"), 18, "  - {name: infer}\n  - {name: extra}\n");
  Write(half);
  Hup();
  ASSERT_TRUE(testing::WaitFor([&] { return Counted("refused", 2); }, std::chrono::seconds(30)))
      << Metrics();
  const std::string log2 = daemon_->LogTail(200);
  EXPECT_NE(log2.find(path_ + ":16: tenants[0].quotas[0]"), std::string::npos) << log2;
  EXPECT_FALSE(HasPool("extra"));
  EXPECT_EQ(AcmeGuaranteedMilli(), 300'000);
  EXPECT_TRUE(Counted("applied", 1));

  // The daemon still stops cleanly after reloads.
  EXPECT_EQ(daemon_->Stop(), 0);
}

}  // namespace
}  // namespace gpupool
