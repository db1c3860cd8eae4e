// PostgreSQL HA on a real failover engine (issue 30, docs/ha.md "PostgreSQL with automatic
// failover"): gpupoold on a pg_auto_failover cluster — a primary and a synchronous streaming
// standby — through a multi-host URI with target_session_attrs=read-write; one agent; 8 threads
// submitting jobs whose task appends ticks to a side-effect file. The primary's node is killed
// (SIGKILL to its keeper and its postgres, as a power failure); pg_auto_failover promotes the
// standby and gpupoold follows it by itself, without a restart. Checks: every acknowledged job
// exists and completes (synchronous replication: an acknowledged commit is on the standby), no
// task ran twice at once or again after it finished, and how long gpupoold took to serve again.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>
#include <vector>

#include "gpupool/v1/jobs.grpc.pb.h"
#include "gpupool/v1/pools.grpc.pb.h"
#include "tests/support/agent_process.h"
#include "tests/support/daemon_process.h"
#include "tests/support/pg_auto_failover.h"
#include "tests/support/side_effects.h"
#include "tests/support/wait_for.h"

namespace gpupool {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr char kConfig[] = R"(
scheduler:
  heartbeat_interval_ms: 200
  heartbeat_timeout_ms: 3000
  node_lease_ms: 120000
)";

constexpr int kSubmitters = 8;

TEST(PgFailoverE2eTest, APrimaryKilledUnderSubmittersLosesNoAcknowledgedJobAndRunsNoTaskTwice) {
  auto cluster = testing::PgAutoFailoverCluster::Start();
  ASSERT_TRUE(cluster.ok()) << cluster.status().ToString();
  ASSERT_EQ((*cluster)->Primary(), 1) << (*cluster)->State();
  Result<std::string> dir = testing::MakeTempDir("gpupool-pg-failover");
  ASSERT_TRUE(dir.ok());
  const std::string side = *dir + "/side-effects";
  std::ofstream(*dir + "/gpupoold.yaml") << kConfig;
  auto daemon = testing::DaemonProcess::Start(
      {.data_dir = "",
       .extra_args = {"--config", *dir + "/gpupoold.yaml", "--database", (*cluster)->uri()}});
  ASSERT_TRUE(daemon.ok()) << daemon.status().ToString();
  ASSERT_TRUE((*daemon)->CreatePool("gpu").ok());
  testing::AgentProcessOptions o;
  o.dir = *dir;
  o.node = "node-0";
  o.scheduler = (*daemon)->grpc_address();
  o.gpus = 8;
  auto agent = testing::StartAgentProcess(o);
  ASSERT_TRUE(agent.ok()) << agent.status().ToString();
  auto channel = grpc::CreateChannel((*daemon)->grpc_address(), grpc::InsecureChannelCredentials());
  auto jobs = v1::JobService::NewStub(channel);

  // Submitters: each acknowledged job id is recorded; a refused or failed call is retried.
  std::mutex mu;
  std::vector<std::string> acknowledged;
  std::atomic<bool> stop{false};
  // A call that began after the kill and was acknowledged shows the daemon serving again; a call
  // that began before may have committed on the old primary and only been answered after it.
  std::atomic<int64_t> killed_ns{INT64_MAX};
  std::atomic<int64_t> first_ack_after_kill_ns{0};
  std::vector<std::thread> submitters;
  for (int s = 0; s < kSubmitters; ++s) {
    submitters.emplace_back([&] {
      while (!stop) {
        v1::SubmitJobRequest req;
        v1::JobSpec* spec = req.mutable_spec();
        spec->set_tenant("acme/e2e/tester");
        spec->set_pool("gpu");
        spec->set_task_count(1);
        spec->set_max_retries(10);
        spec->mutable_template_()->add_command("/bin/sh");
        spec->mutable_template_()->add_command("-c");
        spec->mutable_template_()->add_command(testing::TickingScript(side, 2));
        spec->mutable_template_()->mutable_resources()->mutable_whole_gpus()->set_count(1);
        grpc::ClientContext ctx;
        ctx.set_deadline(std::chrono::system_clock::now() + 10s);
        v1::SubmitJobResponse resp;
        const int64_t began_ns = Clock::now().time_since_epoch().count();
        if (jobs->SubmitJob(&ctx, req, &resp).ok()) {
          std::lock_guard lock(mu);
          acknowledged.push_back(resp.job_id());
          if (began_ns > killed_ns.load()) {
            int64_t none = 0;
            first_ack_after_kill_ns.compare_exchange_strong(
                none, Clock::now().time_since_epoch().count());
          }
        } else {
          std::this_thread::sleep_for(100ms);
        }
        std::this_thread::sleep_for(50ms);
      }
    });
  }
  auto count = [&] {
    std::lock_guard lock(mu);
    return acknowledged.size();
  };
  ASSERT_TRUE(testing::WaitFor([&] { return count() >= 40; }, 120s)) << count();

  // Power off the primary's node.
  const size_t before = count();
  (*cluster)->KillNode(1);  // returns once its processes are gone
  const auto killed_at = Clock::now();
  killed_ns = killed_at.time_since_epoch().count();
  // Serving again: a submission begun after the kill and acknowledged.
  ASSERT_TRUE(testing::WaitFor([&] { return first_ack_after_kill_ns.load() != 0; }, 180s))
      << (*cluster)->State() << (*daemon)->LogTail(30);
  const double serve_again_s =
      std::chrono::duration<double>(
          Clock::time_point(Clock::duration(first_ack_after_kill_ns.load())) - killed_at)
          .count();
  // It was served by the promoted standby (the old primary's node stays down).
  EXPECT_EQ((*cluster)->Primary(), 2) << (*cluster)->State();
  ASSERT_TRUE(testing::WaitFor([&] { return count() >= before + 40; }, 120s));
  stop = true;
  for (auto& t : submitters) t.join();
  std::printf(
      "pg failover: %zu jobs acknowledged (%zu before the kill); served again %.1f s after "
      "the primary was killed\n",
      count(), before, serve_again_s);
  ::testing::Test::RecordProperty("serve_again_ms", static_cast<int>(serve_again_s * 1000));

  // Every acknowledged job is there and completes; nothing ran twice.
  for (const std::string& id : acknowledged) {
    ASSERT_TRUE(testing::WaitFor(
        [&] {
          v1::GetJobRequest req;
          req.set_job_id(id);
          v1::Job job;
          grpc::ClientContext ctx;
          ctx.set_deadline(std::chrono::system_clock::now() + 10s);
          grpc::Status st = jobs->GetJob(&ctx, req, &job);
          EXPECT_NE(st.error_code(), grpc::StatusCode::NOT_FOUND)
              << "acknowledged job " << id << " was lost";
          return st.ok() && job.state() == v1::JOB_STATE_SUCCEEDED;
        },
        300s))
        << "job " << id;
  }
  int executions = 0;
  for (const std::string& v : testing::CheckExecutions(testing::ReadExecutions(side), &executions))
    ADD_FAILURE() << v;
  EXPECT_EQ(testing::ReadExecutions(side).size(), acknowledged.size());
  (*agent)->Signal(SIGTERM);
  (*agent)->Wait(10s);
  if (!::testing::Test::HasFailure()) std::filesystem::remove_all(*dir);
}

}  // namespace
}  // namespace gpupool
