// Engine: the public facade over EngineImpl, plus the capacity readout and workload setup.
#include <algorithm>
#include <array>
#include <map>
#include <utility>

#include "placement/engine_impl.h"
#include "placement/fit.h"

namespace gpupool::placement {

Engine::Engine(PoolPolicy policy) : impl_(std::make_unique<EngineImpl>(policy)) {}
Engine::~Engine() = default;
Engine::Engine(Engine&&) noexcept = default;
Engine& Engine::operator=(Engine&&) noexcept = default;

const PoolPolicy& Engine::policy() const { return impl_->policy; }
void Engine::SetWorkload(std::vector<WorkloadClass> classes) { impl_->SetWorkload(classes); }
bool Engine::workload_given() const { return impl_->workload_inventory != EngineImpl::kNoWorkload; }
bool Engine::inventory_changed_since_workload() const {
  return impl_->workload_inventory != impl_->inventory_version;
}
Status Engine::AddNode(const NodeSpec& node) { return impl_->AddNode(node); }
Status Engine::RemoveNode(std::string_view name) { return impl_->RemoveNode(name); }
Status Engine::SetSchedulable(std::string_view name, bool s) {
  return impl_->SetSchedulable(name, s);
}
Status Engine::SetDeviceHealthy(std::string_view node, std::string_view id, bool healthy) {
  return impl_->SetDeviceHealthy(node, id, healthy);
}
Decision Engine::Place(const Request& request, PlaceOptions options) const {
  return impl_->Place(request, options);
}
Decision Engine::PlaceAvoiding(const Request& request, const std::vector<std::string>& avoid,
                               PlaceOptions options) const {
  return impl_->Place(request, options, impl_->AvoidSlots(avoid));
}
Status Engine::Commit(const Allocation& a) { return impl_->Commit(a); }
Status Engine::Release(const Allocation& a) { return impl_->Release(a); }
int Engine::node_count() const { return impl_->live_nodes; }

std::vector<NodeCapacity> Engine::Capacity() const {
  std::vector<NodeCapacity> out;
  for (const NodeState& n : impl_->nodes)
    if (n.live) out.push_back(impl_->CapacityOf(n));
  return out;
}

Result<NodeCapacity> Engine::NodeCapacityOf(std::string_view name) const {
  const NodeState* n = impl_->FindNode(name);
  if (n == nullptr) return Status::NotFound("node '" + std::string(name) + "' not in the pool");
  return impl_->CapacityOf(*n);
}

NodeCapacity EngineImpl::CapacityOf(const NodeState& n) const {
  NodeCapacity c;
  c.name = n.name;
  c.schedulable = n.schedulable;
  c.cpu_milli = n.cpu_total;
  c.cpu_allocated = n.cpu_used;
  c.memory_mib = n.mem_total;
  c.memory_allocated = n.mem_used;
  c.spill_budget_mib = n.spill_budget;
  c.spill_used_mib = n.spill_used;
  for (const DeviceState& d : n.devices) {
    DeviceCapacity dc;
    dc.id = d.id;
    for (const auto& [name, id] : models_)
      if (id == d.model) dc.model = name;
    for (const auto& [name, id] : mig_profiles_)
      if (id == d.mig_profile) dc.mig_profile = name;
    dc.healthy = d.healthy;
    dc.physical = d.physical;
    dc.offered = d.offered;
    dc.allocated = d.allocated;
    dc.slots_total = d.slots_total;
    dc.slots_used = d.slots_used;
    dc.exclusive_taken = d.exclusive_taken;
    c.devices.push_back(std::move(dc));
  }
  return c;
}

double EngineImpl::Reach(const FragClass& f) const {
  // Whether a node can host the class when empty depends on its hardware only: decide once per
  // node type, count per node.
  std::vector<int8_t> can_type(type_ids_.size(), -1);
  int live = 0, can = 0;
  for (const NodeState& n : nodes) {
    if (!n.live) continue;
    ++live;
    int8_t& known = can_type[static_cast<size_t>(n.type)];
    if (known < 0) {
      int devices = 0;
      for (const DeviceState& d : n.devices)
        if (d.mig_profile < 0 && ((f.model_mask >> (d.model & 63)) & 1)) ++devices;
      known = n.cpu_total >= f.cpu_milli && n.mem_total >= f.memory_mib && devices >= f.gpu_count;
    }
    can += known;
  }
  return live == 0 ? 1.0 : std::max(1, can) / static_cast<double>(live);
}

void EngineImpl::SetModelShares(std::vector<FragClass>* classes) const {
  std::array<int64_t, 64> per_model{};
  int64_t all = 0;
  for (const NodeState& n : nodes) {
    if (!n.live) continue;
    for (const DeviceState& d : n.devices) {
      if (d.mig_profile >= 0) continue;
      ++per_model[static_cast<size_t>(d.model & 63)];
      ++all;
    }
  }
  for (FragClass& f : *classes) {
    int64_t allowed = 0;
    for (size_t m = 0; m < per_model.size(); ++m)
      if ((f.model_mask >> m) & 1) allowed += per_model[m];
    f.model_share =
        all == 0 ? 1.0
                 : static_cast<double>(std::max<int64_t>(1, allowed)) / static_cast<double>(all);
  }
}

void EngineImpl::SetWorkload(const std::vector<WorkloadClass>& classes) {
  std::vector<FragClass> w;
  double total = 0;
  for (const WorkloadClass& wc : classes) {
    if (wc.weight <= 0) continue;
    const CompiledRequest c = Compile(wc.shape);
    FragClass f;
    f.cpu_milli = c.cpu_milli;
    f.memory_mib = c.memory_mib;
    f.gpu_count = c.gpu_count;
    f.model_mask = c.unknown_model ? 0 : c.model_mask;
    f.gpu_milli = c.gpu_milli;
    if (c.kind == RequestKind::kFractional && c.share_milli == 0) {
      // An absolute request: measure it against the first device of the pool.
      for (const NodeState& n : nodes)
        if (!n.devices.empty()) {
          f.gpu_milli = NeedMilli(n.devices.front(), c);
          break;
        }
    }
    f.p = wc.weight;
    total += wc.weight;
    w.push_back(f);
  }
  for (FragClass& f : w) {
    f.p /= total;
    f.reach = Reach(f);
    f.inv_gpu = f.gpu_milli > 0 ? 1.0 / f.gpu_milli : 0;
    f.inv_cpu = f.cpu_milli > 0 ? 1.0 / static_cast<double>(f.cpu_milli) : 0;
    f.inv_mem = f.memory_mib > 0 ? 1.0 / static_cast<double>(f.memory_mib) : 0;
  }
  SetModelShares(&w);
  pool_shape_ = PoolShape{};
  std::map<std::pair<int64_t, int64_t>, int64_t> kinds;  // (cores, GPUs) → live GPU nodes
  for (const NodeState& n : nodes) {
    if (!n.live) continue;
    pool_shape_.cpu_milli += n.cpu_total;
    pool_shape_.gpu_milli += int64_t{1000} * n.gpu_count;
    if (n.gpu_count > 0) ++kinds[{n.cpu_total, int64_t{1000} * n.gpu_count}];
    const auto t = static_cast<size_t>(n.type);
    if (pool_shape_.types.size() <= t) pool_shape_.types.resize(t + 1);
    PoolShape::Type& type = pool_shape_.types[t];
    if (type.count++ > 0) continue;
    type.cpu_milli = n.cpu_total, type.memory_mib = n.mem_total;
    for (const DeviceState& d : n.devices) {
      if (d.mig_profile >= 0) continue;
      auto it = std::find_if(type.gpus.begin(), type.gpus.end(), [&](const std::pair<int, int>& g) {
        return g.first == (d.model & 63);
      });
      if (it == type.gpus.end())
        type.gpus.emplace_back(d.model & 63, 1);
      else
        ++it->second;
    }
  }
  for (const auto& [shape, count] : kinds)
    pool_shape_.kinds.push_back(PoolShape::Kind{shape.first, shape.second, count});
  if (!w.empty()) workload_ = std::move(w);
  workload_inventory = inventory_version;
  plugin_->WorkloadChanged();
  // Keep the score indexes: their scores go stale and are recomputed a bounded number per
  // decision (kStaleRefreshPerDecision), so a push into a 50,000-node pool is not one long stall.
  for (auto& index : indexes_) index->MarkAllStale();
}

}  // namespace gpupool::placement
