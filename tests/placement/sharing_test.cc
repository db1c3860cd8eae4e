// Sharing modes and overcommit: exclusive and time-sliced pools, MIG profiles, VRAM spill.
#include <gtest/gtest.h>

#include "placement/placement.h"
#include "tests/placement/test_util.h"

namespace gpupool::placement {
namespace {

using testing::Amount;
using testing::Node;
using testing::Share;
using testing::Whole;

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

// Per-device time-slicing (issue 27): a pool mixes a whole GPU, a GPU cut into 4 slots and a MIG
// instance cut into 2; each kind of request lands where it belongs.
NodeSpec MixedNode() {
  NodeSpec n = Node("mix", 2);
  n.devices[1].time_slice_slots = 4;
  DeviceSpec mig = testing::Gpu("mix-gpu2/mig-3g.40gb-0", "A100", 42, 40960);
  mig.mig_profile = "3g.40gb";
  mig.time_slice_slots = 2;
  n.devices.push_back(mig);
  return n;
}

Request Mig(const std::string& profile) {
  Request r;
  r.kind = RequestKind::kMig;
  r.mig_profile = profile;
  return r;
}

TEST(SharingTest, MixedPoolPlacesEachKindWhereItBelongs) {
  Engine e(PoolPolicy{});  // fractional
  ASSERT_TRUE(e.AddNode(MixedNode()).ok());
  // A whole GPU never takes a sliced one: the only unsliced GPU is 0.
  Decision whole = e.Place(Whole(1));
  ASSERT_TRUE(whole.placed);
  EXPECT_EQ(whole.allocation.grants[0].device_id, "mix-gpu0");
  EXPECT_TRUE(whole.allocation.grants[0].exclusive);
  ASSERT_TRUE(e.Commit(whole.allocation).ok());
  EXPECT_FALSE(e.Place(Whole(1)).placed);
  // Fractional requests up to a slot's share take one slot of GPU 1 and hold exactly the slot.
  for (int i = 0; i < 4; ++i) {
    Decision d = e.Place(Amount(10000, 8192));
    ASSERT_TRUE(d.placed) << i;
    EXPECT_EQ(d.allocation.grants[0].device_id, "mix-gpu1");
    EXPECT_EQ(d.allocation.grants[0].slots, 1);
    EXPECT_FALSE(d.allocation.grants[0].exclusive);
    EXPECT_EQ(d.allocation.grants[0].amount, (Resources{25000, 10240}));
    ASSERT_TRUE(e.Commit(d.allocation).ok());
  }
  Decision fifth = e.Place(Amount(10000, 8192));
  ASSERT_FALSE(fifth.placed);
  EXPECT_EQ(e.NodeCapacityOf("mix")->devices[1].slots_used, 4);
  // MIG requests for the instance's profile take its two slots, half the instance each.
  for (int i = 0; i < 2; ++i) {
    Decision d = e.Place(Mig("3g.40gb"));
    ASSERT_TRUE(d.placed) << i;
    EXPECT_EQ(d.allocation.grants[0].device_id, "mix-gpu2/mig-3g.40gb-0");
    EXPECT_EQ(d.allocation.grants[0].slots, 1);
    EXPECT_FALSE(d.allocation.grants[0].exclusive);
    EXPECT_EQ(d.allocation.grants[0].amount, (Resources{21000, 20480}));
    ASSERT_TRUE(e.Commit(d.allocation).ok());
  }
  Decision third = e.Place(Mig("3g.40gb"));
  ASSERT_FALSE(third.placed);
  EXPECT_EQ(third.rejections[0].reason, "slots: need 1, free 0 on GPU 2 (mix-gpu2/mig-3g.40gb-0)");
}

TEST(SharingTest, AShareLargerThanASlotIsRefusedWithTheSlotsSize) {
  Engine e(PoolPolicy{});
  NodeSpec n = Node("a", 1);
  n.devices[0].time_slice_slots = 4;
  ASSERT_TRUE(e.AddNode(n).ok());
  Decision d = e.Place(Amount(10000, 20480));
  ASSERT_FALSE(d.placed);
  EXPECT_EQ(d.rejections[0].reason,
            "slots: need 10 TFLOPS, 20480 MiB; a slot of GPU 0 (a-gpu0) holds 25 TFLOPS, 10240 "
            "MiB");
  Decision w = e.Place(Whole(1));
  ASSERT_FALSE(w.placed);
  EXPECT_EQ(w.rejections[0].reason,
            "slots: GPU 0 (a-gpu0) is time-sliced into 4 slots; a whole GPU needs an unsliced one");
}

TEST(SharingTest, AnExclusivePoolsShareTakesASlotOfASlicedGpu) {
  PoolPolicy p;
  p.sharing = SharingMode::kExclusive;
  Engine e(p);
  NodeSpec n = Node("a", 2);
  n.devices[1].time_slice_slots = 2;
  ASSERT_TRUE(e.AddNode(n).ok());
  // Two shares and one whole GPU fit: the shares on GPU 1's slots, the whole on GPU 0.
  Decision w = e.Place(Whole(1));
  ASSERT_TRUE(w.placed);
  EXPECT_EQ(w.allocation.grants[0].device_id, "a-gpu0");
  ASSERT_TRUE(e.Commit(w.allocation).ok());
  for (int i = 0; i < 2; ++i) {
    Decision d = e.Place(Share(300));
    ASSERT_TRUE(d.placed) << i;
    EXPECT_EQ(d.allocation.grants[0].device_id, "a-gpu1");
    EXPECT_EQ(d.allocation.grants[0].slots, 1);
    ASSERT_TRUE(e.Commit(d.allocation).ok());
  }
  EXPECT_FALSE(e.Place(Share(300)).placed);
}

TEST(SharingTest, ASlotNeedsTheNodeToEnforceWhatThePoolRequiresOfSharedWork) {
  PoolPolicy p;
  p.shared_requires = CapabilityBit(RequirableCapabilities()[0]);
  Engine e(p);
  NodeSpec n = Node("a", 1);
  n.devices[0].time_slice_slots = 2;
  n.capabilities = 0;
  ASSERT_TRUE(e.AddNode(n).ok());
  Request m = Share(100);
  Decision d = e.Place(m);
  ASSERT_FALSE(d.placed);
  EXPECT_EQ(d.rejection_counts[0].first, "capability");
}

TEST(SharingTest, ATimeSlicedPoolLeavesMigInstancesWholeUnlessTheyAreSliced) {
  PoolPolicy p;
  p.sharing = SharingMode::kTimeSliced;
  p.replicas = 4;
  Engine e(p);
  NodeSpec n = Node("a", 0);
  DeviceSpec mig = testing::Gpu("a/mig-1g.10gb-0", "A100", 14, 10240);
  mig.mig_profile = "1g.10gb";
  n.devices.push_back(mig);
  ASSERT_TRUE(e.AddNode(n).ok());
  Decision d = e.Place(Mig("1g.10gb"));
  ASSERT_TRUE(d.placed);
  EXPECT_TRUE(d.allocation.grants[0].exclusive);
  EXPECT_EQ(d.allocation.grants[0].slots, 0);
}

}  // namespace
}  // namespace gpupool::placement
