// Core: the node lease (see scheduler/node_lease.h): renewals answered to heartbeats, and the
// release of a lost node's tasks once its lease has certainly lapsed.
#include "scheduler/node_lease.h"

#include "base/log.h"
#include "scheduler/core.h"
#include "scheduler/core_state.h"

namespace gpupool {

LeaseAnswer Core::OnLeaseHeartbeat(const std::string& node,
                                   const std::vector<DeviceHealth>& devices) {
  LeaseAnswer answer;
  answer.epoch = s_->epoch;
  auto it = s_->nodes.find(node);
  if (it == s_->nodes.end()) return answer;
  // A lost node renews nothing: its deadline, and so the release of its tasks, stay where they
  // were; it registers again and reconciles first.
  if (it->second.rec.state == NodeState::kNotReady) return answer;
  OnHeartbeat(node, devices);
  answer.verdict = LeaseVerdict::kRenewed;
  return answer;
}

int Core::State::PlanNodeRelease(NodeEntry& node, const std::string& why,
                                 std::vector<TaskChange>* lost) {
  if (node.tasks_released) return 0;
  node.tasks_released = true;
  int released = 0;
  for (const auto& [id, i] : jobs.OnNode(node.rec.name)) {  // SCHEDULED or RUNNING there
    JobEntry& job = jobs.at(id);
    if (job.task(i).changing) continue;
    lost->push_back(PlanRequeueOrFail(job, i, why));
    ++released;
  }
  return released;
}

void Core::State::CommitNodeRelease(Core* core, std::vector<TaskChange> lost) {
  if (lost.empty()) return;
  StopGangSiblings(lost);
  CommitTaskChanges(core, std::move(lost));
}

void Core::State::StopGangSiblings(const std::vector<TaskChange>& lost) {
  std::vector<Mutation> batch;
  std::vector<TaskRecord> stopping;
  for (const TaskChange& c : lost) {
    JobEntry* job = jobs.Find(c.job_id);
    if (job == nullptr || !job->head.spec.gang) continue;
    const std::string member = TaskId(c.job_id, c.index);
    for (int32_t m = 0; m < job->size(); ++m) {
      const Task& rt = job->task(m);
      if (m == c.index || !rt.holds || rt.changing || rt.rec.stop != StopIntent::kNone) continue;
      // Placed again only whole: the lost member waits for its siblings to stop.
      job->restarting = true;
      TaskRecord t = rt.rec;
      t.stop = StopIntent::kDrain;
      t.reason = "stopping: gang member " + member + " was lost; the gang runs again whole";
      batch.emplace_back(UpdateTask{t});
      batch.emplace_back(
          AppendEvent{Event("task.gang_stopped", "task/" + TaskId(t.job_id, m),
                            "gang member " + member + " was lost", job->head.spec.tenant)});
      stopping.push_back(std::move(t));
    }
  }
  if (stopping.empty()) return;
  Persist(std::move(batch), [this, stopping = std::move(stopping)](Status st) {
    if (!st.ok()) {
      LogError("core", "gang siblings' stop not stored; they keep running",
               {{"error", st.ToString()}});
      return;
    }
    for (const TaskRecord& t : stopping) {
      JobEntry* job = jobs.Find(t.job_id);
      if (job == nullptr) continue;
      TaskRecord& cur = job->task(t.index).rec;
      const Task& rt = job->task(t.index);
      // Moved on while this was stored (ended, or its end is being stored): leave it.
      if (cur.attempt != t.attempt || cur.node != t.node || !rt.holds || rt.changing) continue;
      cur.stop = StopIntent::kDrain;
      cur.reason = t.reason;
      dispatcher.Stop(*job, t.index, t.reason);
    }
  });
}

void Core::FenceNode(const std::string& name, const std::string& by, Callback<NodeView> done) {
  GPUPOOL_DCHECK_ON_THREAD(s_->thread);
  auto it = s_->nodes.find(name);
  if (it == s_->nodes.end()) {
    done(Status::NotFound("node '" + name + "' not found"));
    return;
  }
  if (it->second.rec.state != NodeState::kNotReady) {
    done(Status::FailedPrecondition(
        "node '" + name + "' is " + std::string(ToString(it->second.rec.state)) +
        ": its agent is connected, so it is not fenced; fence only a silent (NOT_READY) node you "
        "know is powered off (cordon or drain a live one)"));
    return;
  }
  // The fence is recorded before anything moves; the requeue is a change of its own (stored
  // before it is applied, retried until it is).
  const std::string who = by.empty() ? std::string("an admin") : by;
  std::vector<Mutation> batch{AppendEvent{s_->Event(
      "node.fenced", "node/" + name, "fenced by " + who + ": its tasks are requeued now")}};
  s_->Persist(std::move(batch), [this, name, who, done = std::move(done)](Status st) {
    if (!st.ok()) {
      done(st.WithContext("node not fenced"));
      return;
    }
    auto node = s_->nodes.find(name);
    if (node == s_->nodes.end()) {
      done(Status::NotFound("node '" + name + "' not found"));
      return;
    }
    std::vector<TaskChange> lost;
    if (node->second.rec.state == NodeState::kNotReady) {
      s_->PlanNodeRelease(node->second, "node " + name + " fenced by " + who, &lost);
    }
    LogWarn("core", "node fenced; requeueing its tasks",
            {{"node", name}, {"by", who}, {"tasks", std::to_string(lost.size())}});
    s_->CommitNodeRelease(this, std::move(lost));
    done(GetNode(name));
    s_->RequestSchedule(this);
  });
}

void Core::ReleaseLapsedNodes() {
  const int64_t now = s_->clock->MonotonicMicros();
  const int64_t after_us = NodeLeaseReleaseAfterUs(s_->options);
  std::vector<TaskChange> lost;
  for (auto& [name, node] : s_->nodes) {
    if (node.tasks_released || node.rec.state != NodeState::kNotReady ||
        now - node.last_seen_us <= after_us) {
      continue;
    }
    const int released = s_->PlanNodeRelease(node, "node " + name + " lost (lease lapsed)", &lost);
    LogWarn("core", "node lease lapsed; requeueing its tasks",
            {{"node", name},
             {"silent_ms", std::to_string((now - node.last_seen_us) / 1000)},
             {"tasks", std::to_string(released)}});
  }
  s_->CommitNodeRelease(this, std::move(lost));
}

}  // namespace gpupool
