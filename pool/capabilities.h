// Capabilities: what a node can enforce, as agents name them in Register.capabilities, and what
// a pool requires of the nodes that take its shared (fractional or time-sliced) work.
//
// Agents report a list of {name, enforced, detail}; only the enforced names count. The names a
// pool may require are the closed set below; an agent may report others (its cgroup controllers,
// XID events), which are shown to people and never required. Placement works on a bit mask
// (one bit per requirable name), so the filter costs one AND per node.
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace gpupool {

using CapabilityMask = uint64_t;

// The requirable capabilities, in the order masks are printed.
//   vram_cap       VRAM held to the grant on every allocation path (the CUDA interposer)
//   compute_share  compute held to the grant's share of the GPU (the CUDA interposer or MPS)
//   spill          VRAM beyond the device's own served from host memory and metered
//   sandbox        the task's own cgroup, uid, namespaces and device filter
//   vram_scrub     a device's memory is scrubbed before another tenant gets it
//   mps            per-tenant MPS control daemons (fault isolation between tenants)
std::span<const std::string_view> RequirableCapabilities();

// The bit of `name`; 0 when the name is not requirable.
CapabilityMask CapabilityBit(std::string_view name);

// The mask of `names`. INVALID_ARGUMENT naming the first unknown one (and the known ones).
Result<CapabilityMask> CapabilityMaskOf(const std::vector<std::string>& names);

// The requirable names in `mask`, in RequirableCapabilities() order.
std::vector<std::string> CapabilityNames(CapabilityMask mask);

// "vram_cap, compute_share" for the names in `mask`; "" for 0.
std::string CapabilityList(CapabilityMask mask);

// What a new pool requires of nodes for shared work when its creator names nothing (API, CLI,
// config): tenants who share a GPU do not trust each other, so their work goes only to nodes
// that hold each to its slice and confine it — vram_cap, compute_share and sandbox.
CapabilityMask DefaultRequiredCapabilities();

// The word an operator writes for "no requirement" where an empty list means the default.
inline constexpr std::string_view kNoRequirement = "none";

// The requirement as written: exactly {"none"} is no requirement; an empty list is the default
// when `empty_is_default` (a new pool), else no requirement (an update that clears it). "none"
// beside other names is INVALID_ARGUMENT; other names are returned as given (CapabilityMaskOf
// checks them).
Result<std::vector<std::string>> RequirementAsWritten(std::vector<std::string> names,
                                                      bool empty_is_default);

}  // namespace gpupool
