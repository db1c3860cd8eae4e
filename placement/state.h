// Internal state of the placement engine: nodes and devices as the hot path sees them, and a
// request compiled to typed ids. Not part of the public API (placement.h is).
//
// Invariants per device: 0 ≤ allocated ≤ offered on each dimension; slots_used ≤ slots_total;
// an exclusive grant excludes every other grant on the device. Per node: cpu_used ≤ cpu_total,
// mem_used ≤ mem_total, spill_used = Σ max(0, allocated VRAM − physical VRAM) ≤ spill_budget.
// free_milli and idle_milli are caches refreshed by Refresh() after every change.
//
// Thread safety: none (owned by one Engine).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "placement/placement.h"
#include "pool/resources.h"

namespace gpupool::placement {

inline constexpr int kMaxDevicesPerNode = 64;

struct DeviceState {
  std::string id;
  int model = 0;         // interned model id
  int mig_profile = -1;  // interned profile id; -1: a whole GPU
  bool healthy = true;
  Resources physical;
  Resources offered;
  Resources allocated;
  int slots_total = 0;  // > 0: the device (or MIG instance) is time-sliced into that many slots
  int slots_used = 0;
  bool exclusive_taken = false;
  // Share of the physical device still free, in milli (1000 = a whole idle GPU; more under
  // overcommit). 0 when the device cannot take a share (unhealthy, MIG, taken, sliced).
  int32_t free_milli = 0;

  bool Shareable() const {
    return healthy && mig_profile < 0 && !exclusive_taken && slots_used == 0;
  }
  bool Idle() const { return healthy && !exclusive_taken && slots_used == 0 && allocated.IsZero(); }
  int64_t Spill() const {
    return allocated.vram_mib > physical.vram_mib ? allocated.vram_mib - physical.vram_mib : 0;
  }
};

struct NodeState {
  std::string name;
  bool live = true;  // false after RemoveNode (the slot is kept so indices stay stable)
  bool schedulable = true;
  CapabilityMask caps = 0;  // what the node's agent enforces (NodeSpec::capabilities)
  int64_t cpu_total = 0, cpu_used = 0;
  int64_t mem_total = 0, mem_used = 0;
  int64_t spill_budget = 0, spill_used = 0;
  std::vector<DeviceState> devices;
  // dist[i * n + j]: interconnect distance between devices i and j (topology.h); empty when the
  // node lists no links, so every set of devices is equally good.
  std::vector<int> dist;
  int slot = -1;         // index in the engine's node table; stable for the node's life
  uint64_t tie_key = 0;  // smaller wins ties
  uint64_t version = 0;  // engine-wide unique per change; strategy caches key on it
  // Tasks on the node by kind: 0 GPU-sharing, 1/2/3/4 taking 1, 2, ≤4, more whole GPUs.
  std::array<int32_t, 5> kinds{};
  int32_t idle_milli = 0;    // Σ free_milli
  int32_t full_devices = 0;  // devices with nothing allocated (whole-GPU candidates)
  int32_t gpu_count = 0;     // whole GPUs (non-MIG devices)
  int model = -1;            // the model of every non-MIG device, or -1 when mixed or none
  int type = 0;              // nodes of one type have identical hardware (NodeSpec less names)

  int64_t cpu_free() const { return cpu_total - cpu_used; }
  int64_t mem_free() const { return mem_total - mem_used; }
  bool Usable() const { return live && schedulable; }
  // Nothing allocated, everything healthy and usable: scores like every other pristine node of
  // its type. Cached by Refresh().
  bool pristine = false;
  // Recomputes free_milli, idle_milli, full_devices and model from the counters and stamps
  // `new_version` (unique across the engine, so caches never confuse two states).
  void Refresh(uint64_t new_version);
};

// A request with its strings resolved and the pool's sharing mode applied.
struct CompiledRequest {
  RequestKind kind = RequestKind::kCpuOnly;
  Resources per_device;
  int32_t share_milli = 0;  // > 0: need is this share of the device's physical capacity
  int gpu_count = 0;
  uint64_t model_mask = ~uint64_t{0};  // bit per interned model
  bool unknown_model = false;          // allowed_models names only models no node has
  int mig_profile = -1;
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
  CapabilityMask needs_caps = 0;  // the node must enforce these (shared work: the pool's policy)
  // What a time-sliced device (DeviceState::slots_total > 0) asks of its node before it gives a
  // slot: a slot is shared work whatever the request's kind (the pool's shared_requires).
  CapabilityMask slot_caps = 0;
  // The request asked for a share (fractional or time-slice), even where the pool's sharing mode
  // made it whole: on a time-sliced device it takes one slot. A request for whole GPUs never does.
  bool slot_ok = false;
  // Per-device demand in milli-GPU, for strategies that reason in GPU shares.
  int32_t gpu_milli = 0;
  uint64_t shape_key = 0;  // equal for requests that score alike (memory excluded)

  bool ModelAllowed(int model) const { return (model_mask >> (model & 63)) & 1; }
  bool NeedsDevices() const { return kind != RequestKind::kCpuOnly && gpu_count > 0; }
};

// Devices on one node, by index (candidates, or the chosen set).
struct DeviceSet {
  int n = 0;
  // Only idx[0, n) is meaningful; left uninitialised on purpose (hot path, 128 bytes).
  std::array<int16_t, kMaxDevicesPerNode> idx;
  void Push(int i) { idx[static_cast<size_t>(n++)] = static_cast<int16_t>(i); }
};

}  // namespace gpupool::placement
