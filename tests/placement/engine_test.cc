// Engine basics under first-fit: place, commit, release, inventory events, reasons.
#include <gtest/gtest.h>

#include "placement/placement.h"
#include "placement/strategy.h"
#include "tests/placement/test_util.h"

namespace gpupool::placement {
namespace {

using testing::Amount;
using testing::Node;
using testing::Share;
using testing::Whole;

Engine FirstFit() { return Engine(PoolPolicy{}); }

TEST(EngineTest, FirstFitPlacesOnFirstNodeAndCommits) {
  Engine e = FirstFit();
  ASSERT_TRUE(e.AddNode(Node("a", 2)).ok());
  ASSERT_TRUE(e.AddNode(Node("b", 2)).ok());
  Decision d = e.Place(Share(500));
  ASSERT_TRUE(d.placed);
  EXPECT_EQ(d.allocation.node, "a");
  ASSERT_EQ(d.allocation.grants.size(), 1u);
  // 0.5 of 100 TFLOPS = 50000 milli-TFLOPS; 0.5 of 40960 MiB = 20480 MiB.
  EXPECT_EQ(d.allocation.grants[0].amount, (Resources{50000, 20480}));
  ASSERT_TRUE(e.Commit(d.allocation).ok());
  auto cap = e.NodeCapacityOf("a");
  ASSERT_TRUE(cap.ok());
  EXPECT_EQ(cap->devices[0].allocated, (Resources{50000, 20480}));
  EXPECT_EQ(cap->cpu_allocated, 1000);
  ASSERT_TRUE(e.Release(d.allocation).ok());
  cap = e.NodeCapacityOf("a");
  EXPECT_TRUE(cap->devices[0].allocated.IsZero());
  EXPECT_EQ(cap->cpu_allocated, 0);
}

// PlaceAvoiding (the scheduler's starvation reservations): the named nodes are passed over as
// if cordoned, for every strategy's cached index too, and the engine is left as it was.
TEST(EngineTest, PlaceAvoidingPassesOverTheNamedNodes) {
  for (Strategy s : {Strategy::kFirstFit, Strategy::kBestFit, Strategy::kFgdPack}) {
    PoolPolicy policy;
    policy.strategy = s;
    Engine e(policy);
    ASSERT_TRUE(e.AddNode(Node("a", 2)).ok());
    ASSERT_TRUE(e.AddNode(Node("b", 2)).ok());
    ASSERT_TRUE(e.Commit(e.Place(Share(500)).allocation).ok());
    const std::string first = e.Place(Share(500)).allocation.node;
    const std::string other = first == "a" ? "b" : "a";
    Decision d = e.PlaceAvoiding(Share(500), {first});
    ASSERT_TRUE(d.placed);
    EXPECT_EQ(d.allocation.node, other);
    EXPECT_EQ(e.Place(Share(500)).allocation.node, first);  // nothing changed
    Decision none = e.PlaceAvoiding(Whole(1), {"a", "b", "unknown"});
    EXPECT_FALSE(none.placed);
    ASSERT_EQ(none.rejection_counts.size(), 1u);
    EXPECT_EQ(none.rejection_counts[0], (std::pair<std::string, int>{"reserved", 2}));
    std::vector<Request> gang(2, Whole(2));
    EXPECT_FALSE(e.PlaceGangAvoiding(gang, {"b"}).placed);
    EXPECT_FALSE(e.PlaceGang(gang).placed);  // a holds a share
    EXPECT_TRUE(e.PlaceGangAvoiding(std::vector<Request>(1, Whole(2)), {"a"}).placed);
  }
}

// Cold-start locality (Request::warm): among nodes packing cannot tell apart, the one holding
// more of the image goes first; a better-packed node always beats a warmer one. Every strategy,
// the cached index (fgd-pack, best-fit …) and the uncached path (random) alike.
TEST(EngineTest, AWarmNodeIsChosenWhenPackingAllows) {
  for (Strategy s : AllStrategies()) {
    SCOPED_TRACE(StrategyName(s));
    PoolPolicy policy;
    policy.strategy = s;
    policy.tie_seed = s == Strategy::kRandom ? 7 : 0;
    Engine e(policy);
    for (const char* n : {"a", "b", "c"}) ASSERT_TRUE(e.AddNode(Node(n, 2)).ok());
    // Three identical idle nodes: the one with the fewest bytes to fetch wins.
    Request r = Share(500);
    r.warm = {{"c", 4096}, {"b", 1024}};
    if (s != Strategy::kRandom) {
      Decision d = e.Place(r);
      ASSERT_TRUE(d.placed);
      EXPECT_EQ(d.allocation.node, "b");
      r.warm = {{"c", 0}, {"b", 1024}, {"unknown", 0}};
      EXPECT_EQ(e.Place(r).allocation.node, "c");
    }
    // A node that cannot take the task is passed over however warm.
    ASSERT_TRUE(e.SetSchedulable("c", false).ok());
    Decision d = e.Place(r);
    ASSERT_TRUE(d.placed);
    if (s != Strategy::kRandom) {
      EXPECT_EQ(d.allocation.node, "b");
    }
    ASSERT_TRUE(e.SetSchedulable("c", true).ok());
  }
  // Packing first: best-fit and fgd-pack fill the used node before a warm empty one.
  for (Strategy s : {Strategy::kBestFit, Strategy::kFgdPack, Strategy::kGpuPacking}) {
    SCOPED_TRACE(StrategyName(s));
    PoolPolicy policy;
    policy.strategy = s;
    Engine e(policy);
    ASSERT_TRUE(e.AddNode(Node("a", 2)).ok());
    ASSERT_TRUE(e.AddNode(Node("b", 2)).ok());
    Request first = Share(500);
    first.warm = {{"a", 0}};
    Decision used = e.Place(first);
    ASSERT_TRUE(used.placed);
    ASSERT_EQ(used.allocation.node, "a");
    ASSERT_TRUE(e.Commit(used.allocation).ok());
    Request r = Share(500);
    r.warm = {{"b", 0}};
    EXPECT_EQ(e.Place(r).allocation.node, "a") << "a warm node must not undo packing";
  }
}

TEST(EngineTest, WholeGpusNeedFullyFreeDevices) {
  Engine e = FirstFit();
  ASSERT_TRUE(e.AddNode(Node("a", 2)).ok());
  Decision s = e.Place(Share(100));
  ASSERT_TRUE(e.Commit(s.allocation).ok());
  // One of a's two GPUs now carries a share: two whole GPUs no longer fit.
  Decision d = e.Place(Whole(2));
  EXPECT_FALSE(d.placed);
  ASSERT_EQ(d.rejections.size(), 1u);
  EXPECT_EQ(d.rejections[0].node, "a");
  EXPECT_EQ(d.rejections[0].reason, "devices: need 2 device(s), 1 of 2 can take it");
  EXPECT_TRUE(e.Place(Whole(1)).placed);
}

TEST(EngineTest, RejectionReasonNamesVramAndDevice) {
  Engine e = FirstFit();
  ASSERT_TRUE(e.AddNode(Node("a", 4)).ok());
  // 40960 MiB each; fill GPU 3 down to 24576 MiB free and the others completely.
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(e.Commit(e.Place(Amount(1000, 40960)).allocation).ok());
  ASSERT_TRUE(e.Commit(e.Place(Amount(1000, 16384)).allocation).ok());
  Decision d = e.Place(Amount(1000, 40960));
  ASSERT_FALSE(d.placed);
  ASSERT_EQ(d.rejections.size(), 1u);
  EXPECT_EQ(d.rejections[0].reason, "vram: need 40960 MiB, free 24576 MiB on GPU 3 (a-gpu3)");
  ASSERT_EQ(d.rejection_counts.size(), 1u);
  EXPECT_EQ(d.rejection_counts[0], (std::pair<std::string, int>{"vram", 1}));
}

TEST(EngineTest, CpuAndMemoryAreHardLimits) {
  Engine e = FirstFit();
  ASSERT_TRUE(e.AddNode(Node("a", 1, /*cpu=*/4000, /*mem=*/8192)).ok());
  Decision d = e.Place(Share(100, /*cpu=*/5000));
  ASSERT_FALSE(d.placed);
  EXPECT_EQ(d.rejections[0].reason, "cpu: need 5000 milli-cores, free 4000");
  d = e.Place(Share(100, 1000, /*mem=*/9000));
  ASSERT_FALSE(d.placed);
  EXPECT_EQ(d.rejections[0].reason, "memory: need 9000 MiB, free 8192 MiB");
}

TEST(EngineTest, UnschedulableAndRemovedNodesAreSkipped) {
  Engine e = FirstFit();
  ASSERT_TRUE(e.AddNode(Node("a", 1)).ok());
  ASSERT_TRUE(e.AddNode(Node("b", 1)).ok());
  ASSERT_TRUE(e.SetSchedulable("a", false).ok());
  EXPECT_EQ(e.Place(Share(100)).allocation.node, "b");
  ASSERT_TRUE(e.RemoveNode("b").ok());
  EXPECT_FALSE(e.Place(Share(100)).placed);
  ASSERT_TRUE(e.SetSchedulable("a", true).ok());
  EXPECT_EQ(e.Place(Share(100)).allocation.node, "a");
  EXPECT_EQ(e.node_count(), 1);
  EXPECT_EQ(e.AddNode(Node("a", 1)).code(), StatusCode::kAlreadyExists);
}

TEST(EngineTest, CommitRejectsStaleDecision) {
  Engine e = FirstFit();
  ASSERT_TRUE(e.AddNode(Node("a", 1)).ok());
  Decision d1 = e.Place(Whole(1));
  Decision d2 = e.Place(Whole(1));
  ASSERT_TRUE(e.Commit(d1.allocation).ok());
  EXPECT_EQ(e.Commit(d2.allocation).code(), StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace gpupool::placement
