// Core: pools, capacity views and recovery from the store (nodes: core_nodes.cc).
#include <algorithm>
#include <limits>

#include "base/log.h"
#include "scheduler/core.h"
#include "scheduler/core_state.h"
#include "scheduler/pool_workload.h"

namespace gpupool {
namespace {

placement::SharingMode ToPlacement(SharingMode m) {
  switch (m) {
    case SharingMode::kExclusive:
      return placement::SharingMode::kExclusive;
    case SharingMode::kTimeSliced:
      return placement::SharingMode::kTimeSliced;
    case SharingMode::kFractional:
      break;
  }
  return placement::SharingMode::kFractional;
}

placement::LinkKind ToPlacement(LinkKind k) {
  switch (k) {
    case LinkKind::kNvlink:
      return placement::LinkKind::kNvlink;
    case LinkKind::kPcieSwitch:
      return placement::LinkKind::kPcieSwitch;
    case LinkKind::kPcieHost:
      return placement::LinkKind::kPcieHost;
    case LinkKind::kSystem:
      break;
  }
  return placement::LinkKind::kSystem;
}

Result<std::unique_ptr<placement::Engine>> MakeEngine(const PoolRecord& rec,
                                                      const std::string& default_strategy) {
  const std::string& name =
      rec.placement_strategy.empty() ? default_strategy : rec.placement_strategy;
  Result<placement::Strategy> strategy = placement::ParseStrategy(name);
  if (!strategy.ok()) return strategy.status().WithContext("pool.placement_strategy");
  placement::PoolPolicy policy;
  policy.strategy = *strategy;
  policy.compute = rec.compute_overcommit;
  policy.memory = rec.memory_overcommit;
  policy.sharing = ToPlacement(rec.sharing_mode);
  policy.replicas =
      rec.sharing_mode == SharingMode::kTimeSliced ? std::max(rec.time_slice_replicas, 1) : 1;
  Result<CapabilityMask> required = CapabilityMaskOf(rec.required_capabilities);
  if (!required.ok()) return required.status().WithContext("pool.required_capabilities");
  policy.shared_requires = *required;
  ConfigureEngine(rec, &policy);
  return std::make_unique<placement::Engine>(policy);
}

// A MIG-enabled GPU is scheduled through its instances: the parent is left out of the engine.
placement::NodeSpec ToNodeSpec(const NodeRecord& n, const DeviceSlotsBook& slots) {
  // An admin's count wins over the one the agent's config gives the device.
  auto EffectiveSlots = [](const std::string& node, const DeviceRecord& d,
                           const DeviceSlotsBook& book) {
    const int32_t set = book.Slots(node, d.id);
    return set > 0 ? set : d.time_slice_slots;
  };
  std::set<std::string> parents;
  for (const DeviceRecord& d : n.devices) {
    if (!d.parent_id.empty()) parents.insert(d.parent_id);
  }
  placement::NodeSpec spec;
  spec.name = n.name;
  spec.cpu_milli = n.cpu_milli;
  spec.memory_mib = n.memory_mib;
  spec.spill_budget_mib = n.spill_budget_mib;
  std::map<int32_t, int> by_index;  // device record index → engine index
  for (const DeviceRecord& d : n.devices) {
    // A GPU in MIG mode runs work only through its instances (NVIDIA MIG User Guide, "CUDA
    // Device Enumeration"), also while it has none.
    if (parents.contains(d.id) || d.mig_enabled) continue;
    by_index[d.index] = static_cast<int>(spec.devices.size());
    spec.devices.push_back(placement::DeviceSpec{d.id, d.model, d.physical, d.mig_profile,
                                                 EffectiveSlots(n.name, d, slots), d.healthy});
  }
  for (const LinkRecord& l : n.links) {
    auto a = by_index.find(l.a), b = by_index.find(l.b);
    if (a == by_index.end() || b == by_index.end()) continue;
    spec.links.push_back(placement::Link{a->second, b->second, ToPlacement(l.kind)});
  }
  for (const auto& [k, v] : n.labels) spec.labels.emplace_back(k, v);
  spec.capabilities = EnforcedCapabilities(n);
  return spec;
}

bool Schedulable(NodeState s) { return s == NodeState::kReady; }

}  // namespace

placement::NodeSpec ToNodeSpecForAgents(const NodeRecord& n, const DeviceSlotsBook& slots) {
  return ToNodeSpec(n, slots);
}
Result<std::unique_ptr<placement::Engine>> MakePoolEngine(const PoolRecord& rec,
                                                          const std::string& default_strategy) {
  return MakeEngine(rec, default_strategy);
}

// ---------------------------------------------------------------------------------------------
// Capacity and views

void Core::State::RecomputeLimits(PoolEntry& pool) {
  PoolLimits lim;
  for (const placement::NodeCapacity& n : pool.engine->Capacity()) {
    int32_t gpus = 0;
    for (const placement::DeviceCapacity& d : n.devices) {
      lim.largest_device.milli_tflops =
          std::max(lim.largest_device.milli_tflops, d.offered.milli_tflops);
      lim.largest_device.vram_mib = std::max(lim.largest_device.vram_mib, d.offered.vram_mib);
      lim.models.insert(d.model);
      if (!d.mig_profile.empty()) {
        lim.mig_profiles.insert(d.mig_profile);
      } else {
        ++gpus;
      }
    }
    lim.most_gpus_on_node = std::max(lim.most_gpus_on_node, gpus);
  }
  // Dynamic MIG: a GPU the pool may re-partition can serve every profile its model lays out.
  if (pool.rec.mig_relayout != MigRelayout::kOff) {
    for (const std::string& name : pool.nodes) {
      auto n = nodes.find(name);
      if (n == nodes.end()) continue;
      for (const DeviceRecord& d : n->second.rec.devices) {
        const GpuModel* model = d.mig_enabled ? MigModel(d) : nullptr;
        if (model == nullptr) continue;
        for (const MigProfile& p : model->mig_profiles) {
          if (!p.starts.empty()) lim.mig_profiles.insert(p.name);
        }
      }
    }
  }
  pool.limits = std::move(lim);
}

CapacityView Core::State::PoolCapacity(const PoolEntry& pool) const {
  CapacityView v;
  for (const placement::NodeCapacity& n : pool.engine->Capacity()) {
    ++v.nodes;
    for (const placement::DeviceCapacity& d : n.devices) {
      ++v.devices;
      v.physical += d.physical;
      v.offered += d.offered;
      v.allocated += d.allocated;
    }
  }
  return v;
}

NodeView Core::State::ViewOf(const NodeEntry& node) const {
  NodeView v;
  v.node = node.rec;
  auto pool = pools.find(node.rec.pool);
  if (pool == pools.end()) return v;
  Result<placement::NodeCapacity> cap = pool->second.engine->NodeCapacityOf(node.rec.name);
  if (!cap.ok()) return v;
  v.capacity.nodes = 1;
  for (const placement::DeviceCapacity& d : cap->devices) {
    auto idx = node.device_index.find(d.id);
    DeviceView dv;
    if (idx != node.device_index.end())
      dv.device = node.rec.devices[static_cast<size_t>(idx->second)];
    dv.device.healthy = d.healthy;
    dv.sample = samples.Find(node.rec.name, d.id);
    dv.capacity = CapacityView{d.physical, d.offered, d.allocated, 1, 1};
    v.capacity.physical += d.physical;
    v.capacity.offered += d.offered;
    v.capacity.allocated += d.allocated;
    ++v.capacity.devices;
    if (const DeviceFaultRecord* f = faults.Active(node.rec.name, dv.device.id)) dv.fault = *f;
    dv.slots = d.slots_total;
    dv.slots_used = d.slots_used;
    v.devices.push_back(std::move(dv));
  }
  v.capabilities = node.rec.capabilities;
  v.cached_images = images.ReferencesOn(node.rec.name);
  for (const DeviceRecord& d : node.rec.devices) {  // core_mig_layouts.cc
    if (!d.mig_enabled) continue;
    MigGpuView g{d, FormatMigLayout(ReportedMigLayout(node.rec, d.id)), std::nullopt, std::nullopt};
    if (const MigLayoutRecord* r = mig.Find(node.rec.name, d.id)) g.row = *r;
    if (const DeviceFaultRecord* f = faults.Active(node.rec.name, d.id)) g.fault = *f;
    v.mig_gpus.push_back(std::move(g));
  }
  v.running_tasks = static_cast<int32_t>(jobs.OnNode(node.rec.name).size());
  return v;
}

// ---------------------------------------------------------------------------------------------
// Pools

void Core::CreatePool(PoolRecord pool, Callback<PoolView> done) {
  GPUPOOL_DCHECK_ON_THREAD(s_->thread);
  if (s_->pools.contains(pool.name)) {
    done(Status::AlreadyExists("pool '" + pool.name + "' already exists"));
    return;
  }
  Result<std::unique_ptr<placement::Engine>> engine =
      MakeEngine(pool, s_->options.default_strategy);
  if (!engine.ok()) {
    done(engine.status());
    return;
  }
  pool.create_us = s_->clock->NowMicros();
  std::vector<Mutation> batch{
      UpsertPool{pool}, AppendEvent{s_->Event("pool.created", "pool/" + pool.name, "created")}};
  auto shared = std::make_shared<std::unique_ptr<placement::Engine>>(std::move(engine).value());
  s_->Persist(std::move(batch), [this, pool, shared, done = std::move(done)](Status st) {
    if (!st.ok()) {
      done(st.WithContext("pool not stored"));
      return;
    }
    PoolEntry& e = s_->pools[pool.name];
    e.rec = pool;
    e.engine = std::move(*shared);
    done(PoolView{pool, s_->PoolCapacity(e), LearnedOf(e)});
  });
}

// A new engine for `pool`'s new policy with the pool's nodes and live allocations replayed into
// it, so a change that would strand running work (say, lowering overcommit) is refused whole.
Result<std::unique_ptr<placement::Engine>> Core::State::ReplayedEngine(const PoolRecord& pool,
                                                                       const PoolEntry& cur) {
  Result<std::unique_ptr<placement::Engine>> made = MakeEngine(pool, options.default_strategy);
  if (!made.ok()) return made.status();
  std::unique_ptr<placement::Engine> engine = std::move(made).value();
  for (const std::string& n : cur.nodes) {
    const NodeEntry& node = nodes.at(n);
    Status st = engine->AddNode(ToNodeSpec(node.rec, slots));
    if (st.ok()) st = engine->SetSchedulable(n, Schedulable(node.rec.state));
    if (!st.ok()) return st;
  }
  for (int64_t id : jobs.InPool(pool.name)) {
    for (const Task& rt : jobs.at(id).tasks) {
      if (!rt.holds) continue;
      if (Status st = engine->Commit(rt.allocation); !st.ok()) {
        return Status::FailedPrecondition(
            "pool '" + pool.name +
            "': the new policy would not hold running work: " + st.message());
      }
    }
  }
  return engine;
}

// The stored policy takes over: the new engine replaces the old one, and the room held for
// preemptors (which lived in the old engine) is dropped and rebuilt in the new one from the
// victims' typed columns, so a preemptor keeps waiting for the victims it chose instead of
// preempting more tasks for the same room.
void Core::State::SwapEngine(PoolEntry& e, const PoolRecord& pool,
                             std::unique_ptr<placement::Engine> engine) {
  for (int64_t id : reservations.IdsInPool(pool.name)) {
    reservations.Find(id)->held.clear();
    DropReservation(id, "pool policy changed");
  }
  e.rec = pool;
  e.engine = std::move(engine);
  RebuildReservations(clock->NowMicros(), &pool.name);
  RecomputeLimits(e);
}

void Core::UpdatePool(PoolRecord pool, Callback<PoolView> done) {
  GPUPOOL_DCHECK_ON_THREAD(s_->thread);
  PoolEntry* cur = s_->FindPool(pool.name);
  if (cur == nullptr) {
    done(Status::NotFound("pool '" + pool.name + "' not found"));
    return;
  }
  pool.create_us = cur->rec.create_us;
  PoolRecord with_new_pins = cur->rec;
  with_new_pins.pinned_images = pool.pinned_images;
  if (with_new_pins == pool) return UpdatePoolPins(std::move(pool), std::move(done));
  Result<std::unique_ptr<placement::Engine>> engine = s_->ReplayedEngine(pool, *cur);
  if (!engine.ok()) {
    done(engine.status());
    return;
  }
  auto shared = std::make_shared<std::unique_ptr<placement::Engine>>(std::move(engine).value());
  std::vector<Mutation> batch{
      UpsertPool{pool},
      AppendEvent{s_->Event("pool.updated", "pool/" + pool.name, "policy updated")}};
  s_->Persist(std::move(batch), [this, pool, shared, done = std::move(done)](Status st) {
    PoolEntry* e = s_->FindPool(pool.name);
    if (!st.ok() || e == nullptr) {
      done(st.ok() ? Status::NotFound("pool '" + pool.name + "' was deleted") : st);
      return;
    }
    const bool pins_changed = e->rec.pinned_images != pool.pinned_images;
    s_->SwapEngine(*e, pool, std::move(*shared));
    // Stored first; a node that misses the list gets it with its next registration.
    if (pins_changed) s_->dispatcher.PinImages(pool, e->nodes);
    done(PoolView{pool, s_->PoolCapacity(*e), LearnedOf(*e)});
    s_->RequestSchedule(this);
  });
}

// Only the pinned images change: placement's policy is as it was, so the engine and the room held
// for reservations stay; the pool's nodes are told once the list is stored.
void Core::UpdatePoolPins(PoolRecord pool, Callback<PoolView> done) {
  const std::string what = pool.pinned_images.empty()
                               ? std::string("no image pinned")
                               : std::to_string(pool.pinned_images.size()) + " image(s) pinned";
  std::vector<Mutation> batch{UpsertPool{pool},
                              AppendEvent{s_->Event("pool.updated", "pool/" + pool.name, what)}};
  s_->Persist(std::move(batch), [this, pool, done = std::move(done)](Status st) {
    PoolEntry* e = s_->FindPool(pool.name);
    if (!st.ok() || e == nullptr) {
      done(st.ok() ? Status::NotFound("pool '" + pool.name + "' was deleted") : st);
      return;
    }
    const bool changed = e->rec.pinned_images != pool.pinned_images;
    e->rec.pinned_images = pool.pinned_images;
    if (changed) s_->dispatcher.PinImages(e->rec, e->nodes);
    done(PoolView{e->rec, s_->PoolCapacity(*e), LearnedOf(*e)});
  });
}

void Core::DeletePool(const std::string& name, Callback<bool> done) {
  GPUPOOL_DCHECK_ON_THREAD(s_->thread);
  PoolEntry* pool = s_->FindPool(name);
  if (pool == nullptr) {
    done(Status::NotFound("pool '" + name + "' not found"));
    return;
  }
  if (!pool->nodes.empty()) {
    done(Status::FailedPrecondition("pool '" + name + "' still has " +
                                    std::to_string(pool->nodes.size()) +
                                    " node(s); move or remove them first"));
    return;
  }
  for (int64_t id : s_->jobs.InPool(name)) {
    if (!IsTerminal(s_->jobs.at(id).head.state)) {
      done(Status::FailedPrecondition("pool '" + name + "' still has unfinished job " +
                                      std::to_string(id)));
      return;
    }
  }
  std::vector<Mutation> batch{gpupool::DeletePool{name},
                              AppendEvent{s_->Event("pool.deleted", "pool/" + name, "deleted")}};
  std::vector<std::string> quota_tenants;  // the pool's quotas go with it
  for (const auto& [key, q] : s_->book.quotas()) {
    if (q.pool == name) quota_tenants.push_back(q.tenant);
  }
  for (const std::string& t : quota_tenants) batch.emplace_back(gpupool::DeleteQuota{t, name});
  s_->Persist(std::move(batch), [this, name, quota_tenants, done = std::move(done)](Status st) {
    if (!st.ok()) {
      done(st.WithContext("pool not deleted"));
      return;
    }
    for (const std::string& t : quota_tenants) s_->book.EraseQuota(t, name);
    s_->pools.erase(name);
    done(true);
  });
}

Result<PoolView> Core::GetPool(const std::string& name) const {
  GPUPOOL_DCHECK_ON_THREAD(s_->thread);
  const PoolEntry* pool = s_->FindPool(name);
  if (pool == nullptr) return Status::NotFound("pool '" + name + "' not found");
  return PoolView{pool->rec, s_->PoolCapacity(*pool), LearnedOf(*pool)};
}

std::vector<PoolView> Core::ListPools() const {
  GPUPOOL_DCHECK_ON_THREAD(s_->thread);
  std::vector<PoolView> out;
  for (const auto& [name, pool] : s_->pools)
    out.push_back({pool.rec, s_->PoolCapacity(pool), LearnedOf(pool)});
  return out;
}

// ---------------------------------------------------------------------------------------------
// Recovery

placement::Allocation Core::State::AllocationOf(const JobEntry& job, const TaskRecord& t) const {
  placement::Allocation a;
  a.node = t.node;
  a.cpu_milli = job.request.cpu_milli;
  a.memory_mib = job.request.memory_mib;
  // The engine indexes devices in the order AddNode saw them (MIG parents left out): read that
  // order once for the node rather than once per grant.
  std::map<std::string, int> engine_index;
  if (auto p = pools.find(job.head.spec.pool); p != pools.end()) {
    Result<placement::NodeCapacity> cap = p->second.engine->NodeCapacityOf(t.node);
    if (cap.ok()) {
      for (size_t i = 0; i < cap->devices.size(); ++i) {
        engine_index[cap->devices[i].id] = static_cast<int>(i);
      }
    }
  }
  for (const Allocation& g : t.allocations) {
    placement::Grant grant;
    grant.device_id = g.device_id;
    grant.amount = g.amount;
    grant.slots = g.slots;
    grant.exclusive = g.exclusive;
    if (auto idx = engine_index.find(g.device_id); idx != engine_index.end()) {
      grant.device_index = idx->second;
    }
    a.grants.push_back(std::move(grant));
  }
  return a;
}

}  // namespace gpupool
