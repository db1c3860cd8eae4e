// fgd-pack's preferences through the public API: where the share-waste and stranded-GPU terms,
// the CPU fit, the CPU-tight mode's CPU-only room, the partitioned mode's best fit and the
// CPU-lean mode's stranded CPU and share CPU ratio (strategies/fgd_pack.h) decide, with the
// arithmetic of each case written out.
#include "placement/strategies/fgd_pack.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "placement/placement.h"
#include "tests/placement/test_util.h"

namespace gpupool::placement {
namespace {

using testing::Node;
using testing::Share;
using testing::Whole;

Engine Make(Strategy s) {
  PoolPolicy p;
  p.strategy = s;  // tie_seed 0: ties go to the node added first
  return Engine(p);
}

// Where the engine would place `r`, or "(not placed)".
std::string NodeOf(const Engine& e, const Request& r) {
  const Decision d = e.Place(r);
  return d.placed ? d.allocation.node : "(not placed)";
}

// A workload class for the arithmetic tests: probability, milli-GPU per device, devices (0:
// CPU-only) and milli-cores.
FragClass Class(double p, int32_t gpu_milli, int gpu_count, int64_t cpu_milli) {
  FragClass c;
  c.p = p, c.gpu_milli = gpu_milli, c.gpu_count = gpu_count, c.cpu_milli = cpu_milli;
  return c;
}

TEST(FgdPackTest, CompletesTypicalPatterns) {
  // Workload: 650s and 350s, equally often; first-fit decreasing pairs them, {650, 350}, so a
  // device with 350 or 650 free ends full (waste 0), and 700 free is on no pattern (waste 700).
  // Node a's GPU holds a 300 (700 free), node b's is fresh. A 350:
  //   on a: 700 → 350, Δwaste = 0 − 700 = −700; FGD's ΔF = ½ × 350 (the 650 class loses its
  //         fit) = 175, ΔH = ½ × (350 − 50) = 150;
  //   on b: 1000 → 650, Δwaste = 0 − 0 = 0; ΔF = 0, ΔH = ½ × (0 − 350) = −175.
  // fgd-pack: a costs 150 + 2 × 175 − 128 × 700 = −89,100, b −175 → a. FGD alone: int(100 ·
  // sigmoid(−0.175)) = 45 on a, 50 on b → b.
  for (auto [strategy, expect] : {std::pair{Strategy::kFgdPack, "a"}, {Strategy::kFgd, "b"}}) {
    Engine e = Make(strategy);
    e.SetWorkload({{Share(650), 1}, {Share(350), 1}});
    ASSERT_TRUE(e.AddNode(Node("a", 1)).ok());
    ASSERT_TRUE(e.Commit(e.Place(Share(300)).allocation).ok());
    ASSERT_TRUE(e.AddNode(Node("b", 1)).ok());
    const Decision d = e.Place(Share(350));
    ASSERT_TRUE(d.placed);
    EXPECT_EQ(d.allocation.node, expect) << StrategyName(strategy);
  }
}

TEST(FgdPackTest, KeepsCpuHeavySharesOffLeanNodes) {
  // Workload: whole GPUs and 470 shares, each with 12 cores: 0.5 × 1000 + 0.5 × 470 = 735
  // milli-GPU per 12000 milli-cores; × 1.3 = 0.079625. Node lean (2 GPUs, 16 cores) feeds
  // 0.079625 × 16000 = 1274 of its 2000 idle (726 stranded); a 470 with 12 cores there leaves
  // 1530 idle and 4000 cores, which feed 318.5: 1211.5 stranded, Δ = +485.5. Node rich (104
  // cores) strands nothing either way. The 470 goes to rich although lean was added first. (The
  // pool is not CPU-scarce: 4000 milli-GPU for 120000 milli-cores is 0.033 per core, the workload
  // asks 0.061 — scarcity 0.54, no CPU fit.)
  Engine e = Make(Strategy::kFgdPack);
  e.SetWorkload({{Whole(1, 12000), 1}, {Share(470, 12000), 1}});
  ASSERT_TRUE(e.AddNode(Node("lean", 2, /*cpu=*/16000)).ok());
  ASSERT_TRUE(e.AddNode(Node("rich", 2, /*cpu=*/104000)).ok());
  EXPECT_EQ(NodeOf(e, Share(470, 12000)), "rich");
}

TEST(FgdPackTest, CpuScarcity) {
  // Workload: whole GPUs with 16 cores and 500 shares with 4 cores, equally often: 0.5 × 1000 +
  // 0.5 × 500 = 750 milli-GPU per 0.5 × 16000 + 0.5 × 4000 = 10000 milli-cores, 0.075 per core.
  // A pool of 16 GPUs and 64 cores offers 0.25 per core: scarcity 0.25 / 0.075 = 3.33. With 512
  // cores, 0.03125 per core: 0.42. No CPU demand or no pool: 0.
  std::vector<FragClass> w = {Class(0.5, 1000, 1, 16000), Class(0.5, 500, 1, 4000)};
  EXPECT_NEAR(CpuScarcity(w, PoolShape{64000, 16000}), 0.25 / 0.075, 1e-9);
  EXPECT_NEAR(CpuScarcity(w, PoolShape{512000, 16000}), 0.03125 / 0.075, 1e-9);
  EXPECT_EQ(CpuScarcity(w, PoolShape{}), 0);
  w[0].cpu_milli = w[1].cpu_milli = 0;
  EXPECT_EQ(CpuScarcity(w, PoolShape{64000, 16000}), 0);
}

TEST(FgdPackTest, PacksCpuWhereCpuIsScarce) {
  // Workload: whole GPUs with 16 cores (62.5 milli-GPU per core). Nodes a and b: 8 GPUs and 32
  // cores each; the pool offers 250 milli-GPU per core, scarcity 4 ≥ 1.3, so the CPU fit is on.
  // a runs one such task (7 GPUs idle, 16 cores free). A CPU-only task of 8 cores:
  //   on a: the class no longer fits (8 < 16 cores): ΔF = 7000; ΔH = (7000 − 0) − (7000 − 1000)
  //         = 1000; stranded (1.3 × 62.5 = 81.25 milli-GPU per core) 7000 − 650 − (7000 − 1300)
  //         = +650; CPU fit 1000 × 8000 / 32000 = 250;
  //   on b: ΔF = 0; ΔH = (8000 − 1000) − (8000 − 2000) = 1000; stranded 8000 − 1950 − (8000 −
  //         2600) = +650; CPU fit 1000 × 24000 / 32000 = 750.
  // cost a = 1000 + 2 × 7000 + 16 × 650 + 60 × 250 = 40,400; b = 1000 + 16 × 650 + 60 × 750 =
  // 56,400 → a, packing the scarce CPU. Without the CPU fit, b (11,400 against 25,400).
  Engine e = Make(Strategy::kFgdPack);
  ASSERT_TRUE(e.AddNode(Node("a", 8, /*cpu=*/32000)).ok());
  ASSERT_TRUE(e.AddNode(Node("b", 8, /*cpu=*/32000)).ok());
  e.SetWorkload({{Whole(1, 16000), 1}});
  ASSERT_TRUE(e.Commit(e.Place(Whole(1, 16000)).allocation).ok());
  Request cpu;
  cpu.kind = RequestKind::kCpuOnly;
  cpu.cpu_milli = 8000;
  cpu.memory_mib = 1024;
  EXPECT_EQ(NodeOf(e, cpu), "a");
}

// An fgd-pack engine with nodes `first` and `second`, added in that order (ties go to `first`),
// and `workload` learned.
Engine TwoNodes(NodeSpec first, NodeSpec second, std::vector<WorkloadClass> workload) {
  Engine e = Make(Strategy::kFgdPack);
  EXPECT_TRUE(e.AddNode(std::move(first)).ok());
  EXPECT_TRUE(e.AddNode(std::move(second)).ok());
  e.SetWorkload(std::move(workload));
  return e;
}

Request CpuOnlyTask(int64_t cpu) {
  Request r;
  r.kind = RequestKind::kCpuOnly;
  r.cpu_milli = cpu;
  r.memory_mib = 1024;
  return r;
}

// Nodes a (2 GPUs, 56 cores) and b (2 GPUs, 64 cores), a added first; the workload is whole GPUs
// with 4 cores and CPU-only tasks of 32 cores, weighted 1 and `cpu_only_weight`.
Engine TightPair(double cpu_only_weight) {
  return TwoNodes(Node("a", 2, /*cpu=*/56000), Node("b", 2, /*cpu=*/64000),
                  {{Whole(1, 4000), 1}, {CpuOnlyTask(32000), cpu_only_weight}});
}

TEST(FgdPackTest, CutsCpuOnlyRoomInACpuTightPool) {
  // Weights 1 and 1: the workload asks 1000 milli-GPU per 36000 milli-cores (0.0278 per core),
  // the pool offers 4000 per 120000 (0.0333): scarcity 1.2, in [1.08, 1.3) — CPU-tight. A whole
  // GPU with 4 cores:
  //   on a: 56 → 52 cores free, room for one 32-core task before and after: Δ room 0;
  //   on b: 64 → 60 cores free, room for two 32-core tasks before, one after: Δ room = −0.5 ×
  //         32000 × 0.0278 = −444.4 milli-GPU, × 64 = −28,444, a third of it (no GPU of b is in
  //         use yet) = −9,481, score ⌊9,481 / 40⌋ = 237 higher.
  // F, H, the share waste and the stranded GPU (1.3 × 0.0278 = 0.0361 milli-GPU per core: both
  // nodes feed their idle GPUs before and after) score the two alike, so without the term the tie
  // order picks a; with it b, whose cores are then too few for a second 32-core task.
  Engine e = TightPair(1);
  EXPECT_EQ(NodeOf(e, Whole(1, 4000)), "b");
}

TEST(FgdPackTest, KeepsCpuOnlyRoomWhereCpuIsNotTight) {
  // The control: CPU-only tasks half as often, 1000 milli-GPU per 20000 milli-cores (0.05 per
  // core): scarcity 0.67, the term is off and the tie order picks a.
  Engine e = TightPair(0.5);
  EXPECT_EQ(NodeOf(e, Whole(1, 4000)), "a");
}

TEST(FgdPackTest, CutsCpuOnlyRoomOnAWholeNodeAtAThird) {
  // Nodes f (2 GPUs, 64 cores), added first, and u (2 GPUs, 70 cores), which already runs one
  // whole GPU with 4 cores (66 cores free); weights 1 and 1.1: 1000 milli-GPU per 39200
  // milli-cores (0.02551 per core) against the pool's 4000 per 134000 (0.02985): scarcity 1.17,
  // CPU-tight. A 32-core task's room weighs p × 32000 × 0.02551 = 0.5238 × 816.3 = 427.6
  // milli-GPU. Another whole GPU with 4 cores cuts one such room on either node:
  //   on u: 66 → 62 cores, two rooms → one: 64 × −427.6 = −27,366;
  //   on f: 64 → 60 cores, two → one, but no GPU of f is in use: a third, −9,122.
  // F, H and S see the two alike (each keeps its other GPU fed, and the 1-GPU class's count
  // falls by one on both), so at full weight on both the tie order would pick f and break up a
  // whole node; at a third u wins by ⌊18,244 / 40⌋ = 456 score points.
  Engine e = Make(Strategy::kFgdPack);
  ASSERT_TRUE(e.AddNode(Node("f", 2, /*cpu=*/64000)).ok());
  ASSERT_TRUE(e.AddNode(Node("u", 2, /*cpu=*/70000)).ok());
  e.SetWorkload({{Whole(1, 4000), 1}, {CpuOnlyTask(32000), 1.1}});
  ASSERT_TRUE(e.SetSchedulable("f", false).ok());
  ASSERT_TRUE(e.Commit(e.Place(Whole(1, 4000)).allocation).ok());
  ASSERT_TRUE(e.SetSchedulable("f", true).ok());
  EXPECT_EQ(NodeOf(e, Whole(1, 4000)), "u");
}

TEST(FgdPackTest, CpuLeanShortfall) {
  // GPU tasks: 500 shares with 8 cores and whole GPUs with 8 cores, equally often (a CPU-only
  // class does not count): 750 milli-GPU per 8000 milli-cores, r = 10.67 cores per GPU. A 4-GPU
  // node with 32 cores is 42.67 − 32 = 10.67 cores short, one with 96 cores none: over r × 8
  // GPUs, 10.67 / 85.33 = 0.125. Two 32-core nodes: 21.33 / 85.33 = 0.25. No pool GPUs: 0.
  const std::vector<FragClass> w = {Class(0.25, 500, 1, 8000), Class(0.25, 1000, 1, 8000),
                                    Class(0.5, 0, 0, 64000)};
  EXPECT_NEAR(GpuTasksGpuPerCpu(w), 750.0 / 8000, 1e-12);
  PoolShape pool{128000, 8000, {{32000, 4000, 1}, {96000, 4000, 1}}};
  EXPECT_NEAR(CpuLeanShortfall(w, pool), 0.125, 1e-9);
  pool.kinds = {{32000, 4000, 2}};
  EXPECT_NEAR(CpuLeanShortfall(w, pool), 0.25, 1e-9);
  EXPECT_EQ(CpuLeanShortfall(w, PoolShape{}), 0);
}

// Nodes rich (4 GPUs, 96 cores) and lean (4 GPUs, `lean_cores`), rich added first; the workload's
// GPU tasks ask 10 cores per GPU: 500 shares with 8 cores, whole GPUs with 8, 300 shares with 2
// (600 milli-GPU per 6000 milli-cores).
Engine RichAndLean(int64_t lean_cores) {
  return TwoNodes(Node("rich", 4, /*cpu=*/96000, 262144), Node("lean", 4, lean_cores, 262144),
                  {{Share(500, 8000), 1}, {Whole(1, 8000), 1}, {Share(300, 2000), 1}});
}

TEST(FgdPackTest, CpuLightSharesToLeanNodesInACpuLeanPool) {
  // lean has 32 cores for 4 GPUs, 8 short of the workload's 10 per GPU: CpuLeanShortfall = 8000
  // × 0.1 / 8000 = 0.1 ≥ 0.05, so the stranded-CPU term is on, at 0.8 × 0.1 = 0.08 milli-GPU
  // per free milli-core (kStrandedCpuLeanQ: the pool is not CPU-scarce). A 500 share with 2
  // cores (4 cores per GPU):
  //   on rich: 96000 × 0.08 − 4000 = 3680 milli-GPU of CPU its idle GPU cannot use before,
  //            94000 × 0.08 − 3500 = 4020 after: +340, × 64 = +21,760;
  //   on lean: 32000 × 0.08 < 4000 before and 30000 × 0.08 < 3500 after: 0.
  // Every other term scores the two alike (score −14 on both: the tie order would pick rich; the
  // share asks fewer cores per GPU than either node has free per idle GPU, so Q is 0); with the
  // term rich scores −558 → lean, keeping rich's cores for CPU-heavy tasks.
  Engine e = RichAndLean(32000);
  EXPECT_EQ(NodeOf(e, Share(500, 2000)), "lean");
}

TEST(FgdPackTest, NoStrandedCpuWhereNodesFeedTheirGpus) {
  // The control: lean with 40 cores feeds its 4 GPUs at 10 per GPU (shortfall 0): the term is
  // off, both nodes score −14 and the tie order picks rich.
  Engine e = RichAndLean(40000);
  EXPECT_EQ(NodeOf(e, Share(500, 2000)), "rich");
}

TEST(FgdPackTest, ModelPartition) {
  // Demand p·g·k: a 500 share (p 0.5) → 250, two whole GPUs (p 0.5) → 1000. Pinned to models
  // holding 1/4 and 1/2 of the pool's GPUs: (250 × 0.25 + 1000 × 0.5) / 1250 = 0.45. Unpinned:
  // 1. CPU-only classes do not count; without GPU classes the pool is not partitioned (1).
  std::vector<FragClass> w(3);
  w[0].p = 0.5, w[0].gpu_milli = 500, w[0].gpu_count = 1, w[0].model_share = 0.25;
  w[1].p = 0.5, w[1].gpu_milli = 1000, w[1].gpu_count = 2, w[1].model_share = 0.5;
  w[2].p = 0.5, w[2].gpu_count = 0, w[2].model_share = 0.01;
  EXPECT_NEAR(ModelPartition(w), 0.45, 1e-12);
  w[0].model_share = w[1].model_share = 1;
  EXPECT_NEAR(ModelPartition(w), 1, 1e-12);
  EXPECT_EQ(ModelPartition({w[2]}), 1);
}

// A node type of PoolShape: `count` nodes, each with `devices` GPUs of `model` and `cores`.
PoolShape::Type TypeOf(int64_t count, int model, int devices, int64_t cores) {
  PoolShape::Type t;
  t.count = count, t.cpu_milli = cores * 1000, t.memory_mib = 1 << 20;
  t.gpus = {{model, devices}};
  return t;
}

TEST(FgdPackTest, PinnedLoadCountsOnlyTheNodesAClassFits) {
  // 64 GPUs: two 8-GPU H100 nodes (type 0, model 1), sixteen 1-GPU H100 nodes (type 1), 32 1-GPU
  // T4 nodes (type 2, model 2). The workload's GPU demand, Σ p·g·k = 1000: flexible whole GPUs
  // 500, 8-GPU jobs pinned to H100 400 (96 cores: only type 0 hosts them), T4-pinned 500-milli
  // shares 100. Scaled to the pool: 25.6 GPUs of 8-GPU jobs, 6.4 of T4 shares.
  PoolShape pool;
  pool.types = {TypeOf(2, 1, 8, 192), TypeOf(16, 1, 1, 24), TypeOf(32, 2, 1, 8)};
  std::vector<FragClass> w = {Class(0.5, 1000, 1, 4000), Class(0.05, 1000, 8, 96000),
                              Class(0.2, 500, 1, 2000)};
  w[1].model_mask = 0b10, w[1].model_share = 0.5;   // H100: 32 of the 64 GPUs
  w[2].model_mask = 0b100, w[2].model_share = 0.5;  // T4: 32 of 64
  const std::vector<std::vector<double>> load = PinnedLoad(w, pool);
  ASSERT_EQ(load.size(), 3u);
  // Type 0: proportionally 25.6 / 32 = 0.8 (per model, as ModelPressure would say of every
  // H100); water-filled, the 25.6 GPUs have 16 to go to: 1.6, the larger.
  EXPECT_NEAR(load[0][1], 1.6, 1e-12);
  // Type 1: no pinned class fits a 1-GPU node, so flexible work loses nothing there. Per model
  // it carried the 8-GPU jobs' 0.8 and looked as pressed as the big nodes.
  EXPECT_DOUBLE_EQ(load[1][1], 0);
  // Type 2: 6.4 of 32 T4s, both ways.
  EXPECT_NEAR(load[2][2], 0.2, 1e-12);
  EXPECT_DOUBLE_EQ(load[2][1], 0);
  // Nothing pinned: every cell 0.
  for (const auto& row : PinnedLoad({w[0]}, pool))
    for (double x : row) EXPECT_EQ(x, 0);
}

TEST(FgdPackTest, PinnedLoadPushesAClassOntoTheRoomOthersLeave) {
  // 32 GPUs: one 8-GPU node of model 3 (type 0, 128 cores), eight 1-GPU model-3 nodes (type 1,
  // 16 cores), sixteen 1-GPU model-4 nodes (type 2). Demand 1000: 8-GPU jobs pinned to model 3
  // (250, 64 cores: type 0 only), whole GPUs pinned to model 3 (125), flexible (625). Scaled:
  // 8 and 4 GPUs.
  PoolShape pool;
  pool.types = {TypeOf(1, 3, 8, 128), TypeOf(8, 3, 1, 16), TypeOf(16, 4, 1, 16)};
  std::vector<FragClass> w = {Class(0.03125, 1000, 8, 64000), Class(0.125, 1000, 1, 4000),
                              Class(0.625, 1000, 1, 4000)};
  for (int i : {0, 1}) w[i].model_mask = 0b1000, w[i].model_share = 0.5;
  const std::vector<std::vector<double>> load = PinnedLoad(w, pool);
  // Proportionally the 8-GPU node carries 8 / 16 + 4 / 16 = 0.75 and the small ones 0.25. But
  // the 8-GPU jobs, which fit nowhere else, fill the big node (water-filled first: 8 of 8), so
  // the pinned whole GPUs all land on the small nodes: 4 of 8 = 0.5 there, and 1.0 on the big.
  EXPECT_DOUBLE_EQ(load[0][3], 1.0);
  EXPECT_DOUBLE_EQ(load[1][3], 0.5);
  EXPECT_DOUBLE_EQ(load[2][4], 0);
}

Request Pinned(int32_t milli, const char* model) {
  Request r = Share(milli);
  r.allowed_models = {model};
  return r;
}

TEST(FgdPackTest, BestFitInsideAModelSlice) {
  // Four models W, X, Y, Z, two 1-GPU nodes each; the workload is shares of 200 and 900, each
  // pinned to one model, equally often (p 1/8 per class; each class may use 2/8 of the GPUs, so
  // ModelPartition = 0.25 ≤ 1/3: partitioned). In X's slice, x1 holds a 100 (900 free) and x2 a
  // 600 (400 free). A 200 pinned to X:
  //   on x1: 900 → 700 free; the 900 class no longer fits anywhere in the slice.
  //   on x2: 400 → 200 free; x1 keeps its 900 for the 900 class: the better choice.
  // fgd-pack's cost (reach = model share = 1/4, so H weighs each class p/reach = 1/2; the other
  // six classes cannot use X, their F and H fall by the 200 taken: −150 and −600):
  //   x1: ΔF = 1/8 × (700 − 0) − 150 = −62.5; ΔH = ½ × (700 − 0) − 600 = −250; the share
  //       patterns are {900} and {200 × 5}, on which neither 900 nor 700 free lies, so their
  //       expected waste is the free share itself: ΔW = 700 − 900 = −200;
  //   x2: ΔF = 1/8 × (200 − 400) − 150 = −175; ΔH = ½ × (200 − 400) − 600 = −700; ΔW = 0 − 0.
  //   P (ρ = 1 on every model: 200 × 1 on both) and S (CPU feeds all) are equal on both.
  // Without the partitioned mode: x1 = −250 + 2 × −62.5 + 128 × −200 = −25,975 against x2 =
  // −1,050: x1, the loose fit, where W (built for the trace's discrete shares) misleads. In it,
  // best fit adds 1,000 × the free share left: x1 −25,975 + 700,000, x2 −1,050 + 200,000 → x2.
  Engine e = Make(Strategy::kFgdPack);
  for (const char* m : {"W", "X", "Y", "Z"})
    for (int i = 1; i <= 2; ++i) {
      const std::string name = std::string(1, static_cast<char>(m[0] + 32)) + std::to_string(i);
      ASSERT_TRUE(e.AddNode(Node(name, 1, 64000, 262144, m)).ok());
    }
  ASSERT_TRUE(e.SetSchedulable("x2", false).ok());
  ASSERT_TRUE(e.Commit(e.Place(Pinned(100, "X")).allocation).ok());
  ASSERT_TRUE(e.SetSchedulable("x2", true).ok());
  ASSERT_TRUE(e.SetSchedulable("x1", false).ok());
  ASSERT_TRUE(e.Commit(e.Place(Pinned(600, "X")).allocation).ok());
  ASSERT_TRUE(e.SetSchedulable("x1", true).ok());
  std::vector<WorkloadClass> w;
  for (const char* m : {"W", "X", "Y", "Z"})
    for (int32_t g : {200, 900}) w.push_back({Pinned(g, m), 1});
  e.SetWorkload(w);
  EXPECT_EQ(NodeOf(e, Pinned(200, "X")), "x2");
  EXPECT_TRUE(e.Place(Pinned(900, "X")).placed);
}

TEST(FgdPackTest, PatternsStillLeadInAPoolThatIsNotPartitioned) {
  // The control: X's slice alone (x1, x2 as above), the same workload unpinned (ModelPartition
  // 1). ΔF: x1 ½ × 700 = 350, x2 ½ × −200 = −100; ΔH the same (½ per class); ΔW −200 and 0:
  // x1 = 350 + 2 × 350 − 25,600 = −24,550, x2 = −100 − 200 = −300 → x1, as before this mode.
  Engine e = Make(Strategy::kFgdPack);
  ASSERT_TRUE(e.AddNode(Node("x1", 1, 64000, 262144, "X")).ok());
  ASSERT_TRUE(e.AddNode(Node("x2", 1, 64000, 262144, "X")).ok());
  ASSERT_TRUE(e.SetSchedulable("x2", false).ok());
  ASSERT_TRUE(e.Commit(e.Place(Share(100)).allocation).ok());
  ASSERT_TRUE(e.SetSchedulable("x2", true).ok());
  ASSERT_TRUE(e.SetSchedulable("x1", false).ok());
  ASSERT_TRUE(e.Commit(e.Place(Share(600)).allocation).ok());
  ASSERT_TRUE(e.SetSchedulable("x1", true).ok());
  e.SetWorkload({{Share(200), 1}, {Share(900), 1}});
  EXPECT_EQ(NodeOf(e, Share(200)), "x1");
}

// An over-pinned pool (fgd_pack.cc, kOverPinned): node b (model B) added first, node a (model A)
// holding a 100 (900 free). The workload: unpinned 600 shares (weight 1) and 400 shares pinned to
// A (weight `pinned_weight`). First-fit decreasing packs {600, 400} (and, with 3 × as many 400s,
// {400, 400}), so 400 free is on a pattern (expected waste 0) and 900 or 300 free lie on none
// (waste = the free share). An unpinned 600:
//   on a: 900 → 300 free, ΔW = 300 − 900 = −600 → 128 × −600 = −76,800; P = 600 × ρ_A³;
//   on b: 1000 → 400 free, ΔW = 0; P = 0 (nothing is pinned to B).
// |ΔF| ≤ 1,000 (the node's GPU) and |ΔH| ≤ 1,750 (the pinned class weighs p / reach = 2p): under
// 3,750 with w = 2, far below the margins.
Engine PinnedPair(double pinned_weight) {
  Engine e = Make(Strategy::kFgdPack);
  EXPECT_TRUE(e.AddNode(Node("b", 1, 64000, 262144, "B")).ok());
  EXPECT_TRUE(e.AddNode(Node("a", 1, 64000, 262144, "A")).ok());
  EXPECT_TRUE(e.SetSchedulable("b", false).ok());
  EXPECT_TRUE(e.Commit(e.Place(Share(100)).allocation).ok());
  EXPECT_TRUE(e.SetSchedulable("b", true).ok());
  e.SetWorkload({{Share(600), 1}, {Pinned(400, "A"), pinned_weight}});
  return e;
}

TEST(FgdPackTest, RoutesFirstInAnOverPinnedPool) {
  // Pinned weight 3: A holds half the pool's GPUs, so ρ_A = (3 × 400 / 0.5) / (3 × 400 + 600)
  // = 1.33 ≥ 1.1, ρ_A³ = 2.37, P on a = 600 × 2.37 = 1,422. ModelPartition = (1,200 × 0.5 +
  // 600) / 1,800 = 0.67: not partitioned. At P's usual weight 30, a would cost −76,800 + 42,667
  // = −34,133 and win, taking the GPU the A-pinned 400s will need; at the over-pinned weight 150
  // it costs −76,800 + 213,333 = +136,533 → b.
  Engine e = PinnedPair(3);
  EXPECT_EQ(NodeOf(e, Share(600)), "b");
}

TEST(FgdPackTest, PatternsLeadWhereNoModelIsOverPinned) {
  // The control: pinned weight 1, ρ_A = (400 / 0.5) / 1,000 = 0.8 < 1.1, ρ_A³ = 0.512: P at 30
  // on a = 30 × 600 × 0.512 = 9,216, a = −76,800 + 9,216 = −67,584 → a (the pattern leads).
  Engine e = PinnedPair(1);
  EXPECT_EQ(NodeOf(e, Share(600)), "a");
}

// A plain pool (fgd_pack.cc, kCpuAmple): node lean (2 GPUs, 24 cores; added first) holds a
// 500 with no cores on one GPU (500 and 1000 free), node rich (1 GPU, 104 cores) is fresh; the
// workload is whole GPUs and 500 shares with 12 cores each, equally often (750 milli-GPU per
// 12000 milli-cores; × 1.3 = 0.08125 per milli-core for S). `spare` unschedulable 8-GPU nodes
// with `spare_cores` each set the pool's CPU per GPU. A 500 with 12 cores:
//   on lean (onto the 500 free): 24 → 12 cores free, 1500 → 1000 idle, of which 12000 × 0.08125
//       = 975 is fed: ΔS = +25; ΔF = 0 − 250 = −250, ΔH = 250 − 500 = −250 (both classes still
//       fit once); W 0 ({500, 500} ends full). Cost −250 − 500 + 25·s = −750 + 25·s.
//   on rich: the whole-GPU class loses its GPU: ΔF = ΔH = +250; S and W 0. Cost 750.
// Scores ⌊−cost / 40⌋: rich −19; lean 8 at s = 16, −22 at s = 64.
Engine LeanAndRich(int spare, int64_t spare_cores) {
  Engine e = Make(Strategy::kFgdPack);
  EXPECT_TRUE(e.AddNode(Node("lean", 2, 24000)).ok());
  EXPECT_TRUE(e.AddNode(Node("rich", 1, 104000)).ok());
  for (int i = 0; i < spare; ++i) {
    const std::string name = "spare" + std::to_string(i);
    EXPECT_TRUE(e.AddNode(Node(name, 8, spare_cores)).ok());
    EXPECT_TRUE(e.SetSchedulable(name, false).ok());
  }
  EXPECT_TRUE(e.SetSchedulable("rich", false).ok());
  EXPECT_TRUE(e.Commit(e.Place(Share(500, 0)).allocation).ok());
  EXPECT_TRUE(e.SetSchedulable("rich", true).ok());
  e.SetWorkload({{Whole(1, 12000), 1}, {Share(500, 12000), 1}});
  return e;
}

TEST(FgdPackTest, StrandedGpuWeighs64WhereCpuIsAmple) {
  // One spare node with 256 cores: the pool has 11 GPUs for 384 cores, 0.0286 milli-GPU per
  // milli-core against the workload's 0.0625 — scarcity 0.46 < 0.98; the GPU tasks' 16 cores per
  // GPU leave lean 8 cores short, 8000 × 0.0625 / 11000 = 0.045 < 0.05 (not CPU-lean). S weighs
  // 64: rich.
  Engine e = LeanAndRich(1, 256000);
  EXPECT_EQ(NodeOf(e, Share(500, 12000)), "rich");
}

TEST(FgdPackTest, StrandedGpuStays16NearTheCpuTightGate) {
  // The control: forty spare nodes with 124 cores (15.5 per GPU): 323 GPUs for 5,088 cores,
  // scarcity 1.016, in [0.98, 1.08); shortfall (40 × 4000 + 8000) × 0.0625 / 323,000 = 0.033.
  // S weighs 16: lean, as before the plain-pool weight.
  Engine e = LeanAndRich(40, 124000);
  EXPECT_EQ(NodeOf(e, Share(500, 12000)), "lean");
}

// Nodes a (4 GPUs, 32 cores: 8 per GPU), added first, and b (4 GPUs, 40 cores: 10 per GPU); the
// workload of RichAndLean (GPU tasks at 10 cores per GPU), so a is 8 cores short of feeding its
// GPUs: CpuLeanShortfall = 8000 × 0.1 / 8000 = 0.1, a CPU-lean pool.
Engine LeanPair() {
  return TwoNodes(Node("a", 4, /*cpu=*/32000, 262144), Node("b", 4, /*cpu=*/40000, 262144),
                  {{Share(500, 8000), 1}, {Whole(1, 8000), 1}, {Share(300, 2000), 1}});
}

TEST(FgdPackTest, CpuHungryShareToTheNodeWithCoresPerIdleGpu) {
  // A 500 share with 5 cores asks 10 cores per GPU; a has 32 free for 4 idle GPUs (8 per GPU),
  // b 40 (10 per GPU). Without the share CPU-ratio term a scores at least as well as b (−14;
  // neither node strands GPU or CPU before or after at these ratios) and wins (checked with the
  // weight at 0); the term adds 20 × 500 × ln(10 / 8)² = 497.9 milli-GPU on a (score −26) and
  // nothing on b, where the share takes exactly the node's ratio. On a the share would leave 27
  // cores for 3.5 idle GPUs (7.7 per GPU): where the small nodes' cores run out first
  // (cloud-inference's L4 and T4) that idle GPU is lost.
  Engine e = LeanPair();
  EXPECT_EQ(NodeOf(e, Share(500, 5000)), "b");
}

TEST(FgdPackTest, ShareAtTheNodesRatioStaysInTieOrder) {
  // The control: a 500 share with 4 cores (8 per GPU, a's ratio): the term is 0 on both nodes,
  // both score −14 and the tie order picks a.
  Engine e = LeanPair();
  EXPECT_EQ(NodeOf(e, Share(500, 4000)), "a");
}

TEST(FgdPackTest, CpuHoleCap) {
  // 500 shares with 2 cores, whole GPUs with 8 and CPU-only tasks of 16, equally often: 1500
  // milli-GPU per 26000 milli-cores, 0.05769 per core. By size: 2 cores bring 500 − 115.4 =
  // 384.6 beyond the mean, 8 cores 1000 − 461.5 = 538.5 more (923.1), 16 cores 0 − 923.1 (0):
  // the peak is at 8 cores.
  std::vector<FragClass> w = {Class(1, 500, 1, 2000), Class(1, 1000, 1, 8000),
                              Class(1, 0, 0, 16000)};
  EXPECT_EQ(CpuHoleCap(w), 8000);
  // The whole GPUs with 24 cores instead: 1500 per 42000 (0.03571). 2 cores: 500 − 71.4 =
  // 428.6; 16: −571.4 (−142.9); 24: 1000 − 857.1 (0): the peak is at 2 cores.
  w[1].cpu_milli = 24000;
  EXPECT_EQ(CpuHoleCap(w), 2000);
  // The classes of one size count together: a 500 share and a CPU-only task, both of 2 cores,
  // are one step that brings exactly the mean (the share alone would be above it): 0.
  EXPECT_EQ(CpuHoleCap({Class(1, 500, 1, 2000), Class(1, 0, 0, 2000)}), 0);
  // One class (it is the mean), no CPU demand, no workload: 0.
  EXPECT_EQ(CpuHoleCap({w[0]}), 0);
  w[0].cpu_milli = w[1].cpu_milli = w[2].cpu_milli = 0;
  EXPECT_EQ(CpuHoleCap(w), 0);
  EXPECT_EQ(CpuHoleCap({}), 0);
}

// GPU-less nodes a (6 cores) and b (40 cores), added in that order, and a GPU node c (4 GPUs, 74
// cores) that takes no tasks; the workload is whole GPUs with 4 cores and CPU-only tasks of 32
// cores, weighted 1 and `cpu_only_weight`.
Engine HolePool(double cpu_only_weight) {
  Engine e = Make(Strategy::kFgdPack);
  EXPECT_TRUE(e.AddNode(Node("a", 0, /*cpu=*/6000)).ok());
  EXPECT_TRUE(e.AddNode(Node("b", 0, /*cpu=*/40000)).ok());
  EXPECT_TRUE(e.AddNode(Node("c", 4, /*cpu=*/74000)).ok());
  EXPECT_TRUE(e.SetSchedulable("c", false).ok());
  e.SetWorkload({{Whole(1, 4000), 1}, {CpuOnlyTask(32000), cpu_only_weight}});
  return e;
}

TEST(FgdPackTest, CutsABigCpuHoleWhereCpuRunsOutFirst) {
  // Weights 1 and 1: 1000 milli-GPU per 36000 milli-cores (0.02778 per core) against the pool's
  // 4000 per 120000 (0.03333): scarcity 1.2, CPU-tight. The hole cap is 4 cores (the whole GPUs
  // bring 1000 − 111.1 beyond the mean, the CPU-only tasks take it back). A CPU-only task of 4
  // cores:
  //   on a: 6 → 2 cores free, the room above 4 cores goes 2000 → 0 milli-cores: 15 × −2000 =
  //         −30,000;
  //   on b: 40 → 36, the room goes 36000 → 32000: 15 × −4000 = −60,000.
  // No GPU is touched and the 32-core class fits b once before and after, so F, H and S see the
  // two alike: without the term the tie order picks a and leaves b's 40-core hole to a big
  // CPU-only task; with it b wins by ⌊30,000 / 40⌋ = 750 score points and a's 6 cores are kept
  // for a small task.
  EXPECT_EQ(NodeOf(HolePool(1), CpuOnlyTask(4000)), "b");
  // CPU-only weight 0.85: 1000 milli-GPU per 31200 milli-cores (0.03205 per core), scarcity
  // 1.04 — under the CPU-tight gate (no CPU-only room term), but the CPU still runs out first:
  // the hole cap is 4 cores again and b wins the same way.
  EXPECT_EQ(NodeOf(HolePool(0.85), CpuOnlyTask(4000)), "b");
  // The control: CPU-only tasks half as often, 1000 milli-GPU per 20000 milli-cores (0.05 per
  // core): scarcity 0.67, no hole cap, and the tie order picks a.
  EXPECT_EQ(NodeOf(HolePool(0.5), CpuOnlyTask(4000)), "a");
}

}  // namespace
}  // namespace gpupool::placement
