// Test support: a task on the fake CUDA driver's GPU (tests/fakes/cuda) — one 64 MiB device whose
// contexts cost nothing, so a grant is all allocations — for the agent's tests that run real CUDA
// programs (the interposer's probe) through the TaskRunner.
#pragma once

#include <sys/stat.h>

#include <cstdint>
#include <string>

#include "agent/task_runner.h"
#include "tests/fakes/cuda/fake_state.h"

namespace gpupool::agent::testing {

inline constexpr int64_t kFakeGpuMib = 64;
inline std::string FakeGpuUuid() { return fakecuda::FakeUuid(0); }

// The device's truth in `dir` (which exists): readable and chargeable by every task's uid. Keep
// it out of /tmp: a sandboxed task's private /tmp would hide it.
inline bool MakeFakeGpu(const std::string& dir) {
  chmod(dir.c_str(), 0777);
  if (fakecuda::MapDevice(dir.c_str(), 0, static_cast<uint64_t>(kFakeGpuMib) << 20) == nullptr) {
    return false;
  }
  return chmod((dir + "/device0").c_str(), 0666) == 0;
}

// Puts `spec` on that GPU: the driver found through `fake_cuda_dir`, its truth in `state_dir`,
// and a grant of `vram_mib` of it, `milli_tflops` of its 100 TFLOPS and `pct` % of its threads.
inline void OnFakeGpu(TaskSpec* spec, const std::string& state_dir,
                      const std::string& fake_cuda_dir, int64_t vram_mib, int64_t milli_tflops,
                      int32_t pct) {
  spec->env["GPUPOOL_FAKE_CUDA_STATE"] = state_dir;
  spec->env["GPUPOOL_FAKE_CUDA_DEVICES"] = "fake64," + std::to_string(kFakeGpuMib << 20) + ",8,0";
  spec->env["LD_LIBRARY_PATH"] = fake_cuda_dir;
  DeviceGrant g;
  // The fake's own UUID for the device: the agent sets CUDA_VISIBLE_DEVICES to it, and the fake,
  // like CUDA, enumerates nothing for a UUID it does not have.
  g.uuid = FakeGpuUuid();
  g.vram_mib = vram_mib;
  g.milli_tflops = milli_tflops;
  g.thread_percentage = pct;
  g.device_vram_mib = kFakeGpuMib;
  g.device_milli_tflops = 100'000;
  spec->devices = {g};
}

}  // namespace gpupool::agent::testing
