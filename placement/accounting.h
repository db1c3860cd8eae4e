// Accounting: applying and undoing allocations on a node, with the checks that keep the
// invariants of state.h (nothing promised beyond what is offered; spill within budget).
//
// Check* functions say why an allocation cannot be applied; Apply/Unapply assume the check
// passed. Used by Engine::Commit/Release and, on copies of a node, by the victim search.
#pragma once

#include <cstdint>

#include "base/status.h"
#include "placement/placement.h"
#include "placement/state.h"

namespace gpupool::placement {

// The grants a placement of `req` on `devices` of `node` makes (amounts per request kind).
Allocation MakeAllocation(const NodeState& node, const CompiledRequest& req,
                          const DeviceSet& devices);

Status CheckApply(const NodeState& node, const Allocation& a);
void Apply(NodeState& node, const Allocation& a, uint64_t new_version);
Status CheckUnapply(const NodeState& node, const Allocation& a);
void Unapply(NodeState& node, const Allocation& a, uint64_t new_version);

// Kind of task an allocation belongs to, for NodeState::kinds; -1 for CPU-only.
int AllocationKind(const Allocation& a);

}  // namespace gpupool::placement
