// Core: the scheduling pass, dispatch, and the end of a task's attempt.
#include <algorithm>
#include <chrono>

#include "base/log.h"
#include "scheduler/core.h"
#include "scheduler/core_state.h"

namespace gpupool {
namespace {

// A placement that failed in this pass for a pool and request shape fails again for an identical
// one (nothing was released in between), so the pass skips it without asking the engine.
struct ShapeKey {
  std::string pool;
  ResourceRequest request;
  friend bool operator<(const ShapeKey& a, const ShapeKey& b) {
    if (a.pool != b.pool) return a.pool < b.pool;
    const ResourceRequest &x = a.request, &y = b.request;
    return std::tie(x.shape, x.fractional.milli_tflops, x.fractional.vram_mib, x.gpu_count,
                    x.models, x.mig_profile, x.cpu_milli, x.memory_mib) <
           std::tie(y.shape, y.fractional.milli_tflops, y.fractional.vram_mib, y.gpu_count,
                    y.models, y.mig_profile, y.cpu_milli, y.memory_mib);
  }
};

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

std::vector<Allocation> ToRecord(const placement::Allocation& a) {
  std::vector<Allocation> out;
  for (const placement::Grant& g : a.grants) {
    out.push_back(Allocation{g.device_id, g.amount, g.slots, g.exclusive});
  }
  return out;
}

}  // namespace

void Core::Schedule() {
  s_->schedule_posted = false;
  if (s_->pending.empty()) return;
  auto started = std::chrono::steady_clock::now();
  int64_t now = s_->clock->NowMicros();

  struct Placed {
    int64_t job_id;
    int32_t index;
    int32_t attempt;
  };
  std::vector<Placed> placed;
  std::vector<Mutation> batch;
  std::set<ShapeKey> failed;
  std::set<int64_t> gangs_tried;

  auto reserve = [&](JobEntry& job, int32_t i, const placement::Allocation& a) {
    TaskRecord& t = job.rec.tasks[static_cast<size_t>(i)];
    TaskRuntime& rt = job.rt[static_cast<size_t>(i)];
    rt.allocation = a;
    rt.holds = true;
    rt.committing = true;
    ++s_->running;
    s_->Dequeue(job, i);
    t.state = TaskState::kScheduled;
    t.node = a.node;
    t.allocations = ToRecord(a);
    t.scheduled_us = now;
    t.reason = "placed on " + a.node;
    batch.emplace_back(UpdateTask{t});
    placed.push_back({job.rec.id, i, t.attempt});
  };

  int32_t considered = 0;
  std::vector<QueueKey> order(s_->pending.begin(), s_->pending.end());
  for (const QueueKey& key : order) {
    if (++considered > s_->options.max_tasks_per_pass) break;
    JobEntry* job = s_->FindJob(key.job_id);
    if (job == nullptr || !s_->pending.contains(key)) continue;
    PoolEntry* pool = s_->FindPool(job->rec.spec.pool);
    if (pool == nullptr) continue;
    ShapeKey shape{job->rec.spec.pool, job->request};
    if (failed.contains(shape)) continue;
    placement::Request req = s_->ToPlacement(job->request);

    if (job->rec.spec.gang) {
      if (!gangs_tried.insert(job->rec.id).second) continue;
      std::vector<int32_t> members;
      for (int32_t i = 0; i < static_cast<int32_t>(job->rec.tasks.size()); ++i) {
        if (job->rec.tasks[static_cast<size_t>(i)].state == TaskState::kPending)
          members.push_back(i);
      }
      std::vector<placement::Request> reqs(members.size(), req);
      placement::Engine::GangResult g = pool->engine->PlaceGang(reqs);
      if (!g.placed) {
        std::string why = "gang of " + std::to_string(members.size()) + " waiting: task " +
                          std::to_string(g.failed_index) + " does not fit; " +
                          WhyNotPlaced(g.failed);
        for (int32_t i : members) job->rec.tasks[static_cast<size_t>(i)].reason = why;
        continue;
      }
      for (size_t k = 0; k < members.size(); ++k) {
        Status st = pool->engine->Commit(g.allocations[k]);
        if (!st.ok()) {
          LogError("core", "gang commit failed",
                   {{"job", std::to_string(job->rec.id)}, {"error", st.ToString()}});
          break;
        }
        reserve(*job, members[k], g.allocations[k]);
      }
      continue;
    }

    placement::Decision d = pool->engine->Place(req);
    if (!d.placed) {
      failed.insert(shape);
      job->rec.tasks[static_cast<size_t>(key.index)].reason = WhyNotPlaced(d);
      continue;
    }
    Status st = pool->engine->Commit(d.allocation);
    if (!st.ok()) {
      LogError("core", "commit of a fresh decision failed", {{"error", st.ToString()}});
      continue;
    }
    reserve(*job, key.index, d.allocation);
  }

  double pass_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  if (s_->metrics != nullptr) s_->metrics->PassDuration(pass_s);
  if (placed.empty()) return;

  // Refresh job states inside the same commit.
  std::set<int64_t> touched;
  for (const Placed& p : placed) touched.insert(p.job_id);
  for (int64_t id : touched) {
    JobEntry& job = s_->jobs.at(id);
    if (s_->RefreshJobState(job))
      batch.emplace_back(UpdateJob{id, job.rec.state, job.rec.reason, 0});
  }

  s_->Persist(std::move(batch), [this, placed = std::move(placed)](Status st) {
    int64_t done_us = s_->clock->NowMicros();
    for (const Placed& p : placed) {
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
        t.reason = "requeued: allocation not stored: " + st.message();
        if (job->rec.state != JobState::kCancelled) s_->Enqueue(*job, p.index);
        continue;
      }
      if (s_->metrics != nullptr) {
        s_->metrics->TaskTransition("SCHEDULED");
        s_->metrics->SchedulingLatency(static_cast<double>(done_us - job->rec.submit_us) / 1e6);
      }
      if (rt.stop == StopIntent::kCancel || job->rec.state == JobState::kCancelled) {
        // Cancelled while the commit was in flight: never start it.
        std::vector<Mutation> none;
        s_->FinishTask(*job, p.index, TaskState::kCancelled, "cancelled before start", 0, &none);
        s_->Persist(std::move(none), [](Status) {});
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
  cmd.max_runtime_ms = job.rec.spec.max_runtime_ms;
  cmd.epoch = epoch;
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

void Core::State::FinishTask(JobEntry& job, int32_t index, TaskState state, std::string reason,
                             int32_t exit_code, std::vector<Mutation>* out) {
  TaskRecord& t = job.rec.tasks[static_cast<size_t>(index)];
  ReleaseTask(job, index);
  Dequeue(job, index);
  job.rt[static_cast<size_t>(index)].stop = StopIntent::kNone;
  t.state = state;
  t.reason = std::move(reason);
  t.exit_code = exit_code;
  t.finished_us = clock->NowMicros();
  out->emplace_back(UpdateTask{t});
  out->emplace_back(AppendEvent{Event("task.state", "task/" + TaskId(job.rec.id, index),
                                      std::string(ToString(state)) + ": " + t.reason)});
  if (metrics != nullptr) metrics->TaskTransition(std::string(ToString(state)));
  if (RefreshJobState(job)) {
    out->emplace_back(UpdateJob{job.rec.id, job.rec.state, job.rec.reason, job.rec.finish_us});
  }
  Notify(job, "task " + TaskId(job.rec.id, index) + ": " + std::string(ToString(state)));
}

void Core::State::RequeueOrFail(JobEntry& job, int32_t index, const std::string& why,
                                std::vector<Mutation>* out) {
  TaskRecord& t = job.rec.tasks[static_cast<size_t>(index)];
  out->emplace_back(AppendEvent{Event("task.lost", "task/" + TaskId(job.rec.id, index), why)});
  if (job.rec.state == JobState::kCancelled) {
    FinishTask(job, index, TaskState::kCancelled, why, 0, out);
    return;
  }
  if (t.attempt >= RetryLimit(job)) {
    FinishTask(job, index, TaskState::kFailed, why + "; out of retries", 0, out);
    return;
  }
  ReleaseTask(job, index);
  job.rt[static_cast<size_t>(index)].stop = StopIntent::kNone;
  ++t.attempt;
  t.state = TaskState::kPending;
  t.node.clear();
  t.allocations.clear();
  t.reason = "requeued (attempt " + std::to_string(t.attempt + 1) + "): " + why;
  t.scheduled_us = t.started_us = t.finished_us = 0;
  Enqueue(job, index);
  out->emplace_back(UpdateTask{t});
  if (metrics != nullptr) metrics->TaskTransition("LOST");
  if (RefreshJobState(job))
    out->emplace_back(UpdateJob{job.rec.id, job.rec.state, job.rec.reason, 0});
  Notify(job, "task " + TaskId(job.rec.id, index) + ": requeued: " + why);
}

}  // namespace gpupool
