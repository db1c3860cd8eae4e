#include <dlfcn.h>

#include "agent/interposer/watchdog/process_memory.h"

namespace gpupool::watchdog {
namespace {

// The documented NVML ABI pieces used here.
typedef int nvmlReturn_t;
constexpr nvmlReturn_t kNvmlSuccess = 0;
constexpr nvmlReturn_t kNvmlInsufficientSize = 7;
typedef struct nvmlDevice_st* nvmlDevice_t;
struct nvmlProcessInfo_t {  // nvmlProcessInfo_v2_t, what the _v3 query fills
  unsigned int pid;
  unsigned long long usedGpuMemory;
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
};
static_assert(sizeof(nvmlProcessInfo_t) == 24);

}  // namespace

struct NvmlProcessMemory::Api {
  void* lib = nullptr;
  nvmlReturn_t (*init)() = nullptr;
  nvmlReturn_t (*shutdown)() = nullptr;
  nvmlReturn_t (*count)(unsigned int*) = nullptr;
  nvmlReturn_t (*handle)(unsigned int, nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*procs)(nvmlDevice_t, unsigned int*, nvmlProcessInfo_t*) = nullptr;
};

std::unique_ptr<NvmlProcessMemory> NvmlProcessMemory::Open(const std::string& library,
                                                           std::string* error) {
  auto api = std::make_unique<Api>();
  api->lib = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (api->lib == nullptr) {
    *error = "cannot load " + library + ": " + dlerror();
    return nullptr;
  }
  auto sym = [&](const char* name) { return dlsym(api->lib, name); };
  api->init = reinterpret_cast<decltype(api->init)>(sym("nvmlInit_v2"));
  api->shutdown = reinterpret_cast<decltype(api->shutdown)>(sym("nvmlShutdown"));
  api->count = reinterpret_cast<decltype(api->count)>(sym("nvmlDeviceGetCount_v2"));
  api->handle = reinterpret_cast<decltype(api->handle)>(sym("nvmlDeviceGetHandleByIndex_v2"));
  api->procs =
      reinterpret_cast<decltype(api->procs)>(sym("nvmlDeviceGetComputeRunningProcesses_v3"));
  if (api->init == nullptr || api->shutdown == nullptr || api->count == nullptr ||
      api->handle == nullptr || api->procs == nullptr) {
    *error = library + " lacks nvmlDeviceGetComputeRunningProcesses_v3 or its companions";
    dlclose(api->lib);
    return nullptr;
  }
  if (nvmlReturn_t r = api->init(); r != kNvmlSuccess) {
    *error = "nvmlInit_v2 failed: " + std::to_string(r);
    dlclose(api->lib);
    return nullptr;
  }
  return std::unique_ptr<NvmlProcessMemory>(new NvmlProcessMemory(std::move(api)));
}

NvmlProcessMemory::NvmlProcessMemory(std::unique_ptr<Api> api) : api_(std::move(api)) {}

NvmlProcessMemory::~NvmlProcessMemory() {
  api_->shutdown();
  dlclose(api_->lib);
}

bool NvmlProcessMemory::Read(std::vector<GpuProcess>* out, std::string* error) {
  out->clear();
  unsigned int n = 0;
  if (nvmlReturn_t r = api_->count(&n); r != kNvmlSuccess) {
    *error = "nvmlDeviceGetCount_v2: " + std::to_string(r);
    return false;
  }
  std::vector<nvmlProcessInfo_t> infos;
  for (unsigned int d = 0; d < n; ++d) {
    nvmlDevice_t dev = nullptr;
    if (nvmlReturn_t r = api_->handle(d, &dev); r != kNvmlSuccess) {
      *error = "nvmlDeviceGetHandleByIndex_v2(" + std::to_string(d) + "): " + std::to_string(r);
      return false;
    }
    // Processes come and go between the size query and the read: retry with more room.
    unsigned int count = 0;
    nvmlReturn_t r = kNvmlInsufficientSize;
    for (int attempt = 0; attempt < 4 && r == kNvmlInsufficientSize; ++attempt) {
      infos.resize(count + 8);
      count = static_cast<unsigned int>(infos.size());
      r = api_->procs(dev, &count, infos.data());
    }
    if (r != kNvmlSuccess) {
      *error = "nvmlDeviceGetComputeRunningProcesses_v3: " + std::to_string(r);
      return false;
    }
    for (unsigned int i = 0; i < count; ++i)
      out->push_back({static_cast<pid_t>(infos[i].pid), d, infos[i].usedGpuMemory});
  }
  return true;
}

}  // namespace gpupool::watchdog
