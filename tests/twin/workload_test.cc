// Workloads: the pod list reader (errors name line and column), the load knobs (time scale,
// replicas) and the mapping to the core's absolute requests.
#include "twin/workload.h"

#include <gtest/gtest.h>

namespace gpupool::twin {
namespace {

constexpr const char* kPods =
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_"
    "time,"
    "scheduled_time\n"
    "p0,1000,1024,1,500,,LS,Running,100,160,100\n"
    "p1,1000,1024,0,0,,BE,Running,200,300,200\n"
    "p2,1000,1024,2,1000,V100M16|V100M32,BE,Running,300,300,300\n";

TEST(WorkloadTest, ParsesPodsWithDurations) {
  Result<std::vector<TwinTask>> pods = ParsePods(kPods, "pods.csv");
  ASSERT_TRUE(pods.ok()) << pods.status().ToString();
  ASSERT_EQ(pods->size(), 3u);
  EXPECT_EQ((*pods)[0].arrival_us, 100'000'000);
  EXPECT_EQ((*pods)[0].duration_us, 60'000'000);
  EXPECT_EQ((*pods)[2].duration_us, 1'000'000);  // deleted when created: at least 1 s
  EXPECT_EQ((*pods)[2].models, (std::vector<std::string>{"V100M16", "V100M32"}));
}

TEST(WorkloadTest, BadRowsNameLineAndColumn) {
  Result<std::vector<TwinTask>> r =
      ParsePods("name,num_gpu,gpu_milli,creation_time,deletion_time\nx,1,500,10,5\n", "pods.csv");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "pods.csv:2: deletion_time: before creation_time");
  r = ParsePods("name,num_gpu,gpu_milli,creation_time\n", "pods.csv");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "pods.csv:1: missing column 'deletion_time'");
  r = ParsePods("name,num_gpu,gpu_milli,creation_time,deletion_time\nx,one,500,10,20\n", "p.csv");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "p.csv:2: num_gpu: expected an integer, got 'one'");
}

TEST(WorkloadTest, LoadFactorCompressesArrivalsAndReplicasCopyPods) {
  std::vector<TwinTask> pods = *ParsePods(kPods, "pods.csv");
  std::vector<TwinNode> nodes = {{"n0", 64000, 262144, 8, "G2", {}}};
  LoadOptions o;
  o.time_scale = 10;
  o.replicas = 2;
  o.replica_gap_us = 3'000'000;
  Workload w = Shape("t", nodes, pods, o, DefaultOrgTree());
  EXPECT_EQ(w.skipped, 1);  // the CPU-only pod
  ASSERT_EQ(w.tasks.size(), 4u);
  EXPECT_EQ(w.tasks[0].name, "p0");
  EXPECT_EQ(w.tasks[0].arrival_us, 10'000'000);   // 100 s / 10
  EXPECT_EQ(w.tasks[0].duration_us, 60'000'000);  // durations kept
  EXPECT_EQ(w.tasks[1].name, "p0~1");
  EXPECT_EQ(w.tasks[1].arrival_us, 13'000'000);
  EXPECT_EQ(w.tasks[0].priority_class, "high");  // LS
  EXPECT_EQ(w.tasks[2].priority_class, "low");   // BE
  EXPECT_FALSE(w.tasks[0].tenant.empty());
  EXPECT_EQ(w.GpuCount(), 8);
}

TEST(WorkloadTest, SharesBecomeAbsoluteRequestsOnTheNormalizedGpu) {
  TwinTask t;
  t.gpu_milli = 470;
  t.num_gpu = 1;
  ResourceRequest r = t.Request(Resources{kGpuMilliTflops, kGpuVramMib});
  EXPECT_EQ(r.shape, RequestShape::kFractional);
  EXPECT_EQ(r.fractional.milli_tflops, 47'000);  // 0.47 × 100 TFLOPS
  EXPECT_EQ(r.fractional.vram_mib, 15'400);      // ⌊0.47 × 32768⌋
  t.gpu_milli = 1000;
  t.num_gpu = 4;
  r = t.Request(Resources{kGpuMilliTflops, kGpuVramMib});
  EXPECT_EQ(r.shape, RequestShape::kWholeGpus);
  EXPECT_EQ(r.gpu_count, 4);
}

TEST(WorkloadTest, MaxNodesKeepsEveryKthNode) {
  std::vector<TwinNode> nodes;
  for (int i = 0; i < 10; ++i) nodes.push_back({"n" + std::to_string(i), 1000, 1000, 2, "T4", {}});
  LoadOptions o;
  o.max_nodes = 4;  // step ⌈10/4⌉ = 3: n0 n3 n6 n9
  Workload w = Shape("t", nodes, {}, o, DefaultOrgTree());
  ASSERT_EQ(w.nodes.size(), 4u);
  EXPECT_EQ(w.nodes[1].name, "n3");
}

}  // namespace
}  // namespace gpupool::twin
