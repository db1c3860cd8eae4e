// Multi-GPU tasks take the best-connected devices (Boost.Graph distances over the links).
#include "placement/topology.h"

#include <gtest/gtest.h>

#include "placement/placement.h"
#include "tests/placement/test_util.h"

namespace gpupool::placement {
namespace {

TEST(TopologyTest, DistancesFollowCheapestPathCappedAtSystem) {
  // 0–1 NVLink (1), 1–2 PCIe switch (2), 3 unlinked.
  std::vector<Link> links = {{0, 1, LinkKind::kNvlink}, {1, 2, LinkKind::kPcieSwitch}};
  std::vector<int> d = BuildDistances(4, links);
  ASSERT_EQ(d.size(), 16u);
  EXPECT_EQ(d[0 * 4 + 1], 1);
  EXPECT_EQ(d[0 * 4 + 2], 3);  // 0→1→2 = 1 + 2
  EXPECT_EQ(d[0 * 4 + 3], 8);  // through the system
  EXPECT_EQ(d[2 * 4 + 2], 0);
  EXPECT_TRUE(BuildDistances(4, {}).empty());
}

TEST(TopologyTest, PicksTheNvLinkedPair) {
  Engine e(PoolPolicy{});
  NodeSpec n = testing::Node("dgx", 4);
  // GPUs 2 and 3 share NVLink; 0 and 1 sit on one PCIe switch.
  n.links = {{2, 3, LinkKind::kNvlink}, {0, 1, LinkKind::kPcieSwitch}, {1, 2, LinkKind::kPcieHost}};
  ASSERT_TRUE(e.AddNode(n).ok());
  Decision d = e.Place(testing::Whole(2));
  ASSERT_TRUE(d.placed);
  ASSERT_EQ(d.allocation.grants.size(), 2u);
  EXPECT_EQ(d.allocation.grants[0].device_index, 2);
  EXPECT_EQ(d.allocation.grants[1].device_index, 3);
  ASSERT_TRUE(e.Commit(d.allocation).ok());
  // Next pair: 0 and 1 (PCIe switch) rather than anything through the system.
  d = e.Place(testing::Whole(2));
  EXPECT_EQ(d.allocation.grants[0].device_index, 0);
  EXPECT_EQ(d.allocation.grants[1].device_index, 1);
}

TEST(TopologyTest, BadLinksAreRejected) {
  Engine e(PoolPolicy{});
  NodeSpec n = testing::Node("x", 2);
  n.links = {{0, 5, LinkKind::kNvlink}};
  EXPECT_EQ(e.AddNode(n).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace gpupool::placement
