// SimulatedBackend: GPUs described by a SimLayout (catalog model, count, MIG layout, links) with
// synthetic but plausible metrics.
//
// UUIDs are deterministic: "GPU-sim-<node>-<i>" for GPU i, "MIG-sim-<node>-<i>-<j>" for MIG
// instance j of GPU i. Metrics follow the load the agent passes in: utilization = the tasks'
// summed thread percentage (capped at 100) plus a little seeded noise, memory used = granted
// VRAM (capped at the device's), power = idle + (TDP - idle) × util, temperature 32 °C + 0.45 ×
// util. A MIG parent's load is the sum of its instances'. The same seed gives the same series.
// Every figure comes from the catalog (pool/catalog.yaml): compute, VRAM and MIG profiles as
// agents must report them, TDP for power (idle is TDP / 8, a simulation assumption: datasheets
// state no idle power), and link bandwidth: NVLink pairs get the GPU link's GB/s × 8 (Gbit/s,
// as the datasheet counts it, both directions), PCIe pairs the host interface's GB/s × 8 / 2
// (one direction), a system link half of that.
//
// With layout.device_dir set, Discover() creates fake device files there (nvidiaN as 195:N,
// nvidiactl, nvidia-uvm, nvidia-uvm-tools, nvidia-caps/nvidia-capK per MIG instance) and lists
// them in the inventory, so the sandbox's device rules apply to them as to /dev/nvidia*.
//
// Health events (PollEvents): lines appended to layout.event_file — "xid <uuid> <code>" or
// "ecc <uuid> corrected|uncorrected"; a line is consumed once it ends with a newline; a malformed
// line is logged and skipped — and events given to InjectEvent().
//
// Thread safety: one thread at a time (see DeviceBackend); SetHealthy() included.
#pragma once

#include <cstdint>
#include <map>
#include <random>
#include <string>

#include "agent/backend.h"
#include "agent/config.h"
#include "pool/catalog.h"

namespace gpupool::agent {

class SimulatedBackend final : public DeviceBackend {
 public:
  SimulatedBackend(std::string node_name, SimLayout layout, Catalog models);

  std::string Name() const override { return "simulated"; }
  Result<Inventory> Discover() override;
  std::vector<DeviceSample> Sample(const std::vector<DeviceLoad>& load) override;

  // Marks a device (by UUID) healthy or not; shows in the next Discover() and Sample().
  void SetHealthy(const std::string& uuid, bool healthy);
  // Queues a health event for the next PollEvents().
  void InjectEvent(DeviceEvent event);

  std::vector<DeviceEvent> PollEvents() override;
  std::string EventSource() const override;
  // A GPU the config gives a `mig:` list (even an empty one) is in MIG mode; its layout changes
  // in memory (a new agent process starts from the config again, as a rebooted node loses its
  // MIG instances).
  Status ApplyMigLayout(const std::string& gpu_uuid, const MigLayout& layout) override;

  static std::string GpuUuid(const std::string& node, int32_t index);
  static std::string MigUuid(const std::string& node, int32_t index, int32_t instance);

 private:
  Inventory Build() const;
  // layout.device_dir: character devices with the driver's numbers (mknod; needs root).
  Status MakeDeviceFiles() const;

  struct MigGpu {
    MigLayout layout;
    bool dynamic = false;  // its placements are known: the layout can change
    int generation = 0;    // re-layouts so far
  };

  std::string node_;
  SimLayout layout_;
  std::map<int32_t, MigGpu> mig_;  // GPU index → its MIG instances
  Catalog models_;
  Inventory inventory_;
  std::map<std::string, bool> health_override_;
  std::mt19937_64 rng_;
  int64_t samples_ = 0;
  std::vector<DeviceEvent> injected_;
  int64_t event_offset_ = 0;  // bytes of layout_.event_file consumed
};

}  // namespace gpupool::agent
