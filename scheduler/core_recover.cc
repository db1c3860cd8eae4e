// Core: recovery — rebuilding memory from what the store holds after a (re)start.
//
// Pools and their engines first, then nodes, then jobs: pending tasks queue again, SCHEDULED and
// RUNNING ones re-commit their stored allocation (those that no longer fit are requeued through
// the change path), and preemptors whose victims still stop get their reservation back from the
// typed columns (core_reservations.cc). Finished jobs past the retention are not loaded.
#include <algorithm>
#include <limits>

#include "base/log.h"
#include "scheduler/core.h"
#include "scheduler/core_state.h"
#include "scheduler/pool_workload.h"

namespace gpupool {

Result<std::unique_ptr<placement::Engine>> MakePoolEngine(const PoolRecord& rec,
                                                          const std::string& default_strategy);

namespace {

bool PastRetention(const JobRecord& j, int64_t retained_since) {
  return IsTerminal(j.state) && j.finish_us != 0 && j.finish_us < retained_since &&
         std::all_of(j.tasks.begin(), j.tasks.end(),
                     [](const TaskRecord& t) { return IsTerminal(t.state); });
}

}  // namespace

Status Core::State::RecoverInventory(const RecoveredState& state) {
  for (const PoolRecord& p : state.pools) {
    Result<std::unique_ptr<placement::Engine>> engine = MakePoolEngine(p, options.default_strategy);
    if (!engine.ok()) return engine.status().WithContext("recover pool '" + p.name + "'");
    PoolEntry& e = pools[p.name];
    e.rec = p;
    e.engine = std::move(engine).value();
  }
  const int64_t now = clock->MonotonicMicros();
  for (const NodeRecord& n : state.nodes) {
    PoolEntry* pool = FindPool(n.pool);
    if (pool == nullptr) {
      LogWarn("core", "node of an unknown pool ignored", {{"node", n.name}, {"pool", n.pool}});
      continue;
    }
    NodeEntry& e = nodes[n.name];
    e.rec = n;
    e.last_seen_us = now;  // agents get one heartbeat timeout from now to reconnect
    for (size_t i = 0; i < n.devices.size(); ++i)
      e.device_index[n.devices[i].id] = static_cast<int>(i);
    GPUPOOL_RETURN_IF_ERROR(pool->engine->AddNode(ToNodeSpecForAgents(n, slots)));
    GPUPOOL_RETURN_IF_ERROR(pool->engine->SetSchedulable(n.name, n.state == NodeState::kReady));
    pool->nodes.insert(n.name);
  }
  for (auto& [name, pool] : pools) RecomputeLimits(pool);
  return Status::Ok();
}

JobEntry& Core::State::RecoverJob(const JobRecord& j) {
  JobEntry entry = JobEntry::FromRecord(j);
  auto cls = options.priority_classes.find(j.spec.priority_class);
  entry.priority = cls != options.priority_classes.end() ? cls->second.value : 0;
  entry.request = j.spec.task_template.resources;
  if (entry.request.shape == RequestShape::kSku) {
    auto sku = options.skus.find(entry.request.sku);
    if (sku != options.skus.end()) entry.request = sku->second.request;
  }
  JobEntry& job = jobs.Insert(std::move(entry));
  if (PoolEntry* pool = FindPool(j.spec.pool))
    LearnSubmission(*pool, ToPlacement(job.request), j.spec.task_count);
  return job;
}

// A SCHEDULED or RUNNING task takes its stored allocation back; a change requeueing it when that
// no longer fits.
std::optional<TaskChange> Core::State::ReadoptTask(JobEntry& job, int32_t i) {
  Task& rt = job.task(i);
  const TaskRecord& t = rt.rec;
  rt.allocation = AllocationOf(job, t);
  PoolEntry* pool = FindPool(job.head.spec.pool);
  Status st = pool == nullptr ? Status::NotFound("pool gone") : pool->engine->Commit(rt.allocation);
  if (!st.ok()) {
    LogWarn("core", "recovered allocation no longer fits; requeueing",
            {{"task", TaskId(job.id(), i)}, {"error", st.ToString()}});
    return PlanRequeueOrFail(job, i, "allocation lost on restart: " + st.message());
  }
  rt.holds = true;
  ++running;
  Charge(job, i);
  // The stop intent is a typed column: a task being drained, preempted or cancelled before the
  // restart still ends the way it was meant to when it exits.
  if (t.stop == StopIntent::kPreempt) {
    // A gang with a member still stopping is restarting: placed again only whole.
    rt.stop_cause = Describe(t.preempted_by);
    job.restarting = job.head.spec.gang;
  }
  return std::nullopt;
}

Status Core::Recover(const RecoveredState& state, int64_t epoch) {
  GPUPOOL_DCHECK_ON_THREAD(s_->thread);
  s_->epoch = epoch;
  s_->dispatcher.set_epoch(epoch);
  s_->max_job_id = state.max_job_id;
  for (const TenantRecord& t : state.tenants) s_->book.PutTenant(t);
  for (const QuotaRecord& q : state.quotas) s_->book.PutQuota(q);
  s_->faults.Load(state.device_faults);  // core_device_faults.cc
  s_->mig.Load(state.mig_layouts);       // core_mig_layouts.cc: before the nodes are added
  s_->slots.Load(state.device_slots);    // core_device_slots.cc: before the nodes are added
  s_->meter.Load(state.usage_marks);     // core_metering.cc: metering resumes at the marks
  GPUPOOL_RETURN_IF_ERROR(s_->RecoverInventory(state));
  std::vector<TaskChange> repairs;
  const int64_t retained_since = s_->options.job_retention_ms > 0
                                     ? s_->clock->NowMicros() - s_->options.job_retention_ms * 1000
                                     : std::numeric_limits<int64_t>::min();
  std::vector<Mutation> job_repairs;
  for (const JobRecord& j : state.jobs) {
    if (PastRetention(j, retained_since)) continue;  // its rows stay in the database
    JobEntry& job = s_->RecoverJob(j);
    // A job's state follows its tasks' in a later commit than theirs (core_change.cc): a restart
    // between the two leaves the tasks durably ended and the job row behind. The tasks say what
    // it is.
    if (s_->RefreshJobState(job)) {
      LogInfo("core", "job state repaired from its tasks on recovery",
              {{"job", std::to_string(job.id())},
               {"stored", std::string(ToString(j.state))},
               {"state", std::string(ToString(job.head.state))}});
      job_repairs.emplace_back(
          UpdateJob{job.id(), job.head.state, job.head.reason, job.head.finish_us});
    }
    for (int32_t i = 0; i < job.size(); ++i) {
      TaskRecord& t = job.task(i).rec;
      if (t.state == TaskState::kPending && !IsTerminal(job.head.state)) {
        t.pending.code = PendingCode::kQueued;  // not stored: the first pass says more
        s_->queue.Add(job, i);
      } else if (t.state == TaskState::kScheduled || t.state == TaskState::kRunning) {
        if (auto repair = s_->ReadoptTask(job, i)) repairs.push_back(std::move(*repair));
      }
    }
  }
  for (const auto& [name, node] : s_->nodes) ApplyDeviceFaults(name);  // after tasks re-commit
  s_->RebuildReservations(s_->clock->NowMicros());
  if (!job_repairs.empty()) s_->PersistOrRetry(std::move(job_repairs));
  if (!repairs.empty()) s_->CommitTaskChanges(this, std::move(repairs));
  LogInfo("core", "state recovered",
          {{"pools", std::to_string(s_->pools.size())},
           {"nodes", std::to_string(s_->nodes.size())},
           {"jobs", std::to_string(s_->jobs.size())},
           {"pending_tasks", std::to_string(s_->queue.size())},
           {"running_tasks", std::to_string(s_->running)},
           {"epoch", std::to_string(epoch)}});
  s_->RequestSchedule(this);
  return Status::Ok();
}

}  // namespace gpupool
