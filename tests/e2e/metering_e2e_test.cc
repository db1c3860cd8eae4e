// The usage ledger with real processes (issue 13): gpupoold on embedded PostgreSQL and a
// gpupool-agent running real tasks; gpupoold is killed with SIGKILL while they run (between and
// in the middle of ledger batches, with 1-second intervals) and restarted. The report must equal
// the integral of the tasks' allocations from their own timelines (scheduled → finished, whole
// seconds), with one ledger row per interval: nothing counted twice, nothing dropped across the
// crash. Also: the usage counters on /metrics, labelled with the tenant cut to its depth.
#include <google/protobuf/util/time_util.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>

#include "billing/money.h"
#include "gpupool/v1/billing.grpc.pb.h"
#include "gpupool/v1/jobs.grpc.pb.h"
#include "gpupool/v1/services.grpc.pb.h"
#include "gpupool/v1/usage.grpc.pb.h"
#include "store/pg_store.h"
#include "tests/api/http_client.h"
#include "tests/support/daemon_process.h"
#include "tests/support/pg_fixture.h"
#include "tests/support/single_agent.h"
#include "tests/support/wait_for.h"

namespace gpupool {
namespace {

using testing::DaemonProcess;
using TimeUtil = google::protobuf::util::TimeUtil;

// A node lease long enough that a restart on a loaded box re-adopts the running tasks.
constexpr char kDaemonConfig[] = R"(
scheduler:
  heartbeat_interval_ms: 200
  heartbeat_timeout_ms: 30000
  node_lease_ms: 30000  # L = T: this test's scenarios predate the long lease
  stop_grace_period_ms: 1000
metering:
  interval_s: 1
  metrics_tenant_depth: 2
)";

bool WaitFor(const std::function<bool()>& done, int seconds) {
  return ::gpupool::testing::WaitFor(done, std::chrono::seconds(seconds),
                                     std::chrono::milliseconds(50));
}

class MeteringE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Result<std::string> dir = testing::MakeTempDir("gpupool-meter-e2e");
    ASSERT_TRUE(dir.ok());
    dir_ = *dir;
    std::ofstream(dir_ + "/gpupoold.yaml") << Config();
    std::vector<std::string> args = {"--config", dir_ + "/gpupoold.yaml"};
    args.insert(args.end(), extra_args_.begin(), extra_args_.end());
    auto d = DaemonProcess::Start({.data_dir = "", .extra_args = args});
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    daemon_ = std::move(d).value();
    Connect();
    ASSERT_TRUE(daemon_->CreatePool("gpu").ok());
    testing::SingleAgent::Options o;
    o.dir = dir_;
    o.gpus = Gpus();
    o.health_poll_ms = 0;
    agent_ = std::make_unique<testing::SingleAgent>(o);
    agent_->Connect(*daemon_);
    ASSERT_TRUE(agent_->Start().ok());
  }

  void TearDown() override {
    agent_.reset();
    daemon_.reset();
    if (!HasFailure()) std::filesystem::remove_all(dir_);
  }

  virtual std::string Config() const { return kDaemonConfig; }
  virtual int Gpus() const { return 2; }

  void Connect() {
    auto channel = daemon_->Channel();
    jobs_ = v1::JobService::NewStub(channel);
    usage_ = v1::UsageService::NewStub(channel);
    billing_ = v1::BillingService::NewStub(channel);
  }

  std::string Submit(const std::string& script, const std::string& tenant = "acme/e2e/meter",
                     const std::string& priority_class = "") {
    return testing::SubmitShellJob(
        *jobs_, {.script = script, .tenant = tenant, .priority_class = priority_class});
  }
  v1::Task Task(const std::string& job_id) { return testing::FirstTask(*jobs_, job_id); }

  Result<v1::GetUsageResponse> Usage(const std::string& tenant = "", bool split = false) {
    grpc::ClientContext ctx;
    v1::GetUsageRequest req;
    req.set_tenant(tenant);
    req.set_split_preempted(split);
    req.set_period("hour");
    v1::GetUsageResponse resp;
    grpc::Status st = usage_->GetUsage(&ctx, req, &resp);
    if (!st.ok()) return Status(static_cast<StatusCode>(st.error_code()), st.error_message());
    return resp;
  }

  // acme's one invoice over yesterday, today and tomorrow (UTC days), as ListInvoices gives it.
  Result<v1::Invoice> AcmeInvoice() {
    const int64_t now_s = time(nullptr);
    grpc::ClientContext ctx;
    v1::ListInvoicesRequest req;
    req.set_tenant("acme");
    req.mutable_start_time()->set_seconds(now_s / 86400 * 86400 - 86400);
    req.mutable_end_time()->set_seconds(now_s / 86400 * 86400 + 2 * 86400);
    v1::ListInvoicesResponse resp;
    grpc::Status st = billing_->ListInvoices(&ctx, req, &resp);
    if (!st.ok()) return Status(static_cast<StatusCode>(st.error_code()), st.error_message());
    if (resp.invoices_size() != 1) {
      return Status::Internal("want one invoice, got " + resp.DebugString());
    }
    return resp.invoices(0);
  }

  std::string dir_;
  std::unique_ptr<DaemonProcess> daemon_;
  std::unique_ptr<testing::SingleAgent> agent_;
  std::unique_ptr<v1::JobService::Stub> jobs_;
  std::unique_ptr<v1::UsageService::Stub> usage_;
  std::unique_ptr<v1::BillingService::Stub> billing_;
  std::vector<std::string> extra_args_;  // more gpupoold arguments, set before SetUp
};

TEST_F(MeteringE2eTest, Kill9AndRestartNeitherDropsNorRepeatsAnInterval) {
  const std::string short_job = Submit("sleep 2");
  const std::string long_job = Submit("sleep 9");
  ASSERT_TRUE(WaitFor([&] { return Task(long_job).state() == v1::TASK_STATE_RUNNING; }, 60));
  // Some periodic intervals are stored, then the daemon dies at an arbitrary point.
  ASSERT_TRUE(WaitFor(
      [&] {
        auto u = Usage();
        return u.ok() && u->totals().intervals() >= 3;
      },
      60));
  daemon_->Kill9();
  ASSERT_TRUE(daemon_->Restart().ok());
  Connect();
  for (const std::string& job : {short_job, long_job}) {
    ASSERT_TRUE(WaitFor([&] { return Task(job).state() == v1::TASK_STATE_SUCCEEDED; }, 90))
        << Task(job).DebugString();
  }

  // The integral of the allocations, from the tasks' own timelines: one whole GPU each, from
  // the allocation's commit to the end, in whole seconds between floored instants.
  int64_t want_device_s = 0, want_intervals = 0;
  for (const std::string& job : {short_job, long_job}) {
    v1::Task t = Task(job);
    ASSERT_EQ(t.attempt(), 0) << "re-adopted, not run again";
    const int64_t from_s = TimeUtil::TimestampToMicroseconds(t.scheduled_time()) / 1'000'000;
    const int64_t to_s = TimeUtil::TimestampToMicroseconds(t.finish_time()) / 1'000'000;
    want_device_s += to_s - from_s;
    want_intervals += to_s - from_s + 1;  // 1-s intervals: the partial first, whole, partial last
  }
  Result<v1::GetUsageResponse> u = Usage();
  ASSERT_TRUE(u.ok()) << u.status().ToString();
  EXPECT_EQ(u->totals().device_seconds(), want_device_s);
  EXPECT_EQ(u->totals().intervals(), want_intervals) << u->DebugString();
  // The simulated backend's H100s (the built-in catalog's figures): 989.5 TFLOPS and 80 GiB.
  EXPECT_EQ(u->totals().milli_tflops_seconds(), 989'500 * want_device_s);
  EXPECT_EQ(u->totals().vram_mib_seconds(), 81'920 * want_device_s);
  EXPECT_DOUBLE_EQ(u->totals().vram_gib_seconds(), 80.0 * static_cast<double>(want_device_s));
  ASSERT_GT(u->rows_size(), 0);
  EXPECT_EQ(u->rows(0).tenant(), "acme/e2e/meter");
  EXPECT_EQ(u->rows(0).pool(), "gpu");

  // The counters since the restart, with the tenant cut at depth 2.
  auto metrics =
      api::testing::HttpCall(daemon_->http_port(), api::testing::http::verb::get, "/metrics");
  EXPECT_NE(
      metrics.body.find("gpupool_usage_device_seconds_total{pool=\"gpu\",tenant=\"acme/e2e\"}"),
      std::string::npos)
      << metrics.body.substr(0, 2000);
}

// Preemption credits from the ledger, end to end: one GPU; a low-priority job of acme runs and
// is metered, a high-priority job of globex preempts it, and acme's job is cancelled while
// requeued, so acme's whole metered usage is the preempted attempt. acme's invoice charges that
// usage at the device-hour price and credits it at the plan's 50 %, and its total is the sum of
// its lines.
constexpr char kCreditConfig[] = R"(
scheduler:
  heartbeat_interval_ms: 200
  heartbeat_timeout_ms: 30000
  node_lease_ms: 30000  # L = T: this test's scenarios predate the long lease
  stop_grace_period_ms: 1000
  default_priority_class: low
metering:
  interval_s: 1
priority_classes:
  - {name: low, value: 0}
  - {name: high, value: 1000, may_preempt: true}
)";

class PreemptionCreditE2eTest : public MeteringE2eTest {
 protected:
  std::string Config() const override { return kCreditConfig; }
  int Gpus() const override { return 1; }

  // The plan is stored before gpupoold starts, effective since yesterday: a plan from config
  // takes effect when stored, and hourly usage is rated by the version in effect at its hour's
  // start, so this test's hour would have no plan.
  void SetUp() override {
    Result<std::string> uri = testing::CreateTestDatabase();
    ASSERT_TRUE(uri.ok()) << uri.status().ToString();
    {
      PgStoreOptions o;
      o.uri = *uri;
      Result<std::unique_ptr<PgStore>> store = PgStore::Open(o);
      ASSERT_TRUE(store.ok()) << store.status().ToString();
      billing::PricePlan plan;
      plan.name = "default";
      plan.currency = "USD";
      plan.effective_from_ms = (time(nullptr) / 86400 - 1) * 86'400'000;
      plan.rates = {
          {"", "", "", billing::Unit::kDeviceHour, billing::Decimal::Parse("72.00").value()}};
      plan.preemption_credit_bps = 5000;  // 50 %
      plan.created_by = "test";
      Result<billing::PricePlan> added = (*store)->AddPricePlan(plan, /*create=*/true);
      ASSERT_TRUE(added.ok()) << added.status().ToString();
    }
    extra_args_ = {"--database", *uri};
    MeteringE2eTest::SetUp();
  }

  void Cancel(const std::string& job_id) {
    grpc::ClientContext ctx;
    v1::CancelJobRequest req;
    req.set_job_id(job_id);
    v1::Job job;
    grpc::Status st = jobs_->CancelJob(&ctx, req, &job);
    EXPECT_TRUE(st.ok()) << st.error_message();
  }
};

TEST_F(PreemptionCreditE2eTest, PreemptedAttemptIsCreditedOnTheInvoice) {
  const std::string low = Submit("sleep 600", "acme/batch", "low");
  ASSERT_TRUE(WaitFor([&] { return Task(low).state() == v1::TASK_STATE_RUNNING; }, 60));
  ASSERT_TRUE(WaitFor(
      [&] {
        auto u = Usage("acme");
        return u.ok() && u->totals().device_seconds() >= 2;
      },
      60));
  const std::string high = Submit("sleep 600", "globex/prod", "high");
  ASSERT_TRUE(WaitFor([&] { return Task(high).state() == v1::TASK_STATE_RUNNING; }, 90))
      << Task(low).DebugString();
  // Preempted and requeued: attempt 1 waits for the only GPU, which the high job holds.
  v1::Task requeued = Task(low);
  ASSERT_EQ(requeued.attempt(), 1) << requeued.DebugString();
  ASSERT_EQ(requeued.state(), v1::TASK_STATE_PENDING) << requeued.DebugString();
  Cancel(low);
  Cancel(high);
  ASSERT_TRUE(WaitFor([&] { return Task(high).state() == v1::TASK_STATE_CANCELLED; }, 60));

  // acme's metered usage: attempt 0 only, whole-GPU seconds.
  Result<v1::GetUsageResponse> u = Usage("acme");
  ASSERT_TRUE(u.ok()) << u.status().ToString();
  const int64_t device_s = u->totals().device_seconds();
  ASSERT_GE(device_s, 2);
  // The report split by preemption (what invoices credit): all of it is the preempted attempt's.
  Result<v1::GetUsageResponse> split = Usage("acme", /*split=*/true);
  ASSERT_TRUE(split.ok()) << split.status().ToString();
  int64_t preempted_s = 0;
  for (const v1::UsageRow& r : split->rows()) {
    EXPECT_TRUE(r.preempted()) << r.DebugString();
    preempted_s += r.totals().device_seconds();
  }
  EXPECT_EQ(preempted_s, device_s);

  Result<v1::Invoice> invoice = AcmeInvoice();
  ASSERT_TRUE(invoice.ok()) << invoice.status().ToString();
  const v1::Invoice& inv = *invoice;
  ASSERT_EQ(inv.lines_size(), 1) << inv.DebugString();
  ASSERT_EQ(inv.credits_size(), 1) << inv.DebugString();
  const v1::InvoiceLine& charge = inv.lines(0);
  const v1::InvoiceLine& credit = inv.credits(0);
  EXPECT_EQ(charge.unit(), "device-hour");
  EXPECT_EQ(charge.base_quantity(), device_s);
  EXPECT_EQ(credit.unit(), "device-hour");
  EXPECT_EQ(credit.tenant(), "acme/batch");
  EXPECT_EQ(credit.priority_class(), "low");
  EXPECT_EQ(credit.base_quantity(), device_s);  // the whole preempted attempt, as metered
  // Charge: device_s / 3600 device-hours × 72.00 = device_s × 0.02 (exact in cents).
  // Credit: device_s / 3600 × 72.00 × 50 % = device_s × 0.01.
  auto cents = [](int64_t n) { return billing::Decimal::FromNanos(n * 10'000'000); };
  auto parse = [](const std::string& s) { return billing::Decimal::Parse(s).value(); };
  EXPECT_EQ(parse(charge.amount()), cents(2 * device_s)) << charge.amount();
  EXPECT_EQ(parse(credit.amount()), cents(device_s)) << credit.amount();
  // The invoice adds up: total = Σ charges − Σ credits.
  EXPECT_EQ(parse(inv.subtotal()), parse(charge.amount()));
  EXPECT_EQ(parse(inv.credit_total()), parse(credit.amount()));
  EXPECT_EQ(parse(inv.total()), cents(device_s));
}

// A service's replicas are billed on lines of their own (docs/billing.md, "Services"): a
// service of one whole-GPU replica and a job of the same tenant run side by side; the ledger
// carries the service's name on the replica's intervals, the usage report has a row for each,
// and the invoice a line for the jobs and one for the service, each at the device-hour price.
class ServiceBillingE2eTest : public PreemptionCreditE2eTest {
 protected:
  int Gpus() const override { return 2; }
};

TEST_F(ServiceBillingE2eTest, AServicesReplicasAreBilledOnLinesOfTheirOwn) {
  auto services = v1::ServiceService::NewStub(daemon_->Channel());
  v1::Service svc;
  svc.set_name("chat");
  svc.set_tenant("acme/web");
  svc.set_pool("gpu");
  v1::TaskTemplate* t = svc.mutable_template_();
  for (const char* a : {"/bin/sh", "-c", "exec sleep 600"}) t->add_command(a);
  t->mutable_resources()->mutable_whole_gpus()->set_count(1);
  v1::Port* port = t->add_ports();
  port->set_port(18080);
  port->set_name("http");
  svc.set_port(18080);
  svc.set_readiness_path("/");
  svc.set_min_replicas(1);
  svc.set_max_replicas(1);
  svc.set_target_in_flight(1);
  svc.mutable_idle()->set_seconds(60);
  {
    grpc::ClientContext ctx;
    v1::CreateServiceRequest req;
    *req.mutable_service() = svc;
    v1::Service out;
    grpc::Status st = services->CreateService(&ctx, req, &out);
    ASSERT_TRUE(st.ok()) << st.error_message();
  }
  const std::string job = Submit("sleep 600", "acme/batch");
  // Both hold a GPU for a few metered seconds.
  auto seconds_of = [](const v1::GetUsageResponse& u, const std::string& service) {
    int64_t n = 0;
    for (const v1::UsageRow& r : u.rows()) {
      if (r.service() == service) n += r.totals().device_seconds();
    }
    return n;
  };
  ASSERT_TRUE(WaitFor(
      [&] {
        auto u = Usage("acme");
        return u.ok() && seconds_of(*u, "chat") >= 2 && seconds_of(*u, "") >= 2;
      },
      60));

  // The replica's job, then the service deleted (its replica stopped) and the job cancelled.
  std::string replica;
  {
    grpc::ClientContext ctx;
    v1::GetServiceRequest req;
    req.set_tenant("acme/web");
    req.set_name("chat");
    v1::Service out;
    ASSERT_TRUE(services->GetService(&ctx, req, &out).ok());
    ASSERT_EQ(out.status().replicas_size(), 1) << out.DebugString();
    replica = out.status().replicas(0).job_id();
  }
  {
    grpc::ClientContext ctx;
    v1::DeleteServiceRequest req;
    req.set_tenant("acme/web");
    req.set_name("chat");
    v1::DeleteServiceResponse out;
    grpc::Status st = services->DeleteService(&ctx, req, &out);
    ASSERT_TRUE(st.ok()) << st.error_message();
  }
  Cancel(job);
  auto ended = [&](const std::string& id) {
    const v1::TaskState s = Task(id).state();
    return s == v1::TASK_STATE_CANCELLED || s == v1::TASK_STATE_SUCCEEDED ||
           s == v1::TASK_STATE_FAILED;
  };
  ASSERT_TRUE(WaitFor([&] { return ended(job) && ended(replica); }, 60))
      << Task(replica).DebugString();

  Result<v1::GetUsageResponse> u = Usage("acme");
  ASSERT_TRUE(u.ok()) << u.status().ToString();
  const int64_t chat_s = seconds_of(*u, "chat");
  const int64_t job_s = seconds_of(*u, "");
  ASSERT_GE(chat_s, 2);
  ASSERT_GE(job_s, 2);
  EXPECT_EQ(chat_s + job_s, u->totals().device_seconds());  // nothing else was metered

  Result<v1::Invoice> invoice = AcmeInvoice();
  ASSERT_TRUE(invoice.ok()) << invoice.status().ToString();
  const v1::Invoice& inv = *invoice;
  ASSERT_EQ(inv.lines_size(), 2) << inv.DebugString();
  // The tenant's jobs first, then the service; each device_s × 72.00 / 3600 = × 0.02.
  auto cents = [](int64_t n) { return billing::Decimal::FromNanos(n * 10'000'000); };
  auto parse = [](const std::string& s) { return billing::Decimal::Parse(s).value(); };
  EXPECT_EQ(inv.lines(0).service(), "");
  EXPECT_EQ(inv.lines(0).tenant(), "acme/batch");
  EXPECT_EQ(inv.lines(0).base_quantity(), job_s);
  EXPECT_EQ(parse(inv.lines(0).amount()), cents(2 * job_s));
  EXPECT_EQ(inv.lines(1).service(), "chat");
  EXPECT_EQ(inv.lines(1).tenant(), "acme/web");
  EXPECT_EQ(inv.lines(1).base_quantity(), chat_s);
  EXPECT_EQ(parse(inv.lines(1).amount()), cents(2 * chat_s));
  EXPECT_EQ(parse(inv.total()), cents(2 * (job_s + chat_s)));
}

}  // namespace
}  // namespace gpupool
