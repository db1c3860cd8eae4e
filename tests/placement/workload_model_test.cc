// WorkloadModel and WorkloadFeed (placement/workload_model.h, workload_feed.h): the prior, the
// decay arithmetic written out, coverage, eviction, the snapshot, when the engine is fed, and the
// guard classes that keep a pool's biggest nodes whole before a task of their size is seen.
#include "placement/workload_model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <tuple>

#include "placement/workload_feed.h"
#include "tests/placement/test_util.h"

namespace gpupool::placement {
namespace {

using testing::Node;
using testing::Share;
using testing::Whole;

WorkloadModelOptions NoPrior(double half_life) {
  WorkloadModelOptions o;
  o.half_life_tasks = half_life;
  o.prior_weight = 0;
  return o;
}

TEST(WorkloadModelTest, PriorBeforeAnythingIsSeen) {
  // 16 pseudo-tasks over 7 classes: each weighs 16/7 = 2.2857, share 1/7.
  WorkloadModel m;
  const std::vector<LearnedClass> c = m.Classes();
  ASSERT_EQ(c.size(), 7u);
  for (const LearnedClass& k : c) {
    EXPECT_TRUE(k.prior);
    EXPECT_NEAR(k.weight, 16.0 / 7, 1e-9);
    EXPECT_NEAR(k.share, 1.0 / 7, 1e-9);
  }
  // Equal weights: first seen first, ¼ share ahead of 8 whole GPUs.
  EXPECT_EQ(c.front().shape.share_milli, 250);
  EXPECT_EQ(c.back().shape.gpu_count, 8);
  EXPECT_EQ(m.tasks_observed(), 0);
  EXPECT_NEAR(m.prior_weight(), 16, 1e-9);
}

TEST(WorkloadModelTest, DecayArithmetic) {
  // half-life 2 tasks: λ = 2^(−1/2) = 0.70711 per task.
  //   A ×1:  A = 1
  //   B ×1:  A = 1 × λ = 0.70711, B = 1
  //   B ×2:  A = 0.70711 × λ² = 0.35355, B = 1 × λ² + 2 = 2.5
  // shares: A = 0.35355 / 2.85355 = 0.12390, B = 2.5 / 2.85355 = 0.87610.
  WorkloadModel m(NoPrior(2));
  m.Observe(Share(300), 1);
  m.Observe(Whole(2), 1);
  std::vector<LearnedClass> c = m.Classes();
  ASSERT_EQ(c.size(), 2u);
  EXPECT_NEAR(c[0].weight, 1.0, 1e-12);  // B, the heavier
  EXPECT_NEAR(c[1].weight, std::sqrt(0.5), 1e-12);
  m.Observe(Whole(2), 2);
  c = m.Classes();
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0].shape.kind, RequestKind::kWholeGpu);
  EXPECT_NEAR(c[0].weight, 2.5, 1e-12);
  EXPECT_NEAR(c[1].weight, 0.35355339, 1e-8);
  EXPECT_NEAR(c[0].share, 2.5 / 2.85355339, 1e-8);
  EXPECT_NEAR(c[1].share, 0.35355339 / 2.85355339, 1e-8);
  EXPECT_EQ(m.tasks_observed(), 4);
  EXPECT_NEAR(m.observed_weight(), 2.85355339, 1e-8);
}

TEST(WorkloadModelTest, MemoryIsADecayedMeanNotPartOfTheClass) {
  // half-life 1: a 1000 MiB task, then a 3000 MiB one of the same shape.
  //   weight 1 × ½ + 1 = 1.5; memory (1000 × ½ + 3000) / 1.5 = 2333.3 → 2333.
  WorkloadModel m(NoPrior(1));
  m.Observe(Share(500, 2000, 1000), 1);
  m.Observe(Share(500, 2000, 3000), 1);
  const std::vector<LearnedClass> c = m.Classes();
  ASSERT_EQ(c.size(), 1u);
  EXPECT_NEAR(c[0].weight, 1.5, 1e-12);
  EXPECT_EQ(c[0].shape.memory_mib, 2333);
  EXPECT_EQ(c[0].shape.cpu_milli, 2000);
}

TEST(WorkloadModelTest, ClassIdentity) {
  // Model order does not make a new class; CPU does.
  WorkloadModel m(NoPrior(1e9));
  Request a = Whole(1), b = Whole(1), c = Whole(1, 4000);
  a.allowed_models = {"V100", "A100"};
  b.allowed_models = {"A100", "V100"};
  c.allowed_models = {"A100", "V100"};
  m.Observe(a);
  m.Observe(b);
  m.Observe(c);
  const std::vector<LearnedClass> k = m.Classes();
  ASSERT_EQ(k.size(), 2u);
  EXPECT_NEAR(k[0].weight, 2, 1e-6);
  EXPECT_EQ(k[0].shape.allowed_models, (std::vector<std::string>{"A100", "V100"}));
}

TEST(WorkloadModelTest, PriorFadesAsObservationsComeIn) {
  // No decay to speak of (half-life 1e9). After 100 tasks the prior is 16 / 116 = 13.8% of the
  // weight: kept. After 1000, 16 / 1016 = 1.6% < 1/32: left out.
  WorkloadModel m(WorkloadModelOptions{1e9, 16, 256});
  m.Observe(Share(300), 100);
  EXPECT_EQ(m.Classes().size(), 8u);
  EXPECT_NEAR(m.Classes()[0].share, 100.0 / 116, 1e-6);
  m.Observe(Share(300), 900);
  const std::vector<LearnedClass> c = m.Classes();
  ASSERT_EQ(c.size(), 1u);
  EXPECT_FALSE(c[0].prior);
  EXPECT_NEAR(c[0].share, 1.0, 1e-12);
  // A prior class once observed is a learned class: it stays.
  m.Observe(Whole(8, 64000, 262144), 1);
  EXPECT_EQ(m.Classes().size(), 2u);
}

TEST(WorkloadModelTest, CoverageAsFgdsTargetWorkload) {
  // Weights 6, 3, 1 (half-life 0: no decay). Coverage 0.5: 6 ≥ 5 after the first → 1 class; 0.9: 6,
  // then 9 ≥ 9 → 2; 0.95: 9 < 9.5 → all 3.
  WorkloadModel m(NoPrior(0));
  m.Observe(Share(100), 6);
  m.Observe(Share(200), 3);
  m.Observe(Share(300), 1);
  EXPECT_EQ(m.Classes(0.5).size(), 1u);
  EXPECT_EQ(m.Classes(0.9).size(), 2u);
  EXPECT_EQ(m.Classes(0.95).size(), 3u);
  const std::vector<WorkloadClass> e = m.ForEngine(0.95);
  ASSERT_EQ(e.size(), 3u);
  EXPECT_NEAR(e[0].weight, 0.6, 1e-9);
  EXPECT_EQ(e[0].shape.share_milli, 100);
}

TEST(WorkloadModelTest, EvictsTheLightestBeyondMaxClasses) {
  // Max 2 classes, half-life 1: A ×3 (3), B ×1 (A 1.5, B 1), C ×1 (A 0.75, B 0.5 → evicted).
  // B (a 200 share) is folded into the nearest kept class of its kind, models and device count:
  // A (100), which then weighs 0.75 + 0.5 = 1.25.
  WorkloadModel m(WorkloadModelOptions{1, 0, 2});
  m.Observe(Share(100), 3);
  m.Observe(Share(200), 1);
  m.Observe(Share(300), 1);
  const std::vector<LearnedClass> c = m.Classes();
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0].shape.share_milli, 100);
  EXPECT_NEAR(c[0].weight, 1.25, 1e-12);
  EXPECT_EQ(c[1].shape.share_milli, 300);
  EXPECT_NEAR(c[1].weight, 1, 1e-12);
  EXPECT_NEAR(m.observed_weight(), 2.25, 1e-12);
}

TEST(WorkloadModelTest, FoldsAnEvictedClassOnlyIntoItsOwnModelSet) {
  // Max 3 classes, no decay. A 100 and a 400 share pinned to T4 (2 each), a 300 share pinned to
  // V100 (1), then a 500 pinned to V100: the V100 300 is the lightest and is folded into the
  // nearest class of its models — none is left but itself, so it goes (the T4 classes may not
  // take it). Then a 200 pinned to T4 evicts the V100 500 (1): dropped as well. Then a 150 on
  // T4, with T4 100 (2), T4 400 (2), T4 200 (1): the 200 goes, folded into the 100 (distance
  // 0.1, against 0.2 to the 400): T4 100 weighs 3.
  auto on = [](int32_t g, const char* model) {
    Request r = Share(g);
    r.allowed_models = {model};
    return r;
  };
  WorkloadModel m(WorkloadModelOptions{0, 0, 3});
  m.Observe(on(100, "T4"), 2);
  m.Observe(on(400, "T4"), 2);
  m.Observe(on(300, "V100"), 1);
  m.Observe(on(500, "V100"), 1);
  EXPECT_NEAR(m.observed_weight(), 5, 1e-12);
  m.Observe(on(200, "T4"), 1);
  EXPECT_NEAR(m.observed_weight(), 5, 1e-12);
  m.Observe(on(150, "T4"), 1);
  const std::vector<LearnedClass> c = m.Classes();
  ASSERT_EQ(c.size(), 3u);
  EXPECT_EQ(c[0].shape.share_milli, 100);
  EXPECT_NEAR(c[0].weight, 3, 1e-12);
  EXPECT_EQ(c[1].shape.share_milli, 400);
  EXPECT_EQ(c[2].shape.share_milli, 150);
  EXPECT_NEAR(m.observed_weight(), 6, 1e-12);
}

TEST(WorkloadModelTest, StaysFiniteOverManyHalfLives) {
  // Half-life 1, 1000 tasks of A: λ^(−N) passes 2^200 and is folded back. A's weight is
  // Σ_{k<1000} 2^−k = 2 − 2^−999 ≈ 2; B, seen 1000 tasks ago, weighs 2^−1000 (or underflows to
  // 0 when folded back): below the total's precision, so A alone covers it.
  WorkloadModel m(NoPrior(1));
  m.Observe(Share(200), 1);
  for (int i = 0; i < 900; ++i) m.Observe(Share(100), 1);
  for (int i = 0; i < 100; ++i) m.Observe(Share(100), 1);
  const std::vector<LearnedClass> c = m.Classes();
  ASSERT_EQ(c.size(), 1u);
  EXPECT_NEAR(c[0].weight, 2.0, 1e-9);
  EXPECT_NEAR(c[0].share, 1.0, 1e-12);
  EXPECT_EQ(c[0].shape.memory_mib, 1024);
  EXPECT_NEAR(m.observed_weight(), 2.0, 1e-9);
}

TEST(WorkloadFeedTest, PushesWhenDueAndDrifted) {
  // No prior, no decay, check points every 1, 1, 2, 4, 4, … tasks (refresh 4). Observed: A, A,
  // B, B, then twelve A. At each check point, the L1 distance of shares to what was pushed:
  //   task 1:  A 1            vs {}            → 1      push
  //   task 2:  A 1            vs A 1           → 0      (no drift)
  //   task 4:  A ½, B ½       vs A 1           → 1      push
  //   task 8:  A ¾, B ¼       vs A ½, B ½      → 0.5    push
  //   task 12: A ⅚, B ⅙       vs A ¾, B ¼      → 0.167  push
  //   task 16: A ⅞, B ⅛       vs A ⅚, B ⅙      → 0.083  < kDrift 0.1: no push
  PoolPolicy p;
  p.strategy = Strategy::kFgdPack;
  Engine e(p);
  ASSERT_TRUE(e.AddNode(Node("a", 2)).ok());
  WorkloadFeed feed(NoPrior(0), 4);
  EXPECT_FALSE(e.workload_given());
  EXPECT_TRUE(feed.Sync(e));  // never given one
  EXPECT_TRUE(e.workload_given());
  EXPECT_FALSE(feed.Sync(e));
  std::vector<int> pushed_at;
  for (int n = 1; n <= 16; ++n) {
    feed.Observe(n == 3 || n == 4 ? Whole(1) : Share(500), 1);
    if (feed.Sync(e)) pushed_at.push_back(n);
  }
  EXPECT_EQ(pushed_at, (std::vector<int>{1, 4, 8, 12}));
  EXPECT_EQ(feed.pushes(), 5);
  // A node added: the reach is stale, push at once whatever the drift.
  ASSERT_TRUE(e.AddNode(Node("b", 2)).ok());
  EXPECT_TRUE(e.inventory_changed_since_workload());
  EXPECT_TRUE(feed.Sync(e));
  EXPECT_FALSE(feed.Sync(e));
}

TEST(WorkloadFeedTest, StrategiesThatIgnoreTheWorkloadAreNotFed) {
  PoolPolicy p;
  p.strategy = Strategy::kBestFit;
  Engine e(p);
  WorkloadFeed feed;
  feed.Observe(Share(500), 10);
  EXPECT_FALSE(feed.Sync(e));
  EXPECT_FALSE(e.workload_given());
  EXPECT_DOUBLE_EQ(WorkloadCoverage(Strategy::kFgd), 0.95);
  EXPECT_DOUBLE_EQ(WorkloadCoverage(Strategy::kFgdPack), 1.0);
}

NodeCapacity Shape(std::string name, int gpus, int64_t cpu, int64_t mem, bool mig = false) {
  NodeCapacity n;
  n.name = std::move(name);
  n.cpu_milli = cpu;
  n.memory_mib = mem;
  for (int i = 0; i < gpus; ++i) {
    DeviceCapacity d;
    if (mig) d.mig_profile = "1g.10gb";
    n.devices.push_back(std::move(d));
  }
  return n;
}

TEST(WorkloadFeedTest, GuardShapesAreTheMaximalNodeShapes) {
  // G2 (8 GPUs, 96 cores, 384 GiB) is dominated by G3 (8, 128, 768); V100 (8, 96, 768) too.
  // A10 (1 GPU, 128 cores, 1 TiB) has the most memory: maximal as well. A node of MIG devices
  // only and an unschedulable bigger node do not count; a CPU-only node neither.
  std::vector<NodeCapacity> nodes = {
      Shape("g2a", 8, 96000, 393216),   Shape("g2b", 8, 96000, 393216),
      Shape("g3", 8, 128000, 786432),   Shape("v100", 8, 96000, 786432),
      Shape("a10", 1, 128000, 1048576), Shape("mig", 16, 256000, 2097152, /*mig=*/true),
      Shape("cpu", 0, 512000, 4194304), Shape("off", 16, 256000, 2097152)};
  nodes.back().schedulable = false;
  const std::vector<Request> g = GuardShapes(nodes);
  ASSERT_EQ(g.size(), 2u);
  EXPECT_EQ(g[0].kind, RequestKind::kWholeGpu);
  EXPECT_EQ(std::tie(g[0].gpu_count, g[0].cpu_milli, g[0].memory_mib),
            std::make_tuple(1, int64_t{128000}, int64_t{1048576}));
  EXPECT_EQ(std::tie(g[1].gpu_count, g[1].cpu_milli, g[1].memory_mib),
            std::make_tuple(8, int64_t{128000}, int64_t{786432}));
  EXPECT_TRUE(UsesGuardClasses(Strategy::kFgdPack));
  EXPECT_FALSE(UsesGuardClasses(Strategy::kFgd));
}

// The default trace's miss (docs/twin.md): CPU-hungry 1-GPU tasks arrive first; the pool's one
// big node (128 cores, 768 GiB), where their CPU strands the least GPU, took them, and the first
// 120-core 8-GPU task, which only that node can host, found it nibbled. With the guard class
// the big node stays whole while the others have room, whatever the pool's tie order.
TEST(WorkloadFeedTest, TheBiggestNodeStaysWholeBeforeItsShapeIsSeen) {
  const Request small = Whole(1, 12000, 49152);
  const Request big = Whole(8, 120000, 737280);
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    PoolPolicy p;
    p.strategy = Strategy::kFgdPack;
    p.tie_seed = seed;
    Engine e(p);
    ASSERT_TRUE(e.AddNode(Node("big", 8, 128000, 786432)).ok());
    for (int i = 0; i < 4; ++i)
      ASSERT_TRUE(e.AddNode(Node("g2-" + std::to_string(i), 8, 96000, 393216)).ok());
    WorkloadFeed feed;
    for (int t = 0; t < 16; ++t) {  // half the four G2 nodes' GPUs
      feed.Observe(small);
      feed.Sync(e);
      const Decision d = e.Place(small);
      ASSERT_TRUE(d.placed) << "seed " << seed << " task " << t;
      EXPECT_NE(d.allocation.node, "big") << "seed " << seed << " task " << t;
      ASSERT_TRUE(e.Commit(d.allocation).ok());
    }
    EXPECT_TRUE(e.Place(big).placed) << "seed " << seed;
  }
}

}  // namespace
}  // namespace gpupool::placement
