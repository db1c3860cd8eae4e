// placement::VerdictOf (placement/verdict.h): the capacity verdict of a decision, with the
// engine's node counts per reason.
#include "placement/verdict.h"

#include <gtest/gtest.h>

#include "placement/placement.h"
#include "tests/placement/test_util.h"

namespace gpupool::placement {
namespace {

using testing::Node;
using testing::Share;
using testing::Whole;

TEST(VerdictTest, PlacedIsNoVerdict) {
  Engine e{PoolPolicy{}};
  ASSERT_TRUE(e.AddNode(Node("a", 1)).ok());
  EXPECT_EQ(VerdictOf(e.Place(Whole(1))), Verdict{});
}

TEST(VerdictTest, UnplacedCountsTheRefusingNodesPerReason) {
  Engine e{PoolPolicy{}};
  // a and b have one GPU each (two whole GPUs: too few devices); c has two but too little CPU.
  ASSERT_TRUE(e.AddNode(Node("a", 1)).ok());
  ASSERT_TRUE(e.AddNode(Node("b", 1)).ok());
  ASSERT_TRUE(e.AddNode(Node("c", 2, /*cpu=*/500)).ok());
  Decision d = e.Place(Whole(2));
  ASSERT_FALSE(d.placed);
  Verdict v = VerdictOf(d);
  EXPECT_EQ(v.code, VerdictCode::kNoCapacity);
  EXPECT_TRUE(v.binding.empty());
  int32_t total = 0;
  for (const auto& [reason, nodes] : v.nodes_by_reason) {
    EXPECT_GT(nodes, 0) << reason;
    total += nodes;
  }
  EXPECT_EQ(total, 3);  // every node said why, once
  ASSERT_EQ(v.nodes_by_reason.size(), d.rejection_counts.size());
  for (size_t i = 0; i < v.nodes_by_reason.size(); ++i) {
    EXPECT_EQ(v.nodes_by_reason[i].first, d.rejection_counts[i].first);
    EXPECT_EQ(v.nodes_by_reason[i].second, d.rejection_counts[i].second);
  }
}

TEST(VerdictTest, AGangMemberThatDoesNotFitGivesGangWaiting) {
  Engine e{PoolPolicy{}};
  ASSERT_TRUE(e.AddNode(Node("a", 1)).ok());
  std::vector<Request> gang(2, Whole(1));
  Engine::GangResult g = e.PlaceGang(gang);
  ASSERT_FALSE(g.placed);
  Verdict v = VerdictOf(g.failed, VerdictCode::kGangWaiting);
  EXPECT_EQ(v.code, VerdictCode::kGangWaiting);
  ASSERT_EQ(v.nodes_by_reason.size(), 1u);
  EXPECT_EQ(v.nodes_by_reason[0].second, 1);
}

TEST(VerdictTest, AnEmptyPoolSaysSo) {
  Engine e{PoolPolicy{}};
  Verdict v = VerdictOf(e.Place(Share(100)));
  EXPECT_EQ(v.code, VerdictCode::kNoCapacity);
  ASSERT_EQ(v.nodes_by_reason.size(), 1u);
  EXPECT_EQ(v.nodes_by_reason[0].first, "no-nodes");
}

}  // namespace
}  // namespace gpupool::placement
