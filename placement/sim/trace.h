// Trace: the node and task lists of the Alibaba GPU trace v2023 ("openb"), as CSV text, and
// their translation into placement inputs.
//
// Parsing is by header name, so the 5-column multigpu files and the 11-column ones both read.
// A task asks for num_gpu × gpu_milli milli-GPU: a share (gpu_milli < 1000, one GPU) becomes a
// fractional Request with share_milli = gpu_milli — that fraction of the device's compute, VRAM
// following the same fraction; gpu_milli = 1000 becomes num_gpu whole GPUs; num_gpu = 0 is
// CPU-only. gpu_spec ("V100M16|V100M32") becomes allowed_models.
//
// The trace names GPU models only (some internal: G2, G3); TraceModel() gives each a nominal
// TFLOPS and VRAM so the engine has real units. Only milli-GPU matters for the benchmark.
// Thread safety: plain functions. LoadFile is the one function here that does I/O.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "placement/placement.h"

namespace gpupool::placement::sim {

struct TraceNode {
  std::string name;
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
  int gpus = 0;
  std::string model;
};

struct TraceTask {
  std::string name;
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
  int num_gpu = 0;
  int32_t gpu_milli = 0;
  std::string gpu_spec;  // "|"-separated models; empty: any

  int64_t GpuMilli() const { return static_cast<int64_t>(num_gpu) * gpu_milli; }
};

// Whether a gpu_spec ("V100M16|V100M32"; empty: any) lets a task run on a GPU of `model`.
bool SpecAllowsModel(const std::string& spec, const std::string& model);

// The node and task lists (placement/sim/csv.h); errors name `source` and the line.
Result<std::vector<TraceNode>> ParseNodes(std::string_view csv,
                                          const std::string& source = "node list");
Result<std::vector<TraceTask>> ParseTasks(std::string_view csv,
                                          const std::string& source = "task list");
Result<std::string> LoadFile(const std::string& path);

// Nominal physical capacity of a trace GPU model (integral TFLOPS, so shares are exact).
Resources TraceModel(std::string_view model);
NodeSpec ToNodeSpec(const TraceNode& n);
Request ToRequest(const TraceTask& t);

}  // namespace gpupool::placement::sim
