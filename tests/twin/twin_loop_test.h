// Small hand-built workloads for the twin's tests.
#pragma once

#include <string>
#include <vector>

#include "twin/org_tree.h"
#include "twin/workload.h"

namespace gpupool::twin::testing {

inline constexpr int64_t kS = 1'000'000;

inline TwinTask Task(const std::string& name, double arrival_s, double duration_s,
                     const std::string& tenant, const std::string& cls, int32_t gpu_milli = 1000,
                     int32_t num_gpu = 1) {
  TwinTask t;
  t.name = name;
  t.arrival_us = static_cast<int64_t>(arrival_s * kS);
  t.duration_us = static_cast<int64_t>(duration_s * kS);
  t.tenant = tenant;
  t.priority_class = cls;
  t.gpu_milli = gpu_milli;
  t.num_gpu = num_gpu;
  t.cpu_milli = 1000;
  t.memory_mib = 1024;
  return t;
}

inline Workload Make(int nodes, int gpus_per_node, std::vector<TwinTask> tasks) {
  Workload w;
  w.name = "test";
  for (int i = 0; i < nodes; ++i)
    w.nodes.push_back({"n" + std::to_string(i), 64'000, 262'144, gpus_per_node, "G2", {}});
  w.tasks = std::move(tasks);
  return w;
}

// One org "t" (optionally with a quota) and leaves t/a, t/b.
inline OrgTree Org(int64_t guaranteed_pct = 0, int64_t limit_pct = 0) {
  OrgTree o;
  o.tenants = {
      {"t", guaranteed_pct * 1000, limit_pct * 1000, 0}, {"t/a", 0, 0, 1}, {"t/b", 0, 0, 1}};
  return o;
}

// Two orgs "a" and "b", each guaranteed half the pool.
inline OrgTree TwoHalves() {
  OrgTree o;
  o.tenants = {{"a", 50'000, 0, 1}, {"b", 50'000, 0, 1}};
  return o;
}

}  // namespace gpupool::twin::testing
