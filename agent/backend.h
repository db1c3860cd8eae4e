// DeviceBackend: where the agent learns what GPUs its node has and how they are doing.
//
// Discover() is called once at start (and its result sent in Register); Sample() every heartbeat.
// Two implementations: SimulatedBackend (GPUs described in the agent's YAML; used by tests, the
// demo and benchmarks) and NvmlBackend (libnvidia-ml.so.1 loaded with dlopen at run time).
//
// Device identity: a whole GPU has an index (0..n-1) and a UUID. A GPU in MIG mode is reported
// once as itself (its full capacity, mig_profile empty) and then once per MIG instance
// (mig_profile set, parent_uuid = the GPU's UUID, index = the GPU's index); schedulers place
// work on the instances, not on their parent. Links connect GPU indexes.
//
// Thread safety: a backend is used from one thread at a time (the agent's strand).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "pool/inventory.h"
#include "pool/mig_layout.h"

namespace gpupool::agent {

using LinkKind = ::gpupool::LinkKind;  // pool/inventory.h

struct Device {
  std::string uuid;
  std::string model;  // catalog model name
  int32_t index = 0;
  int64_t vram_mib = 0;
  int64_t milli_tflops = 0;
  std::string mig_profile;  // set for a MIG instance
  std::string parent_uuid;  // MIG instance: its GPU's UUID
  bool healthy = true;
  int32_t numa_node = 0;
  // Device files a task granted this device may open (/dev/nvidiaN; a MIG instance adds its
  // capability files). Only these become device nodes in the task's container.
  std::vector<std::string> device_files;
  int32_t time_slice_slots = 0;  // from the agent's config (`time_slicing:`); 0: none
  int32_t mig_start = 0;         // a MIG instance: its GPU instance's first memory slice
  bool mig_enabled = false;      // a GPU whose MIG mode is on (re-partitionable)
};

struct Link {
  int32_t a = 0;
  int32_t b = 0;
  LinkKind kind = LinkKind::kSystem;
  int32_t bandwidth_gbps = 0;
};

struct Inventory {
  std::vector<Device> devices;
  std::vector<Link> links;
  // Control devices every GPU task needs (nvidiactl, nvidia-uvm, nvidia-uvm-tools).
  std::vector<std::string> control_device_files;
  // The driver's user-space files (agent/driver_files.h) a GPU task from an image gets bound
  // read-only: an image carries no driver. Empty on the simulated backend.
  std::vector<std::string> driver_files;
};

// What the agent's tasks hold on one device, for backends that synthesize metrics.
struct DeviceLoad {
  std::string uuid;
  int32_t thread_percentage = 0;  // sum over tasks (may exceed 100 when time-sliced)
  int64_t vram_mib = 0;           // sum of granted VRAM
};

struct DeviceSample {
  std::string uuid;
  int32_t utilization_pct = 0;
  int64_t memory_used_mib = 0;
  int32_t power_watts = 0;
  int32_t temperature_c = 0;
  int64_t ecc_errors = 0;
  int64_t xid_errors = 0;
  int32_t last_xid = 0;          // the newest XID seen on the device (0 = none)
  int32_t memory_util_pct = -1;  // memory bandwidth utilisation; -1 = the backend cannot tell
  bool healthy = true;
  int32_t mps_daemons = -1;  // MPS control daemons up for it (filled by the agent); -1 = unmanaged
};

// A health event of one device (NVML's event API; the simulated backend's injection file).
struct DeviceEvent {
  enum class Kind { kXid, kEccCorrected, kEccUncorrected };
  std::string uuid;
  Kind kind = Kind::kXid;
  int32_t xid = 0;      // kXid
  int64_t time_us = 0;  // when the backend saw it (wall clock, µs since the epoch)
};

class DeviceBackend {
 public:
  virtual ~DeviceBackend() = default;
  // "simulated" | "nvml".
  virtual std::string Name() const = 0;
  virtual Result<Inventory> Discover() = 0;
  // One sample per discovered device (same order as Discover()). `load` is what the agent's
  // running tasks were granted; real backends ignore it.
  virtual std::vector<DeviceSample> Sample(const std::vector<DeviceLoad>& load) = 0;
  // Health events since the last call, without blocking (agent/health/health_monitor.h).
  virtual std::vector<DeviceEvent> PollEvents() { return {}; }
  // How events are watched, or why they cannot be ("" = not at all): the xid_events capability.
  virtual std::string EventSource() const { return ""; }
  // Re-partitions GPU `gpu_uuid` (MIG mode on) into `layout` (pool/mig_layout.h; the caller
  // validated it against the GPU's catalog model, and checked that none of its own tasks runs on
  // the GPU). All or nothing: destroys the GPU's compute and GPU instances, then creates
  // `layout`'s in order at their starts. If the driver refuses a step, it destroys what it
  // created, re-creates the layout the GPU had, and returns an error naming the step, the
  // profile and the driver's reason (the GPU is back as it was). If the old layout cannot be
  // re-created either, returns DATA_LOSS: the GPU is left with no instance, and the caller takes
  // it out of service. Discover() afterwards reports the new instances.
  virtual Status ApplyMigLayout(const std::string& gpu_uuid, const MigLayout& layout) {
    (void)layout;
    return Status::Unimplemented("backend " + Name() + " cannot re-partition GPU " + gpu_uuid);
  }
};

const char* LinkKindName(LinkKind kind);

}  // namespace gpupool::agent
