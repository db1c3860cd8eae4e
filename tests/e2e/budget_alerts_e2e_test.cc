// Budget alerts end to end (docs/billing.md, "Budgets"): a real gpupoold on embedded PostgreSQL
// with a price plan, a gpupool-agent running a real task, a tenant's budget, and an HTTPS
// webhook receiver on loopback (a certificate of a test CA the daemon is told to trust). The
// task's metered usage crosses the budget's thresholds; the receiver gets one budget.threshold
// delivery per threshold, signed, with the subject that names tenant, month and percent, and no
// second one — not on later checks, not after gpupoold restarts (the new leader reads what was
// told from the event log).
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "base/tls/pki.h"
#include "billing/period.h"
#include "gpupool/v1/billing.grpc.pb.h"
#include "gpupool/v1/jobs.grpc.pb.h"
#include "gpupool/v1/webhooks.grpc.pb.h"
#include "tests/api/webhook_receiver.h"
#include "tests/support/daemon_process.h"
#include "tests/support/single_agent.h"
#include "tests/support/wait_for.h"

namespace gpupool {
namespace {

using api::testing::WebhookReceiver;
using testing::DaemonProcess;

// 3600 USD a device-hour: one USD per second of a whole GPU, so a task of a few seconds
// crosses a budget of 4 USD.
constexpr char kDaemonConfig[] = R"(
metering:
  interval_s: 1
price_plans:
  - name: default
    currency: USD
    rates:
      - {unit: device-hour, price: 3600}
      - {unit: tflops-hour, price: 0.01}
)";

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

class BudgetAlertsE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Result<std::string> dir = testing::MakeTempDir("gpupool-budget-e2e");
    ASSERT_TRUE(dir.ok());
    dir_ = *dir;
    Result<tls::CertAuthority> ca = tls::CertAuthority::LoadOrCreate(dir_ + "/hooks-ca");
    ASSERT_TRUE(ca.ok()) << ca.status().ToString();
    std::ofstream(dir_ + "/hooks-ca.pem") << ca->ca_pem();
    std::ofstream(dir_ + "/gpupoold.yaml") << kDaemonConfig;
    auto d = DaemonProcess::Start(
        {.data_dir = "",
         .extra_args = {"--config", dir_ + "/gpupoold.yaml", "--budget-check-interval", "1",
                        "--webhooks-allow-loopback", "true", "--webhooks-ca-file",
                        dir_ + "/hooks-ca.pem"}});
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    daemon_ = std::move(d).value();
    ASSERT_TRUE(daemon_->CreatePool("gpu").ok());
    testing::SingleAgent::Options o;
    o.dir = dir_;
    o.gpus = 1;
    o.health_poll_ms = 0;
    agent_ = std::make_unique<testing::SingleAgent>(o);
    agent_->Connect(*daemon_);
    ASSERT_TRUE(agent_->Start().ok());
    server_cert_ = ca->server_cert_pem();
    server_key_ = ca->server_key_pem();
  }
  void TearDown() override {
    if (HasFailure() && daemon_) std::cerr << daemon_->LogTail(60);
    receiver_.reset();
    agent_.reset();
    daemon_.reset();
    if (!HasFailure()) std::filesystem::remove_all(dir_);
  }

  // The budget.threshold deliveries the receiver got, each delivery id once.
  std::vector<WebhookReceiver::Delivery> Alerts() {
    std::vector<WebhookReceiver::Delivery> out;
    for (const WebhookReceiver::Delivery& d : receiver_->deliveries()) {
      if (d.kind != "budget.threshold") continue;
      bool seen = false;
      for (const auto& o : out) seen = seen || o.id == d.id;
      if (!seen) out.push_back(d);
    }
    return out;
  }

  std::string dir_, server_cert_, server_key_;
  std::unique_ptr<DaemonProcess> daemon_;
  std::unique_ptr<testing::SingleAgent> agent_;
  std::unique_ptr<WebhookReceiver> receiver_;
};

TEST_F(BudgetAlertsE2eTest, EachThresholdReachesTheTenantsWebhookOnceAcrossARestart) {
  auto hooks = v1::WebhookService::NewStub(daemon_->Channel());
  auto billing = v1::BillingService::NewStub(daemon_->Channel());
  auto jobs = v1::JobService::NewStub(daemon_->Channel());

  // The tenant's webhook, for budget alerts only.
  v1::CreateWebhookRequest hook;
  hook.mutable_webhook()->set_tenant("acme");
  hook.mutable_webhook()->add_event_kinds("budget.threshold");
  receiver_ = std::make_unique<WebhookReceiver>(server_cert_, server_key_, "");
  const uint16_t port = receiver_->Start();
  hook.mutable_webhook()->set_url("https://127.0.0.1:" + std::to_string(port) + "/hooks");
  v1::CreateWebhookResponse made;
  {
    grpc::ClientContext ctx;
    grpc::Status st = hooks->CreateWebhook(&ctx, hook, &made);
    ASSERT_TRUE(st.ok()) << st.error_message();
  }
  receiver_ = std::make_unique<WebhookReceiver>(server_cert_, server_key_, made.secret());
  ASSERT_EQ(receiver_->Start(port), port);

  // acme/e2e's budget: 4 USD a month, alerts at 50 % and 100 %.
  v1::SetBudgetRequest budget;
  budget.mutable_budget()->set_tenant("acme/e2e");
  budget.mutable_budget()->set_amount("4");
  budget.mutable_budget()->add_alert_percents(100);
  budget.mutable_budget()->add_alert_percents(50);
  v1::Budget set;
  {
    grpc::ClientContext ctx;
    grpc::Status st = billing->SetBudget(&ctx, budget, &set);
    ASSERT_TRUE(st.ok()) << st.error_message();
  }
  EXPECT_EQ(set.currency(), "USD");
  EXPECT_EQ(set.spent(), "0.00");

  // A whole GPU for about eight seconds: about 8 USD, past both thresholds.
  testing::ShellJob spec;
  spec.script = "sleep 8";
  spec.tenant = "acme/e2e/ann";
  const std::string job = testing::SubmitShellJob(*jobs, spec);
  ASSERT_FALSE(job.empty());
  ASSERT_TRUE(testing::WaitFor([&] { return Alerts().size() >= 2; }, std::chrono::seconds(90),
                               std::chrono::milliseconds(100)))
      << Alerts().size() << " budget alerts received";
  const std::string month = billing::PeriodLabel(billing::MonthOf(NowMs()));
  std::vector<WebhookReceiver::Delivery> got = Alerts();
  ASSERT_EQ(got.size(), 2u);
  EXPECT_NE(got[0].body.find("\"subject\":\"budget/acme/e2e@" + month + "/50\""), std::string::npos)
      << got[0].body;
  EXPECT_NE(got[1].body.find("\"subject\":\"budget/acme/e2e@" + month + "/100\""),
            std::string::npos)
      << got[1].body;
  for (const WebhookReceiver::Delivery& d : got) {
    EXPECT_TRUE(d.signature_ok) << d.id << ": " << d.signature_error;
    EXPECT_NE(d.body.find("\"tenant\":\"acme/e2e\""), std::string::npos) << d.body;
    EXPECT_NE(d.body.find("of its 4.00 USD budget for " + month), std::string::npos) << d.body;
  }

  // Later checks, and a restarted gpupoold, tell nothing again.
  std::this_thread::sleep_for(std::chrono::seconds(3));
  daemon_->Stop();
  ASSERT_TRUE(daemon_->Restart().ok());
  std::this_thread::sleep_for(std::chrono::seconds(5));
  EXPECT_EQ(Alerts().size(), 2u);

  // The budget as the API shows it: the month's spend is past its amount.
  v1::ListBudgetsResponse listed;
  {
    grpc::ClientContext ctx;
    auto again = v1::BillingService::NewStub(daemon_->Channel());
    grpc::Status st = again->ListBudgets(&ctx, v1::ListBudgetsRequest(), &listed);
    ASSERT_TRUE(st.ok()) << st.error_message();
  }
  ASSERT_EQ(listed.budgets_size(), 1);
  EXPECT_EQ(listed.budgets(0).period(), month);
  EXPECT_GE(std::stod(listed.budgets(0).percent_used()), 100.0) << listed.budgets(0).DebugString();
}

}  // namespace
}  // namespace gpupool
