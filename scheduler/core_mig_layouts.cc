// Core: dynamic MIG (issue 27; docs/placement.md, "Dynamic MIG"). A GPU's layout changes only
// while none of its instances runs a task, and only through a stored MigLayoutRecord: the row is
// stored (with an event) while the GPU's instances are out of placement, and only then is the
// agent asked. The agent's next registration settles the row (mig_layouts.h). The pool's policy
// lets the scheduler choose layouts itself for the MIG work that found no room
// (mig_planner.h); an admin may set one whatever the policy.
#include "base/log.h"
#include "scheduler/core.h"
#include "scheduler/core_state.h"
#include "scheduler/mig_planner.h"

namespace gpupool {
namespace {

constexpr int64_t kMigFailureBackoffUs = 10LL * 60 * 1'000'000;  // 10 minutes

std::string Describe(const MigLayoutRecord& r) {
  return "MIG layout " + (r.layout.empty() ? std::string("(no instance)") : r.layout) + " " +
         std::string(ToString(r.state)) + " (generation " + std::to_string(r.generation) +
         (r.reason.empty() ? std::string(")") : "): " + r.reason);
}

}  // namespace

const GpuModel* Core::State::MigModel(const DeviceRecord& gpu) const {
  const Catalog& catalog = options.catalog != nullptr ? *options.catalog : Catalog::Builtin();
  const GpuModel* model = catalog.Find(gpu.model);
  if (model == nullptr) return nullptr;
  for (const MigProfile& p : model->mig_profiles) {
    if (p.memory_slices > 0 && !p.starts.empty()) return model;
  }
  return nullptr;  // the catalog states no placement rule: layouts cannot be planned
}

int32_t Core::State::BusyMigInstances(const PoolEntry& pool, const NodeEntry& node,
                                      const std::string& gpu) const {
  Result<placement::NodeCapacity> cap = pool.engine->NodeCapacityOf(node.rec.name);
  if (!cap.ok()) return 0;
  int32_t busy = 0;
  for (const placement::DeviceCapacity& d : cap->devices) {
    auto idx = node.device_index.find(d.id);
    if (idx == node.device_index.end()) continue;
    if (node.rec.devices[static_cast<size_t>(idx->second)].parent_id != gpu) continue;
    if (d.slots_used > 0 || d.exclusive_taken || !d.allocated.IsZero()) ++busy;
  }
  return busy;
}

void Core::State::ApplyDeviceHealth(PoolEntry& pool, const NodeEntry& node) {
  for (const DeviceRecord& d : node.rec.devices) {
    const bool faulted = faults.Active(node.rec.name, d.id) != nullptr;  // core_device_faults.cc
    const bool held = !d.parent_id.empty() && mig.HoldsOut(node.rec.name, d.parent_id);
    (void)pool.engine->SetDeviceHealthy(node.rec.name, d.id, d.healthy && !faulted && !held);
  }
}

// Stores `rows` (with an event each), then applies them: the book, the devices' health, and the
// agents asked for `ask`'s layouts. A refused write changes nothing: the rows stay as they were
// and are planned again later.
void Core::State::StoreMigLayouts(Core* core, std::vector<MigLayoutRecord> rows,
                                  std::vector<MigLayoutRecord> ask,
                                  std::function<void(Status)> then) {
  std::vector<Mutation> batch;
  for (const MigLayoutRecord& r : rows) {
    batch.emplace_back(PutMigLayout{r});
    batch.emplace_back(
        AppendEvent{Event("device.mig_layout", "node/" + r.node + "/" + r.gpu, Describe(r))});
  }
  // Held out before the write, so nothing lands on an instance about to go.
  for (const MigLayoutRecord& r : rows) {
    if (r.state != MigLayoutState::kApplying && r.state != MigLayoutState::kDraining) continue;
    auto n = nodes.find(r.node);
    PoolEntry* pool = n == nodes.end() ? nullptr : FindPool(n->second.rec.pool);
    if (pool == nullptr) continue;
    for (const DeviceRecord& d : n->second.rec.devices) {
      if (d.parent_id == r.gpu) (void)pool->engine->SetDeviceHealthy(r.node, d.id, false);
    }
  }
  auto apply = [this, core, rows, ask = std::move(ask), then = std::move(then)](Status st) {
    if (st.ok()) {
      for (const MigLayoutRecord& r : rows) {
        mig.Put(r);
        LogInfo("core", "MIG layout stored",
                {{"node", r.node},
                 {"gpu", r.gpu},
                 {"layout", r.layout},
                 {"state", std::string(ToString(r.state))},
                 {"generation", std::to_string(r.generation)},
                 {"by", r.set_by}});
      }
    } else {
      LogWarn("core", "MIG layout not stored", {{"error", st.message()}});
    }
    std::set<std::string> touched;
    for (const MigLayoutRecord& r : rows) touched.insert(r.node);
    for (const std::string& name : touched) {
      auto n = nodes.find(name);
      PoolEntry* pool = n == nodes.end() ? nullptr : FindPool(n->second.rec.pool);
      if (pool != nullptr) ApplyDeviceHealth(*pool, n->second);
    }
    if (st.ok()) {
      for (const MigLayoutRecord& r : ask) dispatcher.SetMigLayout(*mig.Find(r.node, r.gpu));
      RequestSchedule(core);
    }
    if (then) then(st);
  };
  if (batch.empty()) return apply(Status::Ok());
  Persist(std::move(batch), std::move(apply));
}

void Core::SetMigLayout(const std::string& node, const std::string& gpu, const std::string& layout,
                        const std::string& by, Callback<NodeView> done) {
  GPUPOOL_DCHECK_ON_THREAD(s_->thread);
  auto n = s_->nodes.find(node);
  if (n == s_->nodes.end()) return done(Status::NotFound("node '" + node + "' not found"));
  const NodeEntry& entry = n->second;
  auto idx = entry.device_index.find(gpu);
  if (idx == entry.device_index.end())
    return done(Status::NotFound("node '" + node + "': no device '" + gpu + "'"));
  const DeviceRecord& d = entry.rec.devices[static_cast<size_t>(idx->second)];
  if (!d.parent_id.empty()) {
    return done(Status::FailedPrecondition("device '" + gpu +
                                           "' is a MIG instance; set the layout "
                                           "of its GPU " +
                                           d.parent_id));
  }
  if (!d.mig_enabled) {
    return done(
        Status::FailedPrecondition("GPU '" + gpu + "' on node '" + node +
                                   "' is not in MIG mode (enable it on the node: nvidia-smi -i " +
                                   std::to_string(d.index) + " -mig 1)"));
  }
  const GpuModel* model = s_->MigModel(d);
  if (model == nullptr) {
    return done(Status::FailedPrecondition("GPU model '" + d.model +
                                           "' has no MIG placement rules in the catalog"));
  }
  Result<MigLayout> parsed = ParseMigLayout(*model, layout);
  if (!parsed.ok()) return done(Status::InvalidArgument("layout: " + parsed.status().message()));
  PoolEntry* pool = s_->FindPool(entry.rec.pool);
  if (pool == nullptr)
    return done(Status::FailedPrecondition("node '" + node + "' is in no known pool"));
  if (const MigLayoutRecord* row = s_->mig.Find(node, gpu);
      row != nullptr && s_->mig.HoldsOut(node, gpu)) {
    return done(Status::FailedPrecondition("GPU '" + gpu + "': a re-layout is under way (" +
                                           Describe(*row) + "); wait for it to settle"));
  }
  if (int32_t busy = s_->BusyMigInstances(*pool, entry, gpu); busy > 0) {
    return done(Status::FailedPrecondition(
        "GPU '" + gpu + "' has " + std::to_string(busy) +
        " MIG instance(s) running work; its layout changes only while it is idle (drain it "
        "first)"));
  }
  const std::string wanted = FormatMigLayout(*parsed);
  const MigLayoutRecord* row = s_->mig.Find(node, gpu);
  if (FormatMigLayout(ReportedMigLayout(entry.rec, gpu)) == wanted &&
      (row == nullptr || row->layout == wanted)) {
    return done(s_->ViewOf(entry));  // already laid out so
  }
  const std::string who = by.empty() ? std::string("an admin") : by;
  MigLayoutRecord next = s_->mig.Next(node, gpu, *parsed, MigLayoutState::kApplying,
                                      "set by " + who, by, s_->clock->NowMicros());
  s_->StoreMigLayouts(this, {next}, {next}, [this, node, done = std::move(done)](Status st) {
    if (!st.ok()) return done(st.WithContext("MIG layout not set"));
    done(GetNode(node));
  });
}

void Core::SettleMigLayouts(const AgentRegistration& reg) {
  auto n = s_->nodes.find(reg.node.name);
  if (n == s_->nodes.end()) return;
  PoolEntry* pool = s_->FindPool(n->second.rec.pool);
  if (pool == nullptr) return;
  const NodeEntry& entry = n->second;
  MigLayoutBook::Settlement s = s_->mig.Settle(
      entry.rec, reg.mig_outcomes,
      [&](const std::string& gpu) { return s_->BusyMigInstances(*pool, entry, gpu) > 0; },
      s_->clock->NowMicros());
  if (s.store.empty() && s.ask.empty()) return;
  std::vector<DeviceFaultReport> faults;
  // The fault's id is when the failure was stored: raised once, not again once cleared.
  for (const MigLayoutRecord& r : s.faulted)
    faults.push_back({r.gpu, r.reason, r.updated_us > 0 ? r.updated_us : r.generation});
  const std::string name = reg.node.name;
  s_->StoreMigLayouts(this, std::move(s.store), std::move(s.ask),
                      [this, name, faults = std::move(faults)](Status st) {
                        if (st.ok() && !faults.empty()) OnDeviceFaults(name, faults);
                      });
}

void Core::PlanMigLayouts() {
  const int64_t now = s_->clock->NowMicros();
  const int64_t cooldown_us = s_->options.mig_relayout_cooldown_ms * 1000;
  std::vector<MigLayoutRecord> store, ask;
  for (auto& [pool_name, pool] : s_->pools) {
    if (pool.rec.mig_relayout == MigRelayout::kOff) continue;
    MigPlanInput in;
    in.policy = pool.rec.mig_relayout;
    in.now_us = now;
    in.cooldown_us = cooldown_us;
    if (auto w = s_->mig_waiting.find(pool_name); w != s_->mig_waiting.end())
      in.waiting = w->second;
    for (const placement::LearnedClass& c : pool.workload.model().Classes()) {
      if (c.shape.kind == placement::RequestKind::kMig && !c.prior)
        in.mix.emplace_back(c.shape.mig_profile, c.weight);
    }
    for (const std::string& name : pool.nodes) {
      const NodeEntry& node = s_->nodes.at(name);
      const bool ready = node.rec.state == NodeState::kReady;
      for (const DeviceRecord& d : node.rec.devices) {
        if (!d.mig_enabled || !d.healthy || s_->faults.Active(name, d.id) != nullptr) continue;
        const MigLayoutRecord* row = s_->mig.Find(name, d.id);
        const int32_t busy = s_->BusyMigInstances(pool, node, d.id);
        if (row != nullptr && row->state == MigLayoutState::kDraining) {
          if (busy == 0 && ready) {  // drained: re-laid out now
            MigLayoutRecord next = *row;
            next.generation = row->generation + 1;
            next.state = MigLayoutState::kApplying;
            next.updated_us = now;
            store.push_back(next);
            ask.push_back(next);
          }
          continue;
        }
        if (!ready || s_->mig.HoldsOut(name, d.id) || in.waiting.empty()) continue;
        // A GPU whose last layout failed is left alone for a while: the driver that refused
        // it would most likely refuse the next one too, and every try empties the GPU.
        if (row != nullptr && row->state == MigLayoutState::kFailed &&
            now - row->updated_us < kMigFailureBackoffUs)
          continue;
        MigGpu g;
        g.node = name;
        g.gpu = d.id;
        g.model = s_->MigModel(d);
        g.current = ReportedMigLayout(node.rec, d.id);
        g.busy_instances = busy;
        g.last_change_us = row != nullptr ? row->updated_us : 0;
        if (g.model != nullptr) in.gpus.push_back(std::move(g));
      }
    }
    for (MigRelayoutChoice& c : PlanMigRelayouts(in)) {
      MigLayoutRecord next = s_->mig.Next(
          c.node, c.gpu, c.layout, c.drain ? MigLayoutState::kDraining : MigLayoutState::kApplying,
          std::move(c.reason), "scheduler", now);
      if (!c.drain) ask.push_back(next);
      store.push_back(std::move(next));
    }
  }
  if (store.empty()) return;
  // Planned again from the next full pass's demand, not from this one's.
  s_->mig_waiting.clear();
  s_->StoreMigLayouts(this, std::move(store), std::move(ask), nullptr);
}

}  // namespace gpupool
