// Gangs (all or nothing, undone in reverse) and the victim search for preemption.
#include <gtest/gtest.h>

#include "placement/placement.h"
#include "tests/placement/test_util.h"

namespace gpupool::placement {
namespace {

using testing::Node;
using testing::Whole;

TEST(GangTest, AllOrNothingLeavesNoTrace) {
  Engine e(PoolPolicy{});
  ASSERT_TRUE(e.AddNode(Node("a", 4)).ok());
  ASSERT_TRUE(e.AddNode(Node("b", 4)).ok());
  const std::vector<NodeCapacity> before = e.Capacity();
  // 3 × 2 GPUs fit in 8; 5 × 2 do not.
  std::vector<Request> ok(3, Whole(2));
  Engine::GangResult g = e.PlaceGang(ok);
  ASSERT_TRUE(g.placed);
  ASSERT_EQ(g.allocations.size(), 3u);
  std::vector<Request> too_big(5, Whole(2));
  Engine::GangResult bad = e.PlaceGang(too_big);
  EXPECT_FALSE(bad.placed);
  EXPECT_EQ(bad.failed_index, 4);
  EXPECT_FALSE(bad.failed.rejections.empty());
  // Neither call changed the engine.
  const std::vector<NodeCapacity> after = e.Capacity();
  for (size_t i = 0; i < after.size(); ++i)
    for (size_t d = 0; d < after[i].devices.size(); ++d)
      EXPECT_EQ(after[i].devices[d].allocated, before[i].devices[d].allocated);
  // The successful gang's allocations commit as a set, in order.
  for (const Allocation& a : g.allocations) ASSERT_TRUE(e.Commit(a).ok());
  EXPECT_FALSE(e.Place(Whole(4)).placed);
}

RunningTask Running(std::string id, const Allocation& a, int32_t prio, int64_t lost) {
  return RunningTask{std::move(id), a, prio, lost};
}

TEST(PreemptionTest, FewestThenLowestPriorityThenLeastWorkLost) {
  Engine e(PoolPolicy{});
  ASSERT_TRUE(e.AddNode(Node("a", 2)).ok());
  ASSERT_TRUE(e.AddNode(Node("b", 2)).ok());
  std::vector<RunningTask> running;
  // a: two 1-GPU tasks (priority 1, work 100 and 5). b: one 2-GPU task (priority 1, work 10).
  auto place = [&](const std::string& id, Request r, int32_t prio, int64_t lost) {
    Decision d = e.Place(r);
    ASSERT_TRUE(d.placed);
    ASSERT_TRUE(e.Commit(d.allocation).ok());
    running.push_back(Running(id, d.allocation, prio, lost));
  };
  place("a1", Whole(1), 1, 100);
  place("a2", Whole(1), 1, 5);
  place("b1", Whole(2), 1, 10);
  // One GPU needed: evicting a2 alone (1 victim, work 5) beats a1 (work 100) and b1.
  VictimSet v = e.FindVictims(Whole(1), /*priority=*/5, running);
  ASSERT_TRUE(v.found);
  EXPECT_EQ(v.task_ids, std::vector<std::string>{"a2"});
  EXPECT_EQ(v.decision.allocation.node, "a");
  // Two GPUs: b1 alone (1 victim) beats a1 + a2 (2 victims).
  v = e.FindVictims(Whole(2), 5, running);
  ASSERT_TRUE(v.found);
  EXPECT_EQ(v.task_ids, std::vector<std::string>{"b1"});
  // Nobody of lower priority: nothing to find.
  EXPECT_FALSE(e.FindVictims(Whole(1), 1, running).found);
  // The search changed nothing.
  EXPECT_FALSE(e.Place(Whole(1)).placed);
}

TEST(PreemptionTest, SparesVictimsItDoesNotNeed) {
  Engine e(PoolPolicy{});
  ASSERT_TRUE(e.AddNode(Node("a", 1)).ok());
  std::vector<RunningTask> running;
  // Three shares on one GPU: 300 (prio 0), 300 (prio 0), 400 (prio 2). A 600 share needs 600
  // free: cheapest-first takes the two prio-0 tasks (600 freed) and spares the prio-2 one.
  int32_t prios[] = {0, 0, 2};
  int32_t shares[] = {300, 300, 400};
  for (int i = 0; i < 3; ++i) {
    Decision d = e.Place(testing::Share(shares[i]));
    ASSERT_TRUE(e.Commit(d.allocation).ok());
    running.push_back(Running("t" + std::to_string(i), d.allocation, prios[i], 0));
  }
  VictimSet v = e.FindVictims(testing::Share(600), 3, running);
  ASSERT_TRUE(v.found);
  EXPECT_EQ(v.task_ids, (std::vector<std::string>{"t0", "t1"}));
}

}  // namespace
}  // namespace gpupool::placement
