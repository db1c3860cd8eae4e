// PostgreSQL lost and back under replicas (docs/ha.md, "PostgreSQL loss and return"): three
// gpupoold replicas and one agent on a PostgreSQL server the test stops and starts. While the
// database is down a submission is refused with UNAVAILABLE (never acknowledged); the leader, no
// longer able to prove its lease, stops acting and exits (its supervisor — here the test —
// restarts it as a standby). When the database is back some replica takes the lease with a newer
// epoch and serves; every job acknowledged before the outage completes, and no task's command
// ran twice at once or again after it finished.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <fstream>

#include "api/client/leader_follow.h"
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

// T = 30 s: the agents' tasks ride out the outage (docs/ha.md, "Trade-off").
constexpr char kConfig[] = R"(
scheduler:
  heartbeat_interval_ms: 200
  heartbeat_timeout_ms: 30000
  node_lease_ms: 30000  # L = T: this test's scenarios predate the long lease
  node_lease_stop_grace_ms: 1000
  node_lease_margin_ms: 1000
ha:
  enabled: true
  lease_ms: 1000
)";

constexpr int kReplicas = 3;

class HaPgOutageE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto set = testing::ReplicaSet::Start(
        {.name = "ha-pg-outage", .config = kConfig, .replicas = kReplicas, .fsync = true});
    ASSERT_TRUE(set.ok()) << set.status().ToString();
    set_ = std::move(set).value();
    side_ = set_->dir() + "/side-effects";
    ASSERT_TRUE(set_->CreatePool("gpu").ok());
    testing::AgentProcessOptions o;
    o.dir = set_->dir();
    o.node = "node-0";
    o.scheduler = set_->targets();
    o.gpus = 4;
    auto a = testing::StartAgentProcess(o);
    ASSERT_TRUE(a.ok()) << a.status().ToString();
    agent_ = std::move(a).value();
  }

  void TearDown() override {
    if (agent_) {
      agent_->Signal(SIGTERM);
      agent_->Wait(10s);
    }
    if (set_ && !HasFailure()) set_->RemoveDir();
    set_.reset();
  }

  DaemonProcess& Replica(int i) { return set_->Replica(i); }
  int Leader(std::chrono::seconds timeout) { return set_->Leader(timeout); }

  // The epoch a standby reports (its NotLeader), 0 if none answers as a standby.
  int64_t EpochSeenByStandbys() {
    for (int i = 0; i < kReplicas; ++i) {
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + 5s);
      v1::ListPoolsResponse resp;
      grpc::Status st = v1::PoolService::NewStub(Replica(i).Channel())->ListPools(&ctx, {}, &resp);
      if (auto hint = api::NotLeaderOf(st); hint && !hint->leader_address().empty()) {
        return hint->epoch();
      }
    }
    return 0;
  }

  grpc::Status Submit(std::chrono::milliseconds timeout, std::string* id) {
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
        timeout);
    if (st.ok()) *id = resp.job_id();
    return st;
  }

  bool Succeeded(const std::string& id) {
    v1::GetJobRequest req;
    req.set_job_id(id);
    v1::Job job;
    grpc::Status st = set_->client().Call([&](auto ch, grpc::ClientContext* ctx) {
      return v1::JobService::NewStub(ch)->GetJob(ctx, req, &job);
    });
    return st.ok() && job.state() == v1::JOB_STATE_SUCCEEDED;
  }

  std::unique_ptr<testing::ReplicaSet> set_;
  std::string side_;
  std::unique_ptr<ChildProcess> agent_;
};

TEST_F(HaPgOutageE2eTest, RefusedDuringTheOutageThenANewEpochLeadsAndNothingAcknowledgedIsLost) {
  std::vector<std::string> acknowledged;
  for (int i = 0; i < 2; ++i) {
    std::string id;
    grpc::Status st = Submit(30s, &id);
    ASSERT_TRUE(st.ok()) << st.error_message();
    acknowledged.push_back(id);
  }
  const int leader = Leader(10s);
  ASSERT_GE(leader, 0);
  int64_t epoch_before = 0;
  ASSERT_TRUE(testing::WaitFor([&] { return (epoch_before = EpochSeenByStandbys()) > 0; }, 30s));

  ASSERT_TRUE(set_->postgres().server().Stop().ok());
  // A submission now is refused, never acknowledged: the leader cannot commit it, and once it
  // has stopped acting the standbys name no leader that could.
  {
    std::string id;
    grpc::Status st = Submit(3s, &id);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAVAILABLE) << st.error_message();
    EXPECT_TRUE(id.empty());
  }
  // The leader cannot prove its lease past lease - safety: it stops acting and exits (code 4).
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        // Serving() reaps the child when it has exited; the log says why.
        return !Replica(leader).Serving() &&
               Replica(leader).LogTail(50).find("leader lease lost; stopping") != std::string::npos;
      },
      30s, 50ms))
      << Replica(leader).LogTail(20);
  // No replica serves while the database is down.
  for (int i = 0; i < kReplicas; ++i) EXPECT_FALSE(Replica(i).Serving()) << "replica " << i;

  ASSERT_TRUE(set_->postgres().server().Restart().ok());
  // Its supervisor starts the old leader again, as a standby.
  ASSERT_TRUE(Replica(leader).Restart().ok());

  const int next = Leader(60s);
  ASSERT_GE(next, 0) << "no replica leads after the database came back";
  int64_t epoch_after = 0;
  ASSERT_TRUE(testing::WaitFor([&] { return (epoch_after = EpochSeenByStandbys()) > epoch_before; },
                               30s, 50ms))
      << "epoch before the outage " << epoch_before << ", after " << epoch_after;

  // The new leader accepts work again, and everything acknowledged completes exactly once.
  {
    std::string id;
    grpc::Status st = Submit(30s, &id);
    ASSERT_TRUE(st.ok()) << st.error_message();
    acknowledged.push_back(id);
  }
  for (const std::string& id : acknowledged) {
    EXPECT_TRUE(testing::WaitFor([&] { return Succeeded(id); }, 180s, 200ms)) << "job " << id;
  }
  int executions = 0;
  for (const std::string& v :
       testing::CheckExecutions(testing::ReadExecutions(side_), &executions)) {
    ADD_FAILURE() << v;
  }
  EXPECT_GE(executions, static_cast<int>(acknowledged.size()) * 2);
}

}  // namespace
}  // namespace gpupool
