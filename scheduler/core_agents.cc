// Core: agent registration and reconciliation, heartbeats, task reports, and the periodic tick.
#include <set>

#include "base/log.h"
#include "scheduler/core.h"
#include "scheduler/core_state.h"
#include "scheduler/node_lease.h"

namespace gpupool {
namespace {

bool SameHardware(const NodeRecord& a, const NodeRecord& b) {
  // What the agent enforces decides which work the node may take, so a change rebuilds it too.
  return a.devices == b.devices && a.links == b.links && a.cpu_milli == b.cpu_milli &&
         a.memory_mib == b.memory_mib && a.spill_budget_mib == b.spill_budget_mib &&
         EnforcedCapabilities(a) == EnforcedCapabilities(b);
}

}  // namespace

// Checks a registering node against what the core knows and sets the state it registers with:
// an admin's cordon or drain survives reconnects; a lost node comes back ready.
Status Core::State::PrepareRegistration(NodeRecord& n) const {
  if (pools.find(n.pool) == pools.end()) {
    return Status::NotFound("node '" + n.name + "': pool '" + n.pool + "' not found");
  }
  auto existing = nodes.find(n.name);
  if (existing != nodes.end() && existing->second.rec.pool != n.pool) {
    return Status::FailedPrecondition("node '" + n.name + "' belongs to pool '" +
                                      existing->second.rec.pool + "', not '" + n.pool + "'");
  }
  n.state = NodeState::kReady;
  if (existing != nodes.end() && (existing->second.rec.state == NodeState::kCordoned ||
                                  existing->second.rec.state == NodeState::kDraining)) {
    n.state = existing->second.rec.state;
  }
  n.last_heartbeat_us = clock->NowMicros();
  return Status::Ok();
}

// Once the node is stored: memory and engine follow, the agent is answered with what to stop,
// and only after the answer are the starts it never received sent again.
void Core::AnswerRegistration(const AgentRegistration& reg,
                              const Callback<RegistrationResult>& done) {
  if (Status applied = ApplyRegistration(reg.node); !applied.ok()) return done(applied);
  OnDeviceFaults(reg.node.name, reg.faults);
  SettleMigLayouts(reg);  // core_mig_layouts.cc
  RegistrationResult result;
  result.epoch = s_->epoch;
  result.heartbeat_interval_ms = s_->options.heartbeat_interval_ms;
  result.lease_ms = NodeLeaseMs(s_->options);
  result.lease_stop_grace_ms = s_->options.node_lease_stop_grace_ms;
  if (const PoolEntry* pool = s_->FindPool(reg.node.pool); pool != nullptr) {
    result.pinned_images = pool->rec.pinned_images;
  }
  std::vector<std::pair<int64_t, int32_t>> resend;
  Reconcile(reg, &result.stop_task_ids, &resend);
  done(result);
  for (const auto& [job_id, index] : resend) {
    JobEntry* job = s_->jobs.Find(job_id);
    if (job != nullptr) s_->dispatcher.Start(*job, index);
  }
  s_->RequestSchedule(this);
}

void Core::OnAgentRegister(AgentRegistration reg, Callback<RegistrationResult> done) {
  GPUPOOL_DCHECK_ON_THREAD(s_->thread);
  NodeRecord& n = reg.node;
  if (Status st = s_->PrepareRegistration(n); !st.ok()) {
    done(st);
    return;
  }
  n.capabilities = reg.capabilities;  // stored with the node: shown while the agent is away
  std::vector<Mutation> batch{
      UpsertNode{n}, AppendEvent{s_->Event("node.registered", "node/" + n.name,
                                           std::to_string(n.devices.size()) + " device(s)")}};
  s_->Persist(std::move(batch), [this, reg = std::move(reg), done = std::move(done)](Status st) {
    if (!st.ok()) {
      done(st.WithContext("node not stored"));
      return;
    }
    AnswerRegistration(reg, done);
  });
}

// The hardware of a known node changed (a GPU vanished, MIG re-partitioned): the node leaves the
// engine, and the room held there goes with it (reservations dropped, tasks no longer holding).
Status Core::State::ForgetNodeRoom(PoolEntry& pool, const std::string& name) {
  GPUPOOL_RETURN_IF_ERROR(pool.engine->RemoveNode(name));
  for (int64_t id : reservations.IdsOnNode(name)) {
    reservations.Find(id)->held.clear();
    DropReservation(id, "devices changed on node " + name);
  }
  for (const auto& [id, i] : jobs.OnNode(name)) {  // holding room there ⇒ placed there
    Task& rt = jobs.at(id).task(i);
    if (rt.holds && rt.allocation.node == name) rt.holds = false;
  }
  return Status::Ok();
}

// After ForgetNodeRoom and the node's re-adding: re-commits what still fits on its new
// hardware; tasks whose devices are gone are lost (requeued or failed).
void Core::State::RecommitTasks(Core* core, PoolEntry& pool, const std::string& name) {
  std::vector<TaskChange> repairs;
  for (const auto& [id, i] : jobs.OnNode(name)) {  // SCHEDULED or RUNNING there
    JobEntry& job = jobs.at(id);
    Task& rt = job.task(i);
    if (rt.holds || rt.changing) continue;
    rt.allocation = AllocationOf(job, rt.rec);
    if (pool.engine->Commit(rt.allocation).ok()) {
      rt.holds = true;
    } else {
      if (running > 0) --running;
      repairs.push_back(PlanRequeueOrFail(job, i, "devices changed on node " + name));
    }
  }
  if (!repairs.empty()) CommitTaskChanges(core, std::move(repairs));
}

Status Core::ApplyRegistration(const NodeRecord& n) {
  GPUPOOL_DCHECK_ON_THREAD(s_->thread);
  PoolEntry* pool = s_->FindPool(n.pool);
  if (pool == nullptr) return Status::NotFound("pool '" + n.pool + "' not found");
  auto it = s_->nodes.find(n.name);
  bool fresh = it == s_->nodes.end();
  bool rebuild = !fresh && !SameHardware(it->second.rec, n);
  NodeEntry& e = s_->nodes[n.name];
  e.rec = n;
  e.last_seen_us = s_->clock->MonotonicMicros();
  e.tasks_released = false;
  e.device_index.clear();
  for (size_t i = 0; i < n.devices.size(); ++i)
    e.device_index[n.devices[i].id] = static_cast<int>(i);
  if (rebuild) GPUPOOL_RETURN_IF_ERROR(s_->ForgetNodeRoom(*pool, n.name));
  if (fresh || rebuild) {
    GPUPOOL_RETURN_IF_ERROR(pool->engine->AddNode(ToNodeSpecForAgents(n, s_->slots)));
    pool->nodes.insert(n.name);
  }
  if (rebuild) s_->RecommitTasks(this, *pool, n.name);
  GPUPOOL_RETURN_IF_ERROR(pool->engine->SetSchedulable(n.name, n.state == NodeState::kReady));
  s_->ApplyDeviceHealth(*pool, e);
  s_->RecomputeLimits(*pool);
  return Status::Ok();
}

void Core::Reconcile(const AgentRegistration& reg, std::vector<std::string>* stop,
                     std::vector<std::pair<int64_t, int32_t>>* resend) {
  GPUPOOL_DCHECK_ON_THREAD(s_->thread);
  const std::string& node = reg.node.name;
  std::set<std::pair<std::string, int32_t>> reported;
  for (const AgentRegistration::Running& r : reg.running) {
    reported.emplace(r.task_id, r.attempt);
    int32_t index = 0;
    JobEntry* job = s_->jobs.FindTask(r.task_id, &index);
    const TaskRecord* t = job ? &job->task(index).rec : nullptr;
    bool known = t != nullptr && t->node == node && t->attempt == r.attempt &&
                 (t->state == TaskState::kScheduled || t->state == TaskState::kRunning);
    if (!known) stop->push_back(r.task_id);
  }
  std::vector<TaskChange> repairs;
  // What the core placed there (a task reported but not placed there is in `stop` already).
  for (const auto& [id, i] : s_->jobs.OnNode(node)) {
    JobEntry& job = s_->jobs.at(id);
    const TaskRecord& t = job.task(i).rec;
    if (job.task(i).changing) continue;
    bool is_reported = reported.contains({TaskId(id, i), t.attempt});
    if (t.state == TaskState::kScheduled && !is_reported) {
      if (!job.task(i).committing) resend->emplace_back(id, i);
    } else if (t.state == TaskState::kRunning && !is_reported) {
      repairs.push_back(s_->PlanRequeueOrFail(job, i, "agent on " + node + " no longer runs it"));
    } else if (is_reported && t.stop != StopIntent::kNone) {
      s_->dispatcher.Stop(job, i, "stop requested before reconnect");  // the stop is stored already
    }
  }
  if (!repairs.empty()) s_->CommitTaskChanges(this, std::move(repairs));
}

void Core::OnNodeImages(const std::string& node, const std::vector<NodeImage>& images) {
  GPUPOOL_DCHECK_ON_THREAD(s_->thread);
  if (!s_->nodes.contains(node)) return;
  s_->images.Report(node, images);
}

void Core::OnHeartbeat(const std::string& node, const std::vector<DeviceHealth>& devices) {
  GPUPOOL_DCHECK_ON_THREAD(s_->thread);
  auto it = s_->nodes.find(node);
  if (it == s_->nodes.end()) return;
  NodeEntry& e = it->second;
  e.last_seen_us = s_->clock->MonotonicMicros();
  e.rec.last_heartbeat_us = s_->clock->NowMicros();
  PoolEntry* pool = s_->FindPool(e.rec.pool);
  if (pool == nullptr) return;
  std::vector<DeviceFaultReport> faults;
  for (const DeviceHealth& d : devices) {
    if (d.fault.fault_id > 0) faults.push_back(d.fault);
    auto idx = e.device_index.find(d.id);
    if (idx == e.device_index.end()) continue;
    if (d.sample) {
      DeviceSample sample = *d.sample;
      sample.time_us = e.rec.last_heartbeat_us;
      s_->samples.Put(node, d.id, sample);
    }
    DeviceRecord& rec = e.rec.devices[static_cast<size_t>(idx->second)];
    if (rec.healthy == d.healthy) continue;
    rec.healthy = d.healthy;
    const bool faulted = s_->faults.Active(node, d.id) != nullptr;  // core_device_faults.cc
    const bool held = !rec.parent_id.empty() && s_->mig.HoldsOut(node, rec.parent_id);
    (void)pool->engine->SetDeviceHealthy(node, d.id, d.healthy && !faulted && !held);
    LogWarn("core", d.healthy ? "device healthy again" : "device unhealthy",
            {{"node", node}, {"device", d.id}});
  }
  if (!faults.empty()) OnDeviceFaults(node, faults);
}

// RUNNING is not an end: memory moves on at once and the row follows (written again from memory
// if the store refuses it). Nothing is acknowledged to a client by it.
void Core::State::MarkRunning(JobEntry& job, int32_t index, const std::string& task_id,
                              const std::vector<TaskEndpoint>& endpoints) {
  TaskRecord& t = job.task(index).rec;
  if (t.state == TaskState::kRunning) return;
  std::vector<Mutation> batch;
  t.state = TaskState::kRunning;
  t.pull = {};              // pulled
  t.endpoints = endpoints;  // stored with RUNNING
  t.started_us = clock->NowMicros();
  jobs.Reindex(job, index);
  t.reason = "running on " + t.node;
  if (metrics != nullptr) metrics->TaskTransition("RUNNING");
  batch.emplace_back(UpdateTask{t});
  if (RefreshJobState(job))
    batch.emplace_back(UpdateJob{job.head.id, job.head.state, job.head.reason, 0});
  Notify(job, "task " + task_id + ": RUNNING on " + t.node);
  PersistOrRetry(std::move(batch));
}

// What an end the agent reports means for the task: requeued (preempted, drained, a device fault,
// a lapsed lease) or finished, by its stop intent first.
TaskChange Core::State::PlanEnd(const JobEntry& job, int32_t index, const TaskReport& r) const {
  const TaskRecord& t = job.task(index).rec;
  if (t.stop == StopIntent::kPreempt && r.state != TaskState::kSucceeded) {
    return PlanRequeuePreempted(job, index);
  }
  if (t.stop == StopIntent::kDrain || (r.device_fault && r.state == TaskState::kFailed)) {
    return PlanRequeueOrFail(job, index, r.reason.empty() ? "stopped for requeue" : r.reason);
  }
  if (t.stop == StopIntent::kCancel || CancelRequested(job.head.state)) {
    return PlanFinish(job, index, TaskState::kCancelled, "cancelled", r.exit_code);
  }
  if (r.lease_expired && r.state != TaskState::kSucceeded) {
    // Its node stopped it because the node lease lapsed: not the task's failure (docs/ha.md).
    return PlanRequeueOrFail(job, index, "stopped on " + t.node + ": node lease lapsed");
  }
  std::string why = r.reason;
  if (why.empty()) {
    why = r.signal != 0 ? "killed by signal " + std::to_string(r.signal)
                        : "exit code " + std::to_string(r.exit_code);
  }
  if (r.oom) why += " (out of memory)";
  TaskState end = r.state == TaskState::kSucceeded ? TaskState::kSucceeded : TaskState::kFailed;
  if (r.state == TaskState::kCancelled) end = TaskState::kCancelled;
  return PlanFinish(job, index, end, why, r.exit_code);
}

// The node's image pull for a task it has not started (docs/images.md, "Cold start"): kept in
// memory for the API and told to the job's watchers; nothing is stored, nothing changes state.
void Core::NotePull(JobEntry& job, int32_t index, const TaskReport& r) {
  TaskRecord& t = job.task(index).rec;
  if (t.state != TaskState::kScheduled) return;  // RUNNING already: a late progress report
  t.pull = r.pull;
  t.pull.attempt = r.attempt;
  char mib[64];
  std::snprintf(mib, sizeof(mib), "%.1f of %.1f MiB",
                static_cast<double>(r.pull.bytes_done) / (1 << 20),
                static_cast<double>(r.pull.bytes_total) / (1 << 20));
  s_->Notify(job, "task " + r.task_id + ": PULLING " + r.pull.image + " on " + t.node + ", " + mib);
}

void Core::OnTaskReport(const TaskReport& r) {
  GPUPOOL_DCHECK_ON_THREAD(s_->thread);
  int32_t index = 0;
  JobEntry* job = s_->jobs.FindTask(r.task_id, &index);
  if (job == nullptr) return;
  const Task& rt = job->task(index);
  const TaskRecord& t = rt.rec;
  // Reports of an older attempt, another node, or a finished task are stale.
  if (t.attempt != r.attempt || t.node != r.node ||
      (t.state != TaskState::kScheduled && t.state != TaskState::kRunning)) {
    return;
  }
  if (rt.changing) return;  // its end is being stored already
  if (r.state == TaskState::kScheduled) return NotePull(*job, index, r);
  if (r.state == TaskState::kRunning) {
    return s_->MarkRunning(*job, index, r.task_id, r.endpoints);
  }
  // An end: planned now, applied once stored (core_change.cc).
  TaskChange change = s_->PlanEnd(*job, index, r);
  change.after.usage = r.usage;  // the ended attempt's, kept with the task (also when requeued)
  change.usage_reported = true;  // and its last ledger interval carries it (core_metering.cc)
  s_->CommitTaskChanges(this, {std::move(change)});
}

void Core::Tick() {
  GPUPOOL_DCHECK_ON_THREAD(s_->thread);
  int64_t now = s_->clock->MonotonicMicros();
  int64_t timeout_us = s_->options.heartbeat_timeout_ms * 1000;
  s_->RetryUnstored(this);
  std::vector<Mutation> batch;
  for (auto& [name, node] : s_->nodes) {
    if (node.rec.state == NodeState::kNotReady || now - node.last_seen_us <= timeout_us) continue;
    LogWarn("core", "node silent past heartbeat timeout; marking NOT_READY",
            {{"node", name}, {"silent_ms", std::to_string((now - node.last_seen_us) / 1000)}});
    node.rec.state = NodeState::kNotReady;
    PoolEntry* pool = s_->FindPool(node.rec.pool);
    if (pool != nullptr) (void)pool->engine->SetSchedulable(name, false);
    batch.emplace_back(gpupool::SetNodeState{name, NodeState::kNotReady});
    batch.emplace_back(
        AppendEvent{s_->Event("node.lost", "node/" + name,
                              "no heartbeat for " + std::to_string(timeout_us / 1000000) + "s")});
  }
  if (!batch.empty()) s_->PersistOrRetry(std::move(batch));
  // Its tasks are started elsewhere only once the node's lease has certainly lapsed.
  ReleaseLapsedNodes();
  // 2,000 jobs a tick: a table of millions is swept in minutes, at ~0.1 ms a tick.
  s_->EvictFinished(s_->clock->NowMicros(), 2000);
  s_->MeterTick(this);  // core_metering.cc: closes the intervals of running attempts
  PlanMigLayouts();     // core_mig_layouts.cc
  if (s_->metrics != nullptr) PublishMetrics();
  if ((!s_->queue.empty() && s_->PeriodicPassDue()) || !s_->reservations.empty()) {
    s_->RequestSchedule(this);
  }
}

void Core::PublishMetrics() {
  GPUPOOL_DCHECK_ON_THREAD(s_->thread);
  for (const auto& [name, pool] : s_->pools) {
    CapacityView c = s_->PoolCapacity(pool);
    s_->metrics->PoolCapacity(name, c.physical, c.offered, c.allocated);
    std::map<std::string, int> by_state;
    for (const std::string& n : pool.nodes)
      by_state[std::string(ToString(s_->nodes.at(n).rec.state))]++;
    for (NodeState st :
         {NodeState::kReady, NodeState::kNotReady, NodeState::kCordoned, NodeState::kDraining}) {
      s_->metrics->Nodes(name, std::string(ToString(st)), by_state[std::string(ToString(st))]);
    }
  }
  std::map<std::pair<std::string, std::string>, int> depth;
  for (const auto& [name, pool] : s_->pools) {
    for (const auto& [cls, _] : s_->options.priority_classes) depth[{name, cls}] = 0;
  }
  for (const auto& [key, d] : s_->queue.depth()) depth[key] = d;
  for (const auto& [key, d] : depth) s_->metrics->QueueDepth(key.first, key.second, d);
  s_->PublishTenantMetrics();
}

}  // namespace gpupool
