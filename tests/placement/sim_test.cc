// The trace replay: CSV parsing (both column layouts), the protocol's arrival sequence, and a
// small replay on the real Alibaba trace that must give sane numbers (not timings).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "placement/sim/replay.h"
#include "placement/sim/report.h"
#include "placement/sim/trace.h"

namespace gpupool::placement::sim {
namespace {

TEST(TraceTest, ParsesBothTaskLayouts) {
  auto full = ParseTasks(
      "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_"
      "time,"
      "scheduled_time\n"
      "p0,12000,16384,1,460,V100M16|V100M32,LS,Running,0,1,0\n"
      "p1,4000,0,0,0,,BE,Failed,1,2,\n");
  ASSERT_TRUE(full.ok()) << full.status().ToString();
  ASSERT_EQ(full->size(), 2u);
  Request r = ToRequest((*full)[0]);
  EXPECT_EQ(r.kind, RequestKind::kFractional);
  EXPECT_EQ(r.share_milli, 460);
  EXPECT_EQ(r.allowed_models, (std::vector<std::string>{"V100M16", "V100M32"}));
  EXPECT_EQ(ToRequest((*full)[1]).kind, RequestKind::kCpuOnly);
  auto five = ParseTasks("name,cpu_milli,memory_mib,num_gpu,gpu_milli\np0,8000,1024,4,1000\r\n");
  ASSERT_TRUE(five.ok());
  Request w = ToRequest((*five)[0]);
  EXPECT_EQ(w.kind, RequestKind::kWholeGpu);
  EXPECT_EQ(w.gpu_count, 4);
  EXPECT_EQ((*five)[0].GpuMilli(), 4000);
}

TEST(TraceTest, BadRowsSayWhere) {
  auto bad = ParseTasks("name,cpu_milli,memory_mib,num_gpu,gpu_milli\np0,8x,1,1,1000\n");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "task list:2: cpu_milli: expected an integer, got '8x'");
  auto missing = ParseNodes("sn,cpu_milli,gpu\n");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().message(), "node list:1: missing column 'memory_mib'");
}

TEST(ReplayTest, ArrivalsShuffleThenResampleToTune) {
  std::vector<TraceTask> trace(10);
  for (int i = 0; i < 10; ++i)
    trace[static_cast<size_t>(i)] = TraceTask{"t" + std::to_string(i), 1000, 0, 1, 1000, ""};
  // 10 tasks × 1000 milli = 10000; capacity 10000 × tune 1.3 → resample to ≥ 13000: 13 tasks.
  auto a = Arrivals(trace, 42, 1.3, 10000);
  EXPECT_EQ(a.size(), 13u);
  EXPECT_EQ(Arrivals(trace, 42, 1.3, 10000)[0].name, a[0].name);  // seeded, repeatable
}

TEST(ReplayTest, TinyClusterMetric) {
  // One node, 2 GPUs (capacity 2000). Tasks: 1000, 1000, 1000 → the third is dropped.
  std::vector<TraceNode> nodes = {{"n", 64000, 262144, 2, "T4"}};
  std::vector<TraceTask> tasks(3, TraceTask{"t", 1000, 0, 1, 1000, ""});
  auto r = Replay(nodes, tasks, {}, Strategy::kFirstFit, 1);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->placed, 2);
  EXPECT_EQ(r->dropped, 1);
  // After task 1: arrived 50%, used 50% → bin 50 holds 50; unallocated at 50 = 50.
  EXPECT_DOUBLE_EQ(r->UnallocatedAt(50), 50.0);
  EXPECT_DOUBLE_EQ(r->UnallocatedAt(100), 0.0);
  // Task 3: arrived 150%, used still 100% → unallocated 0 at bin 150 (beyond the kept range).
  EXPECT_TRUE(std::isnan(r->UnallocatedAt(75)));
}

// A slice of the real trace: the first 3000 arrivals of seed 42 on the full 1213-node cluster.
TEST(ReplayTest, RealTraceSubsetIsSane) {
  const std::string dir = GPUPOOL_TRACE_DIR;
  if (!std::filesystem::exists(dir + "/openb_node_list_gpu_node.csv"))
    GTEST_SKIP() << "no trace at " << dir;
  auto nodes = ParseNodes(*LoadFile(dir + "/openb_node_list_gpu_node.csv"));
  auto tasks = ParseTasks(*LoadFile(dir + "/openb_pod_list_default.csv"));
  ASSERT_TRUE(nodes.ok() && tasks.ok());
  EXPECT_EQ(nodes->size(), 1213u);
  EXPECT_EQ(tasks->size(), 8152u);
  EXPECT_EQ(CapacityMilli(*nodes), 6212000);
  const auto arrivals = Arrivals(*tasks, 42, 1.3, CapacityMilli(*nodes));
  EXPECT_GT(arrivals.size(), 10000u);  // ≈10,800 for the default trace
  for (Strategy s : {Strategy::kFgd, Strategy::kFgdPack, Strategy::kBestFit}) {
    auto r = Replay(*nodes, arrivals, WorkloadFor(s, *tasks), s, 42, /*limit=*/3000);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->tasks, 3000);
    // 3000 of ≈10,800 arrivals is ≈35% of capacity: an empty cluster takes every one of them.
    EXPECT_EQ(r->dropped, 0) << StrategyName(s);
    for (int x = 5; x <= 30; ++x) EXPECT_NEAR(r->UnallocatedAt(x), 100.0 - x, 1.0) << x;
  }
}

// Online mode never peeks at the future: the decisions for the first k arrivals are the same
// whether or not the later arrivals exist. Cluster: 60 nodes of the real trace, so it fills up.
TEST(ReplayTest, OnlineDecisionsDependOnlyOnThePast) {
  const std::string dir = GPUPOOL_TRACE_DIR;
  if (!std::filesystem::exists(dir + "/openb_node_list_gpu_node.csv"))
    GTEST_SKIP() << "no trace at " << dir;
  auto nodes = ParseNodes(*LoadFile(dir + "/openb_node_list_gpu_node.csv"));
  auto tasks = ParseTasks(*LoadFile(dir + "/openb_pod_list_default.csv"));
  ASSERT_TRUE(nodes.ok() && tasks.ok());
  nodes->resize(60);
  const auto arrivals = Arrivals(*tasks, 7, 1.3, CapacityMilli(*nodes));
  const std::vector<TraceTask> prefix(arrivals.begin(), arrivals.begin() + 150);
  for (Strategy s : {Strategy::kFgd, Strategy::kFgdPack, Strategy::kFirstFit}) {
    std::vector<std::string> whole, part;
    ASSERT_TRUE(ReplayOnline(*nodes, arrivals, s, 7, 0, &whole).ok());
    ASSERT_TRUE(ReplayOnline(*nodes, prefix, s, 7, 0, &part).ok());
    ASSERT_EQ(part.size(), 150u);
    EXPECT_EQ(std::vector<std::string>(whole.begin(), whole.begin() + 150), part)
        << StrategyName(s);
    EXPECT_GT(std::count(whole.begin(), whole.end(), std::string()), 0) << StrategyName(s);
  }
}

TEST(ReportTest, ModeIsLabelled) {
  Summary s = Summarize(Strategy::kFgd, {});
  EXPECT_NE(Table("default", {s}, "online").find("mode: online"), std::string::npos);
  EXPECT_NE(Table("default", {s}).find("mode: oracle"), std::string::npos);
  EXPECT_NE(Json("default", 1.3, {}, {s}, {}, "online").find("\"mode\": \"online\""),
            std::string::npos);
}

TEST(ReportTest, SummaryAndOutputs) {
  ReplayResult a, b;
  a.strategy = b.strategy = Strategy::kFgd;
  a.alloc_pct.assign(kMaxArrivedPct + 1, -1);
  b.alloc_pct = a.alloc_pct;
  a.alloc_pct[100] = 95;  // unallocated 5
  b.alloc_pct[100] = 97;  // unallocated 3
  Summary s = Summarize(Strategy::kFgd, {a, b});
  // mean 4; sample sd = sqrt(((5−4)² + (3−4)²) / 1) = 1.414…
  EXPECT_DOUBLE_EQ(s.mean, 4.0);
  EXPECT_NEAR(s.sd, 1.41421, 1e-4);
  EXPECT_NE(Json("default", 1.3, {a, b}, {s}).find("\"100\": 5.0000"), std::string::npos);
  EXPECT_NE(Svg("default", {a, b}).find("<polyline"), std::string::npos);
  EXPECT_NE(Table("default", {s}).find("fgd"), std::string::npos);
}

TEST(ReportTest, BoundRowAndPerSeed) {
  ReplayResult a;
  a.strategy = Strategy::kFgd;
  a.seed = 42;
  a.alloc_pct.assign(kMaxArrivedPct + 1, -1);
  a.alloc_pct[100] = 95;  // unallocated 5
  const std::vector<SeedBound> bounds = {{42, MetricBound{3.0, 97.0, 10, ""}}};
  const Summary b = SummarizeBound(bounds);
  EXPECT_EQ(b.label, "bound");
  EXPECT_DOUBLE_EQ(b.mean, 3.0);
  EXPECT_EQ(b.runs, 1);
  EXPECT_NE(Table("default", {b}).find("bound"), std::string::npos);
  // Seed 42: fgd 5.00, bound 3.00, best − bound = 5 − 3 = 2.00.
  const std::string per_seed = PerSeedTable("default", {a}, bounds);
  EXPECT_NE(per_seed.find("5.00"), std::string::npos) << per_seed;
  EXPECT_NE(per_seed.find("3.00"), std::string::npos) << per_seed;
  EXPECT_NE(per_seed.find("2.00"), std::string::npos) << per_seed;
  const std::string json = Json("default", 1.3, {a}, {Summarize(Strategy::kFgd, {a})}, bounds);
  EXPECT_NE(json.find("\"bound\": {\"mean\": 3.0000"), std::string::npos) << json;
  EXPECT_NE(json.find("\"packable_pct\": 97.0000"), std::string::npos) << json;
}

}  // namespace
}  // namespace gpupool::placement::sim
