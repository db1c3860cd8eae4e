// Filter stage: per-device need arithmetic, spill accounting and the reason strings.
#include "placement/fit.h"

#include <gtest/gtest.h>

#include "placement/placement.h"
#include "tests/placement/test_util.h"

namespace gpupool::placement {
namespace {

using testing::Amount;
using testing::Node;
using testing::Share;
using testing::Whole;

DeviceState Device(int64_t tflops_milli, int64_t vram, int64_t alloc_tflops = 0,
                   int64_t alloc_vram = 0) {
  DeviceState d;
  d.id = "g";
  d.physical = Resources{tflops_milli, vram};
  d.offered = d.physical;
  d.allocated = Resources{alloc_tflops, alloc_vram};
  return d;
}

TEST(FitTest, NeedOnShareIsFloorOfPhysical) {
  struct Case {
    int32_t share;
    Resources physical;
    Resources want;
  } cases[] = {
      // 470/1000 × 125000 = 58750 milli-TFLOPS; 470/1000 × 16384 = 7700.48 → 7700 MiB (floor).
      {470, {125000, 16384}, {58750, 7700}},
      // 530/1000 × 16384 = 8683.52 → 8683: 7700 + 8683 = 16383 ≤ 16384, so the pair fits.
      {530, {125000, 16384}, {66250, 8683}},
      {1000, {19000, 16384}, {19000, 16384}},
  };
  for (const Case& c : cases) {
    CompiledRequest r;
    r.kind = RequestKind::kFractional;
    r.share_milli = c.share;
    DeviceState d = Device(c.physical.milli_tflops, c.physical.vram_mib);
    EXPECT_EQ(NeedOn(d, r), c.want) << c.share;
  }
}

TEST(FitTest, NeedMilliOfAbsoluteRequestRoundsUp) {
  CompiledRequest r;
  r.kind = RequestKind::kFractional;
  // 10 TFLOPS of 100 = 100 milli; 20480 MiB of 40960 = 500 milli → the larger, 500.
  r.per_device = Resources{10000, 20480};
  EXPECT_EQ(NeedMilli(Device(100000, 40960), r), 500);
  // 1 milli-TFLOPS of 3 TFLOPS = 0.33 milli → rounds up to 1.
  r.per_device = Resources{1, 0};
  EXPECT_EQ(NeedMilli(Device(3000, 40960), r), 1);
}

TEST(FitTest, SpillDeltaCountsOnlyVramBeyondPhysical) {
  // Physical 16384 MiB, 12288 allocated. +8192 → 20480 allocated: 4096 MiB beyond physical.
  EXPECT_EQ(SpillDelta(Device(1000, 16384, 0, 12288), Resources{0, 8192}), 4096);
  // Already 2048 beyond; +1024 more → 1024 extra spill.
  EXPECT_EQ(SpillDelta(Device(1000, 16384, 0, 18432), Resources{0, 1024}), 1024);
  // Still under physical: no spill.
  EXPECT_EQ(SpillDelta(Device(1000, 16384, 0, 0), Resources{0, 16384}), 0);
}

// Reasons as a person reads them, one row per failing check.
TEST(FitTest, ReasonsPerCheck) {
  Engine e(PoolPolicy{});
  NodeSpec small = Node("n", 2, /*cpu=*/8000, /*mem=*/16384);
  ASSERT_TRUE(e.AddNode(small).ok());
  ASSERT_TRUE(e.Commit(e.Place(Amount(100000, 40960)).allocation).ok());  // GPU 0 full
  ASSERT_TRUE(e.Commit(e.Place(Amount(60000, 8192)).allocation).ok());  // GPU 1: 40000, 32768 free
  struct Case {
    Request req;
    std::string reason;
  } cases[] = {
      {Share(100, 9000, 0), "cpu: need 9000 milli-cores, free 8000"},
      {Share(100, 1000, 20000), "memory: need 20000 MiB, free 16384 MiB"},
      {Amount(1000, 36864), "vram: need 36864 MiB, free 32768 MiB on GPU 1 (n-gpu1)"},
      {Amount(50000, 1024), "compute: need 50 TFLOPS, free 40 TFLOPS on GPU 1 (n-gpu1)"},
      {testing::Whole(1), "devices: GPU 1 (n-gpu1) is in use"},
  };
  for (const Case& c : cases) {
    Decision d = e.Place(c.req);
    ASSERT_FALSE(d.placed) << c.reason;
    ASSERT_EQ(d.rejections.size(), 1u);
    EXPECT_EQ(d.rejections[0].reason, c.reason);
  }
}

TEST(FitTest, ModelConstraintAndUnknownModel) {
  Engine e(PoolPolicy{});
  ASSERT_TRUE(e.AddNode(Node("t4", 1, 64000, 262144, "T4")).ok());
  Request r = Share(500);
  r.allowed_models = {"A100"};
  Decision d = e.Place(r);
  ASSERT_FALSE(d.placed);
  EXPECT_EQ(d.rejections[0].reason, "model: no node in the pool has an allowed model");
  r.allowed_models = {"A100", "T4"};
  EXPECT_TRUE(e.Place(r).placed);
}

// Shared work goes only where the node enforces what the pool requires (issue 24): a slice is
// never sold on a node that cannot hold its tenant to it. Whole GPUs are not held to it, and
// preemption does not look past it either.
TEST(FitTest, SharedWorkNeedsTheCapabilitiesThePoolRequires) {
  PoolPolicy policy;
  policy.shared_requires = CapabilityBit("vram_cap") | CapabilityBit("sandbox");
  Engine e(policy);
  NodeSpec bare = Node("bare", 2);
  bare.capabilities = CapabilityBit("sandbox");  // no VRAM cap
  ASSERT_TRUE(e.AddNode(bare).ok());
  Decision d = e.Place(Share(500));
  ASSERT_FALSE(d.placed);
  ASSERT_EQ(d.rejections.size(), 1u);
  EXPECT_EQ(d.rejections[0].reason,
            "capability: cannot enforce vram_cap (the pool requires it for shared work)");
  EXPECT_EQ(d.rejection_counts, (std::vector<std::pair<std::string, int>>{{"capability", 1}}));
  // A whole GPU needs no slice enforcement.
  Decision whole = e.Place(Whole(1));
  ASSERT_TRUE(whole.placed);
  ASSERT_TRUE(e.Commit(whole.allocation).ok());
  // Preempting the whole-GPU task would not make the node able to enforce a slice.
  std::vector<RunningTask> running{{"t1", whole.allocation, 0, 0}};
  EXPECT_FALSE(e.FindVictims(Share(1000), 10, running).found);
  // A node that enforces both takes the share; the bare one still does not.
  NodeSpec enforcing = Node("enforcing", 1);
  enforcing.capabilities =
      CapabilityBit("vram_cap") | CapabilityBit("sandbox") | CapabilityBit("compute_share");
  ASSERT_TRUE(e.AddNode(enforcing).ok());
  Decision shared = e.Place(Share(500));
  ASSERT_TRUE(shared.placed);
  EXPECT_EQ(shared.allocation.node, "enforcing");
}

TEST(FitTest, RejectionsAreBoundedAndCounted) {
  Engine e(PoolPolicy{});
  for (int i = 0; i < 25; ++i) ASSERT_TRUE(e.AddNode(Node("n" + std::to_string(i), 1, 1000)).ok());
  Decision d = e.Place(Share(100, 2000));
  ASSERT_FALSE(d.placed);
  EXPECT_EQ(static_cast<int>(d.rejections.size()), Decision::kMaxRejections);
  ASSERT_EQ(d.rejection_counts.size(), 1u);
  EXPECT_EQ(d.rejection_counts[0], (std::pair<std::string, int>{"cpu", 25}));
}

}  // namespace
}  // namespace gpupool::placement
