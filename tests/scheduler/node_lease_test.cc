// The scheduler's side of the node lease (scheduler/node_lease.h): a silent node is NOT_READY at
// the heartbeat timeout T, its tasks move only after T + stop grace + margin; a lost node's
// heartbeats renew nothing until it registers again, which reconciles it and makes it READY; a
// task its agent stopped because the lease lapsed is requeued, not failed.
#include "scheduler/node_lease.h"

#include <gtest/gtest.h>

#include <set>

#include "tests/scheduler/core_harness.h"

namespace gpupool::testing {
namespace {

SchedulerOptions LeaseOptions() {
  SchedulerOptions o = SchedulerOptions::Defaults();
  o.heartbeat_timeout_ms = 3000;      // T
  o.node_lease_stop_grace_ms = 1000;  // G
  o.node_lease_margin_ms = 1000;      // requeue after 5 s of silence
  return o;
}

// Advances the clock in 500 ms ticks, keeping `alive` heartbeating.
void Pass(CoreHarness& h, int64_t us, const std::string& alive) {
  for (int64_t done = 0; done < us; done += kSecond / 2) {
    h.clock.Advance(kSecond / 2);
    if (!alive.empty()) (void)h.core->OnLeaseHeartbeat(alive, {});
    h.core->Tick();
    h.Drain();
  }
}

struct LeaseFixture {
  CoreHarness h{LeaseOptions()};
  int64_t job = 0;

  LeaseFixture() {
    EXPECT_TRUE(h.CreatePool("gpu").ok());
    EXPECT_TRUE(h.Register("n1", "gpu", 1).ok());
    Result<JobRecord> j = h.Submit(CoreHarness::Whole("gpu", 1));
    EXPECT_TRUE(j.ok());
    job = j->id;
    h.Report("n1", job, 0, TaskState::kRunning);
    EXPECT_TRUE(h.Register("n2", "gpu", 1).ok());
  }
};

TEST(NodeLeaseTest, ReleaseWaitsForTheLeasePlusGraceAndMargin) {
  LeaseFixture f;
  EXPECT_EQ(NodeLeaseReleaseAfterUs(LeaseOptions()), 5 * kSecond);
  Pass(f.h, 3500'000, "n2");
  EXPECT_EQ(f.h.core->GetNode("n1")->node.state, NodeState::kNotReady);
  TaskRecord t = f.h.Task(f.job);
  EXPECT_EQ(t.state, TaskState::kRunning);  // n1 may still run it: its lease has not lapsed
  EXPECT_EQ(t.node, "n1");
  EXPECT_EQ(f.h.agents.starts.size(), 1u);
  Pass(f.h, 1000'000, "n2");  // 4.5 s
  EXPECT_EQ(f.h.Task(f.job).node, "n1");
  Pass(f.h, 1000'000, "n2");  // 5.5 s > T + G + margin
  t = f.h.Task(f.job);
  EXPECT_EQ(t.node, "n2");
  EXPECT_EQ(t.attempt, 1);
  EXPECT_EQ(t.state, TaskState::kScheduled);
}

TEST(NodeLeaseTest, HeartbeatsOfALostNodeRenewNothingUntilItRegistersAgain) {
  LeaseFixture f;
  Pass(f.h, 3500'000, "n2");
  ASSERT_EQ(f.h.core->GetNode("n1")->node.state, NodeState::kNotReady);
  // n1's heartbeats come back (SIGCONT): no renewal, and the release clock keeps running.
  LeaseAnswer a = f.h.core->OnLeaseHeartbeat("n1", {});
  EXPECT_EQ(a.verdict, LeaseVerdict::kRegisterAgain);
  EXPECT_EQ(f.h.core->OnLeaseHeartbeat("n2", {}).verdict, LeaseVerdict::kRenewed);
  EXPECT_EQ(f.h.core->OnLeaseHeartbeat("nope", {}).verdict, LeaseVerdict::kRegisterAgain);
  Pass(f.h, 2000'000, "n2");
  EXPECT_EQ(f.h.Task(f.job).node, "n2");
  // It registers again (its agent stopped the task when its lease lapsed): READY, and the old
  // attempt, if still reported, is told to stop.
  Result<RegistrationResult> r = f.h.Register("n1", "gpu", 1, {{TaskId(f.job, 0), 0}});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(f.h.core->GetNode("n1")->node.state, NodeState::kReady);
  EXPECT_EQ(r->stop_task_ids, std::vector<std::string>{TaskId(f.job, 0)});
  EXPECT_EQ(r->lease_ms, 3000);
  EXPECT_EQ(r->lease_stop_grace_ms, 1000);
  EXPECT_EQ(f.h.core->OnLeaseHeartbeat("n1", {}).verdict, LeaseVerdict::kRenewed);
}

TEST(NodeLeaseTest, ANodeBackBeforeTheReleaseKeepsItsTasks) {
  LeaseFixture f;
  Pass(f.h, 3500'000, "n2");
  ASSERT_EQ(f.h.core->GetNode("n1")->node.state, NodeState::kNotReady);
  ASSERT_TRUE(f.h.Register("n1", "gpu", 1, {{TaskId(f.job, 0), 0}}).ok());
  EXPECT_EQ(f.h.core->GetNode("n1")->node.state, NodeState::kReady);
  Pass(f.h, 3000'000, "n1");
  TaskRecord t = f.h.Task(f.job);
  EXPECT_EQ(t.node, "n1");
  EXPECT_EQ(t.attempt, 0);
  EXPECT_EQ(t.state, TaskState::kRunning);
}

TEST(NodeLeaseTest, ATaskStoppedForALapsedLeaseIsRequeuedNotFailed) {
  LeaseFixture f;
  TaskReport r;
  r.node = "n1";
  r.task_id = TaskId(f.job, 0);
  r.attempt = 0;
  r.state = TaskState::kFailed;
  r.signal = 15;
  r.lease_expired = true;
  f.h.core->OnTaskReport(r);
  f.h.Drain();
  TaskRecord t = f.h.Task(f.job);
  EXPECT_EQ(t.attempt, 1);
  EXPECT_NE(t.state, TaskState::kFailed);
  EXPECT_NE(f.h.core->GetJob(f.job)->state, JobState::kFailed);
}

// A restarted scheduler counts every node as renewed at recovery: agents have the whole
// T + G + margin to come back and re-report before anything of theirs moves.
TEST(NodeLeaseTest, ARestartGivesAgentsTheWholeLeaseToReconnect) {
  std::shared_ptr<MemoryDatabase> db = MemoryStore().database();
  int64_t job = 0;
  {
    CoreHarness h(LeaseOptions(), db);
    ASSERT_TRUE(h.CreatePool("gpu").ok());
    ASSERT_TRUE(h.Register("n1", "gpu", 1).ok());
    ASSERT_TRUE(h.Register("n2", "gpu", 1).ok());
    Result<JobRecord> j = h.Submit(CoreHarness::Whole("gpu", 1));
    ASSERT_TRUE(j.ok());
    job = j->id;
    h.Report(h.Task(job).node, job, 0, TaskState::kRunning);
  }
  CoreHarness h(LeaseOptions(), db);
  const std::string node = h.Task(job).node;
  const std::string other = node == "n1" ? "n2" : "n1";
  ASSERT_TRUE(h.Register(other, "gpu", 1).ok());
  Pass(h, 4500'000, other);
  EXPECT_EQ(h.Task(job).node, node);
  EXPECT_EQ(h.Task(job).attempt, 0);
  // The agent re-reports the task finished while the scheduler was down: done, never re-run.
  h.Report(node, job, 0, TaskState::kSucceeded);
  ASSERT_TRUE(h.Register(node, "gpu", 1).ok());
  Pass(h, 3000'000, other);
  EXPECT_EQ(h.Task(job).state, TaskState::kSucceeded);
  EXPECT_EQ(h.Task(job).attempt, 0);
}

}  // namespace
}  // namespace gpupool::testing

namespace gpupool::testing {
namespace {

// Issue 30: with a long node lease L (5 minutes, gpupoold's default) a silent node keeps its
// tasks; an admin who knows the node is powered off fences it and they run elsewhere at once. A
// node whose agent is connected cannot be fenced.
TEST(NodeLeaseTest, ALongLeaseKeepsTheWorkAndAFenceReleasesItAtOnce) {
  SchedulerOptions o = LeaseOptions();
  o.node_lease_ms = 300'000;
  EXPECT_EQ(NodeLeaseMs(o), 300'000);
  EXPECT_EQ(NodeLeaseReleaseAfterUs(o), 302 * kSecond);
  CoreHarness h(o);
  ASSERT_TRUE(h.CreatePool("gpu").ok());
  ASSERT_TRUE(h.Register("n1", "gpu", 1).ok());
  Result<JobRecord> j = h.Submit(CoreHarness::Whole("gpu", 1));
  ASSERT_TRUE(j.ok());
  h.Report("n1", j->id, 0, TaskState::kRunning);
  ASSERT_TRUE(h.Register("n2", "gpu", 1).ok());
  // A connected node is refused, naming why; nothing moves.
  Result<NodeView> live = h.Sync<NodeView>([&](auto cb) { h.core->FenceNode("n1", "ops", cb); });
  EXPECT_EQ(live.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(live.status().message().find("its agent is connected"), std::string::npos)
      << live.status().message();
  EXPECT_EQ(h.Task(j->id).node, "n1");
  // Silent for a minute (past T = 3 s, well within L): NOT_READY, and the task stays.
  Pass(h, 60 * kSecond, "n2");
  EXPECT_EQ(h.core->GetNode("n1")->node.state, NodeState::kNotReady);
  EXPECT_EQ(h.Task(j->id).state, TaskState::kRunning);
  EXPECT_EQ(h.Task(j->id).node, "n1");
  // Fenced: requeued at once and started on n2, the fence recorded.
  Result<NodeView> fenced =
      h.Sync<NodeView>([&](auto cb) { h.core->FenceNode("n1", "key ops", cb); });
  ASSERT_TRUE(fenced.ok()) << fenced.status().ToString();
  h.core->Tick();
  h.Drain();
  const TaskRecord t = h.Task(j->id);
  EXPECT_EQ(t.node, "n2");
  EXPECT_EQ(t.attempt, 1);
  EXPECT_EQ(
      h.Sync<NodeView>([&](auto cb) { h.core->FenceNode("nope", "ops", cb); }).status().code(),
      StatusCode::kNotFound);
}

}  // namespace
}  // namespace gpupool::testing

namespace gpupool::testing {
namespace {

// Issue 30: a gang member lost with its node takes its gang down: the member is requeued, every
// other member is stopped for requeue (before, it ran on alone while its peers waited forever in
// their collective), and the gang runs again whole.
TEST(NodeLeaseTest, AGangMemberLostWithItsNodeRestartsTheWholeGang) {
  CoreHarness h(LeaseOptions());
  ASSERT_TRUE(h.CreatePool("gpu").ok());
  ASSERT_TRUE(h.Register("n1", "gpu", 1).ok());
  ASSERT_TRUE(h.Register("n2", "gpu", 1).ok());
  JobSpec gang = CoreHarness::Whole("gpu", 1, 2);
  gang.gang = true;
  gang.max_retries = 3;
  Result<JobRecord> j = h.Submit(gang);
  ASSERT_TRUE(j.ok()) << j.status().ToString();
  h.Report(h.Task(j->id, 0).node, j->id, 0, TaskState::kRunning);
  h.Report(h.Task(j->id, 1).node, j->id, 1, TaskState::kRunning);
  const int32_t on_n1 = h.Task(j->id, 0).node == "n1" ? 0 : 1;
  const int32_t on_n2 = 1 - on_n1;
  ASSERT_TRUE(h.Register("n3", "gpu", 1).ok());
  // n1 goes silent past T + G + margin; n2 and n3 keep heartbeating.
  for (int64_t done = 0; done < 6 * kSecond; done += kSecond / 2) {
    h.clock.Advance(kSecond / 2);
    (void)h.core->OnLeaseHeartbeat("n2", {});
    (void)h.core->OnLeaseHeartbeat("n3", {});
    h.core->Tick();
    h.Drain();
  }
  // The lost member is requeued; its sibling on n2 was told to stop, and nothing is placed yet.
  EXPECT_EQ(h.Task(j->id, on_n1).state, TaskState::kPending);
  ASSERT_FALSE(h.agents.stops.empty());
  EXPECT_EQ(h.agents.stops.back().first, "n2");
  EXPECT_EQ(h.agents.stops.back().second.task_id, TaskId(j->id, on_n2));
  EXPECT_EQ(h.Task(j->id, on_n2).stop, StopIntent::kDrain);
  // The sibling exits: the whole gang is placed again, on n2 and n3.
  h.ExitStopped();
  h.core->Tick();
  h.Drain();
  std::set<std::string> nodes;
  for (int32_t i = 0; i < 2; ++i) {
    const TaskRecord t = h.Task(j->id, i);
    EXPECT_EQ(t.state, TaskState::kScheduled) << i;
    EXPECT_EQ(t.attempt, 1) << i;
    nodes.insert(t.node);
  }
  EXPECT_EQ(nodes, (std::set<std::string>{"n2", "n3"}));
}

}  // namespace
}  // namespace gpupool::testing
