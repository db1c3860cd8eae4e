// process_memory.h — where the watchdog reads each process's GPU memory: the port, and NVML
// (dlopen'd, so nothing links against it) as its real implementation. Tests point it at the fake
// libnvidia-ml.so.1, which reads the fake driver's truth.
#ifndef GPUPOOL_AGENT_INTERPOSER_WATCHDOG_PROCESS_MEMORY_H_
#define GPUPOOL_AGENT_INTERPOSER_WATCHDOG_PROCESS_MEMORY_H_

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace gpupool::watchdog {

struct GpuProcess {
  pid_t pid;
  uint32_t device;  // NVML index
  uint64_t bytes;   // used GPU memory, as the driver accounts it
};

class ProcessMemorySource {
 public:
  virtual ~ProcessMemorySource() = default;
  // Every compute process on every device; false (and `*error`) when the source cannot answer.
  virtual bool Read(std::vector<GpuProcess>* out, std::string* error) = 0;
};

// NVML: nvmlDeviceGetComputeRunningProcesses_v3 on every device
// (https://docs.nvidia.com/deploy/nvml-api/group__nvmlDeviceQueries.html).
class NvmlProcessMemory : public ProcessMemorySource {
 public:
  // Loads `library` ("libnvidia-ml.so.1" on a GPU host) and initialises NVML.
  static std::unique_ptr<NvmlProcessMemory> Open(const std::string& library, std::string* error);
  ~NvmlProcessMemory() override;
  bool Read(std::vector<GpuProcess>* out, std::string* error) override;

 private:
  struct Api;
  explicit NvmlProcessMemory(std::unique_ptr<Api> api);
  std::unique_ptr<Api> api_;
};

}  // namespace gpupool::watchdog

#endif  // GPUPOOL_AGENT_INTERPOSER_WATCHDOG_PROCESS_MEMORY_H_
