// Inventory vocabulary: the few kinds that the agent (what it reports), the API (what it
// converts), the scheduler (what it stores) and placement (what it scores) must agree on, defined
// once here instead of once per module.
//
// Values are stable: the store writes LinkKind as its integer (1..4) and SharingMode by name
// (scheduler/model.h ToString), so enumerators are only ever appended.
//
// Thread safety: plain values.
#pragma once

#include <cstdint>

namespace gpupool {

// Interconnect between two devices of a node, best first. Devices with no link listed talk
// through the system (kSystem).
enum class LinkKind : uint8_t {
  kNvlink = 1,  // NVLink / NVSwitch (or AMD Infinity Fabric)
  kPcieSwitch,  // behind one PCIe switch
  kPcieHost,    // same PCIe host bridge / NUMA node
  kSystem,      // across NUMA nodes (the SMP interconnect)
};

// How a pool shares its devices.
enum class SharingMode : uint8_t {
  kExclusive = 1,  // every GPU request takes whole devices
  kFractional,     // devices are shared by compute and VRAM amounts
  kTimeSliced,     // each device offers `replicas` slots; a GPU request takes one slot
};

}  // namespace gpupool
