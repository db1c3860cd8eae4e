// Leader election through the real binaries (docs/ha.md): three gpupoold replicas on one
// PostgreSQL, two agents that know all three addresses, tasks that record every execution in a
// side-effect file. The leader is killed with -9 again and again while jobs are submitted: every
// acknowledged job completes, no task's command runs twice at once or again after it finished,
// and a standby takes over (the time from kill to the new leader serving is printed).
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "gpupool/v1/jobs.grpc.pb.h"
#include "gpupool/v1/pools.grpc.pb.h"
#include "tests/support/agent_process.h"
#include "tests/support/daemon_process.h"
#include "tests/support/replica_set.h"
#include "tests/support/side_effects.h"
#include "tests/support/wait_for.h"

namespace gpupool {
namespace {

using namespace std::chrono_literals;
using testing::ChildProcess;
using testing::DaemonProcess;

constexpr char kConfig[] = R"(
scheduler:
  heartbeat_interval_ms: 200
  heartbeat_timeout_ms: 4000
  node_lease_ms: 4000  # L = T: this test's scenarios predate the long lease
  stop_grace_period_ms: 1000
  node_lease_stop_grace_ms: 1000
  node_lease_margin_ms: 1000
ha:
  enabled: true
  lease_ms: 1000
)";

constexpr int kReplicas = 3;
constexpr int kKills = 3;

bool WaitFor(const std::function<bool()>& done, std::chrono::seconds timeout) {
  return ::gpupool::testing::WaitFor(done, timeout, std::chrono::milliseconds(20));
}

class FailoverE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto set = testing::ReplicaSet::Start(
        {.name = "failover-e2e", .config = kConfig, .replicas = kReplicas});
    ASSERT_TRUE(set.ok()) << set.status().ToString();
    set_ = std::move(set).value();
    side_ = set_->dir() + "/side-effects";
    ASSERT_TRUE(set_->CreatePool("gpu").ok());
    for (int i = 0; i < 2; ++i) {
      testing::AgentProcessOptions o;
      o.dir = set_->dir();
      o.node = "node-" + std::to_string(i);
      o.scheduler = set_->targets();
      o.gpus = 2;
      auto a = testing::StartAgentProcess(o);
      ASSERT_TRUE(a.ok()) << a.status().ToString();
      agents_.push_back(std::move(a).value());
    }
    ASSERT_TRUE(WaitFor([&] { return ReadyNodes() == 2; }, 60s));
  }

  void TearDown() override {
    for (auto& a : agents_) {
      a->Signal(SIGTERM);
      a->Wait(10s);
    }
    agents_.clear();
    if (set_ && !HasFailure()) set_->RemoveDir();
    set_.reset();
  }

  // The index of the replica that serves, waiting up to `timeout`; -1 if none.
  int Leader(std::chrono::seconds timeout) { return set_->Leader(timeout); }

  int ReadyNodes() {
    v1::ListNodesResponse resp;
    grpc::Status st = set_->client().Call([&](auto ch, grpc::ClientContext* ctx) {
      return v1::NodeService::NewStub(ch)->ListNodes(ctx, v1::ListNodesRequest{}, &resp);
    });
    if (!st.ok()) return -1;
    return static_cast<int>(std::count_if(resp.nodes().begin(), resp.nodes().end(), [](auto& n) {
      return n.state() == v1::NODE_STATE_READY;
    }));
  }

  // Submits one job of two ~2 s tasks; its id when acknowledged, else empty.
  std::string TrySubmit() {
    v1::SubmitJobRequest req;
    v1::JobSpec* s = req.mutable_spec();
    s->set_tenant("acme/e2e/tester");
    s->set_pool("gpu");
    s->set_task_count(2);
    s->set_max_retries(10);
    s->mutable_template_()->add_command("/bin/sh");
    s->mutable_template_()->add_command("-c");
    s->mutable_template_()->add_command(testing::TickingScript(side_, 10));
    s->mutable_template_()->mutable_resources()->mutable_whole_gpus()->set_count(1);
    v1::SubmitJobResponse resp;
    grpc::Status st = set_->client().Call(
        [&](auto ch, grpc::ClientContext* ctx) {
          return v1::JobService::NewStub(ch)->SubmitJob(ctx, req, &resp);
        },
        5s);
    return st.ok() ? resp.job_id() : "";
  }

  bool Succeeded(const std::string& id) {
    v1::GetJobRequest req;
    req.set_job_id(id);
    v1::Job job;
    grpc::Status st = set_->client().Call([&](auto ch, grpc::ClientContext* ctx) {
      return v1::JobService::NewStub(ch)->GetJob(ctx, req, &job);
    });
    if (!st.ok()) return false;
    return job.state() == v1::JOB_STATE_SUCCEEDED;
  }

  std::unique_ptr<testing::ReplicaSet> set_;  // its client follows the leader, as gpupoolctl does
  std::string side_;
  std::vector<std::unique_ptr<ChildProcess>> agents_;
};

TEST_F(FailoverE2eTest, KillingTheLeaderLosesNoAcknowledgedJobAndRunsNoTaskTwice) {
  std::vector<std::string> acknowledged;
  for (int round = 0; round < kKills; ++round) {
    for (int i = 0; i < 3; ++i) {
      std::string id = TrySubmit();
      if (!id.empty()) acknowledged.push_back(id);
    }
    const int leader = Leader(60s);
    ASSERT_GE(leader, 0);
    const auto killed_at = std::chrono::steady_clock::now();
    set_->Replica(leader).Kill9();
    const int next = Leader(60s);
    ASSERT_GE(next, 0) << "no standby took over";
    EXPECT_NE(next, leader);
    std::printf("takeover %d: %lld ms (replica %d -> %d)\n", round,
                static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                           std::chrono::steady_clock::now() - killed_at)
                                           .count()),
                leader, next);
    ASSERT_TRUE(set_->Replica(leader).Restart().ok());  // a standby again
  }
  ASSERT_FALSE(acknowledged.empty());
  for (const std::string& id : acknowledged) {
    EXPECT_TRUE(WaitFor([&] { return Succeeded(id); }, 180s)) << "job " << id;
  }
  int executions = 0;
  for (const std::string& v :
       testing::CheckExecutions(testing::ReadExecutions(side_), &executions)) {
    ADD_FAILURE() << v;
  }
  EXPECT_GE(executions, static_cast<int>(acknowledged.size()) * 2);
  EXPECT_TRUE(WaitFor([&] { return ReadyNodes() == 2; }, 60s));
}

}  // namespace
}  // namespace gpupool
