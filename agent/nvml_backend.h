// NvmlBackend: real NVIDIA GPUs through libnvidia-ml.so.1, loaded with dlopen at run time.
//
// There is no build-time dependency on NVIDIA headers or libraries: the few NVML entry points
// used are declared here as function-pointer types. Open() fails with an Unavailable status that
// says exactly why ("backend=nvml unavailable: libnvidia-ml.so.1: cannot open shared object file:
// No such file or directory; use backend: simulated") so the agent can print it and exit, or the
// caller can fall back.
//
// Discovery: every GPU (UUID, NVML name mapped to a catalog model, memory, NUMA node from sysfs),
// its MIG instances when MIG mode is on (profile parsed from the instance name, e.g. "… MIG
// 3g.40gb"), and links from nvmlDeviceGetP2PStatus (NVLink) or
// nvmlDeviceGetTopologyCommonAncestor (PCIe switch / host bridge / system). Samples:
// utilization, memory used, power, temperature, uncorrected ECC errors (volatile). A device whose
// queries fail with GPU_IS_LOST is reported unhealthy. Events: every GPU is registered for
// critical XID, double-bit and single-bit ECC events (nvmlDeviceRegisterEvents; XIDs alone where
// ECC events are refused); PollEvents() drains the event set without blocking
// (nvmlEventSetWait_v2 with a 0 ms timeout).
//
// Device files, so the sandbox's device rules let a task reach what it was granted: a GPU is
// `/dev/nvidia<minor>` with the minor from nvmlDeviceGetMinorNumber (NVML reference, "Device
// Queries": "the Nvidia device node file for each GPU will have the form /dev/nvidia[minor
// number]" — not the NVML index, which may differ); a MIG instance is its parent's file plus its
// GPU and compute instances' access capabilities, `/dev/nvidia-caps/nvidia-cap<N>` with N the
// `DeviceFileMinor` of /proc/driver/nvidia/capabilities/gpu<minor>/mig/gi<G>/access and
// …/gi<G>/ci<C>/access (NVIDIA's MIG user guide, "Device Nodes and Capabilities"; G and C from
// nvmlDeviceGetGpuInstanceId / nvmlDeviceGetComputeInstanceId). The control files every CUDA
// process opens — nvidiactl, nvidia-uvm, nvidia-uvm-tools — are listed where they exist. A file
// that cannot be determined is left out with a warning: the task then fails to open the device,
// never gets a broader rule.
//
// MIG: a GPU in MIG mode is reported with mig_enabled, each instance with mig_start, its GPU
// instance's placement start (nvmlDeviceGetGpuInstanceById + nvmlGpuInstanceGetInfo).
// ApplyMigLayout re-partitions through NVML's MIG management calls (agent/nvml_mig.cc).
//
// Driver files (Inventory::driver_files): the driver's compute and utility libraries and its
// binaries (agent/driver_files.h), found once at Open(), for image tasks' containers.
//
// Thread safety: one thread at a time (see DeviceBackend).
#pragma once

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "agent/backend.h"
#include "pool/catalog.h"

namespace gpupool::agent {

// Where the driver's device nodes and capability files are (tests point these at a directory of
// their own).
struct NvmlDevicePaths {
  std::string dev_dir = "/dev";
  std::string proc_dir = "/proc/driver/nvidia";
  // Where the driver's user-space libraries are (agent/driver_files.h); empty: the directory of
  // the libnvidia-ml.so.1 loaded, where the driver's installer puts them all.
  std::vector<std::string> driver_dirs;
  std::vector<std::string> bin_dirs = {"/usr/bin"};  // … and its binaries (nvidia-smi, MPS)
};

class NvmlBackend final : public DeviceBackend {
 public:
  // Loads `library` (default "libnvidia-ml.so.1") and calls nvmlInit_v2.
  static Result<std::unique_ptr<NvmlBackend>> Open(Catalog models,
                                                   const std::string& library = "libnvidia-ml.so.1",
                                                   NvmlDevicePaths paths = {});
  ~NvmlBackend() override;
  NvmlBackend(const NvmlBackend&) = delete;
  NvmlBackend& operator=(const NvmlBackend&) = delete;

  std::string Name() const override { return "nvml"; }
  Result<Inventory> Discover() override;
  std::vector<DeviceSample> Sample(const std::vector<DeviceLoad>& load) override;
  std::vector<DeviceEvent> PollEvents() override;
  std::string EventSource() const override;
  // Why events are not (all) watched; empty when they are.
  std::string EventError() const;
  // Re-partitions a GPU (agent/nvml_mig.cc; the contract is DeviceBackend's). Catalog profile
  // names become NVML GPU instance profile ids by asking the driver (see nvml_mig.cc);
  // FAILED_PRECONDITION when the library lacks the MIG management calls, NOT_FOUND for an
  // unknown GPU, FAILED_PRECONDITION when its MIG mode is off.
  Status ApplyMigLayout(const std::string& gpu_uuid, const MigLayout& layout) override;

  struct Api;  // the resolved entry points (nvml_backend.cc)

 private:
  NvmlBackend(void* handle, std::unique_ptr<Api> api, Catalog models, NvmlDevicePaths paths);
  // The MIG capability file of `access` (a capabilities access file), or "" with a warning.
  std::string CapabilityFile(const std::string& access) const;
  void RegisterEvents(const std::string& uuid, void* dev);
  // A MIG instance's first memory slice: its GPU instance's placement start (0 when the driver
  // cannot say, with a warning).
  int32_t MigStartOf(void* gpu, unsigned gpu_instance_id) const;

  void* handle_;
  std::unique_ptr<Api> api_;
  Catalog models_;
  NvmlDevicePaths paths_;
  std::vector<std::string> driver_files_;  // found once: the driver does not move under us
  std::vector<std::pair<std::string, void*>> devices_;  // uuid → nvmlDevice_t, Discover() order
  void* event_set_ = nullptr;                           // nvmlEventSet_t
  std::set<std::string> events_tried_, watched_;        // GPU uuids
  std::string event_error_;
};

}  // namespace gpupool::agent
