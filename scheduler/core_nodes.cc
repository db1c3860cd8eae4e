// Core: nodes as admins see and set them (list, get, cordon, drain, ready). A drain stores the
// node's state and each of its tasks' DRAIN stop intent first; StopTask goes out only after.
#include "scheduler/core.h"
#include "scheduler/core_state.h"

namespace gpupool {

std::vector<NodeView> Core::ListNodes(const std::string& pool) const {
  std::vector<NodeView> out;
  for (const auto& [name, node] : s_->nodes) {
    if (pool.empty() || node.rec.pool == pool) out.push_back(s_->ViewOf(node));
  }
  return out;
}

Result<NodeView> Core::GetNode(const std::string& name) const {
  auto it = s_->nodes.find(name);
  if (it == s_->nodes.end()) return Status::NotFound("node '" + name + "' not found");
  return s_->ViewOf(it->second);
}

void Core::SetNodeState(const std::string& name, NodeState state, Callback<NodeView> done) {
  auto it = s_->nodes.find(name);
  if (it == s_->nodes.end()) {
    done(Status::NotFound("node '" + name + "' not found"));
    return;
  }
  NodeEntry& node = it->second;
  if (state == NodeState::kReady && node.rec.state == NodeState::kNotReady) {
    done(Status::FailedPrecondition("node '" + name +
                                    "' is NOT_READY; it becomes ready when its agent reconnects"));
    return;
  }
  // Plan → persist → apply → act: a drain's stop intents are stored with the node's state, so a
  // daemon restart mid-drain still requeues the tasks when they exit; StopTask goes out only
  // once they are.
  std::vector<TaskRecord> draining;
  const NodeState before = node.rec.state;
  std::vector<Mutation> batch{
      gpupool::SetNodeState{name, state},
      AppendEvent{s_->Event("node.state", "node/" + name, std::string(ToString(state)))}};
  if (state == NodeState::kDraining) {
    for (const auto& [id, job] : s_->jobs) {
      for (int32_t i = 0; i < job.size(); ++i) {
        TaskRecord t = job.task(i).rec;
        const Task& rt = job.task(i);
        if (t.node != name || !rt.holds || rt.changing || t.stop != StopIntent::kNone) continue;
        t.stop = StopIntent::kDrain;
        t.reason = "stopping: node " + name + " is draining";
        batch.emplace_back(UpdateTask{t});
        draining.push_back(std::move(t));
      }
    }
  }
  s_->Persist(std::move(batch), [this, name, state, before, draining = std::move(draining),
                                 done = std::move(done)](Status st) {
    if (!st.ok()) {
      done(st.WithContext("node state not stored"));
      return;
    }
    auto found = s_->nodes.find(name);
    if (found == s_->nodes.end()) {
      done(Status::NotFound("node '" + name + "' not found"));
      return;
    }
    if (found->second.rec.state != before) {
      // Lost (or set again) while this was stored: the newer state stands, and is stored again.
      s_->PersistOrRetry({gpupool::SetNodeState{name, found->second.rec.state}});
      done(GetNode(name));
      return;
    }
    found->second.rec.state = state;
    if (PoolEntry* pool = s_->FindPool(found->second.rec.pool)) {
      (void)pool->engine->SetSchedulable(name, state == NodeState::kReady);
    }
    for (const TaskRecord& t : draining) {
      JobEntry* job = s_->jobs.Find(t.job_id);
      if (job == nullptr) continue;
      TaskRecord& cur = job->task(t.index).rec;
      const Task& rt = job->task(t.index);
      // Moved on while this was stored (ended, or its end is being stored): leave it.
      if (cur.attempt != t.attempt || cur.node != name || !rt.holds || rt.changing) continue;
      cur.stop = StopIntent::kDrain;
      cur.reason = t.reason;
      s_->dispatcher.Stop(*job, t.index, t.reason);
    }
    done(GetNode(name));
    s_->RequestSchedule(this);
  });
}

}  // namespace gpupool
