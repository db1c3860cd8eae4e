// A fake libnvidia-ml.so.1 for the interposer's tests: the NVML queries the agent's watchdog makes,
// answered from the fake CUDA driver's device truth (tests/fakes/cuda/fake_state.h) under
// GPUPOOL_FAKE_CUDA_STATE, as a real NVML answers from the kernel driver. Per-process memory is
// what each process holds now; processes that have ended are gone (reaped on read).
// Behaviour follows https://docs.nvidia.com/deploy/nvml-api/ (return codes, the size protocol of
// nvmlDeviceGetComputeRunningProcesses_v3).
#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>

#include "tests/fakes/cuda/fake_state.h"

#define NVML_API extern "C" __attribute__((visibility("default")))

namespace {

constexpr int kSuccess = 0;
constexpr int kUninitialized = 1;
constexpr int kInvalidArgument = 2;
constexpr int kInsufficientSize = 7;
constexpr int kNotFound = 6;

struct ProcessInfo {  // nvmlProcessInfo_v2_t
  unsigned int pid;
  unsigned long long usedGpuMemory;
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
};

int g_init = 0;

const char* Dir() {
  const char* d = getenv("GPUPOOL_FAKE_CUDA_STATE");
  return d != nullptr && *d != 0 ? d : nullptr;
}

unsigned Count() {
  const char* dir = Dir();
  if (dir == nullptr) return 0;
  unsigned n = 0;
  for (;; ++n) {
    char path[4096];
    snprintf(path, sizeof path, "%s/device%u", dir, n);
    struct stat st;
    if (stat(path, &st) != 0) return n;
  }
}

}  // namespace

NVML_API int nvmlInit_v2() {
  ++g_init;
  return kSuccess;
}

NVML_API int nvmlShutdown() {
  if (g_init == 0) return kUninitialized;
  --g_init;
  return kSuccess;
}

NVML_API int nvmlDeviceGetCount_v2(unsigned int* count) {
  if (g_init == 0) return kUninitialized;
  if (count == nullptr) return kInvalidArgument;
  *count = Count();
  return kSuccess;
}

NVML_API int nvmlDeviceGetHandleByIndex_v2(unsigned int index, void** device) {
  if (g_init == 0) return kUninitialized;
  if (device == nullptr || index >= Count()) return kInvalidArgument;
  *device = reinterpret_cast<void*>(static_cast<uintptr_t>(index) + 1);
  return kSuccess;
}

NVML_API int nvmlDeviceGetComputeRunningProcesses_v3(void* device, unsigned int* count,
                                                     ProcessInfo* infos) {
  if (g_init == 0) return kUninitialized;
  if (device == nullptr || count == nullptr) return kInvalidArgument;
  int index = static_cast<int>(reinterpret_cast<uintptr_t>(device) - 1);
  static gpupool::fakecuda::Truth truth;  // large; NVML is not reentrant-safe for one handle
  if (!gpupool::fakecuda::ReadTruth(Dir(), index, &truth)) return kNotFound;
  unsigned int n = 0;
  for (const auto& e : truth.procs)
    if (e.pid != 0 && e.bytes != 0) ++n;
  if (*count < n || (infos == nullptr && n != 0)) {
    *count = n;
    return kInsufficientSize;
  }
  unsigned int i = 0;
  for (const auto& e : truth.procs)
    if (e.pid != 0 && e.bytes != 0)
      infos[i++] = ProcessInfo{static_cast<unsigned int>(e.pid), e.bytes, 0xFFFFFFFFu, 0xFFFFFFFFu};
  *count = n;
  return kSuccess;
}

namespace {
struct Memory {  // nvmlMemory_t
  unsigned long long total, free, used;
};
struct MemoryV2 {  // nvmlMemory_v2_t
  unsigned int version;
  unsigned long long total, reserved, free, used;
};
bool DeviceMemory(void* device, unsigned long long* total, unsigned long long* used) {
  if (device == nullptr) return false;
  int index = static_cast<int>(reinterpret_cast<uintptr_t>(device) - 1);
  static gpupool::fakecuda::Truth truth;
  if (!gpupool::fakecuda::ReadTruth(Dir(), index, &truth)) return false;
  *total = truth.total;
  *used = truth.used;
  return true;
}
}  // namespace

NVML_API int nvmlDeviceGetMemoryInfo(void* device, Memory* m) {
  if (g_init == 0) return kUninitialized;
  if (m == nullptr || !DeviceMemory(device, &m->total, &m->used)) return kInvalidArgument;
  m->free = m->total - m->used;
  return kSuccess;
}

NVML_API int nvmlDeviceGetMemoryInfo_v2(void* device, MemoryV2* m) {
  if (g_init == 0) return kUninitialized;
  if (m == nullptr || !DeviceMemory(device, &m->total, &m->used)) return kInvalidArgument;
  m->reserved = 0;
  m->free = m->total - m->used;
  return kSuccess;
}
