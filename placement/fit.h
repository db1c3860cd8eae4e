// Filter stage and device choice: can this node take this request, on which devices, and if
// not, why (a sentence a person can act on: "vram: need 40960 MiB, free 24576 MiB on GPU 3").
//
// Pure functions of a NodeState and a CompiledRequest. Thread safety: none needed.
#pragma once

#include <string>
#include <string_view>

#include "placement/state.h"

namespace gpupool::placement {

enum class Reject : uint8_t {
  kNone,
  kUnschedulable,
  kCpu,
  kMemory,
  kModel,
  kCompute,
  kVram,
  kSpill,
  kDevices,  // too few free devices
  kMig,
  kSlots,
  kCapability,  // the node cannot enforce what the pool requires for shared work
  kCount,
};
std::string_view RejectName(Reject r);

// What a fractional request needs on device `d` (share of d's physical capacity, or absolute).
Resources NeedOn(const DeviceState& d, const CompiledRequest& r);
// One slot's share of a time-sliced device: its offered capacity over its slots.
Resources SlotShare(const DeviceState& d);
// What a grant on `d` holds when `r` lands there: a slot's share on a time-sliced device, the
// request's need when fractional, else the card itself (offered compute, physical VRAM).
Resources GrantedOn(const DeviceState& d, const CompiledRequest& r);
// The same need as a share of d's physical capacity, in milli-GPU (rounded up).
int32_t NeedMilli(const DeviceState& d, const CompiledRequest& r);
// Extra host RAM the node must back if `need` is added to `d` (VRAM beyond physical).
int64_t SpillDelta(const DeviceState& d, const Resources& need);

// Filter: node-level checks (schedulable, CPU, memory) then the devices that could each take
// the request. Returns kNone and fills `candidates` when at least gpu_count devices qualify.
// `why` (may be null) receives the reason for the first failing check.
Reject FilterNode(const NodeState& node, const CompiledRequest& req, DeviceSet* candidates,
                  std::string* why);

// Default device choice among `candidates`: fractional and time-slice take the fullest devices
// that fit (best fit inside the node); whole GPUs take the best-connected set; checks the node's
// spill budget for the chosen set. Returns false when the set breaks the spill budget.
bool ChooseDevices(const NodeState& node, const CompiledRequest& req, const DeviceSet& candidates,
                   DeviceSet* chosen);

// Whether adding `req` on `chosen` keeps the node within its spill budget.
bool SpillFits(const NodeState& node, const CompiledRequest& req, const DeviceSet& chosen);

}  // namespace gpupool::placement
