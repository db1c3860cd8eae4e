// NVML inside the task shows the slice, as cuMemGetInfo does: nvmlDeviceGetMemoryInfo(_v2)
// answer total = the VRAM grant, used = the task's charge, free = the rest (never more than the
// device really has free). The real NVML is the one the program loaded (found by its soname).
// Reached by linking (the exports) and through dlsym (core.cc routes these names here).
// https://docs.nvidia.com/deploy/nvml-api/group__nvmlDeviceQueries.html
#include <dlfcn.h>

#include "agent/interposer/interposer.h"

namespace gi = gpupool::interposer;

namespace {

typedef int nvmlReturn_t;
typedef struct nvmlDevice_st* nvmlDevice_t;
struct nvmlMemory_t {
  unsigned long long total, free, used;
};
struct nvmlMemory_v2_t {
  unsigned int version;
  unsigned long long total, reserved, free, used;
};
constexpr nvmlReturn_t kNvmlSuccess = 0;
constexpr nvmlReturn_t kNvmlNotFound = 6;

void* RealNvml(const char* name) {
  static void* lib = [] {
    void* h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_NOLOAD);
    return h != nullptr ? h : dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_GLOBAL);
  }();
  return lib != nullptr ? gi::RealDlsymOf(lib, name) : nullptr;
}

// The slice, or false when there is no ledger (then the device's own figures stand).
bool Slice(unsigned long long* total, unsigned long long* used, unsigned long long* free_bytes) {
  gpupool::ledger::LedgerClient* l = gi::Ledger();
  gpupool::ledger::Response q;
  if (l == nullptr || !l->Call(gpupool::ledger::Op::kQuery, gpupool::ledger::Kind::kNone, 0, &q))
    return false;
  unsigned long long slice_free = q.vram_limit - q.vram_used;
  *total = q.vram_limit;
  *used = q.vram_used;
  *free_bytes = slice_free < *free_bytes ? slice_free : *free_bytes;
  return true;
}

}  // namespace

GPUPOOL_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t dev, nvmlMemory_t* m) {
  auto real = reinterpret_cast<nvmlReturn_t (*)(nvmlDevice_t, nvmlMemory_t*)>(
      RealNvml("nvmlDeviceGetMemoryInfo"));
  if (real == nullptr) return kNvmlNotFound;
  nvmlReturn_t r = real(dev, m);
  if (r == kNvmlSuccess && m != nullptr) Slice(&m->total, &m->used, &m->free);
  return r;
}

GPUPOOL_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t dev, nvmlMemory_v2_t* m) {
  auto real = reinterpret_cast<nvmlReturn_t (*)(nvmlDevice_t, nvmlMemory_v2_t*)>(
      RealNvml("nvmlDeviceGetMemoryInfo_v2"));
  if (real == nullptr) return kNvmlNotFound;
  nvmlReturn_t r = real(dev, m);
  if (r == kNvmlSuccess && m != nullptr && Slice(&m->total, &m->used, &m->free)) m->reserved = 0;
  return r;
}
