// Workload: what a twin replay submits and runs — a cluster (nodes with GPUs) and tasks that
// arrive at a simulated time, run for a duration and leave. Built from the Alibaba openb trace
// (pod lists with creation and deletion times) or from a synthetic generator (synthetic.h).
//
//  * GPUs are normalized: every trace GPU becomes one unit of kGpuMilliTflops / kGpuVramMib
//    (its model name kept, for gpu_spec constraints), so a pod's share of g milli-GPU is the
//    absolute request ⌊g × unit / 1000⌋ the daemon's API takes, on any model. Allocation is then
//    counted in GPUs exactly as the trace counts it.
//  * A pod's duration is deletion_time − creation_time (at least 1 s). Pods asking for no GPU
//    (CPU-only) are left out: the twin replays GPU scheduling (counted in `skipped`).
//  * Load: arrival times are divided by `time_scale` (durations kept), so the arrival rate — and
//    the demand, once the replay is longer than most durations — grows by that factor; each pod
//    may also be submitted `replicas` times (copy k named "<pod>~k", arriving `k × replica_gap`
//    later), which multiplies the work without shortening the replay.
//    With `load_mode` kCopies the factor keeps the times and multiplies the pods instead: each
//    pod is submitted ⌊X⌋ or ⌈X⌉ times (chosen by a hash of its name, so X on average; X < 1
//    thins), copy k named "<pod>~k" arriving with it — a diurnal workload keeps its 24-h day.
//  * Tenants and classes come from an OrgTree (the pod's `owner`, or its name when it has none,
//    hashed to a leaf; qos → class). A copy k hashes "<owner>~k".
//  * Gangs: pods with one `gang` id (synthetic workloads, synthetic.h) are one gang job of that
//    many tasks; they must agree on arrival, duration, request and qos (checked on parsing).
//
// Thread safety: plain values and functions; Load* read files.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "base/status.h"
#include "pool/catalog.h"
#include "pool/mig_layout.h"
#include "pool/resources.h"
#include "scheduler/model.h"
#include "twin/org_tree.h"

namespace gpupool::twin {

inline constexpr int64_t kGpuMilliTflops = 100'000;  // one normalized GPU: 100 TFLOPS
inline constexpr int64_t kGpuVramMib = 32'768;       // and 32 GiB

struct TwinMigGpu {
  MigLayout layout;     // its instances (empty: none yet)
  bool dynamic = true;  // its layout can change (DeviceRecord::mig_enabled)
};

// INVALID_ARGUMENT unless `catalog` has `model` and every profile of `mig.layout`, and a dynamic
// layout follows the model's placement rules (the core plans new ones by them): what the twin
// needs to register the GPU's instances and re-lay it out.
Status CheckTwinMigGpu(const Catalog& catalog, const std::string& model, const TwinMigGpu& mig);

struct TwinNode {
  std::string name;
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
  int gpus = 0;
  std::string model;
  std::vector<std::string> device_ids;  // empty: "<name>-gpu<i>"
  // GPUs in MIG mode, by index. `model` must then be a catalog model that has their profiles;
  // the twin registers each instance as the agent does and, for a dynamic GPU, re-lays it out
  // when the core asks.
  std::map<int, TwinMigGpu> mig = {};
};

struct TwinTask {
  std::string name;
  int64_t arrival_us = 0;   // simulated time since the replay's start
  int64_t duration_us = 0;  // run time it needs (from its first start, or again after preemption)
  std::string tenant;
  std::string qos;
  std::string priority_class;
  int32_t gpu_milli = 0;  // per GPU: < 1000 a share of one GPU; 1000 whole GPUs
  int32_t num_gpu = 0;
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
  std::vector<std::string> models;  // allowed GPU models (whole GPUs only); empty: any
  // A MIG instance of this profile instead (gpu_milli is then its compute share of a GPU, for
  // the report's demand and allocation figures; num_gpu 1).
  std::string mig_profile;
  std::string owner;        // hashed to a tenant instead of the name when not empty
  std::string gang;         // pods with one gang id start and stop together
  int64_t gang_index = -1;  // Workload::gangs index once shaped; -1: alone

  int64_t GpuMilli() const { return static_cast<int64_t>(num_gpu) * gpu_milli; }
  // The request the daemon's API would take for it, on GPUs of `gpu` each.
  ResourceRequest Request(const Resources& gpu) const;
};

struct Workload {
  std::string name;
  std::vector<TwinNode> nodes;
  std::vector<TwinTask> tasks;                  // by arrival time, then name
  std::vector<std::vector<size_t>> gangs;       // tasks of each gang, in task order
  int64_t skipped = 0;                          // CPU-only pods left out
  Resources gpu{kGpuMilliTflops, kGpuVramMib};  // every GPU's physical capacity
  int64_t GpuCount() const;
};

enum class LoadMode {
  kCompress,  // arrivals divided by the load factor
  kCopies,    // each pod submitted ⌊X⌋ or ⌈X⌉ times, X on average; times kept
};

struct LoadOptions {
  std::string trace_dir;
  std::string workload = "default";  // openb_pod_list_<workload>.csv
  std::string nodes_file = "openb_node_list_gpu_node.csv";
  double time_scale = 1.0;  // the load factor: arrivals divided by it, or copies (load_mode)
  LoadMode load_mode = LoadMode::kCompress;
  int replicas = 1;
  int64_t replica_gap_us = 1'000'000;
  int max_nodes = 0;      // > 0: every k-th node, so that about this many remain (model mix kept)
  int64_t max_tasks = 0;  // > 0: the first this many pods (before replication)
};

// Parses a pod list (header names: name, num_gpu, gpu_milli, creation_time, deletion_time;
// optional cpu_milli, memory_mib, gpu_spec, qos, owner, gang). INVALID_ARGUMENT naming the line
// and column; a gang member that differs from its gang's first names both.
Result<std::vector<TwinTask>> ParsePods(std::string_view csv, const std::string& source);
Result<std::vector<TwinNode>> ParseNodeList(std::string_view csv, const std::string& source);

// Reads trace_dir/openb_pod_list_<workload>.csv and trace_dir/<nodes_file>, applies the options
// and the org tree. NOT_FOUND naming the file when one is missing.
Result<Workload> LoadTrace(const LoadOptions& options, const OrgTree& org);

Result<LoadMode> ParseLoadMode(std::string_view name);  // "compress" | "copies"

// Applies load and org tree to tasks already parsed (tests use it directly).
Workload Shape(std::string name, std::vector<TwinNode> nodes, std::vector<TwinTask> pods,
               const LoadOptions& options, const OrgTree& org);

}  // namespace gpupool::twin
