// The usage ledger with real processes (issue 13): gpupoold on embedded PostgreSQL and a
// gpupool-agent running real tasks; gpupoold is killed with SIGKILL while they run (between and
// in the middle of ledger batches, with 1-second intervals) and restarted. The report must equal
// the integral of the tasks' allocations from their own timelines (scheduled → finished, whole
// seconds), with one ledger row per interval: nothing counted twice, nothing dropped across the
// crash. Also: the usage counters on /metrics, labelled with the tenant cut to its depth.
#include <google/protobuf/util/time_util.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <functional>

#include "gpupool/v1/jobs.grpc.pb.h"
#include "gpupool/v1/usage.grpc.pb.h"
#include "tests/api/http_client.h"
#include "tests/support/agent_process.h"
#include "tests/support/daemon_process.h"
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
    std::ofstream(dir_ + "/gpupoold.yaml") << kDaemonConfig;
    auto d =
        DaemonProcess::Start({.data_dir = "", .extra_args = {"--config", dir_ + "/gpupoold.yaml"}});
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    daemon_ = std::move(d).value();
    Connect();
    ASSERT_TRUE(daemon_->CreatePool("gpu").ok());
    testing::AgentProcessOptions o;
    o.dir = dir_;
    o.node = "node-a";
    o.scheduler = daemon_->grpc_address();
    o.gpus = 2;
    auto child = testing::StartAgentProcess(o);
    ASSERT_TRUE(child.ok());
    agent_ = std::move(child).value();
  }

  void TearDown() override {
    if (agent_) {
      agent_->Signal(SIGTERM);
      agent_->Wait(std::chrono::seconds(10));
    }
    daemon_.reset();
    if (!HasFailure()) std::filesystem::remove_all(dir_);
  }

  void Connect() {
    auto channel = daemon_->Channel();
    jobs_ = v1::JobService::NewStub(channel);
    usage_ = v1::UsageService::NewStub(channel);
  }

  std::string Submit(const std::string& script) {
    v1::SubmitJobRequest req;
    v1::JobSpec* s = req.mutable_spec();
    s->set_tenant("acme/e2e/meter");
    s->set_pool("gpu");
    s->set_task_count(1);
    s->mutable_template_()->add_command("/bin/sh");
    s->mutable_template_()->add_command("-c");
    s->mutable_template_()->add_command(script);
    s->mutable_template_()->mutable_resources()->mutable_whole_gpus()->set_count(1);
    grpc::ClientContext ctx;
    v1::SubmitJobResponse resp;
    grpc::Status st = jobs_->SubmitJob(&ctx, req, &resp);
    EXPECT_TRUE(st.ok()) << st.error_message();
    return resp.job_id();
  }

  v1::Task Task(const std::string& job_id) {
    grpc::ClientContext ctx;
    v1::GetJobRequest req;
    req.set_job_id(job_id);
    v1::Job job;
    if (!jobs_->GetJob(&ctx, req, &job).ok() || job.tasks_size() == 0) return {};
    return job.tasks(0);
  }

  Result<v1::GetUsageResponse> Usage() {
    grpc::ClientContext ctx;
    v1::GetUsageRequest req;
    req.set_period("hour");
    v1::GetUsageResponse resp;
    grpc::Status st = usage_->GetUsage(&ctx, req, &resp);
    if (!st.ok()) return Status(static_cast<StatusCode>(st.error_code()), st.error_message());
    return resp;
  }

  std::string dir_;
  std::unique_ptr<DaemonProcess> daemon_;
  std::unique_ptr<testing::ChildProcess> agent_;
  std::unique_ptr<v1::JobService::Stub> jobs_;
  std::unique_ptr<v1::UsageService::Stub> usage_;
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

}  // namespace
}  // namespace gpupool
