// The packing bound (placement/sim/bound.h) and its LP solver (lp.h): hand-solved LPs, small
// packing instances whose LP optimum is worked out below, the certificate's arithmetic for given
// duals, a brute-force check that the bound is never below the best packing, the metric bound on
// a tiny arrival sequence, CPU-only nodes, and an exhaustive search over every protocol-following
// policy on tiny clusters that the bound must never lose to.
#include "placement/sim/bound.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>

#include "placement/sim/forced.h"
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

TEST(LpTest, UnboundedAndBufferedBounds) {
  // max x + y; x − y ≤ 1: y grows without limit.
  Lp open;
  open.AddRow(1);
  open.AddColumn(1, Lp::kInf, {{0, 1}});
  open.AddColumn(1, Lp::kInf, {{0, -1}});
  EXPECT_EQ(open.Solve(), Lp::Result::kUnbounded);
  // A bound set before the column ever reached the solver still counts: max x; x ≤ 5 (row),
  // x ≤ 2 (bound) → 2.
  Lp lp;
  lp.AddRow(5);
  const int x = lp.AddColumn(1, Lp::kInf, {{0, 1}});
  lp.SetUpper(x, 2);
  ASSERT_EQ(lp.Solve(), Lp::Result::kOptimal);
  EXPECT_NEAR(lp.Objective(), 2, 1e-9);
  EXPECT_NEAR(lp.Value(x), 2, 1e-9);
}

// Random packing-shaped LPs (the bound's: nonnegative rows, some bounded columns, columns added
// between solves, bounds raised and lowered between solves, both at once): whatever the solver, an
// optimum is primal feasible and its duals certify it — b·y + Σ_j u_j·max(0, c_j − A_j·y) (the LP
// dual's value for y ≥ 0) equals the objective. This is what bound.cc relies on.
TEST(LpTest, OptimaCarryTheirDualCertificate) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> unit(0, 1);
  for (int round = 0; round < 40; ++round) {
    const int m = 3 + static_cast<int>(rng() % 20);
    Lp lp;
    std::vector<double> rhs;
    for (int i = 0; i < m; ++i)
      rhs.push_back(1 + std::floor(unit(rng) * 50)), lp.AddRow(rhs.back());
    struct Col {
      double cost, upper;
      std::vector<std::pair<int, double>> e;
    };
    std::vector<Col> cols;
    auto add = [&](int n) {
      for (int k = 0; k < n; ++k) {
        Col c{1 + std::floor(unit(rng) * 9),
              unit(rng) < 0.3 ? std::floor(unit(rng) * 6) : Lp::kInf,
              {}};
        for (int i = 0; i < m; ++i)
          if (unit(rng) < 0.3) c.e.emplace_back(i, 1 + std::floor(unit(rng) * 4));
        if (c.e.empty()) c.e.emplace_back(static_cast<int>(rng() % static_cast<unsigned>(m)), 1);
        EXPECT_EQ(lp.AddColumn(c.cost, c.upper, c.e), static_cast<int>(cols.size()));
        cols.push_back(std::move(c));
      }
    };
    auto check = [&](const char* step) {
      ASSERT_EQ(lp.Solve(), Lp::Result::kOptimal) << step << " round " << round;
      const std::vector<double> y = lp.Duals();
      ASSERT_EQ(y.size(), static_cast<size_t>(m));
      std::vector<double> used(static_cast<size_t>(m), 0);
      double primal = 0, dual = 0;
      for (int i = 0; i < m; ++i) {
        EXPECT_GE(y[static_cast<size_t>(i)], -1e-7) << step;
        dual += rhs[static_cast<size_t>(i)] * std::max(0.0, y[static_cast<size_t>(i)]);
      }
      for (size_t j = 0; j < cols.size(); ++j) {
        const double v = lp.Value(static_cast<int>(j));
        EXPECT_GE(v, -1e-7) << step;
        EXPECT_LE(v, cols[j].upper + 1e-7) << step;
        primal += cols[j].cost * v;
        double reduced = cols[j].cost;
        for (const auto& [i, a] : cols[j].e) {
          used[static_cast<size_t>(i)] += a * v;
          reduced -= a * std::max(0.0, y[static_cast<size_t>(i)]);
        }
        if (reduced > 1e-7) {
          ASSERT_NE(cols[j].upper, Lp::kInf) << step << ": a column prices in with no bound";
          dual += cols[j].upper * reduced;
        }
      }
      for (int i = 0; i < m; ++i)
        EXPECT_LE(used[static_cast<size_t>(i)], rhs[static_cast<size_t>(i)] + 1e-6) << step;
      EXPECT_NEAR(lp.Objective(), primal, 1e-6) << step;
      EXPECT_NEAR(dual, primal, 1e-6 * std::max(1.0, primal)) << step << " round " << round;
    };
    add(5 + static_cast<int>(rng() % 30));
    check("first solve");
    add(1 + static_cast<int>(rng() % 10));
    check("columns added");
    for (size_t j = 0; j < cols.size(); ++j)
      if (unit(rng) < 0.3) {
        cols[j].upper = unit(rng) < 0.2 ? Lp::kInf : std::floor(unit(rng) * 4);
        lp.SetUpper(static_cast<int>(j), cols[j].upper);
      }
    check("bounds changed");
    add(1 + static_cast<int>(rng() % 5));
    for (size_t j = 0; j < cols.size(); ++j)
      if (unit(rng) < 0.2) {
        cols[j].upper = std::floor(unit(rng) * 3);
        lp.SetUpper(static_cast<int>(j), cols[j].upper);
      }
    check("columns added and bounds changed");
  }
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

TEST(BoundTest, CpuOnlyNodesHostCpuOnlyTasks) {
  // A GPU node (2 GPUs, 16 cores) and a CPU-only node (8 cores); capacity 2000. Arrivals: a
  // CPU-only task of 8 cores, then two whole-GPU tasks of 8 cores each (arrived 0, 1000, 2000).
  // Every task is a key (the two GPU tasks need at least its CPU: 2000 = 100% of capacity), so the
  // no-drop scenario forces the CPU-only task into the packing. On the CPU-only node it leaves the
  // GPU node's 16 cores to the two GPU tasks: 2000 allocated, unallocated ≥ 0 at the event at
  // 100%. Were the CPU-only node left out of the LP, the forced task would take 8 of the GPU
  // node's cores and the bound would claim 1000 (+1) — beaten by the policy above.
  const std::vector<TraceNode> nodes = {{"g", 16000, 65536, 2, "T4"}, {"c", 8000, 65536, 0, ""}};
  const std::vector<TraceTask> a = {
      {"c", 8000, 1024, 0, 0, ""}, {"a", 8000, 1024, 1, 1000, ""}, {"b", 8000, 1024, 1, 1000, ""}};
  EXPECT_EQ(BoundRefusal(nodes), "");
  EXPECT_NEAR(AllocatedUpperBound(nodes, a), 2000, 1e-6);
  const MetricBound b = UnallocatedLowerBound(nodes, a, 100, BoundOptions{1});
  EXPECT_TRUE(b.refused.empty());
  EXPECT_EQ(b.events, 1);
  EXPECT_NEAR(b.unallocated_pct, 0, 1e-9);
  // Without the CPU-only node the protocol places the CPU-only task on the GPU node (it fits when
  // it arrives), so only 1000 can be allocated. The bound stays sound but does not see it (2000):
  // the three arrivals fall in one bucket of the first-drop scenarios, and "some key of the bucket
  // was dropped first" forces nothing.
  const std::vector<TraceNode> gpu_only = {nodes[0]};
  EXPECT_GE(AllocatedUpperBound(gpu_only, a), 1000);
  // A list with no GPU at all has nothing to bound.
  EXPECT_NE(BoundRefusal({nodes[1]}).find("no GPU"), std::string::npos);
}

// Every policy that follows the protocol — a task goes to any node (and GPU) that can host it,
// and is dropped only when none can — by exhaustive search over a tiny arrival sequence: the
// most milli-GPU allocated after the last arrival, and the least metric (100 − mean allocated %
// over the events of bin x) over all those policies.
struct Exhaustive {
  double most_allocated = 0;
  double least_unallocated = 100;
  // Arrivals some policy had to drop (no node could host them when they came).
  std::vector<bool> ever_dropped;
};

// The metric's bin once every task of `arrivals` has arrived: their GPU, in % of capacity.
int ArrivedPct(const std::vector<TraceNode>& nodes, const std::vector<TraceTask>& arrivals) {
  int64_t capacity = 0, arrived = 0;
  for (const TraceNode& n : nodes) capacity += 1000 * int64_t{n.gpus};
  for (const TraceTask& t : arrivals) arrived += t.GpuMilli();
  return static_cast<int>(
      std::lround(100.0 * static_cast<double>(arrived) / static_cast<double>(capacity)));
}

Exhaustive SearchEveryPolicy(const std::vector<TraceNode>& nodes,
                             const std::vector<TraceTask>& arrivals, int x) {
  struct State {
    int64_t cpu, mem;
    std::vector<int32_t> free;
    const TraceNode* node;
  };
  std::vector<State> st;
  int64_t capacity = 0;
  for (const TraceNode& n : nodes) {
    st.push_back(State{n.cpu_milli, n.memory_mib,
                       std::vector<int32_t>(static_cast<size_t>(std::max(n.gpus, 0)), 1000), &n});
    capacity += 1000 * int64_t{std::max(n.gpus, 0)};
  }
  // The bin's events, as UnallocatedLowerBound defines them.
  std::vector<bool> event(arrivals.size(), false);
  int64_t arrived = 0;
  for (size_t i = 0; i < arrivals.size(); ++i) {
    arrived += arrivals[i].GpuMilli();
    const long b =
        std::lround(100.0 * static_cast<double>(arrived) / static_cast<double>(capacity));
    if (b > x) break;
    event[i] = b == x;
  }
  Exhaustive out;
  out.ever_dropped.assign(arrivals.size(), false);
  std::function<void(size_t, int64_t, double, int)> go = [&](size_t i, int64_t alloc, double sum,
                                                             int events) {
    if (i == arrivals.size()) {
      out.most_allocated = std::max(out.most_allocated, static_cast<double>(alloc));
      if (events > 0) out.least_unallocated = std::min(out.least_unallocated, 100 - sum / events);
      return;
    }
    const TraceTask& t = arrivals[i];
    bool placed = false;
    auto next = [&](int64_t a) {
      placed = true;
      const bool e = event[i];
      go(i + 1, a, sum + (e ? 100.0 * static_cast<double>(a) / static_cast<double>(capacity) : 0),
         events + (e ? 1 : 0));
    };
    for (State& n : st) {
      if (n.cpu < t.cpu_milli || n.mem < t.memory_mib) continue;
      n.cpu -= t.cpu_milli, n.mem -= t.memory_mib;
      if (t.GpuMilli() <= 0) {
        next(alloc);
      } else if (SpecAllowsModel(t.gpu_spec, n.node->model) && !n.free.empty()) {
        if (t.gpu_milli < 1000) {
          for (size_t g = 0; g < n.free.size(); ++g) {
            int32_t& f = n.free[g];
            if (f < t.gpu_milli) continue;
            f -= t.gpu_milli;
            next(alloc + t.gpu_milli);
            f += t.gpu_milli;
          }
        } else {
          std::vector<int32_t*> whole;
          for (int32_t& f : n.free)
            if (f == 1000 && static_cast<int>(whole.size()) < t.num_gpu) whole.push_back(&f);
          if (static_cast<int>(whole.size()) == t.num_gpu) {
            for (int32_t* f : whole) *f = 0;
            next(alloc + t.GpuMilli());
            for (int32_t* f : whole) *f = 1000;
          }
        }
      }
      n.cpu += t.cpu_milli, n.mem += t.memory_mib;
    }
    if (!placed) {  // nothing can host it: dropped
      out.ever_dropped[i] = true;
      const bool e = event[i];
      go(i + 1, alloc,
         sum + (e ? 100.0 * static_cast<double>(alloc) / static_cast<double>(capacity) : 0),
         events + (e ? 1 : 0));
    }
  };
  go(0, 0, 0, 0);
  return out;
}

TEST(BoundTest, ForcedArrivalsTakeTheScarceCpu) {
  // One node: 2 GPUs, 8 cores, 128 GiB. Two CPU-only tasks of 3 cores and 60 GiB arrive, then two
  // whole-GPU tasks of 4 cores. The protocol places both CPU-only tasks (the node is empty, then
  // has 5 cores and 68 GiB free), which leaves 2 cores: both GPU tasks are dropped, 0 allocated.
  // No task covers a CPU-only one (none needs 60 GiB), so no key forces them: the drop-rule
  // scenarios alone leave them out and place both GPU tasks (2000). ForcedArrivals proves them
  // placed: refusing the second needs > 5 cores or > 68 GiB in use, and the first brings 3 cores
  // and 60 GiB — with prices p_cpu = 1/5001 milli, p_mem = 1/69633 MiB (one node's refusal worth
  // 1 through either), max(3000/5001, 61440/69633) = 0.88 < 1 node. Then the forced 6 cores leave
  // 2, and the LP (a relaxation: CPU counted per node type, tasks fractional) buys half of a
  // 4-core GPU task with them: 500 (+1 milli of margin) instead of 2000.
  const std::vector<TraceNode> nodes = {{"g", 8000, 131072, 2, "T4"}};
  const std::vector<TraceTask> a = {{"c1", 3000, 61440, 0, 0, ""},
                                    {"c2", 3000, 61440, 0, 0, ""},
                                    {"g1", 4000, 1024, 1, 1000, ""},
                                    {"g2", 4000, 1024, 1, 1000, ""}};
  EXPECT_EQ(ForcedArrivals(nodes, a), (std::vector<bool>{true, true, false, false}));
  EXPECT_NEAR(AllocatedUpperBound(nodes, a), 501, 1e-6);
  BoundOptions packing;
  packing.protocol = false;
  EXPECT_NEAR(AllocatedUpperBound(nodes, a, packing), 2000, 1e-6);
  const Exhaustive best = SearchEveryPolicy(nodes, a, 100);
  EXPECT_EQ(best.most_allocated, 0);
  // Once the arrivals before it could fill the node, a task is not forced: a third CPU-only task
  // of 3 cores comes after 6 cores are taken (2 left < 3: some policy — every one — drops it).
  const std::vector<TraceTask> b = {a[0], a[1], {"c3", 3000, 1024, 0, 0, ""}};
  EXPECT_EQ(ForcedArrivals(nodes, b), (std::vector<bool>{true, true, false}));
}

TEST(BoundTest, NeverBeatenByAnyProtocolPolicy) {
  // 300 random tiny clusters (1–2 GPU nodes, half of them with 1–2 CPU-only nodes) and arrival
  // sequences of 4–7 tasks (shares, whole GPUs, CPU-only tasks; some pinned to a model): no
  // policy that follows the protocol may allocate more than the protocol bound, nor reach a
  // metric below it; no policy at all may beat the packing bound.
  std::mt19937_64 rng(11);
  const int32_t sizes[] = {200, 320, 470, 600, 810};
  const int64_t cpus[] = {2000, 4000, 8000, 12000};
  int with_cpu_nodes = 0, forced_count = 0, dropped_count = 0;
  for (int trial = 0; trial < 300; ++trial) {
    std::vector<TraceNode> nodes;
    const int gpu_nodes = 1 + static_cast<int>(rng() % 2);
    for (int i = 0; i < gpu_nodes; ++i)
      nodes.push_back({"g" + std::to_string(i), rng() % 2 ? 8000 : 16000, 65536,
                       1 + static_cast<int>(rng() % 2), rng() % 2 ? "T4" : "P100"});
    if (trial % 2 == 1) {
      ++with_cpu_nodes;
      const int cpu_nodes = 1 + static_cast<int>(rng() % 2);
      for (int i = 0; i < cpu_nodes; ++i)
        nodes.push_back({"c" + std::to_string(i), rng() % 2 ? 8000 : 16000, 65536, 0, ""});
    }
    std::vector<TraceTask> a;
    const int tasks = 4 + static_cast<int>(rng() % 4);
    for (int k = 0; k < tasks; ++k) {
      const int64_t cpu = cpus[rng() % 4];
      const std::string spec = rng() % 5 == 0 ? "P100" : "";
      switch (rng() % 6) {
        case 0:
        case 1:
          a.push_back({"cpu", cpu, 1024, 0, 0, ""});
          break;
        case 2:
          a.push_back({"whole", cpu, 1024, 1 + static_cast<int>(rng() % 2), 1000, spec});
          break;
        default:
          a.push_back({"share", cpu, 1024, 1, sizes[rng() % 5], spec});
      }
    }
    const int x = ArrivedPct(nodes, a);
    const Exhaustive best = SearchEveryPolicy(nodes, a, x);
    // No policy drops an arrival that ForcedArrivals says every policy places.
    const std::vector<bool> forced = ForcedArrivals(nodes, a);
    for (size_t i = 0; i < a.size(); ++i) {
      ASSERT_FALSE(forced[i] && best.ever_dropped[i]) << "trial " << trial << " arrival " << i;
      forced_count += forced[i] ? 1 : 0;
      dropped_count += best.ever_dropped[i] ? 1 : 0;
    }
    double grouped = 0;
    for (int mode = 0; mode < 6; ++mode) {
      // Protocol and packing bounds on exact classes, the protocol bound on the coarsest
      // classes (memory and CPU left out: MakeInstance's last resort for huge workloads), the
      // protocol bound on other first-drop buckets, with and without groups of keys, and with
      // the default's second key share alone (only the smallest tasks keys).
      const bool protocol = mode != 1;
      BoundOptions o;
      o.stride = 1;
      o.protocol = protocol;
      if (mode == 2) o.max_classes = 1;
      if (mode == 4) o.group_keys = false;
      o.key_covers = {0.7, 0.3};
      if (mode == 5) o.key_covers = {0.95};
      o.splits_pct = {30, 60, 90, 100};
      if (mode >= 3) o.splits_pct = {20, 40, 60, 80};
      const std::string where = "trial " + std::to_string(trial) + " mode " + std::to_string(mode);
      const double ub = AllocatedUpperBound(nodes, a, o);
      ASSERT_GE(ub + 1e-6, best.most_allocated) << where;
      if (mode == 3) grouped = ub;
      if (mode == 4) {
        // Groups of keys only ever split a scenario into ones that drop more. (On these tiny
        // instances the forced arrivals already see what groups add; on the Alibaba traces
        // groups raise the bound by up to 0.07 point, docs/placement.md.)
        ASSERT_LE(grouped, ub + 1e-6) << where;
      }
      const MetricBound b = UnallocatedLowerBound(nodes, a, x, o);
      ASSERT_TRUE(b.refused.empty()) << where;
      ASSERT_LE(b.unallocated_pct, best.least_unallocated + 1e-6) << where;
    }
  }
  EXPECT_EQ(with_cpu_nodes, 150);
  // Both sides of the forced check were exercised: many arrivals certified, many dropped by some
  // policy (the figures of this seed).
  EXPECT_GT(forced_count, 500);   // 588 of 1,651 arrivals
  EXPECT_GT(dropped_count, 700);  // 795
  // The levels of coarseness, each taken only when the finer one has too many classes: 12.5 and
  // 13 cores with 1 and 2 GiB are four classes exactly (level 0), one without memory and at 12
  // cores rounded down by at most 2 cores (1). Mode 2 above reaches level 4 (no CPU at all)
  // whenever its tasks differ in share or models.
  const std::vector<TraceNode> n = {{"g", 16000, 65536, 2, "T4"}};
  const std::vector<TraceTask> a = {{"a", 12500, 1024, 1, 500, ""},
                                    {"b", 13000, 1024, 1, 500, ""},
                                    {"c", 12500, 2048, 1, 500, ""},
                                    {"d", 13000, 2048, 1, 500, ""}};
  struct Level {
    size_t max_classes;
    int coarse;
    size_t classes;
    int64_t cpu;  // of the first class
  };
  for (const Level& l : {Level{4, 0, 4, 12500}, Level{3, 1, 1, 12000}, Level{1, 1, 1, 12000}}) {
    const PackingInstance in = MakeInstance(n, a, l.max_classes);
    EXPECT_EQ(in.coarse, l.coarse) << l.max_classes;
    ASSERT_EQ(in.classes.size(), l.classes) << l.max_classes;
    EXPECT_EQ(in.classes[0].cpu_milli, l.cpu) << l.max_classes;
    EXPECT_EQ(in.classes[0].memory_mib, l.coarse == 0 ? 1024 : 0) << l.max_classes;
  }
  // Level 1 on its own: 12.5 and 13 cores become 12, 5 and 5.5 become 4 — two classes.
  const std::vector<TraceTask> b = {{"a", 12500, 1024, 1, 500, ""},
                                    {"b", 5000, 1024, 1, 500, ""},
                                    {"c", 12500, 2048, 1, 500, ""},
                                    {"d", 5500, 2048, 1, 500, ""},
                                    {"e", 13000, 1024, 1, 500, ""}};
  const PackingInstance two = MakeInstance(n, b, 2);  // 12, 4 cores
  EXPECT_EQ(two.coarse, 1);
  ASSERT_EQ(two.classes.size(), 2u);
  EXPECT_EQ(two.classes[0].cpu_milli, 12000);
  EXPECT_EQ(two.classes[1].cpu_milli, 4000);
  // Level 1 against 2: 14.5, 15 and 13 cores are 14, 14 and 12 rounded down by at most 2 cores
  // (two classes), but all 12 on two significant bits (14 = 0b1110 → 0b1100).
  const std::vector<TraceTask> c = {{"a", 14500, 1024, 1, 500, ""},
                                    {"b", 15000, 2048, 1, 500, ""},
                                    {"c", 13000, 1024, 1, 500, ""}};
  const PackingInstance fine = MakeInstance(n, c, 2);
  EXPECT_EQ(fine.coarse, 1);
  ASSERT_EQ(fine.classes.size(), 2u);
  EXPECT_EQ(fine.classes[0].cpu_milli, 14000);
  EXPECT_EQ(fine.classes[1].cpu_milli, 12000);
  const PackingInstance bits = MakeInstance(n, c, 1);
  EXPECT_EQ(bits.coarse, 2);
  ASSERT_EQ(bits.classes.size(), 1u);
  EXPECT_EQ(bits.classes[0].cpu_milli, 12000);
}

TEST(BoundTest, TimedScenariosNeverBeatenByAnyProtocolPolicy) {
  // Part 4 (the time-indexed LP of a first drop) on its own — no other key set, so the least
  // over key sets cannot hide it — and with the default key set: 400 random tiny clusters
  // where CPU runs out. GPU nodes of 6–12 cores and 16–32 GiB, sometimes a CPU-only node, and 5–7
  // arrivals, half of them CPU-only tasks of 2–6 cores and 1–12 GiB (so nodes fill in CPU or in
  // memory and CPU-only tasks are dropped with small residuals, often two or more of them), the
  // rest shares and whole GPUs of 1–4 cores. No protocol-following policy may allocate more than
  // either bound, nor reach a lower metric.
  std::mt19937_64 rng(23);
  const int64_t node_cpus[] = {6000, 8000, 12000};
  const int64_t node_mems[] = {16384, 32768};
  const int64_t cpu_only_cpus[] = {2000, 3000, 4000, 6000};
  const int64_t cpu_only_mems[] = {1024, 4096, 8192, 12288};
  const int64_t gpu_cpus[] = {1000, 2000, 4000};
  const int32_t sizes[] = {300, 500, 700};
  int tighter = 0, two_drops = 0;
  for (int trial = 0; trial < 400; ++trial) {
    std::vector<TraceNode> nodes;
    const int gpu_nodes = 1 + static_cast<int>(rng() % 2);
    for (int i = 0; i < gpu_nodes; ++i)
      nodes.push_back({"g" + std::to_string(i), node_cpus[rng() % 3], node_mems[rng() % 2],
                       1 + static_cast<int>(rng() % 2), "T4"});
    if (trial % 4 == 3) nodes.push_back({"c", node_cpus[rng() % 3], node_mems[rng() % 2], 0, ""});
    std::vector<TraceTask> a;
    const int tasks = 5 + static_cast<int>(rng() % 3);
    for (int k = 0; k < tasks; ++k) {
      if (rng() % 2 == 0) {
        a.push_back({"cpu", cpu_only_cpus[rng() % 4], cpu_only_mems[rng() % 4], 0, 0, ""});
      } else if (rng() % 3 == 0) {
        a.push_back({"whole", gpu_cpus[rng() % 3], 2048, 1, 1000, ""});
      } else {
        a.push_back({"share", gpu_cpus[rng() % 3], 2048, 1, sizes[rng() % 3], ""});
      }
    }
    const int x = ArrivedPct(nodes, a);
    const Exhaustive best = SearchEveryPolicy(nodes, a, x);
    int cpu_only_dropped = 0;
    for (size_t i = 0; i < a.size(); ++i)
      cpu_only_dropped += best.ever_dropped[i] && a[i].GpuMilli() <= 0 ? 1 : 0;
    two_drops += cpu_only_dropped >= 2 ? 1 : 0;
    BoundOptions without;
    without.stride = 1;
    without.timed = false;
    without.splits_pct = {20, 40, 60, 80, 100};
    const double plain = AllocatedUpperBound(nodes, a, without);
    for (int mode = 0; mode < 3; ++mode) {
      // 0: the timed key set alone; 1: with the default one; 2: alone, coarse buckets.
      BoundOptions o = without;
      o.timed = true;
      if (mode != 1) o.key_covers = {};
      if (mode == 2) o.splits_pct = {50};
      const std::string where = "trial " + std::to_string(trial) + " mode " + std::to_string(mode);
      const double ub = AllocatedUpperBound(nodes, a, o);
      ASSERT_GE(ub + 1e-6, best.most_allocated) << where;
      if (mode == 1) {
        ASSERT_LE(ub, plain + 1e-6) << where;  // never looser: the least over key sets
        tighter += ub < plain - 1 ? 1 : 0;
      }
      const MetricBound b = UnallocatedLowerBound(nodes, a, x, o);
      ASSERT_LE(b.unallocated_pct, best.least_unallocated + 1e-6) << where;
    }
  }
  // The instances exercise what part 4 is about (the figures of this seed): 137 where some
  // policy drops two or more CPU-only tasks, 4 where part 4 is tighter than the default key set.
  // (Checked while writing: a CPU fill 1.5 cores too high, or one GPU too many touched before a
  // whole-GPU key's drop, fails this test.)
  EXPECT_GT(two_drops, 100);
  EXPECT_GE(tighter, 3);
}

}  // namespace
}  // namespace gpupool::placement::sim
