// Core: agent registration and reconciliation, heartbeats, task reports, and the periodic tick.
#include <set>

#include "base/log.h"
#include "scheduler/core.h"
#include "scheduler/core_state.h"

namespace gpupool {
namespace {

bool SameHardware(const NodeRecord& a, const NodeRecord& b) {
  return a.devices == b.devices && a.links == b.links && a.cpu_milli == b.cpu_milli &&
         a.memory_mib == b.memory_mib && a.spill_budget_mib == b.spill_budget_mib;
}

}  // namespace

// Declared in core_inventory.cc.
placement::NodeSpec ToNodeSpecForAgents(const NodeRecord& n);

void Core::OnAgentRegister(AgentRegistration reg, Callback<RegistrationResult> done) {
  GPUPOOL_DCHECK_ON_THREAD(s_->thread);
  NodeRecord& n = reg.node;
  PoolEntry* pool = s_->FindPool(n.pool);
  if (pool == nullptr) {
    done(Status::NotFound("node '" + n.name + "': pool '" + n.pool + "' not found"));
    return;
  }
  auto existing = s_->nodes.find(n.name);
  if (existing != s_->nodes.end() && existing->second.rec.pool != n.pool) {
    done(Status::FailedPrecondition("node '" + n.name + "' belongs to pool '" +
                                    existing->second.rec.pool + "', not '" + n.pool + "'"));
    return;
  }
  // An admin's cordon or drain survives reconnects; a lost node comes back ready.
  n.state = NodeState::kReady;
  if (existing != s_->nodes.end() && (existing->second.rec.state == NodeState::kCordoned ||
                                      existing->second.rec.state == NodeState::kDraining)) {
    n.state = existing->second.rec.state;
  }
  n.last_heartbeat_us = s_->clock->NowMicros();
  std::vector<Mutation> batch{
      UpsertNode{n}, AppendEvent{s_->Event("node.registered", "node/" + n.name,
                                           std::to_string(n.devices.size()) + " device(s)")}};
  s_->Persist(std::move(batch), [this, reg = std::move(reg), done = std::move(done)](Status st) {
    if (!st.ok()) {
      done(st.WithContext("node not stored"));
      return;
    }
    Status applied = ApplyRegistration(reg.node);
    if (!applied.ok()) {
      done(applied);
      return;
    }
    s_->faults.SetCapabilities(reg.node.name, reg.capabilities);
    OnDeviceFaults(reg.node.name, reg.faults);
    RegistrationResult result;
    result.epoch = s_->epoch;
    result.heartbeat_interval_ms = s_->options.heartbeat_interval_ms;
    result.lease_ms = s_->options.heartbeat_timeout_ms;
    result.lease_stop_grace_ms = s_->options.node_lease_stop_grace_ms;
    std::vector<std::pair<int64_t, int32_t>> resend;
    Reconcile(reg, &result.stop_task_ids, &resend);
    done(result);
    // After the ack: re-send starts the agent never received.
    for (const auto& [job_id, index] : resend) {
      JobEntry* job = s_->jobs.Find(job_id);
      if (job != nullptr) s_->dispatcher.Start(*job, index);
    }
    s_->RequestSchedule(this);
  });
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
  if (rebuild) {
    // The hardware changed (a GPU vanished, MIG re-partitioned): re-add the node and re-commit
    // what still fits; tasks whose devices are gone are lost.
    GPUPOOL_RETURN_IF_ERROR(pool->engine->RemoveNode(n.name));
    // Room held there went with the node.
    for (int64_t id : s_->reservations.IdsOnNode(n.name)) {
      s_->reservations.Find(id)->held.clear();
      s_->DropReservation(id, "devices changed on node " + n.name);
    }
    for (auto& [id, job] : s_->jobs) {
      for (Task& rt : job.tasks) {
        if (rt.holds && rt.allocation.node == n.name) rt.holds = false;
      }
    }
  }
  if (fresh || rebuild) {
    GPUPOOL_RETURN_IF_ERROR(pool->engine->AddNode(ToNodeSpecForAgents(n)));
    pool->nodes.insert(n.name);
  }
  if (rebuild) {
    std::vector<TaskChange> repairs;
    for (auto& [id, job] : s_->jobs) {
      for (int32_t i = 0; i < job.size(); ++i) {
        Task& rt = job.task(i);
        const TaskRecord& t = job.task(i).rec;
        if (t.node != n.name || rt.holds || rt.changing ||
            (t.state != TaskState::kRunning && t.state != TaskState::kScheduled)) {
          continue;
        }
        rt.allocation = s_->AllocationOf(job, t);
        if (pool->engine->Commit(rt.allocation).ok()) {
          rt.holds = true;
        } else {
          if (s_->running > 0) --s_->running;
          repairs.push_back(s_->PlanRequeueOrFail(job, i, "devices changed on node " + n.name));
        }
      }
    }
    if (!repairs.empty()) s_->CommitTaskChanges(this, std::move(repairs));
  }
  GPUPOOL_RETURN_IF_ERROR(pool->engine->SetSchedulable(n.name, n.state == NodeState::kReady));
  for (const DeviceRecord& d : n.devices) {
    const bool faulted = s_->faults.Active(n.name, d.id) != nullptr;  // core_device_faults.cc
    (void)pool->engine->SetDeviceHealthy(n.name, d.id, d.healthy && !faulted);
  }
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
  for (auto& [id, job] : s_->jobs) {
    for (int32_t i = 0; i < job.size(); ++i) {
      TaskRecord& t = job.task(i).rec;
      if (t.node != node || job.task(i).changing) continue;
      bool is_reported = reported.contains({TaskId(id, i), t.attempt});
      if (t.state == TaskState::kScheduled && !is_reported) {
        if (!job.task(i).committing) resend->emplace_back(id, i);
      } else if (t.state == TaskState::kRunning && !is_reported) {
        repairs.push_back(s_->PlanRequeueOrFail(job, i, "agent on " + node + " no longer runs it"));
      } else if (is_reported && t.stop != StopIntent::kNone) {
        s_->dispatcher.Stop(job, i,
                            "stop requested before reconnect");  // the stop is stored already
      }
    }
  }
  if (!repairs.empty()) s_->CommitTaskChanges(this, std::move(repairs));
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
    (void)pool->engine->SetDeviceHealthy(node, d.id, d.healthy && !faulted);
    LogWarn("core", d.healthy ? "device healthy again" : "device unhealthy",
            {{"node", node}, {"device", d.id}});
  }
  if (!faults.empty()) OnDeviceFaults(node, faults);
}

void Core::OnTaskReport(const TaskReport& r) {
  GPUPOOL_DCHECK_ON_THREAD(s_->thread);
  int32_t index = 0;
  JobEntry* job = s_->jobs.FindTask(r.task_id, &index);
  if (job == nullptr) return;
  TaskRecord& t = job->task(index).rec;
  Task& rt = job->task(index);
  // Reports of an older attempt, another node, or a finished task are stale.
  if (t.attempt != r.attempt || t.node != r.node ||
      (t.state != TaskState::kScheduled && t.state != TaskState::kRunning)) {
    return;
  }
  if (rt.changing) return;  // its end is being stored already
  if (r.state == TaskState::kRunning) {
    // Running is not an end: memory moves on at once and the row follows (written again from
    // memory if the store refuses it). Nothing is acknowledged to a client by it.
    if (t.state == TaskState::kRunning) return;
    std::vector<Mutation> batch;
    t.state = TaskState::kRunning;
    t.started_us = s_->clock->NowMicros();
    t.reason = "running on " + t.node;
    if (s_->metrics != nullptr) s_->metrics->TaskTransition("RUNNING");
    batch.emplace_back(UpdateTask{t});
    if (s_->RefreshJobState(*job))
      batch.emplace_back(UpdateJob{job->head.id, job->head.state, job->head.reason, 0});
    s_->Notify(*job, "task " + r.task_id + ": RUNNING on " + t.node);
    s_->PersistOrRetry(std::move(batch));
    return;
  }
  // An end: planned now, applied once stored (core_change.cc).
  TaskChange change;
  if (t.stop == StopIntent::kPreempt && r.state != TaskState::kSucceeded) {
    change = s_->PlanRequeuePreempted(*job, index);
  } else if (t.stop == StopIntent::kDrain || (r.device_fault && r.state == TaskState::kFailed)) {
    change =
        s_->PlanRequeueOrFail(*job, index, r.reason.empty() ? "stopped for requeue" : r.reason);
  } else if (t.stop == StopIntent::kCancel || CancelRequested(job->head.state)) {
    change = s_->PlanFinish(*job, index, TaskState::kCancelled, "cancelled", r.exit_code);
  } else if (r.lease_expired && r.state != TaskState::kSucceeded) {
    // Its node stopped it because the node lease lapsed: not the task's failure (docs/ha.md).
    change = s_->PlanRequeueOrFail(*job, index, "stopped on " + t.node + ": node lease lapsed");
  } else {
    std::string why = r.reason;
    if (why.empty()) {
      why = r.signal != 0 ? "killed by signal " + std::to_string(r.signal)
                          : "exit code " + std::to_string(r.exit_code);
    }
    if (r.oom) why += " (out of memory)";
    TaskState end = r.state == TaskState::kSucceeded ? TaskState::kSucceeded : TaskState::kFailed;
    if (r.state == TaskState::kCancelled) end = TaskState::kCancelled;
    change = s_->PlanFinish(*job, index, end, why, r.exit_code);
  }
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
