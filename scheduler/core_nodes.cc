// Core: nodes as admins see and set them (list, get, cordon, drain, ready). A drain stores the
// node's state and each of its tasks' DRAIN stop intent first; StopTask goes out only after.
#include "scheduler/core.h"
#include "scheduler/core_state.h"

namespace gpupool {

std::vector<NodeView> Core::ListNodes(const std::string& pool) const {
  GPUPOOL_DCHECK_ON_THREAD(s_->thread);
  std::vector<NodeView> out;
  for (const auto& [name, node] : s_->nodes) {
    if (pool.empty() || node.rec.pool == pool) out.push_back(s_->ViewOf(node));
  }
  return out;
}

Result<NodeView> Core::GetNode(const std::string& name) const {
  GPUPOOL_DCHECK_ON_THREAD(s_->thread);
  auto it = s_->nodes.find(name);
  if (it == s_->nodes.end()) return Status::NotFound("node '" + name + "' not found");
  return s_->ViewOf(it->second);
}

// The drain's stop intents for the tasks on `name` that hold room and are not stopping or
// changing already; their rows join `batch`.
std::vector<TaskRecord> Core::State::PlanDrain(const std::string& name,
                                               std::vector<Mutation>* batch) const {
  std::vector<TaskRecord> draining;
  for (const auto& [id, i] : jobs.OnNode(name)) {
    const Task& rt = jobs.at(id).task(i);
    if (!rt.holds || rt.changing || rt.rec.stop != StopIntent::kNone) continue;
    TaskRecord t = rt.rec;
    t.stop = StopIntent::kDrain;
    t.reason = "stopping: node " + name + " is draining";
    batch->emplace_back(UpdateTask{t});
    draining.push_back(std::move(t));
  }
  return draining;
}

// The stored drain applied to the tasks as they are now, and their StopTask sent.
void Core::State::ApplyDrain(const std::string& name, const std::vector<TaskRecord>& draining) {
  for (const TaskRecord& t : draining) {
    JobEntry* job = jobs.Find(t.job_id);
    if (job == nullptr) continue;
    TaskRecord& cur = job->task(t.index).rec;
    const Task& rt = job->task(t.index);
    // Moved on while this was stored (ended, or its end is being stored): leave it.
    if (cur.attempt != t.attempt || cur.node != name || !rt.holds || rt.changing) continue;
    cur.stop = StopIntent::kDrain;
    cur.reason = t.reason;
    dispatcher.Stop(*job, t.index, t.reason);
  }
}

// Once the node's state (and a drain's stop intents) are stored: memory and the engine follow,
// unless the node moved on meanwhile.
void Core::State::ApplyNodeState(Core* core, const NodeStateChange& change, const Status& st,
                                 const Core::Callback<NodeView>& done) {
  const std::string& name = change.name;
  if (!st.ok()) return done(st.WithContext("node state not stored"));
  auto found = nodes.find(name);
  if (found == nodes.end()) return done(Status::NotFound("node '" + name + "' not found"));
  if (found->second.rec.state != change.before) {
    // Lost (or set again) while this was stored: the newer state stands, and is stored again.
    PersistOrRetry({gpupool::SetNodeState{name, found->second.rec.state}});
    return done(core->GetNode(name));
  }
  found->second.rec.state = change.state;
  if (PoolEntry* pool = FindPool(found->second.rec.pool)) {
    (void)pool->engine->SetSchedulable(name, change.state == NodeState::kReady);
  }
  ApplyDrain(name, change.draining);
  done(core->GetNode(name));
  RequestSchedule(core);
}

void Core::SetNodeState(const std::string& name, NodeState state, Callback<NodeView> done) {
  GPUPOOL_DCHECK_ON_THREAD(s_->thread);
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
  State::NodeStateChange change{name, state, node.rec.state, {}};
  std::vector<Mutation> batch{
      gpupool::SetNodeState{name, state},
      AppendEvent{s_->Event("node.state", "node/" + name, std::string(ToString(state)))}};
  if (state == NodeState::kDraining) change.draining = s_->PlanDrain(name, &batch);
  s_->Persist(std::move(batch), [this, change = std::move(change), done = std::move(done)](
                                    Status st) { s_->ApplyNodeState(this, change, st, done); });
}

}  // namespace gpupool
