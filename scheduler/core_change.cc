// Core: the change path for task transitions — plan → persist → apply → act.
//
// A task's exit, requeue or loss is planned as a TaskChange: the record it becomes, built
// without touching memory. The change's rows are stored first; only when the store has them is
// the change applied (allocation released, queues, job state) and acted on (watchers told, a
// pass asked for). A change the store refuses is kept, in order, and stored again by Tick until
// the store takes it; until then the task keeps its allocation and the API keeps showing what
// the database holds, so a job is never reported done before it is durably done, and a task that
// finished while PostgreSQL was down is never run again.
//
// Plain updates of records memory already holds (a RUNNING report, a node marked NOT_READY) go
// through PersistOrRetry: if refused, the records are marked dirty and written again from memory.
#include "base/log.h"
#include "scheduler/core.h"
#include "scheduler/core_state.h"

namespace gpupool {
namespace {

// The state a job's tasks imply. CANCELLING stays until every task has ended, then CANCELLED;
// CANCELLED never changes.
JobState Implied(JobState current, bool all_terminal, bool any_failed, bool any_active) {
  if (current == JobState::kCancelled) return current;
  if (current == JobState::kCancelling) return all_terminal ? JobState::kCancelled : current;
  if (all_terminal) return any_failed ? JobState::kFailed : JobState::kSucceeded;
  return any_active ? JobState::kRunning : JobState::kPending;
}

// The state `job` implies with the task states `afters` (index → record) planned over its own.
JobState ImpliedState(const JobEntry& job, const std::map<int32_t, const TaskRecord*>& afters) {
  bool all_terminal = true, any_failed = false, any_active = false;
  for (int32_t i = 0; i < job.size(); ++i) {
    auto a = afters.find(i);
    TaskState st = a != afters.end() ? a->second->state : job.task(i).rec.state;
    all_terminal &= IsTerminal(st);
    any_failed |= st == TaskState::kFailed;
    any_active |= st == TaskState::kScheduled || st == TaskState::kRunning;
  }
  return Implied(job.head.state, all_terminal, any_failed, any_active);
}

}  // namespace

bool Core::State::RefreshJobState(JobEntry& job) {
  JobState next = ImpliedState(job, {});
  if (next == job.head.state) return false;
  job.head.state = next;
  if (IsTerminal(next) && job.head.finish_us == 0) job.head.finish_us = clock->NowMicros();
  return true;
}

// ---------------------------------------------------------------------------------------------
// Planning: pure functions of the current records.

TaskChange Core::State::PlanFinish(const JobEntry& job, int32_t index, TaskState state,
                                   std::string reason, int32_t exit_code) const {
  TaskChange c;
  c.job_id = job.head.id;
  c.index = index;
  c.after = job.task(index).rec;
  c.after.state = state;
  c.after.stop = StopIntent::kNone;
  c.after.reason = std::move(reason);
  c.after.exit_code = exit_code;
  c.after.finished_us = clock->NowMicros();
  c.after.pending = {};
  const std::string tid = TaskId(job.head.id, index);
  c.events.push_back(Event("task.state", "task/" + tid,
                           std::string(ToString(state)) + ": " + c.after.reason,
                           job.head.spec.tenant));
  c.transition = std::string(ToString(state));
  c.note = "task " + tid + ": " + c.transition;
  return c;
}

TaskChange Core::State::PlanRequeue(const JobEntry& job, int32_t index, const std::string& why,
                                    std::string transition) const {
  TaskChange c;
  c.job_id = job.head.id;
  c.index = index;
  TaskRecord& t = c.after;
  t = job.task(index).rec;
  t.stop = StopIntent::kNone;  // t.preempted_by stays: GetJob still explains the last preemption
  ++t.attempt;
  t.state = TaskState::kPending;
  t.node.clear();
  t.allocations.clear();
  t.reason = "requeued (attempt " + std::to_string(t.attempt + 1) + "): " + why;
  t.scheduled_us = t.started_us = t.finished_us = 0;
  t.pending = {PendingCode::kQueued, "", {}};
  t.pull = {};
  t.endpoints.clear();
  c.transition = std::move(transition);
  return c;
}

TaskChange Core::State::PlanRequeueOrFail(const JobEntry& job, int32_t index,
                                          const std::string& why) const {
  const std::string tid = TaskId(job.head.id, index);
  EventRecord lost = Event("task.lost", "task/" + tid, why, job.head.spec.tenant);
  TaskChange c;
  if (CancelRequested(job.head.state)) {
    c = PlanFinish(job, index, TaskState::kCancelled, why, 0);
  } else if (job.task(index).rec.attempt >= RetryLimit(job)) {
    c = PlanFinish(job, index, TaskState::kFailed, why + "; out of retries", 0);
  } else {
    c = PlanRequeue(job, index, why, "LOST");
    c.note = "task " + tid + ": requeued: " + why;
  }
  c.events.insert(c.events.begin(), std::move(lost));
  return c;
}

TaskChange Core::State::PlanRequeuePreempted(const JobEntry& job, int32_t index) const {
  const TaskRecord& t = job.task(index).rec;
  const Task& rt = job.task(index);
  std::string why = !rt.stop_cause.empty()    ? rt.stop_cause
                    : !t.preempted_by.empty() ? Describe(t.preempted_by)
                                              : std::string("preempted");
  if (CancelRequested(job.head.state)) return PlanFinish(job, index, TaskState::kCancelled, why, 0);
  const std::string tid = TaskId(job.head.id, index);
  TaskChange c = PlanRequeue(job, index, why, "PREEMPTED");
  c.preempted = true;
  c.events.push_back(
      Event("task.state", "task/" + tid, "PREEMPTED: " + why + "; requeued", job.head.spec.tenant));
  c.note = "task " + tid + ": PREEMPTED, requeued: " + why;
  return c;
}

// ---------------------------------------------------------------------------------------------
// Persist, then apply.

void Core::State::CommitTaskChanges(Core* core, std::vector<TaskChange> changes,
                                    std::vector<Mutation> extra) {
  ChangeSet set;
  set.batch = std::move(extra);
  std::map<int64_t, std::map<int32_t, const TaskRecord*>> by_job;
  const int64_t now = clock->NowMicros();
  for (const TaskChange& c : changes) {
    AppendFinalUsage(c, now, &set.batch);  // core_metering.cc: the attempt's last intervals
    JobEntry& job = jobs.at(c.job_id);
    job.task(c.index).changing = true;
    set.batch.emplace_back(UpdateTask{c.after});
    for (const EventRecord& e : c.events) set.batch.emplace_back(AppendEvent{e});
    by_job[c.job_id][c.index] = &c.after;
  }
  for (const auto& [id, afters] : by_job) {
    const JobRecord& rec = jobs.at(id).head;
    JobState next = ImpliedState(jobs.at(id), afters);
    set.job_states[id] = next;
    if (next != rec.state) {
      int64_t finish = IsTerminal(next) && rec.finish_us == 0 ? now : rec.finish_us;
      set.batch.emplace_back(UpdateJob{id, next, rec.reason, finish});
    }
  }
  set.tasks = std::move(changes);
  StoreChangeSet(core, std::move(set), /*retry=*/false);
}

void Core::State::StoreChangeSet(Core* core, ChangeSet set, bool retry) {
  std::vector<Mutation> batch = set.batch;
  Persist(std::move(batch), [this, core, retry, set = std::move(set)](Status st) mutable {
    if (retry) retry_in_flight = false;
    if (!st.ok()) {
      if (!retry) {  // once per change, not once per retry
        LogWarn("core", "task change not stored; kept and retried until it is",
                {{"tasks", std::to_string(set.tasks.size())}, {"error", st.ToString()}});
      }
      if (retry) {
        unstored.push_front(std::move(set));
      } else {
        unstored.push_back(std::move(set));
      }
      return;
    }
    ApplyChangeSet(core, set);
    if (retry) RetryUnstored(core);  // the next one at once: the store is back
  });
}

// One stored task change applied: its room released when it leaves SCHEDULED/RUNNING, its
// record replaced (and reindexed), queued again when requeued — or, cancelled meanwhile, a
// follow-up change that ends it.
void Core::State::ApplyTaskChange(const TaskChange& c, std::vector<TaskChange>* follow_up) {
  JobEntry* job = jobs.Find(c.job_id);
  if (job == nullptr) return;
  Task& rt = job->task(c.index);
  rt.changing = false;
  const bool leaves =
      c.after.state != TaskState::kScheduled && c.after.state != TaskState::kRunning;
  if (leaves) {
    ReleaseTask(*job, c.index);
    queue.Remove(*job, c.index);
    rt.stop_cause.clear();
  }
  rt.rec = c.after;
  jobs.Reindex(*job, c.index);
  if (metrics != nullptr && !c.transition.empty()) metrics->TaskTransition(c.transition);
  if (rt.rec.state != TaskState::kPending) return;
  if (CancelRequested(job->head.state)) {
    // Cancelled while its requeue was being stored: it ends here instead.
    follow_up->push_back(PlanFinish(*job, c.index, TaskState::kCancelled, "cancelled", 0));
  } else {
    if (c.preempted) StartBackoff(*job, c.index);
    queue.Add(*job, c.index);
  }
}

void Core::State::ApplyChangeSet(Core* core, const ChangeSet& set) {
  MeterStored(set.batch);  // core_metering.cc
  std::vector<TaskChange> follow_up;
  for (const TaskChange& c : set.tasks) ApplyTaskChange(c, &follow_up);
  for (const auto& [id, stored] : set.job_states) {
    JobEntry* job = jobs.Find(id);
    if (job == nullptr) continue;
    RefreshJobState(*job);
    // Something else changed the job while this was stored (a cancel): store what it is now.
    if (job->head.state != stored) {
      PersistOrRetry({UpdateJob{id, job->head.state, job->head.reason, job->head.finish_us}});
    }
  }
  for (const TaskChange& c : set.tasks) {
    if (JobEntry* job = jobs.Find(c.job_id); job != nullptr && !c.note.empty())
      Notify(*job, c.note);
  }
  if (!follow_up.empty()) CommitTaskChanges(core, std::move(follow_up));
  RequestSchedule(core);
}

// ---------------------------------------------------------------------------------------------
// Plain updates and retries.

void Core::State::MarkDirty(const std::vector<Mutation>& batch) {
  for (const Mutation& m : batch) {
    if (const auto* ut = std::get_if<UpdateTask>(&m)) {
      dirty_tasks.insert({ut->task.job_id, ut->task.index});
    } else if (const auto* uj = std::get_if<UpdateJob>(&m)) {
      dirty_jobs.insert(uj->job_id);
    } else if (const auto* sn = std::get_if<gpupool::SetNodeState>(&m)) {
      dirty_nodes.insert(sn->name);
    } else if (const auto* ev = std::get_if<AppendEvent>(&m)) {
      unstored_events.push_back(ev->event);
    } else {
      LogError("core", "a mutation that cannot be written again from memory was refused",
               {{"index", std::to_string(m.index())}});
    }
  }
}

void Core::State::PersistOrRetry(std::vector<Mutation> batch) {
  std::vector<Mutation> copy = batch;
  Persist(std::move(batch), [this, copy = std::move(copy)](Status st) {
    if (st.ok()) return;
    LogWarn("core", "update not stored; written again from memory until it is",
            {{"error", st.ToString()}});
    MarkDirty(copy);
  });
}

void Core::State::RetryUnstored(Core* core) {
  if (!dirty_tasks.empty() || !dirty_jobs.empty() || !dirty_nodes.empty() ||
      !unstored_events.empty()) {
    std::vector<Mutation> batch;
    std::set<TaskKey> keep;  // a change of the task is in flight: it writes the newer record
    for (const TaskKey& k : dirty_tasks) {
      JobEntry* job = jobs.Find(k.first);
      if (job == nullptr) continue;
      if (job->task(k.second).changing) {
        keep.insert(k);
        continue;
      }
      batch.emplace_back(UpdateTask{job->task(k.second).rec});
    }
    for (int64_t id : dirty_jobs) {
      if (JobEntry* job = jobs.Find(id)) {
        batch.emplace_back(UpdateJob{id, job->head.state, job->head.reason, job->head.finish_us});
      }
    }
    for (const std::string& n : dirty_nodes) {
      if (auto it = nodes.find(n); it != nodes.end()) {
        batch.emplace_back(gpupool::SetNodeState{n, it->second.rec.state});
      }
    }
    for (EventRecord& e : unstored_events) batch.emplace_back(AppendEvent{std::move(e)});
    dirty_tasks = std::move(keep);
    dirty_jobs.clear();
    dirty_nodes.clear();
    unstored_events.clear();
    if (!batch.empty()) PersistOrRetry(std::move(batch));
  }
  if (retry_in_flight || unstored.empty()) return;
  retry_in_flight = true;
  ChangeSet next = std::move(unstored.front());
  unstored.pop_front();
  StoreChangeSet(core, std::move(next), /*retry=*/true);
}

}  // namespace gpupool
