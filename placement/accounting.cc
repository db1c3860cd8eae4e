#include "placement/accounting.h"

#include <algorithm>

#include "placement/fit.h"

namespace gpupool::placement {
namespace {

int32_t FreeMilli(const DeviceState& d) {
  if (!d.Shareable()) return 0;
  const Resources free = d.offered - d.allocated;
  int64_t m = INT64_MAX;
  if (d.physical.milli_tflops > 0)
    m = std::min(m, free.milli_tflops * 1000 / d.physical.milli_tflops);
  if (d.physical.vram_mib > 0) m = std::min(m, free.vram_mib * 1000 / d.physical.vram_mib);
  return m == INT64_MAX ? 0 : static_cast<int32_t>(std::max<int64_t>(m, 0));
}

Status BadGrant(const NodeState& node, const Grant& g, const std::string& what) {
  return Status::FailedPrecondition("node '" + node.name + "' device " +
                                    std::to_string(g.device_index) + " ('" + g.device_id +
                                    "'): " + what);
}

const DeviceState* FindDevice(const NodeState& node, const Grant& g) {
  if (g.device_index < 0 || g.device_index >= static_cast<int>(node.devices.size())) return nullptr;
  const DeviceState& d = node.devices[static_cast<size_t>(g.device_index)];
  return d.id == g.device_id ? &d : nullptr;
}

}  // namespace

void NodeState::Refresh(uint64_t new_version) {
  version = new_version;
  idle_milli = 0;
  full_devices = 0;
  gpu_count = 0;
  model = -2;
  pristine = Usable() && cpu_used == 0 && mem_used == 0;
  for (DeviceState& d : devices) {
    pristine = pristine && d.Idle() && d.healthy;
    d.free_milli = FreeMilli(d);
    idle_milli += d.free_milli;
    if (d.mig_profile >= 0) continue;
    ++gpu_count;
    if (d.Idle()) ++full_devices;
    model = (model == -2 || model == d.model) ? d.model : -1;
  }
  if (model == -2) model = -1;
}

Allocation MakeAllocation(const NodeState& node, const CompiledRequest& req,
                          const DeviceSet& devices) {
  Allocation a;
  a.node = node.name;
  a.cpu_milli = req.cpu_milli;
  a.memory_mib = req.memory_mib;
  for (int k = 0; k < devices.n; ++k) {
    const int i = devices.idx[static_cast<size_t>(k)];
    const DeviceState& d = node.devices[static_cast<size_t>(i)];
    Grant g;
    g.device_id = d.id;
    g.device_index = i;
    // A time-sliced device (or MIG instance) gives one slot and its share, whatever the kind;
    // otherwise a fractional request gets its amount and the others the card itself.
    g.amount = GrantedOn(d, req);
    g.slots = d.slots_total > 0 ? 1 : 0;
    g.exclusive = g.slots == 0 && req.kind != RequestKind::kFractional;
    a.grants.push_back(std::move(g));
  }
  return a;
}

Status CheckApply(const NodeState& node, const Allocation& a) {
  if (a.cpu_milli < 0 || a.memory_mib < 0) return Status::InvalidArgument("negative cpu or memory");
  if (a.cpu_milli > node.cpu_free())
    return Status::FailedPrecondition("node '" + node.name + "': cpu: need " +
                                      std::to_string(a.cpu_milli) + ", free " +
                                      std::to_string(node.cpu_free()));
  if (a.memory_mib > node.mem_free())
    return Status::FailedPrecondition("node '" + node.name + "': memory: need " +
                                      std::to_string(a.memory_mib) + " MiB, free " +
                                      std::to_string(node.mem_free()) + " MiB");
  int64_t spill = 0;
  for (size_t k = 0; k < a.grants.size(); ++k) {
    const Grant& g = a.grants[k];
    const DeviceState* d = FindDevice(node, g);
    if (d == nullptr) return BadGrant(node, g, "no such device");
    for (size_t j = 0; j < k; ++j)
      if (a.grants[j].device_index == g.device_index) return BadGrant(node, g, "granted twice");
    if (!g.amount.IsNonNegative() || g.slots < 0) return BadGrant(node, g, "negative amount");
    if (!d->healthy) return BadGrant(node, g, "unhealthy");
    if (d->exclusive_taken) return BadGrant(node, g, "taken whole");
    if (g.exclusive && !d->Idle()) return BadGrant(node, g, "in use, cannot take it whole");
    if (g.slots > 0 && d->slots_used + g.slots > d->slots_total)
      return BadGrant(node, g, "no free slot");
    if (g.slots == 0 && d->slots_used > 0) return BadGrant(node, g, "time-sliced");
    if (!(d->offered - d->allocated).Fits(g.amount))
      return BadGrant(
          node, g,
          "needs " + g.amount.ToString() + ", free " + (d->offered - d->allocated).ToString());
    spill += SpillDelta(*d, g.amount);
  }
  if (node.spill_used + spill > node.spill_budget)
    return Status::FailedPrecondition("node '" + node.name + "': spill: need " +
                                      std::to_string(spill) + " MiB of host RAM, budget left " +
                                      std::to_string(node.spill_budget - node.spill_used) + " MiB");
  return Status::Ok();
}

void Apply(NodeState& node, const Allocation& a, uint64_t new_version) {
  node.cpu_used += a.cpu_milli;
  node.mem_used += a.memory_mib;
  for (const Grant& g : a.grants) {
    DeviceState& d = node.devices[static_cast<size_t>(g.device_index)];
    node.spill_used += SpillDelta(d, g.amount);
    d.allocated += g.amount;
    d.slots_used += g.slots;
    d.exclusive_taken = d.exclusive_taken || g.exclusive;
  }
  const int kind = AllocationKind(a);
  if (kind >= 0) ++node.kinds[static_cast<size_t>(kind)];
  node.Refresh(new_version);
}

Status CheckUnapply(const NodeState& node, const Allocation& a) {
  if (a.cpu_milli > node.cpu_used || a.memory_mib > node.mem_used)
    return Status::FailedPrecondition("node '" + node.name +
                                      "': release of more cpu or memory than allocated");
  for (const Grant& g : a.grants) {
    const DeviceState* d = FindDevice(node, g);
    if (d == nullptr) return BadGrant(node, g, "no such device");
    if (!d->allocated.Fits(g.amount) || g.slots > d->slots_used ||
        (g.exclusive && !d->exclusive_taken))
      return BadGrant(node, g, "release of more than allocated");
  }
  return Status::Ok();
}

void Unapply(NodeState& node, const Allocation& a, uint64_t new_version) {
  node.cpu_used -= a.cpu_milli;
  node.mem_used -= a.memory_mib;
  for (auto it = a.grants.rbegin(); it != a.grants.rend(); ++it) {
    DeviceState& d = node.devices[static_cast<size_t>(it->device_index)];
    const int64_t before = d.Spill();
    d.allocated -= it->amount;
    node.spill_used -= before - d.Spill();
    d.slots_used -= it->slots;
    if (it->exclusive) d.exclusive_taken = false;
  }
  const int kind = AllocationKind(a);
  if (kind >= 0) --node.kinds[static_cast<size_t>(kind)];
  node.Refresh(new_version);
}

int AllocationKind(const Allocation& a) {
  if (a.grants.empty()) return -1;
  int exclusive = 0;
  for (const Grant& g : a.grants) exclusive += g.exclusive ? 1 : 0;
  if (exclusive == 0) return 0;
  if (exclusive == 1) return 1;
  if (exclusive == 2) return 2;
  return exclusive <= 4 ? 3 : 4;
}

}  // namespace gpupool::placement
