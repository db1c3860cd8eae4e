// The NVML ABI subset NvmlBackend uses, declared here: no NVIDIA header is needed to build.
// Values and layouts from nvml.h (NVML API reference, https://docs.nvidia.com/deploy/nvml-api/),
// stable since NVML 10; the MIG management structs since R450. Internal to agent/nvml_*.cc.
#pragma once

#include <string>

#include "agent/nvml_backend.h"

namespace gpupool::agent {
namespace nvml {

using nvmlReturn_t = int;
using nvmlDevice_t = void*;
constexpr nvmlReturn_t kNvmlSuccess = 0;
constexpr nvmlReturn_t kNvmlErrorGpuIsLost = 15;
struct NvmlMemory {
  unsigned long long total, free, used;
};
struct NvmlUtilization {
  unsigned int gpu, memory;
};
struct NvmlPciInfo {  // nvmlPciInfo_t (v3)
  char bus_id_legacy[16];
  unsigned int domain, bus, device, pci_device_id, pci_subsystem_id;
  char bus_id[32];
};
constexpr int kTemperatureGpu = 0;
constexpr int kMemoryErrorUncorrected = 1;
constexpr int kEccVolatile = 0;
constexpr int kP2pCapsNvlink = 2;
constexpr int kP2pStatusOk = 0;
constexpr int kTopoSingle = 10, kTopoMultiple = 20, kTopoHostBridge = 30, kTopoNode = 40;
// Events (nvmlEventType*, nvmlEventData_t).
using nvmlEventSet_t = void*;
constexpr nvmlReturn_t kNvmlErrorTimeout = 10;
constexpr unsigned long long kEventSingleBitEcc = 0x1;
constexpr unsigned long long kEventDoubleBitEcc = 0x2;
constexpr unsigned long long kEventXidCritical = 0x8;
struct NvmlEventData {
  nvmlDevice_t device;
  unsigned long long event_type;
  unsigned long long event_data;  // the XID for kEventXidCritical
  unsigned int gpu_instance_id;
  unsigned int compute_instance_id;
};
// MIG management (NVML reference, "Multi Instance GPU Management").
using nvmlGpuInstance_t = void*;
using nvmlComputeInstance_t = void*;
constexpr nvmlReturn_t kNvmlErrorNotSupported = 3;
constexpr nvmlReturn_t kNvmlErrorInvalidArgument = 2;
constexpr nvmlReturn_t kNvmlErrorNoPermission = 4;
constexpr nvmlReturn_t kNvmlErrorInUse = 19;
constexpr nvmlReturn_t kNvmlErrorInsufficientResources = 23;
// NVML_GPU_INSTANCE_PROFILE_COUNT and NVML_COMPUTE_INSTANCE_PROFILE_COUNT of the headers this
// code was written against: ids 0..9 and 0..7. Newer drivers may add ids; they are not queried.
constexpr unsigned kGpuInstanceProfileCount = 10;
constexpr unsigned kComputeInstanceProfileCount = 8;
constexpr unsigned kComputeInstanceEngineProfileShared = 0;
struct NvmlGpuInstanceProfileInfo {  // nvmlGpuInstanceProfileInfo_t
  unsigned int id, is_p2p_supported, slice_count, instance_count, multiprocessor_count,
      copy_engine_count, decoder_count, encoder_count, jpeg_count, ofa_count;
  unsigned long long memory_size_mb;
};
struct NvmlGpuInstanceProfileInfoV2 {  // nvmlGpuInstanceProfileInfo_v2_t
  unsigned int version, id, is_p2p_supported, slice_count, instance_count, multiprocessor_count,
      copy_engine_count, decoder_count, encoder_count, jpeg_count, ofa_count;
  unsigned long long memory_size_mb;
  char name[96];
};
// nvmlGpuInstanceProfileInfo_v2: NVML_STRUCT_VERSION(GpuInstanceProfileInfo, 2).
constexpr unsigned kGpuInstanceProfileInfoV2 =
    (2u << 24) | static_cast<unsigned>(sizeof(NvmlGpuInstanceProfileInfoV2));
struct NvmlPlacement {  // nvmlGpuInstancePlacement_t
  unsigned int start, size;
};
struct NvmlGpuInstanceInfo {  // nvmlGpuInstanceInfo_t
  nvmlDevice_t device;
  unsigned int id, profile_id;
  NvmlPlacement placement;
};
struct NvmlComputeInstanceProfileInfo {  // nvmlComputeInstanceProfileInfo_t
  unsigned int id, slice_count, instance_count, multiprocessor_count, shared_copy_engine_count,
      shared_decoder_count, shared_encoder_count, shared_jpeg_count, shared_ofa_count;
};

}  // namespace nvml

using namespace nvml;  // NOLINT(google-build-using-namespace): the ABI's names, agent/nvml_*.cc
                       // only

struct NvmlBackend::Api {
  std::string library;  // as given to Open()
  nvmlReturn_t (*Init)();
  nvmlReturn_t (*Shutdown)();
  const char* (*ErrorString)(nvmlReturn_t);
  nvmlReturn_t (*GetCount)(unsigned int*);
  nvmlReturn_t (*GetHandleByIndex)(unsigned int, nvmlDevice_t*);
  nvmlReturn_t (*GetUuid)(nvmlDevice_t, char*, unsigned int);
  nvmlReturn_t (*GetName)(nvmlDevice_t, char*, unsigned int);
  nvmlReturn_t (*GetMemoryInfo)(nvmlDevice_t, NvmlMemory*);
  nvmlReturn_t (*GetUtilizationRates)(nvmlDevice_t, NvmlUtilization*);
  nvmlReturn_t (*GetPowerUsage)(nvmlDevice_t, unsigned int*);
  nvmlReturn_t (*GetTemperature)(nvmlDevice_t, int, unsigned int*);
  // Optional entry points (older drivers, non-MIG GPUs): may be null.
  nvmlReturn_t (*GetTotalEccErrors)(nvmlDevice_t, int, int, unsigned long long*);
  nvmlReturn_t (*GetMigMode)(nvmlDevice_t, unsigned int*, unsigned int*);
  nvmlReturn_t (*GetMaxMigDeviceCount)(nvmlDevice_t, unsigned int*);
  nvmlReturn_t (*GetMigDeviceHandleByIndex)(nvmlDevice_t, unsigned int, nvmlDevice_t*);
  nvmlReturn_t (*GetTopologyCommonAncestor)(nvmlDevice_t, nvmlDevice_t, int*);
  nvmlReturn_t (*GetP2PStatus)(nvmlDevice_t, nvmlDevice_t, int, int*);
  nvmlReturn_t (*GetPciInfo)(nvmlDevice_t, NvmlPciInfo*);
  nvmlReturn_t (*GetMinorNumber)(nvmlDevice_t, unsigned int*);
  nvmlReturn_t (*GetGpuInstanceId)(nvmlDevice_t, unsigned int*);
  nvmlReturn_t (*GetComputeInstanceId)(nvmlDevice_t, unsigned int*);
  nvmlReturn_t (*EventSetCreate)(nvmlEventSet_t*);
  nvmlReturn_t (*RegisterEvents)(nvmlDevice_t, unsigned long long, nvmlEventSet_t);
  nvmlReturn_t (*EventSetWait)(nvmlEventSet_t, NvmlEventData*, unsigned int);
  nvmlReturn_t (*EventSetFree)(nvmlEventSet_t);
  // MIG management: optional; ApplyMigLayout says which is missing.
  nvmlReturn_t (*GetGpuInstanceProfileInfo)(nvmlDevice_t, unsigned, NvmlGpuInstanceProfileInfo*);
  nvmlReturn_t (*GetGpuInstanceProfileInfoV)(nvmlDevice_t, unsigned,
                                             NvmlGpuInstanceProfileInfoV2*);  // may stay null
  nvmlReturn_t (*GetGpuInstancePossiblePlacements)(nvmlDevice_t, unsigned, NvmlPlacement*,
                                                   unsigned*);
  nvmlReturn_t (*CreateGpuInstanceWithPlacement)(nvmlDevice_t, unsigned, const NvmlPlacement*,
                                                 nvmlGpuInstance_t*);
  nvmlReturn_t (*GetGpuInstances)(nvmlDevice_t, unsigned, nvmlGpuInstance_t*, unsigned*);
  nvmlReturn_t (*GetGpuInstanceById)(nvmlDevice_t, unsigned, nvmlGpuInstance_t*);
  nvmlReturn_t (*GpuInstanceGetInfo)(nvmlGpuInstance_t, NvmlGpuInstanceInfo*);
  nvmlReturn_t (*GetComputeInstanceProfileInfo)(nvmlGpuInstance_t, unsigned, unsigned,
                                                NvmlComputeInstanceProfileInfo*);
  nvmlReturn_t (*CreateComputeInstance)(nvmlGpuInstance_t, unsigned, nvmlComputeInstance_t*);
  nvmlReturn_t (*GetComputeInstances)(nvmlGpuInstance_t, unsigned, nvmlComputeInstance_t*,
                                      unsigned*);
  nvmlReturn_t (*ComputeInstanceDestroy)(nvmlComputeInstance_t);
  nvmlReturn_t (*GpuInstanceDestroy)(nvmlGpuInstance_t);

  std::string Error(nvmlReturn_t r) const {
    const char* s = ErrorString ? ErrorString(r) : nullptr;
    return s ? std::string(s) : "NVML error " + std::to_string(r);
  }
};

}  // namespace gpupool::agent
