// The packing bound (placement/sim/bound.h) and its LP solver (lp.h): hand-solved LPs, small
// packing instances whose LP optimum is worked out below, the certificate's arithmetic for given
// duals, a brute-force check that the bound is never below the best packing, and the metric
// bound on a tiny arrival sequence.
#include "placement/sim/bound.h"

#include <gtest/gtest.h>

#include <functional>
#include <random>

#include "placement/sim/lp.h"

namespace gpupool::placement::sim {
namespace {

// ---------------------------------------------------------------------------------------------
// Lp: maximise c·x, A x ≤ b, 0 ≤ x ≤ u.

struct LpCase {
  const char* name;
  std::vector<double> rhs;
  struct Col {
    double cost, upper;
    std::vector<std::pair<int, double>> entries;
  };
  std::vector<Col> cols;
  double objective;
  std::vector<double> values;  // per structural column
  std::vector<double> duals;   // per row
};

TEST(LpTest, HandSolved) {
  const double inf = Lp::kInf;
  const std::vector<LpCase> cases = {
      // max x + y; x + 2y ≤ 4; 3x + y ≤ 6. Both rows bind: x = 8/5, y = 6/5, objective 14/5.
      // Duals solve y1 + 3 y2 = 1, 2 y1 + y2 = 1: y1 = 2/5, y2 = 1/5 (4·2/5 + 6·1/5 = 14/5).
      {"two rows bind",
       {4, 6},
       {{1, inf, {{0, 1}, {1, 3}}}, {1, inf, {{0, 2}, {1, 1}}}},
       2.8,
       {1.6, 1.2},
       {0.4, 0.2}},
      // max 3x + 2y; x + y ≤ 4; x + 3y ≤ 9; x ≤ 3. x sits at its bound 3, row 1 leaves y = 1
      // (row 2: 3 + 3 = 6 ≤ 9, slack); objective 9 + 2 = 11; dual of row 1 = y's cost 2.
      {"upper bound",
       {4, 9},
       {{3, 3, {{0, 1}, {1, 1}}}, {2, inf, {{0, 1}, {1, 3}}}},
       11,
       {3, 1},
       {2, 0}},
      // max 5x; 2x ≤ 10; x ≤ 1: the bound binds before the row (objective 5, dual 0).
      {"bound before row", {10}, {{5, 1, {{0, 2}}}}, 5, {1}, {0}},
  };
  for (const LpCase& c : cases) {
    Lp lp;
    for (double b : c.rhs) lp.AddRow(b);
    std::vector<int> ids;
    for (const LpCase::Col& col : c.cols)
      ids.push_back(lp.AddColumn(col.cost, col.upper, col.entries));
    ASSERT_EQ(lp.Solve(), Lp::Result::kOptimal) << c.name;
    EXPECT_NEAR(lp.Objective(), c.objective, 1e-9) << c.name;
    for (size_t i = 0; i < ids.size(); ++i)
      EXPECT_NEAR(lp.Value(ids[i]), c.values[i], 1e-9) << c.name;
    const std::vector<double> y = lp.Duals();
    for (size_t i = 0; i < c.duals.size(); ++i) EXPECT_NEAR(y[i], c.duals[i], 1e-9) << c.name;
  }
}

TEST(LpTest, ColumnAddedAfterSolve) {
  // "two rows bind" (objective 2.8, duals 0.4 and 0.2), then z with cost 2 and entries 1, 1:
  // reduced cost 2 − 0.4 − 0.2 = 1.4 > 0, so z enters. New optimum z = 4 (row 1 binds; row 2:
  // 4 ≤ 6), objective 8, duals (2, 0): x's reduced cost 1 − 2 < 0, y's 1 − 4 < 0.
  Lp lp;
  lp.AddRow(4);
  lp.AddRow(6);
  lp.AddColumn(1, Lp::kInf, {{0, 1}, {1, 3}});
  lp.AddColumn(1, Lp::kInf, {{0, 2}, {1, 1}});
  ASSERT_EQ(lp.Solve(), Lp::Result::kOptimal);
  EXPECT_NEAR(lp.Objective(), 2.8, 1e-9);
  const int z = lp.AddColumn(2, Lp::kInf, {{0, 1}, {1, 1}});
  ASSERT_EQ(lp.Solve(), Lp::Result::kOptimal);
  EXPECT_NEAR(lp.Objective(), 8, 1e-9);
  EXPECT_NEAR(lp.Value(z), 4, 1e-9);
  EXPECT_NEAR(lp.Duals()[0], 2, 1e-9);
  // Lowering z's bound to 1 (its value 4 no longer fits: the solve starts over): z = 1 uses 1 of
  // row 1 and of row 2,
  // leaving x + 2y ≤ 3, 3x + y ≤ 5: x = 7/5, y = 4/5 → 2 + 11/5 = 4.2.
  lp.SetUpper(z, 1);
  ASSERT_EQ(lp.Solve(), Lp::Result::kOptimal);
  EXPECT_NEAR(lp.Objective(), 4.2, 1e-9);
}

// ---------------------------------------------------------------------------------------------
// Packing instances.

PackingNodeType Type(int64_t count, int gpus, int64_t cpu = 64000, int64_t mem = 262144,
                     std::string model = "T4") {
  return PackingNodeType{count, cpu, mem, gpus, std::move(model)};
}

PackingClass Share(int64_t count, int32_t milli, int64_t cpu = 1000, int64_t mem = 1024,
                   std::string spec = "") {
  return PackingClass{count, 0, cpu, mem, 1, milli, std::move(spec)};
}

PackingClass Whole(int64_t count, int gpus, int64_t cpu = 1000, int64_t mem = 1024,
                   std::string spec = "") {
  return PackingClass{count, 0, cpu, mem, gpus, 1000, std::move(spec)};
}

struct PackingCase {
  const char* name;
  PackingInstance instance;
  double lp;  // the configuration LP's optimum, worked out in the comment
};

TEST(BoundTest, ConfigurationLpOptimum) {
  const std::vector<PackingCase> cases = {
      // One GPU, two 810s: they cannot share it. w_810 = 810 gives π = 810, nothing else: 810.
      {"two 810 on one GPU", {{Type(1, 1)}, {Share(2, 810)}}, 810},
      // Two GPUs, three 810s and one 200 (810 + 200 > 1000). Dual w_810 = 810, w_200 = 810/5 =
      // 162: a GPU holds 810 or five 200s (162 × 5 = 810), π = 2 × 810 = 1620, plus the 200's
      // uncredited 200 − 162 = 38: 1658. Primal: 0.9 node of (810 | 810) and 0.1 node of
      // (5 × 200 | 5 × 200) = 1.8 × 810 + 200 = 1658. (The best real packing: 1620.)
      {"810s and a 200", {{Type(1, 2)}, {Share(3, 810), Share(1, 200)}}, 1658},
      // CPU: 16 cores, 2 GPUs, three whole-GPU tasks of 12 cores. With the node's CPU priced at
      // β = 1/12 milli-GPU per milli-core (16000 β = 1333.3) a task is worth 1000 − 12000 β = 0:
      // UB = 16000/12 = 1333.33 (the LP runs 2/3 of a node with two tasks; really: 1000).
      {"CPU binds", {{Type(1, 2, 16000)}, {Whole(3, 1, 12000)}}, 16000.0 / 12},
      // Memory: 10000 MiB, one GPU, two 500s of 8192 MiB. Memory priced so a 500 is worth 0:
      // 500 × 10000 / 8192 = 610.35.
      {"memory binds", {{Type(1, 1, 64000, 10000)}, {Share(2, 500, 1000, 8192)}}, 5000000.0 / 8192},
      // A model constraint no node meets: nothing fits.
      {"model", {{Type(2, 1, 64000, 262144, "T4")}, {Whole(2, 1, 1000, 1024, "V100M16")}}, 0},
      // A 2-GPU node, a 2-GPU task (2000) and an 810: the task alone (2000) beats the 810 alone,
      // and every mix of the two node sets (2000 | 810 on one GPU) is worse: 2000.
      {"multi-GPU", {{Type(1, 2)}, {Whole(1, 2), Share(1, 810)}}, 2000},
      // 470 pairs leave 60 per GPU: ten 470s on four GPUs, at most two per GPU (3 × 470 > 1000):
      // w_470 = 470 certifies π = 4 × 940 = 3760 with nothing uncredited: 3760.
      {"470 pairs", {{Type(2, 2)}, {Share(10, 470)}}, 3760},
  };
  for (const PackingCase& c : cases) {
    PackingDual dual;
    EXPECT_NEAR(PackingUpperBound(c.instance, &dual), c.lp, 1e-6) << c.name;
    // The dual the LP returns certifies the same value when evaluated on its own.
    EXPECT_NEAR(DualBound(c.instance, dual), c.lp, 1e-6) << c.name;
  }
}

TEST(BoundTest, CertificateArithmetic) {
  const PackingInstance in{{Type(1, 2)}, {Share(3, 810), Share(1, 200)}};
  struct Case {
    const char* name;
    std::vector<double> w;
    double cpu_price;
    double ub;
  };
  const std::vector<Case> cases = {
      // w = s: a GPU holds five 200s worth 1000 (counts are relaxed), π = 2000, no remainder.
      {"w = s", {810, 200}, 0, 2000},
      // w_200 = 162: π = 2 × max(810, 5 × 162) = 1620; remainder 1 × (200 − 162) = 38.
      {"optimal", {810, 162}, 0, 1658},
      // w_810 = 0: π = 2 × 1000 (five 200s); remainder 3 × 810 = 2430: 4430.
      {"w_810 = 0", {0, 200}, 0, 4430},
      // A CPU price of 500 milli-GPU for the node's 64000 milli-cores: each task (1000 cores)
      // loses 500/64 = 7.8125 of value: GPU max(810 − 7.8125, 5 × (200 − 7.8125) = 960.9375):
      // π = 500 + 2 × 960.9375 = 2421.875.
      {"CPU price", {810, 200}, 500, 2421.875},
  };
  for (const Case& c : cases) {
    const PackingDual d{c.w, {c.cpu_price}, {0}};
    EXPECT_NEAR(DualBound(in, d), c.ub, 1e-9) << c.name;
  }
}

// Every packing of a tiny instance, by brute force: the bound must never be below the best.
double BestPacking(const PackingInstance& in) {
  struct Node {
    int64_t cpu, mem;
    std::vector<int32_t> free;
    std::string model;
  };
  std::vector<Node> nodes;
  for (const PackingNodeType& t : in.types)
    for (int64_t i = 0; i < t.count; ++i)
      nodes.push_back(Node{t.cpu_milli, t.memory_mib,
                           std::vector<int32_t>(static_cast<size_t>(t.gpus), 1000), t.model});
  std::vector<const PackingClass*> tasks;
  for (const PackingClass& c : in.classes)
    for (int64_t i = 0; i < c.count; ++i) tasks.push_back(&c);
  double best = 0;
  std::function<void(size_t, double)> go = [&](size_t i, double sum) {
    best = std::max(best, sum);
    if (i == tasks.size()) return;
    go(i + 1, sum);  // leave task i out
    const PackingClass& c = *tasks[i];
    for (Node& n : nodes) {
      if (n.cpu < c.cpu_milli || n.mem < c.memory_mib) continue;
      if (!c.gpu_spec.empty() && c.gpu_spec != n.model) continue;
      n.cpu -= c.cpu_milli, n.mem -= c.memory_mib;
      if (c.num_gpu == 1) {
        for (size_t g = 0; g < n.free.size(); ++g) {
          int32_t& f = n.free[g];
          bool tried = false;  // a GPU with the same free share as an earlier one: same subtree
          for (size_t h = 0; h < g; ++h) tried = tried || n.free[h] == f;
          if (tried || f < c.gpu_milli) continue;
          f -= c.gpu_milli;
          go(i + 1, sum + static_cast<double>(c.gpu_milli));
          f += c.gpu_milli;
        }
      } else {
        std::vector<int32_t*> whole;
        for (int32_t& f : n.free)
          if (f == 1000 && static_cast<int>(whole.size()) < c.num_gpu) whole.push_back(&f);
        if (static_cast<int>(whole.size()) == c.num_gpu) {
          for (int32_t* f : whole) *f = 0;
          go(i + 1, sum + static_cast<double>(c.Demand()));
          for (int32_t* f : whole) *f = 1000;
        }
      }
      n.cpu += c.cpu_milli, n.mem += c.memory_mib;
    }
  };
  go(0, 0);
  return best;
}

TEST(BoundTest, NeverBelowTheBestPacking) {
  std::mt19937_64 rng(7);
  const int32_t sizes[] = {160, 200, 320, 470, 500, 650, 810, 1000};
  const int64_t cpus[] = {2000, 6000, 12000};
  for (int trial = 0; trial < 400; ++trial) {
    PackingInstance in;
    const int types = 1 + static_cast<int>(rng() % 2);
    for (int t = 0; t < types; ++t)
      in.types.push_back(Type(1 + static_cast<int64_t>(rng() % 2), 1 + static_cast<int>(rng() % 2),
                              rng() % 2 ? 16000 : 24000, 65536, t == 0 ? "T4" : "P100"));
    const int classes = 1 + static_cast<int>(rng() % 3);
    for (int k = 0; k < classes; ++k) {
      const int64_t count = 1 + static_cast<int64_t>(rng() % 3);
      const int64_t cpu = cpus[rng() % 3];
      const std::string spec = rng() % 4 == 0 ? "P100" : "";
      if (rng() % 6 == 0)
        in.classes.push_back(Whole(count, 2, cpu, 1024, spec));
      else
        in.classes.push_back(Share(count, sizes[rng() % 8], cpu, 1024 << (rng() % 6), spec));
    }
    PackingDual dual;
    const double ub = PackingUpperBound(in, &dual);
    const double best = BestPacking(in);
    ASSERT_GE(ub + 1e-6, best) << "trial " << trial;
    double demand = 0, capacity = 0;
    for (const PackingClass& c : in.classes) demand += static_cast<double>(c.count * c.Demand());
    for (const PackingNodeType& t : in.types)
      capacity += static_cast<double>(t.count * t.gpus * 1000);
    ASSERT_LE(ub, std::min(demand, capacity) + 1e-6) << "trial " << trial;
  }
}

TEST(BoundTest, MetricBoundOnATinySequence) {
  // One node, two GPUs: capacity 2000. Arrivals 810, 810, 380, a CPU-only task, then 1000.
  // arrived after each: 810 (41%), 1620 (81%), 2000 (100%), 2000 (100%), 3000 (150%): the bin
  // at 100 holds events 2 and 3. Prefix {810, 810, 380}: the 380 cannot join an 810 (1190), so
  // at most 810 + 810 = 1620 (the LP agrees: w = s, a GPU's best is 810 > 2 × 380). Allocated ≤
  // 1620 (+1 milli of rounding margin) at both events: unallocated ≥ 100 − 81.05 = 18.95%.
  const std::vector<TraceNode> nodes = {{"n", 64000, 262144, 2, "T4"}};
  std::vector<TraceTask> a = {{"a", 4000, 1024, 1, 810, ""},
                              {"b", 4000, 1024, 1, 810, ""},
                              {"c", 4000, 1024, 1, 380, ""},
                              {"d", 4000, 1024, 0, 0, ""},
                              {"e", 4000, 1024, 1, 1000, ""}};
  const MetricBound b = UnallocatedLowerBound(nodes, a, 100, BoundOptions{1});
  EXPECT_EQ(b.events, 2);
  EXPECT_NEAR(b.unallocated_pct, 100 - 100 * 1621.0 / 2000, 1e-9);
  EXPECT_NEAR(b.packable_pct, 100 * 1621.0 / 2000, 1e-9);
  // Without the 380 there is no event at 100% (1620 → 81%, then 2620 → 131%).
  a.erase(a.begin() + 2);
  EXPECT_EQ(UnallocatedLowerBound(nodes, a, 100, BoundOptions{1}).events, 0);
}

TEST(BoundTest, ProtocolDropRule) {
  // One node, two GPUs (capacity 2000); arrivals 600, 600, 800 (arrived 30%, 60%, 100%).
  // Packing alone: 800 on one GPU and a 600 on the other, 1400 (no two share a GPU).
  // The protocol: both 600s fit when they arrive, so they are placed, one per GPU; the 800 then
  // fits nowhere: 1200. The bound sees it: the 600s are keys (what needs at least as much — the
  // two 600s and the 800, 2000 — is ≥ 70% of capacity); if no key is dropped both are placed
  // and the LP gives 1200; a first key drop in [task 0, task 2) would also drop the 800, which
  // needs more, leaving at most 1200 of demand. Plus the 1 milli-GPU margin:
  //   protocol: 100 − 100 × 1201 / 2000 = 39.95 %;  packing: 100 − 100 × 1401 / 2000 = 29.95 %.
  const std::vector<TraceNode> nodes = {{"n", 64000, 262144, 2, "T4"}};
  const std::vector<TraceTask> a = {
      {"a", 4000, 1024, 1, 600, ""}, {"b", 4000, 1024, 1, 600, ""}, {"c", 4000, 1024, 1, 800, ""}};
  struct Case {
    const char* name;
    bool protocol;
    double unallocated;
  };
  for (const Case& c : {Case{"protocol", true, 39.95}, Case{"packing", false, 29.95}}) {
    BoundOptions o;
    o.stride = 1;
    o.protocol = c.protocol;
    o.key_covers = {0.7};
    const MetricBound b = UnallocatedLowerBound(nodes, a, 100, o);
    EXPECT_EQ(b.events, 1) << c.name;
    EXPECT_NEAR(b.unallocated_pct, c.unallocated, 1e-9) << c.name;
  }
  // The 800 first: it is placed, then each 600 fits the other GPU once: 800 + 600 = 1400 under
  // both rules (the second 600 is dropped).
  const std::vector<TraceTask> b = {a[2], a[0], a[1]};
  BoundOptions o;
  o.key_covers = {0.7};
  EXPECT_NEAR(UnallocatedLowerBound(nodes, b, 100, o).unallocated_pct, 29.95, 1e-9);
}

}  // namespace
TEST(BoundTest, RefusesNodeListsWithCpuOnlyNodes) {
  // A CPU-only node next to a GPU node: the proof does not cover it, so the bound is refused and
  // only the trivial (sound) numbers come back — unallocated ≥ 0, packable ≤ 100 %.
  const std::vector<TraceNode> gpu = {{"n", 64000, 262144, 2, "T4"}};
  std::vector<TraceNode> mixed = gpu;
  mixed.push_back({"c", 96000, 393216, 0, ""});
  EXPECT_EQ(BoundRefusal(gpu), "");
  EXPECT_NE(BoundRefusal(mixed).find("1 CPU-only node"), std::string::npos);
  const std::vector<TraceTask> a = {
      {"a", 4000, 1024, 1, 600, ""}, {"b", 4000, 1024, 1, 600, ""}, {"c", 4000, 1024, 1, 800, ""}};
  for (bool protocol : {true, false}) {
    BoundOptions o;
    o.protocol = protocol;
    const MetricBound b = UnallocatedLowerBound(mixed, a, 100, o);
    EXPECT_FALSE(b.refused.empty());
    EXPECT_EQ(b.unallocated_pct, 0);
    EXPECT_EQ(b.packable_pct, 100);
    EXPECT_TRUE(UnallocatedLowerBound(gpu, a, 100, o).refused.empty());
  }
}

}  // namespace gpupool::placement::sim
