// SIGHUP and the billing keys (cmd/daemon/reload_billing.h), on a real gpupoold: a price plan
// changed in the file becomes a new stored version at once (the old one stays for past
// invoices), an unchanged file stores nothing more, the usage report limits are applied at once,
// and the core's metering settings are reported as applied at the next restart.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <fstream>

#include "gpupool/v1/billing.grpc.pb.h"
#include "tests/api/http_client.h"
#include "tests/support/daemon_process.h"
#include "tests/support/wait_for.h"

namespace gpupool {
namespace {

using api::testing::HttpCall;
namespace http = boost::beast::http;

std::string Config(const std::string& price, int report_timeout_ms, int interval_s) {
  return "metering:\n  interval_s: " + std::to_string(interval_s) +
         "\n  report_timeout_ms: " + std::to_string(report_timeout_ms) +
         "\nprice_plans:\n"
         "  - name: default\n"
         "    currency: USD\n"
         "    rates:\n"
         "      - {unit: tflops-hour, price: " +
         price + "}\n";
}

class BillingReloadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto dir = testing::MakeTempDir("gpupool-billing-reload");
    ASSERT_TRUE(dir.ok()) << dir.status().ToString();
    path_ = *dir + "/gpupoold.yaml";
    Write(Config("0.45", 60000, 60));
    auto d = testing::DaemonProcess::Start({.data_dir = "", .extra_args = {"--config", path_}});
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    daemon_ = std::move(d).value();
    billing_ = v1::BillingService::NewStub(daemon_->Channel());
  }
  void TearDown() override {
    if (HasFailure() && daemon_) std::cerr << daemon_->LogTail(40);
  }

  void Write(const std::string& text) { std::ofstream(path_, std::ios::trunc) << text; }
  void Hup() { ASSERT_EQ(::kill(daemon_->pid(), SIGHUP), 0); }
  bool Counted(const std::string& outcome, int n) {
    return HttpCall(daemon_->http_port(), http::verb::get, "/metrics")
               .body.find("gpupool_config_reloads_total{outcome=\"" + outcome + "\"} " +
                          std::to_string(n)) != std::string::npos;
  }
  // Every stored version of the default plan: "version:price" in order.
  std::vector<std::string> Versions() {
    grpc::ClientContext ctx;
    v1::ListPricePlansRequest req;
    req.set_name("default");
    req.set_all_versions(true);
    v1::ListPricePlansResponse resp;
    grpc::Status st = billing_->ListPricePlans(&ctx, req, &resp);
    std::vector<std::string> out;
    if (!st.ok()) out.push_back("error: " + st.error_message());
    for (const v1::PricePlan& p : resp.plans()) {
      out.push_back(std::to_string(p.version()) + ":" +
                    (p.rates_size() > 0 ? p.rates(0).price() : "") + ":" + p.created_by());
    }
    return out;
  }

  std::string path_;
  std::unique_ptr<testing::DaemonProcess> daemon_;
  std::unique_ptr<v1::BillingService::Stub> billing_;
};

TEST_F(BillingReloadTest, PricePlansAndReportLimitsReloadOnSighup) {
  using V = std::vector<std::string>;
  ASSERT_EQ(Versions(), (V{"1:0.45:config"}));

  Write(Config("0.50", 15000, 30));
  Hup();
  ASSERT_TRUE(testing::WaitFor([&] { return Counted("applied", 1); }, std::chrono::seconds(30)));
  EXPECT_EQ(Versions(), (V{"1:0.45:config", "2:0.5:config"}));
  const std::string log = daemon_->LogTail(100);
  EXPECT_NE(log.find("price plans: 1 new version stored"), std::string::npos) << log;
  EXPECT_NE(log.find("metering.report_concurrency 2, metering.report_timeout_ms 15000"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("metering (enabled, interval_s, metrics_tenant_depth, rollup_after_days, "
                     "max_intervals_per_batch) changed: applied at the next restart"),
            std::string::npos)
      << log;

  // The same file again: nothing new is stored.
  Hup();
  ASSERT_TRUE(testing::WaitFor([&] { return Counted("unchanged", 1); }, std::chrono::seconds(30)));
  EXPECT_EQ(Versions(), (V{"1:0.45:config", "2:0.5:config"}));
}

}  // namespace
}  // namespace gpupool
