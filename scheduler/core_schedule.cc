// Core: the scheduling pass, dispatch, and the end of a task's attempt.
#include <algorithm>
#include <chrono>
#include <queue>

#include "base/log.h"
#include "scheduler/core.h"
#include "scheduler/core_state.h"
#include "scheduler/pool_workload.h"

namespace gpupool {
namespace {

std::string WhyNotPlaced(const placement::Decision& d) {
  std::string why = "waiting for capacity";
  if (!d.rejection_counts.empty()) {
    why += ": ";
    bool first = true;
    for (const auto& [kind, count] : d.rejection_counts) {
      why += (first ? "" : ", ") + std::to_string(count) + " node(s) short of " + kind;
      first = false;
    }
  }
  if (!d.rejections.empty())
    why += " (e.g. " + d.rejections.front().node + ": " + d.rejections.front().reason + ")";
  return why;
}

PendingVerdict Verdict(PendingCode code, std::string binding = {},
                       const placement::Decision* d = nullptr) {
  PendingVerdict v{code, std::move(binding), {}};
  if (d != nullptr) {
    for (const auto& [kind, count] : d->rejection_counts)
      v.nodes_by_reason.emplace_back(kind, count);
  }
  return v;
}

std::vector<Allocation> ToRecord(const placement::Allocation& a) {
  std::vector<Allocation> out;
  for (const placement::Grant& g : a.grants) {
    out.push_back(Allocation{g.device_id, g.amount, g.slots, g.exclusive});
  }
  return out;
}

QuotaAmount Times(const QuotaAmount& a, int32_t n) {
  QuotaAmount out;
  out.resources.milli_tflops = a.resources.milli_tflops * n;
  out.resources.vram_mib = a.resources.vram_mib * n;
  out.devices = a.devices * n;
  return out;
}

}  // namespace

void Core::State::Reserve(PassState& pass, JobEntry& job, int32_t i,
                          const placement::Allocation& a) {
  TaskRecord& t = job.rec.tasks[static_cast<size_t>(i)];
  TaskRuntime& rt = job.rt[static_cast<size_t>(i)];
  rt.allocation = a;
  rt.holds = true;
  rt.committing = true;
  ++running;
  Charge(job, i);
  Dequeue(job, i);
  t.state = TaskState::kScheduled;
  t.node = a.node;
  t.allocations = ToRecord(a);
  t.scheduled_us = pass.now;
  t.reason = "placed on " + a.node;
  t.pending = {};
  pass.batch.emplace_back(UpdateTask{t});
  pass.placed.push_back({job.rec.id, i, t.attempt});
}

// Places every pending member of a gang at once, or preempts for all of them, or says why not.
void Core::State::PlaceGang(PassState& pass, JobEntry& job, PoolEntry& pool,
                            const placement::Request& req, const std::string& behind) {
  const std::string& tenant = job.rec.spec.tenant;
  const std::string& pool_name = job.rec.spec.pool;
  std::vector<int32_t> members;
  bool active = false;
  for (int32_t i = 0; i < static_cast<int32_t>(job.rec.tasks.size()); ++i) {
    TaskState st = job.rec.tasks[static_cast<size_t>(i)].state;
    if (st == TaskState::kPending) members.push_back(i);
    active |= st == TaskState::kScheduled || st == TaskState::kRunning;
  }
  auto wait = [&](const std::string& why, const PendingVerdict& verdict) {
    for (int32_t i : members) {
      job.rec.tasks[static_cast<size_t>(i)].reason = why;
      job.rec.tasks[static_cast<size_t>(i)].pending = verdict;
    }
  };
  if (job.restarting && active) {
    return wait("gang restarting: waiting for its preempted members to stop",
                Verdict(PendingCode::kGangRestarting));
  }
  job.restarting = false;
  auto n = static_cast<int32_t>(members.size());
  std::string binding;
  std::string why = book.WhyOverLimit(pool_name, tenant, Times(Estimate(job.request), n), &binding);
  if (!why.empty()) return wait("waiting: " + why, Verdict(PendingCode::kOverQuota, binding));
  std::vector<placement::Request> reqs(members.size(), req);
  placement::Engine::GangResult g = pool.engine->PlaceGang(reqs);
  if (!g.placed) {
    wait("gang of " + std::to_string(n) + " waiting: task " + std::to_string(g.failed_index) +
             " does not fit; " + WhyNotPlaced(g.failed) + behind,
         Verdict(PendingCode::kGangWaiting, "", &g.failed));
    std::string held_back;
    if (!TryPreemptGang(pass, job, members, req, &held_back) && !held_back.empty()) {
      wait(job.rec.tasks[static_cast<size_t>(members.front())].reason + "; " + held_back,
           Verdict(PendingCode::kDisruptionBudget, "", &g.failed));
    }
    return;
  }
  QuotaAmount total;
  for (const placement::Allocation& a : g.allocations) {
    QuotaAmount u = UsageOf(a);
    total.resources += u.resources;
    total.devices += u.devices;
  }
  why = book.WhyOverLimit(pool_name, tenant, total, &binding);
  if (!why.empty()) return wait("waiting: " + why, Verdict(PendingCode::kOverQuota, binding));
  // All or nothing: commit every member, then make sure no reserved room was taken.
  size_t committed = 0;
  Status st;
  for (; committed < members.size() && st.ok(); ++committed) {
    st = pool.engine->Commit(g.allocations[committed]);
    if (!st.ok()) break;
  }
  for (size_t k = 0; st.ok() && !reservations.empty() && k < members.size(); ++k) {
    if (!ReservationsFit(pool, g.allocations[k].node)) {
      st = Status::FailedPrecondition("room on " + g.allocations[k].node +
                                      " is reserved for a preempting task");
    }
  }
  if (!st.ok()) {
    while (committed-- > 0) (void)pool.engine->Release(g.allocations[committed]);
    return wait("gang of " + std::to_string(n) + " waiting: " + st.message(),
                Verdict(PendingCode::kReserved));
  }
  for (size_t k = 0; k < members.size(); ++k) Reserve(pass, job, members[k], g.allocations[k]);
}

// Places one pending task (or, for a gang, every pending member), or says why it waits.
void Core::State::TryPlace(PassState& pass, JobEntry& job, int32_t index) {
  PoolEntry* pool = FindPool(job.rec.spec.pool);
  if (pool == nullptr || job.cancel_storing || CancelRequested(job.rec.state)) return;
  TaskRecord& task = job.rec.tasks[static_cast<size_t>(index)];
  const std::string& tenant = job.rec.spec.tenant;
  const std::string& pool_name = job.rec.spec.pool;
  std::string behind;
  if (int32_t n = pass.behind[pool_name]; n > 0) {
    behind = "; behind " + std::to_string(n) + " task(s) of higher priority";
  }
  if (TaskRuntime& rt = job.rt[static_cast<size_t>(index)]; rt.reservation != 0) {
    auto res = reservations.find(rt.reservation);
    if (res != reservations.end()) {
      if (res->second.gang) return;  // the gang's reason was set when it preempted
      std::string ids;
      for (const std::string& v : res->second.victims) ids += (ids.empty() ? "" : ", ") + v;
      task.reason = "waiting for " + std::to_string(res->second.victims.size()) +
                    " preempted task(s) to stop on " + res->second.allocation.node + ": " + ids;
      task.pending = Verdict(PendingCode::kWaitingForVictims);
      return;
    }
    rt.reservation = 0;
  }
  ShapeKey shape{pool_name, job.request};
  placement::Request req = ToPlacement(job.request);
  FeedEngine(*pool);

  if (job.rec.spec.gang) {
    if (pass.gangs_tried.insert(job.rec.id).second) PlaceGang(pass, job, *pool, req, behind);
    return;
  }

  std::string binding;
  if (std::string why = book.WhyOverLimit(pool_name, tenant, Estimate(job.request), &binding);
      !why.empty()) {
    task.reason = "waiting: " + why;
    task.pending = Verdict(PendingCode::kOverQuota, binding);
    return;
  }
  if (auto known = pass.failed.find(shape); known != pass.failed.end()) {
    task.reason = known->second.first + behind;
    task.pending = known->second.second;
  } else {
    placement::Decision d = pool->engine->Place(req);
    if (d.placed) {
      if (std::string why = book.WhyOverLimit(pool_name, tenant, UsageOf(d.allocation), &binding);
          !why.empty()) {
        task.reason = "waiting: " + why;
        task.pending = Verdict(PendingCode::kOverQuota, binding);
        return;
      }
      Status st = pool->engine->Commit(d.allocation);
      if (!st.ok()) {
        LogError("core", "commit of a fresh decision failed", {{"error", st.ToString()}});
        return;
      }
      if (!reservations.empty() && !ReservationsFit(*pool, d.allocation.node)) {
        // The free part of a preemptor's room: not for this task.
        (void)pool->engine->Release(d.allocation);
        task.reason =
            "waiting: room on " + d.allocation.node + " is reserved for a preempting task" + behind;
        task.pending = Verdict(PendingCode::kReserved);
        return;
      }
      Reserve(pass, job, index, d.allocation);
      return;
    }
    std::string why = WhyNotPlaced(d);
    task.pending = Verdict(PendingCode::kNoCapacity, "", &d);
    pass.failed.emplace(shape, std::make_pair(why, task.pending));
    task.reason = why + behind;
  }
  std::string why;
  if (TryPreempt(pass, job, index, req, &why)) return;
  if (!why.empty()) {
    task.reason += "; " + why;
    task.pending.code = PendingCode::kDisruptionBudget;
  }
}

// Priority levels high to low; within one, the fair-share queues merged by their tenants'
// shares (recomputed as placements add usage: a lazy heap), each queue oldest first.
void Core::State::RunQueues(PassState& pass) {
  struct Cursor {
    std::pair<double, double> share;
    TaskKey head;
    size_t queue;
    size_t pos;
    bool operator>(const Cursor& o) const {
      return std::tie(share, head) > std::tie(o.share, o.head);
    }
  };
  int32_t considered = 0;
  auto level_it = queues.begin();
  while (level_it != queues.end() && considered < options.max_tasks_per_pass) {
    const int32_t level = level_it->first.neg_priority;
    std::vector<FairKey> keys;
    std::vector<std::vector<TaskKey>> tasks;
    // No queue can have more of its tasks considered than the pass has left: copy only those,
    // so a deep backlog does not make every pass walk all of it.
    const auto budget = static_cast<size_t>(options.max_tasks_per_pass - considered);
    for (; level_it != queues.end() && level_it->first.neg_priority == level; ++level_it) {
      keys.push_back(level_it->first);
      std::vector<TaskKey>& head = tasks.emplace_back();
      head.reserve(std::min(budget, level_it->second.size()));
      for (auto it = level_it->second.begin(); it != level_it->second.end() && head.size() < budget;
           ++it) {
        head.push_back(*it);
      }
    }
    std::priority_queue<Cursor, std::vector<Cursor>, std::greater<>> heap;
    for (size_t q = 0; q < keys.size(); ++q)
      heap.push(Cursor{ShareOf(pass, keys[q]), tasks[q][0], q, 0});
    while (!heap.empty() && considered < options.max_tasks_per_pass) {
      Cursor c = heap.top();
      heap.pop();
      std::pair<double, double> share = ShareOf(pass, keys[c.queue]);
      if (share > c.share && !heap.empty() && share > heap.top().share) {
        c.share = share;  // its tenant got more since: let the others go first
        heap.push(c);
        continue;
      }
      ++considered;
      JobEntry* job = FindJob(c.head.first);
      if (job != nullptr && pending.contains(QueueKey{level, c.head.first, c.head.second})) {
        TryPlace(pass, *job, c.head.second);
      }
      if (++c.pos < tasks[c.queue].size()) {
        c.head = tasks[c.queue][c.pos];
        c.share = ShareOf(pass, keys[c.queue]);
        heap.push(c);
      }
    }
    // Whatever of this level still waits is ahead of every lower level in its pool.
    for (const FairKey& key : keys) {
      if (auto q = queues.find(key); q != queues.end()) {
        pass.behind[key.pool] += static_cast<int32_t>(q->second.size());
      }
    }
  }
}

void Core::State::RunFresh(PassState& pass, std::vector<QueueKey> fresh) {
  std::sort(fresh.begin(), fresh.end());
  for (const QueueKey& k : fresh) {
    if (!pending.contains(k)) continue;
    if (JobEntry* job = FindJob(k.job_id); job != nullptr) TryPlace(pass, *job, k.index);
  }
}

bool Core::State::PeriodicPassDue() const {
  // Below this a pass is cheap enough to run on every tick (and tests stay deterministic).
  constexpr auto kCheap = std::chrono::milliseconds(2);
  if (last_full_pass_cost < kCheap) return true;
  return std::chrono::steady_clock::now() - last_full_pass_end >= 50 * last_full_pass_cost;
}

void Core::Schedule() {
  s_->full_pass_needed = true;
  RunPass();
}

void Core::RunPass() {
  s_->schedule_posted = false;
  bool full = s_->full_pass_needed || !s_->reservations.empty();
  s_->full_pass_needed = false;
  std::vector<QueueKey> fresh = std::move(s_->fresh);
  s_->fresh.clear();
  if (s_->pending.empty() && s_->reservations.empty()) return;
  auto started = std::chrono::steady_clock::now();
  PassState pass;
  pass.now = s_->clock->NowMicros();
  s_->ProcessReservations(pass);  // first, and even with nothing pending: stale ones let go

  if (full) {
    s_->RunQueues(pass);
  } else {
    s_->RunFresh(pass, std::move(fresh));
  }

  auto ended = std::chrono::steady_clock::now();
  if (full) {
    s_->last_full_pass_end = ended;
    s_->last_full_pass_cost = ended - started;
  }
  double pass_s = std::chrono::duration<double>(ended - started).count();
  if (s_->metrics != nullptr) s_->metrics->PassDuration(pass_s);
  if (pass.batch.empty()) return;

  // Refresh job states inside the same commit.
  std::set<int64_t> touched;
  for (const PassState::Placed& p : pass.placed) touched.insert(p.job_id);
  for (int64_t id : touched) {
    JobEntry& job = s_->jobs.at(id);
    if (s_->RefreshJobState(job))
      pass.batch.emplace_back(UpdateJob{id, job.rec.state, job.rec.reason, 0});
  }

  s_->Persist(
      std::move(pass.batch), [this, placed = std::move(pass.placed), stops = std::move(pass.stops),
                              reservations = std::move(pass.new_reservations)](Status st) {
        s_->ActOnStops(st, stops, reservations);
        int64_t done_us = s_->clock->NowMicros();
        for (const PassState::Placed& p : placed) {
          JobEntry* job = s_->FindJob(p.job_id);
          if (job == nullptr) continue;
          TaskRecord& t = job->rec.tasks[static_cast<size_t>(p.index)];
          TaskRuntime& rt = job->rt[static_cast<size_t>(p.index)];
          if (t.attempt != p.attempt || !rt.committing) continue;  // moved on meanwhile
          rt.committing = false;
          if (!st.ok()) {
            // Nothing was dispatched: give the reservation back and try again later.
            s_->ReleaseTask(*job, p.index);
            t.state = TaskState::kPending;
            t.node.clear();
            t.allocations.clear();
            t.scheduled_us = 0;
            t.reason = "requeued: allocation not stored: " + st.message();
            t.pending = Verdict(PendingCode::kQueued);
            if (!CancelRequested(job->rec.state)) s_->Enqueue(*job, p.index);
            s_->RefreshJobState(*job);  // back to what the store still holds
            continue;
          }
          if (s_->metrics != nullptr) {
            s_->metrics->TaskTransition("SCHEDULED");
            s_->metrics->SchedulingLatency(static_cast<double>(done_us - job->rec.submit_us) / 1e6);
          }
          if (t.stop == StopIntent::kCancel || CancelRequested(job->rec.state)) {
            // Cancelled while the commit was in flight: never start it.
            s_->CommitTaskChanges(this, {s_->PlanFinish(*job, p.index, TaskState::kCancelled,
                                                        "cancelled before start", 0)});
            continue;
          }
          s_->SendStart(*job, p.index);
          s_->Notify(*job, "task " + TaskId(p.job_id, p.index) + ": SCHEDULED on " + t.node);
        }
        if (!st.ok()) LogWarn("core", "scheduling commit failed", {{"error", st.ToString()}});
      });
}

void Core::State::SendStart(const JobEntry& job, int32_t index) {
  const TaskRecord& t = job.rec.tasks[static_cast<size_t>(index)];
  StartTaskCommand cmd;
  cmd.task_id = TaskId(job.rec.id, index);
  cmd.job_id = job.rec.id;
  cmd.tenant = job.rec.spec.tenant;
  cmd.attempt = t.attempt;
  cmd.argv = job.rec.spec.task_template.command;
  cmd.env = job.rec.spec.task_template.env;
  for (const auto& [k, v] : job.rec.spec.task_template.secret_env) cmd.env[k] = v;  // to the agent
  cmd.max_runtime_ms = job.rec.spec.max_runtime_ms;
  cmd.epoch = epoch;
  cmd.cpu_milli = job.rec.spec.task_template.resources.cpu_milli;
  cmd.memory_mib = job.rec.spec.task_template.resources.memory_mib;
  auto node = nodes.find(t.node);
  for (const Allocation& a : t.allocations) {
    DeviceGrantCommand g{a.device_id, a.amount.milli_tflops, a.amount.vram_mib, 100};
    if (node != nodes.end()) {
      auto idx = node->second.device_index.find(a.device_id);
      if (idx != node->second.device_index.end()) {
        const DeviceRecord& d = node->second.rec.devices[static_cast<size_t>(idx->second)];
        if (d.physical.milli_tflops > 0 && !a.exclusive) {
          // MPS takes a percentage of the device's SMs: round up so a grant is never starved.
          int64_t pct =
              (a.amount.milli_tflops * 100 + d.physical.milli_tflops - 1) / d.physical.milli_tflops;
          g.thread_percentage = static_cast<int32_t>(std::clamp<int64_t>(pct, 1, 100));
        }
      }
    }
    cmd.devices.push_back(std::move(g));
  }
  if (!agents->StartTask(t.node, cmd)) {
    LogWarn("core", "agent not connected; start deferred to reconnect",
            {{"task", cmd.task_id}, {"node", t.node}});
  }
}

void Core::State::SendStop(const JobEntry& job, int32_t index, const std::string& reason) {
  const TaskRecord& t = job.rec.tasks[static_cast<size_t>(index)];
  StopTaskCommand cmd{TaskId(job.rec.id, index), t.attempt, options.stop_grace_period_ms, reason,
                      epoch};
  agents->StopTask(t.node, cmd);
}

}  // namespace gpupool
