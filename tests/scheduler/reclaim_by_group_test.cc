// Reclaim by group on the deterministic core (scheduler/core_reclaim.cc): borrowing is a property
// of a share group's total, so a group below its guarantee may take any tasks of groups above
// theirs — on one node, of any class when its own cannot make room — as long as each of those
// groups keeps its guarantee; no preemption, by either rule, pushes another group below its
// guarantee; minimum runtimes hold; and the groups reclaimed from do not take the room back.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "scheduler/core.h"
#include "tests/scheduler/core_harness.h"

namespace gpupool {
namespace {

using testing::CoreHarness;
using testing::kSecond;

JobSpec Job(const std::string& tenant, const std::string& cls, int gpus, int tasks = 1) {
  JobSpec s = CoreHarness::As(tenant, CoreHarness::Whole("gpu", gpus, tasks));
  s.priority_class = cls;
  return s;
}

// Reports RUNNING for every task of `job` at the current clock.
void StartAll(CoreHarness& h, int64_t job, int tasks) {
  for (int i = 0; i < tasks; ++i) h.Report(h.Task(job, i).node, job, i, TaskState::kRunning);
}

std::set<std::string> StoppedTasks(const CoreHarness& h) {
  std::set<std::string> out;
  for (const auto& [node, cmd] : h.agents.stops) out.insert(cmd.task_id);
  return out;
}

void Pass(CoreHarness& h, int64_t seconds) {
  h.clock.Advance(seconds * kSecond);
  for (const char* n : {"n0", "n1"}) h.core->OnHeartbeat(n, {});
  h.core->Tick();
  h.Drain();
}

// Two 4-GPU nodes. a (high) and c (low) each hold four GPUs against a guarantee of two: on n0 a's
// two oldest tasks and c's two youngest, on n1 the other way round — so no node holds only the
// tasks that started after their group's guarantee was full (the old per-task rule found none).
// b, guaranteed 4 and holding nothing, asks for a whole node (normal, 4 GPUs): it gets one,
// taking two tasks of each group, and each is left exactly at its guarantee.
TEST(ReclaimByGroupTest, WholeNodeFromTwoGroupsAboveTheirGuarantees) {
  CoreHarness h;
  ASSERT_TRUE(h.CreatePool("gpu").ok());
  for (const char* t : {"t", "t/a", "t/b", "t/c"}) ASSERT_TRUE(h.CreateTenant(t).ok());
  ASSERT_TRUE(h.SetQuota("t/a", "gpu", CoreHarness::Devices(2), CoreHarness::Devices(8)).ok());
  ASSERT_TRUE(h.SetQuota("t/c", "gpu", CoreHarness::Devices(2), CoreHarness::Devices(8)).ok());
  ASSERT_TRUE(h.SetQuota("t/b", "gpu", CoreHarness::Devices(4), CoreHarness::Devices(4)).ok());
  ASSERT_TRUE(h.Register("n0", "gpu", 4).ok());
  ASSERT_TRUE(h.Register("n1", "gpu", 4).ok());
  // First-fit: n0 takes a_old and c_young, n1 c_old and a_young.
  Result<JobRecord> a_old = h.Submit(Job("t/a", "high", 1, 2));
  Result<JobRecord> c_young = h.Submit(Job("t/c", "low", 1, 2));
  Result<JobRecord> c_old = h.Submit(Job("t/c", "low", 1, 2));
  Result<JobRecord> a_young = h.Submit(Job("t/a", "high", 1, 2));
  ASSERT_TRUE(a_old.ok() && c_young.ok() && c_old.ok() && a_young.ok());
  ASSERT_EQ(h.Task(a_old->id).node, "n0");
  ASSERT_EQ(h.Task(c_old->id).node, "n1");
  StartAll(h, a_old->id, 2);
  StartAll(h, c_old->id, 2);
  h.clock.Advance(100 * kSecond);
  StartAll(h, a_young->id, 2);
  StartAll(h, c_young->id, 2);
  h.clock.Advance(61 * kSecond);  // past high's 60 s minimum runtime

  Result<JobRecord> b = h.Submit(Job("t/b", "normal", 4));
  ASSERT_TRUE(b.ok());
  // Victims of b's own class or lower (c's low tasks) cannot free a node; with a's high ones they
  // can: all four tasks of one node.
  std::set<std::string> stopped = StoppedTasks(h);
  ASSERT_EQ(stopped.size(), 4u) << h.Task(b->id).reason;
  std::set<std::string> nodes;
  for (const auto& [node, cmd] : h.agents.stops) nodes.insert(node);
  EXPECT_EQ(nodes.size(), 1u);
  int of_a = 0, of_c = 0;
  for (const std::string& id : stopped) {
    int64_t job = 0;
    int32_t index = 0;
    ASSERT_TRUE(ParseTaskId(id, &job, &index));
    of_a += job == a_old->id || job == a_young->id;
    of_c += job == c_old->id || job == c_young->id;
    EXPECT_EQ(h.Task(job, index).preempted_by.rule, PreemptRule::kReclaim);
  }
  EXPECT_EQ(of_a, 2);
  EXPECT_EQ(of_c, 2);
  h.ExitStopped();
  EXPECT_EQ(h.Task(b->id).state, TaskState::kScheduled);
  EXPECT_EQ(h.core->GetQuota("t/a", "gpu")->used.devices, 2);
  EXPECT_EQ(h.core->GetQuota("t/c", "gpu")->used.devices, 2);

  // No ping-pong: a and c sit at their guarantees with tasks waiting; a's are high and may
  // preempt lower classes, but b keeps only its guarantee and is no one's to take. Nothing is
  // stopped again, however long they wait.
  h.RunStarted();
  for (int i = 0; i < 5; ++i) Pass(h, 120);
  EXPECT_EQ(h.agents.stops.size(), 4u);
  EXPECT_EQ(h.Task(b->id).state, TaskState::kRunning);
}

// a holds four 1-GPU tasks on one 4-GPU node against a guarantee of `a_guaranteed`; b (normal,
// guaranteed 4) asks for `b_gpus`. a loses only what it can spare, and only tasks past their
// class's minimum runtime.
TEST(ReclaimByGroupTest, AGroupLosesOnlyWhatItCanSpare) {
  struct Case {
    std::string name;
    int32_t a_guaranteed;
    int b_gpus;
    int64_t running_s;  // how long a's tasks (normal: 60 s minimum) have run
    size_t stops;
  };
  std::vector<Case> cases{
      {"one to spare, one taken", 3, 1, 100, 1},
      {"one to spare, two needed: untouched", 3, 2, 100, 0},
      {"two to spare, two taken", 2, 2, 100, 2},
      {"within the minimum runtime: untouched", 2, 2, 30, 0},
  };
  for (const Case& c : cases) {
    CoreHarness h;
    ASSERT_TRUE(h.CreatePool("gpu").ok());
    for (const char* t : {"t", "t/a", "t/b"}) ASSERT_TRUE(h.CreateTenant(t).ok());
    ASSERT_TRUE(
        h.SetQuota("t/a", "gpu", CoreHarness::Devices(c.a_guaranteed), CoreHarness::Devices(4))
            .ok());
    ASSERT_TRUE(h.SetQuota("t/b", "gpu", CoreHarness::Devices(4), CoreHarness::Devices(4)).ok());
    ASSERT_TRUE(h.Register("n0", "gpu", 4).ok());
    Result<JobRecord> a = h.Submit(Job("t/a", "normal", 1, 4));
    ASSERT_TRUE(a.ok());
    h.RunStarted();
    h.clock.Advance(c.running_s * kSecond);
    Result<JobRecord> b = h.Submit(Job("t/b", "normal", c.b_gpus));
    ASSERT_TRUE(b.ok());
    EXPECT_EQ(h.agents.stops.size(), c.stops) << c.name;
    h.ExitStopped();
    EXPECT_GE(h.core->GetQuota("t/a", "gpu")->used.devices, c.a_guaranteed) << c.name;
    EXPECT_EQ(h.Task(b->id).state, c.stops > 0 ? TaskState::kScheduled : TaskState::kPending)
        << c.name;
  }
}

// The priority rule obeys guarantees across groups too: a high task of a group without a
// guarantee may not stop a low task of a group that holds no more than its guarantee (the old
// core did), but may stop one of a group above its guarantee, and any lower task of its own group.
TEST(ReclaimByGroupTest, PriorityPreemptionDoesNotPushAnotherGroupBelowItsGuarantee) {
  struct Case {
    std::string name;
    std::string victim_tenant;
    int32_t victim_guaranteed;  // devices guaranteed to t/a
    bool stopped;
  };
  std::vector<Case> cases{
      {"other group at its guarantee", "t/a", 1, false},
      {"other group above its guarantee", "t/a", 0, true},  // no guarantee: all borrowed
      {"own group", "t/h", 1, true},
  };
  for (const Case& c : cases) {
    CoreHarness h;
    ASSERT_TRUE(h.CreatePool("gpu").ok());
    for (const char* t : {"t", "t/a", "t/h"}) ASSERT_TRUE(h.CreateTenant(t).ok());
    ASSERT_TRUE(
        h.SetQuota("t/a", "gpu", CoreHarness::Devices(c.victim_guaranteed), CoreHarness::Devices(2))
            .ok());
    ASSERT_TRUE(h.Register("n0", "gpu", 1).ok());
    Result<JobRecord> low = h.Submit(Job(c.victim_tenant, "low", 1));
    ASSERT_TRUE(low.ok());
    h.RunStarted();
    h.clock.Advance(10 * kSecond);
    Result<JobRecord> high = h.Submit(Job("t/h", "high", 1));
    ASSERT_TRUE(high.ok());
    EXPECT_EQ(h.agents.stops.size(), c.stopped ? 1u : 0u) << c.name;
    if (!c.stopped) {
      EXPECT_EQ(h.Task(high->id).state, TaskState::kPending) << c.name;
    }
  }
}

}  // namespace
}  // namespace gpupool
