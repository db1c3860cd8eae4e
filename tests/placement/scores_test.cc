// Score stage, strategy by strategy: the artifact's formulas with the arithmetic written out.
#include <gtest/gtest.h>

#include "placement/accounting.h"
#include "placement/frag.h"
#include "placement/state.h"
#include "placement/strategies/best_fit.h"
#include "placement/strategies/dot_product.h"
#include "placement/strategies/fgd_pack.h"
#include "placement/strategies/gpu_clustering.h"
#include "placement/strategies/gpu_packing.h"

namespace gpupool::placement {
namespace {

// A node of `frees.size()` 1000-milli GPUs with the given free shares (model 0), `cpu_free`.
NodeState MakeNode(std::vector<int32_t> frees, int64_t cpu_free = 64000) {
  NodeState n;
  n.slot = 0;
  n.cpu_total = 64000;
  n.cpu_used = 64000 - cpu_free;
  n.mem_total = 1 << 20;
  for (int32_t f : frees) {
    DeviceState d;
    d.id = "g";
    d.physical = d.offered = Resources{100000, 1000};
    d.allocated = Resources{(1000 - f) * 100, 1000 - f};
    n.devices.push_back(d);
  }
  n.Refresh(1);
  return n;
}

TEST(ScoresTest, BestFit) {
  // raw × 8·10^6 = 8·10^8 − 3125 Δcpu − 50000 Δgpu.
  // cpu 64000 free − 8000 = 56000 → 175,000,000; gpu 2000 − 1000 = 1000 → 50,000,000.
  EXPECT_EQ(BestFitScore(64000, 8000, 2000, 1000), 800'000'000 - 175'000'000 - 50'000'000);
  // Fuller node wins: less left over.
  EXPECT_GT(BestFitScore(16000, 8000, 1000, 1000), BestFitScore(64000, 8000, 8000, 1000));
}

TEST(ScoresTest, DotProduct) {
  // 100 × (1 − ½ (64000/128000 · 8000/128000 + 8000/8000 · 1000/8000))
  //   = 100 × (1 − ½ (0.03125 + 0.125)) = 92.1875 → 92.
  EXPECT_EQ(DotProductScore(64000, 8000, 8000, 1000), 92);
  // Nothing free: 100.
  EXPECT_EQ(DotProductScore(0, 8000, 0, 1000), 100);
}

TEST(ScoresTest, GpuPacking) {
  CompiledRequest share;
  share.kind = RequestKind::kFractional;
  share.share_milli = 300;
  share.gpu_count = 1;
  DeviceSet cand, chosen;
  // Partly used GPU with 600 free: 100 − (600 × 100 / 1000) / 10 = 100 − 6 = 94.
  NodeState used = MakeNode({600, 1000});
  cand.n = 0;
  cand.Push(0);
  cand.Push(1);
  EXPECT_EQ(GpuPackingScore(used, share, cand, &chosen), 94);
  EXPECT_EQ(chosen.idx[0], 0);
  // Only a free GPU on a used node (GPU 0 has 100 free, too little): 50 − 1 = 49.
  NodeState used2 = MakeNode({100, 1000});
  cand.n = 0;
  cand.Push(1);
  EXPECT_EQ(GpuPackingScore(used2, share, cand, &chosen), 49);
  // Empty 8-GPU node: 33 − 8 = 25.
  NodeState empty = MakeNode(std::vector<int32_t>(8, 1000));
  cand.n = 0;
  for (int i = 0; i < 8; ++i) cand.Push(i);
  EXPECT_EQ(GpuPackingScore(empty, share, cand, &chosen), 25);
}

TEST(ScoresTest, GpuClustering) {
  NodeState n = MakeNode({1000, 1000, 500, 1000});  // idle 3500
  // Only shares so far, a share arrives: 75 + 25 × (8000 − 3500) / 8000 = 75 + 14 = 89.
  n.kinds = {1, 0, 0, 0, 0};
  EXPECT_EQ(GpuClusteringScore(n, 0), 89);
  // Shares and 1-GPU tasks: 50 + 14 = 64; a 2-GPU task (other kinds only): 0 + 14.
  n.kinds = {1, 1, 0, 0, 0};
  EXPECT_EQ(GpuClusteringScore(n, 0), 64);
  EXPECT_EQ(GpuClusteringScore(n, 2), 14);
  // Nothing yet: 25 + 14.
  n.kinds = {0, 0, 0, 0, 0};
  EXPECT_EQ(GpuClusteringScore(n, 1), 39);
}

TEST(ScoresTest, FgdFragmentationAndQuantisedScore) {
  // Workload: half the tasks want 500 milli, half a whole GPU.
  std::vector<FragClass> w(2);
  w[0].gpu_milli = 500, w[0].gpu_count = 1, w[0].p = 0.5, w[0].inv_gpu = 1.0 / 500;
  w[1].gpu_milli = 1000, w[1].gpu_count = 1, w[1].p = 0.5, w[1].inv_gpu = 1.0 / 1000;
  FragModel model(&w);
  // GPUs free 300 and 1000: for the 500 class the 300 is a sliver (f = 300); for the whole
  // class the 300 is too (f = 300). F = 0.5·300 + 0.5·300 = 300.
  NodeState n = MakeNode({300, 1000});
  EXPECT_DOUBLE_EQ(model.F(n), 300);
  // Put 500 on the free GPU (1000 → 500): 500-class slivers stay 300; the whole class can no
  // longer run (no GPU with 1000 free), so it counts all idle 800. F' = 150 + 400 = 550.
  FragChange c{1, 500};
  EXPECT_DOUBLE_EQ(model.Delta(n, &c, 1, 64000, 1 << 20).f, 250);
  // int(100 · sigmoid(−250/1000)) = int(100 / (1 + e^0.25)) = int(43.78) = 43.
  EXPECT_EQ(FgdQuantised(250), 43);
  EXPECT_EQ(FgdQuantised(0), 50);
  // Counting measure H: the 500 class can host ⌊300/500⌋+⌊1000/500⌋ = 2 → 1000 usable of 1300
  // idle (300); the whole class 1 → 1000 usable (300). H = 0.5·300 + 0.5·300 = 300. After:
  // 500 class ⌊300/500⌋+⌊500/500⌋ = 1 → 800 − 500 = 300; whole class 0 → 800. ΔH = 550 − 300.
  EXPECT_DOUBLE_EQ(model.Delta(n, &c, 1, 64000, 1 << 20).h, 250);
}

TEST(ScoresTest, ModelPressureOfPinnedClasses) {
  // Half the GPU demand may run anywhere; a quarter is pinned to model 1, which is a quarter of
  // the pool's GPUs (model_share ¼); a quarter to models 1 or 2 (half the GPUs). CPU-only tasks
  // bring no GPU demand. Σ p·g·k = 0.5·1000 + 0.25·1000 + 0.25·1000 = 1000.
  std::vector<FragClass> w(4);
  w[0].gpu_milli = 1000, w[0].gpu_count = 1, w[0].p = 0.5;  // any model (model_share 1)
  w[1].gpu_milli = 500, w[1].gpu_count = 2, w[1].p = 0.25, w[1].model_mask = 0b10;
  w[1].model_share = 0.25;
  w[2].gpu_milli = 250, w[2].gpu_count = 1, w[2].p = 1.0, w[2].model_mask = 0b110;
  w[2].model_share = 0.5;
  w[3].gpu_count = 0, w[3].p = 0.1;
  // ρ1 = (250 / ¼ + 250 / ½) / 1000 = 1.5 → 3.375; ρ2 = (250 / ½) / 1000 = 0.5 → 0.125; others 0.
  const std::vector<double> pressure = ModelPressure(w);
  ASSERT_EQ(pressure.size(), 64u);
  EXPECT_DOUBLE_EQ(pressure[1], 3.375);
  EXPECT_DOUBLE_EQ(pressure[2], 0.125);
  EXPECT_DOUBLE_EQ(pressure[0], 0);
  EXPECT_DOUBLE_EQ(pressure[63], 0);
  // Nothing pinned: no pressure anywhere.
  w.resize(1);
  for (double x : ModelPressure(w)) EXPECT_EQ(x, 0);

  // The term: a placement taking 600 of a model-1 device and 1000 of a model-0 one, on a node of
  // type 2 (the table is per node type, then model).
  FragModel model(&w);
  std::vector<std::vector<double>> by_type(3);
  by_type[2].assign(64, 0.0);
  by_type[2][1] = 3.375;
  by_type[0].assign(64, 0.0);
  by_type[0][1] = 99;  // another type's figure is not read
  model.set_pinned_pressure(by_type);
  NodeState n = MakeNode({1000, 1000});
  n.type = 2;
  n.devices[0].model = 1;
  FragChange c[2] = {{0, 400}, {1, 0}};
  EXPECT_DOUBLE_EQ(model.Delta(n, c, 2, 64000, 1 << 20).pressure, 600 * 3.375);
  // A type beyond the table (added since the workload was set) or with no row: no pressure.
  n.type = 1;
  EXPECT_DOUBLE_EQ(model.Delta(n, c, 2, 64000, 1 << 20).pressure, 0);
  n.type = 7;
  EXPECT_DOUBLE_EQ(model.Delta(n, c, 2, 64000, 1 << 20).pressure, 0);
}

TEST(ScoresTest, CpuOnlyClassesCountAllIdle) {
  // Half the tasks want 500 milli, half are CPU-only (reach ½: only half the nodes host them).
  std::vector<FragClass> w(2);
  w[0].gpu_milli = 500, w[0].gpu_count = 1, w[0].p = 0.5, w[0].inv_gpu = 1.0 / 500;
  w[1].gpu_count = 0, w[1].p = 0.5, w[1].reach = 0.5;
  FragModel model(&w);
  const NodeState n = MakeNode({300, 1000});  // idle 1300
  // F = ½ × 300 (the 300 is a sliver for 500) + ½ × 1300 (CPU-only: all idle) = 800.
  EXPECT_DOUBLE_EQ(model.Of(n).f, 800);
  // H = ½ × (1300 − 2 × 500) + (½ / ½) × 1300 = 150 + 1300 = 1450.
  EXPECT_DOUBLE_EQ(model.Of(n).h, 1450);
}

TEST(ScoresTest, FgdPackCostAndQuantum) {
  // w = 2: cost = ΔH + 2 ΔF + 16 ΔS + 128 ΔW; score = ⌊−cost / (20 × 2)⌋.
  EXPECT_DOUBLE_EQ(FgdPackCost(100, 50, 0, 0, 2), 200);
  EXPECT_EQ(FgdPackScore(200, 2), -5);
  EXPECT_EQ(FgdPackScore(-79, 2), 1);
  EXPECT_EQ(FgdPackScore(0, 2), 0);
  // 200 + 16 × 10 + 128 × 1 = 488; ⌊−488 / 40⌋ = ⌊−12.2⌋ = −13.
  EXPECT_DOUBLE_EQ(FgdPackCost(100, 50, 10, 1, 2), 488);
  EXPECT_EQ(FgdPackScore(488, 2), -13);
  // w = 10: cost = 100 + 500 = 600; ⌊−600 / 200⌋ = −3.
  EXPECT_EQ(FgdPackScore(FgdPackCost(100, 50, 0, 0, 10), 10), -3);
}

TEST(ScoresTest, StrandedGpuTerm) {
  // 0.1 milli-GPU per milli-core: a node feeds 0.1 × its free CPU of idle GPU; the rest is
  // stranded. Two idle GPUs (2000); a 500 share on GPU 0 leaves 1500 idle.
  std::vector<FragClass> w(1);
  w[0].gpu_milli = 500, w[0].gpu_count = 1, w[0].p = 1, w[0].inv_gpu = 1.0 / 500;
  FragModel model(&w);
  model.set_gpu_per_cpu(0.1);
  struct Case {
    const char* name;
    int64_t cpu_free, cpu_after;
    double ds;
  };
  const Case cases[] = {
      // before max(0, 2000 − 800) = 1200; after max(0, 1500 − 400) = 1100: −100 (a CPU-light
      // task on a lean node feeds it).
      {"lean node, light task", 8000, 4000, -100},
      // after max(0, 1500 − 0) = 1500: +300 (a CPU-heavy task strands the rest).
      {"lean node, heavy task", 8000, 0, 300},
      // max(0, 2000 − 6400) = 0 before, max(0, 1500 − 5600) = 0 after.
      {"rich node", 64000, 56000, 0},
  };
  const FragChange c{0, 500};
  for (const Case& k : cases) {
    const NodeState n = MakeNode({1000, 1000}, k.cpu_free);
    EXPECT_DOUBLE_EQ(model.Delta(n, &c, 1, k.cpu_after, 1 << 20).s, k.ds) << k.name;
  }
}

TEST(ScoresTest, ShareWasteTerm) {
  std::vector<FragClass> w(1);
  w[0].gpu_milli = 500, w[0].gpu_count = 1, w[0].p = 1, w[0].inv_gpu = 1.0 / 500;
  FragModel model(&w);
  // A table: waste[r] = r, except a device with 500 or 0 free ends full and one with 700 free
  // typically ends with 100 unused; a fresh device (1000) counts 0.
  std::vector<double> table(1001);
  for (size_t r = 0; r <= 1000; ++r) table[r] = static_cast<double>(r);
  table[500] = 0, table[700] = 100, table[1000] = 0;
  model.set_share_waste(table);
  const NodeState n = MakeNode({700, 1000});
  struct Case {
    const char* name;
    FragChange change;
    double dw;
  };
  const Case cases[] = {
      {"500 next to 300: 700 → 200", {0, 200}, 200 - 100},  // waste 200 − 100
      {"500 on a fresh device", {1, 500}, 0},               // 0 − 0
      {"whole device", {1, 0}, 0},                          // 0 − 0
      {"300 next to 300: 700 → 400", {0, 400}, 400 - 100},  // 400 − 100
  };
  for (const Case& k : cases)
    EXPECT_DOUBLE_EQ(model.Delta(n, &k.change, 1, 64000, 1 << 20).waste, k.dw) << k.name;
}

TEST(ScoresTest, FgdPackWeightFollowsMultiGpuShare) {
  std::vector<FragClass> w(2);
  w[0].gpu_milli = 500, w[0].gpu_count = 1, w[0].p = 0.9;
  w[1].gpu_milli = 1000, w[1].gpu_count = 8, w[1].p = 0.1;
  // Multi-GPU demand 0.1 × 8000 = 800 of 800 + 0.9 × 500 = 1250: 64% ≥ 25% → 10.
  EXPECT_EQ(FgdPackWeight(w), 10.0);
  w[1].p = 0.01;  // 80 of 530: 15% → 2
  EXPECT_EQ(FgdPackWeight(w), 2.0);
}

}  // namespace
}  // namespace gpupool::placement
