// Small builders for placement tests: nodes of identical GPUs, share and whole requests.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "placement/placement.h"
#include "placement/strategy.h"

namespace gpupool::placement::testing {

// A GPU of `tflops` TFLOPS and `vram_mib` MiB.
inline DeviceSpec Gpu(std::string id, std::string model = "A100", int64_t tflops = 100,
                      int64_t vram_mib = 40960) {
  DeviceSpec d;
  d.id = std::move(id);
  d.model = std::move(model);
  d.physical = Resources{tflops * 1000, vram_mib};
  return d;
}

// A node with `gpus` identical GPUs named "<name>-gpuN".
inline NodeSpec Node(std::string name, int gpus, int64_t cpu_milli = 64000,
                     int64_t memory_mib = 262144, std::string model = "A100") {
  NodeSpec n;
  n.name = name;
  n.cpu_milli = cpu_milli;
  n.memory_mib = memory_mib;
  for (int i = 0; i < gpus; ++i) n.devices.push_back(Gpu(name + "-gpu" + std::to_string(i), model));
  return n;
}

inline Request Share(int32_t milli, int64_t cpu = 1000, int64_t mem = 1024) {
  Request r;
  r.kind = RequestKind::kFractional;
  r.share_milli = milli;
  r.gpu_count = 1;
  r.cpu_milli = cpu;
  r.memory_mib = mem;
  return r;
}

inline Request Whole(int count, int64_t cpu = 1000, int64_t mem = 1024) {
  Request r;
  r.kind = RequestKind::kWholeGpu;
  r.gpu_count = count;
  r.cpu_milli = cpu;
  r.memory_mib = mem;
  return r;
}

inline Request Amount(int64_t tflops_milli, int64_t vram_mib) {
  Request r;
  r.kind = RequestKind::kFractional;
  r.per_device = Resources{tflops_milli, vram_mib};
  r.gpu_count = 1;
  return r;
}

// A gtest parameter name for a strategy ("fgd-pack" → "fgd_pack": names allow no '-').
inline std::string StrategyTestName(const ::testing::TestParamInfo<Strategy>& param) {
  std::string n(StrategyName(param.param));
  for (char& c : n)
    if (c == '-') c = '_';
  return n;
}

}  // namespace gpupool::placement::testing
