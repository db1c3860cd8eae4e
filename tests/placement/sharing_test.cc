// Sharing modes and overcommit: exclusive and time-sliced pools, MIG profiles, VRAM spill.
#include <gtest/gtest.h>

#include "placement/placement.h"
#include "tests/placement/test_util.h"

namespace gpupool::placement {
namespace {

using testing::Amount;
using testing::Node;
using testing::Share;

TEST(SharingTest, OvercommitScalesOfferedAndSpillNeedsBudget) {
  PoolPolicy p;
  p.compute = Ratio{2000};  // offered compute 2 × 100 = 200 TFLOPS
  p.memory = Ratio{1500};   // offered VRAM 1.5 × 40960 = 61440 MiB
  Engine e(p);
  NodeSpec n = Node("a", 1);
  n.spill_budget_mib = 10240;
  ASSERT_TRUE(e.AddNode(n).ok());
  auto cap = *e.NodeCapacityOf("a");
  EXPECT_EQ(cap.devices[0].offered, (Resources{200000, 61440}));
  // 40960 physical + 10240 spill = 51200 MiB may be promised; 20480 more than physical would not.
  Decision d1 = e.Place(Amount(1000, 40960));
  ASSERT_TRUE(e.Commit(d1.allocation).ok());
  Decision d2 = e.Place(Amount(1000, 10240));
  ASSERT_TRUE(d2.placed);
  ASSERT_TRUE(e.Commit(d2.allocation).ok());
  EXPECT_EQ(e.NodeCapacityOf("a")->spill_used_mib, 10240);
  Decision d3 = e.Place(Amount(1000, 1024));
  ASSERT_FALSE(d3.placed);
  EXPECT_EQ(d3.rejections[0].reason,
            "spill: need 1024 MiB of host RAM to back VRAM on GPU 0 (a-gpu0), budget left 0 MiB");
  ASSERT_TRUE(e.Release(d2.allocation).ok());
  EXPECT_EQ(e.NodeCapacityOf("a")->spill_used_mib, 0);
}

TEST(SharingTest, NoBudgetMeansPhysicalVramIsNeverPromisedTwice) {
  PoolPolicy p;
  p.memory = Ratio{2000};
  Engine e(p);
  ASSERT_TRUE(e.AddNode(Node("a", 1)).ok());  // spill budget 0
  ASSERT_TRUE(e.Commit(e.Place(Amount(1000, 40960)).allocation).ok());
  EXPECT_FALSE(e.Place(Amount(1000, 1)).placed);
}

TEST(SharingTest, ExclusivePoolGivesWholeDevices) {
  PoolPolicy p;
  p.sharing = SharingMode::kExclusive;
  Engine e(p);
  ASSERT_TRUE(e.AddNode(Node("a", 2)).ok());
  Decision d = e.Place(Share(100));
  ASSERT_TRUE(d.placed);
  EXPECT_TRUE(d.allocation.grants[0].exclusive);
  ASSERT_TRUE(e.Commit(d.allocation).ok());
  ASSERT_TRUE(e.Commit(e.Place(Share(100)).allocation).ok());
  EXPECT_FALSE(e.Place(Share(100)).placed);  // two tasks, two devices
}

TEST(SharingTest, TimeSlicedPoolOffersReplicas) {
  PoolPolicy p;
  p.sharing = SharingMode::kTimeSliced;
  p.replicas = 4;
  Engine e(p);
  NodeSpec n = Node("a", 1);
  ASSERT_TRUE(e.AddNode(n).ok());
  std::vector<Allocation> a;
  for (int i = 0; i < 4; ++i) {
    Decision d = e.Place(Share(900));
    ASSERT_TRUE(d.placed) << i;
    // Each replica is a quarter: 100 TFLOPS / 4 = 25 TFLOPS, 40960 / 4 = 10240 MiB.
    EXPECT_EQ(d.allocation.grants[0].amount, (Resources{25000, 10240}));
    EXPECT_EQ(d.allocation.grants[0].slots, 1);
    ASSERT_TRUE(e.Commit(d.allocation).ok());
    a.push_back(d.allocation);
  }
  Decision full = e.Place(Share(100));
  ASSERT_FALSE(full.placed);
  EXPECT_EQ(full.rejections[0].reason, "slots: need 1, free 0 on GPU 0 (a-gpu0)");
  EXPECT_EQ(e.NodeCapacityOf("a")->devices[0].slots_used, 4);
  ASSERT_TRUE(e.Release(a[0]).ok());
  EXPECT_TRUE(e.Place(Share(100)).placed);
}

TEST(SharingTest, MigInstancesByProfile) {
  Engine e(PoolPolicy{});
  NodeSpec n;
  n.name = "mig";
  n.cpu_milli = 64000;
  n.memory_mib = 262144;
  for (int i = 0; i < 3; ++i) {
    DeviceSpec d = testing::Gpu("GPU-0/mig-" + std::to_string(i), "A100", 14, 10240);
    d.mig_profile = i < 2 ? "1g.10gb" : "3g.40gb";
    n.devices.push_back(d);
  }
  ASSERT_TRUE(e.AddNode(n).ok());
  Request r;
  r.kind = RequestKind::kMig;
  r.mig_profile = "1g.10gb";
  for (int i = 0; i < 2; ++i) {
    Decision d = e.Place(r);
    ASSERT_TRUE(d.placed);
    EXPECT_TRUE(d.allocation.grants[0].exclusive);
    ASSERT_TRUE(e.Commit(d.allocation).ok());
  }
  EXPECT_FALSE(e.Place(r).placed);  // both 1g instances taken; the 3g one does not match
  r.mig_profile = "3g.40gb";
  EXPECT_EQ(e.Place(r).allocation.grants[0].device_id, "GPU-0/mig-2");
  EXPECT_FALSE(e.Place(Share(100)).placed);  // MIG instances serve MIG requests only
}

TEST(SharingTest, UnhealthyDevicesAreSkipped) {
  Engine e(PoolPolicy{});
  ASSERT_TRUE(e.AddNode(Node("a", 2)).ok());
  ASSERT_TRUE(e.SetDeviceHealthy("a", "a-gpu0", false).ok());
  EXPECT_EQ(e.Place(Share(500)).allocation.grants[0].device_id, "a-gpu1");
  EXPECT_FALSE(e.Place(testing::Whole(2)).placed);
  EXPECT_EQ(e.SetDeviceHealthy("a", "nope", false).code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace gpupool::placement
