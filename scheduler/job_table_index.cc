// The job table's indexes (job_table.h): tasks by node, jobs by pool.
#include "scheduler/job_table.h"

namespace gpupool {
namespace {

const std::set<TaskKey> kNoTasks;
const std::set<int64_t> kNoJobs;

}  // namespace

const std::string& JobTable::PlacedOn(const TaskRecord& t) {
  static const std::string kNowhere;
  const bool placed = t.state == TaskState::kScheduled || t.state == TaskState::kRunning;
  return placed ? t.node : kNowhere;
}

void JobTable::Unindex(const TaskKey& key) {
  auto it = node_of_.find(key);
  if (it == node_of_.end()) return;
  auto tasks = on_node_.find(it->second);
  tasks->second.erase(key);
  if (tasks->second.empty()) on_node_.erase(tasks);
  node_of_.erase(it);
}

void JobTable::Reindex(const JobEntry& job, int32_t index) {
  const TaskKey key{job.id(), index};
  const std::string& node = PlacedOn(job.task(index).rec);
  auto it = node_of_.find(key);
  if (it != node_of_.end() && it->second == node) return;
  Unindex(key);
  if (node.empty()) return;
  on_node_[node].insert(key);
  node_of_.emplace(key, node);
}

JobEntry& JobTable::Insert(JobEntry entry) {
  int64_t id = entry.head.id;
  JobEntry& added = jobs_.emplace(id, std::move(entry)).first->second;
  in_pool_[added.head.spec.pool].insert(id);
  for (int32_t i = 0; i < added.size(); ++i) Reindex(added, i);
  return added;
}

JobTable::Map::iterator JobTable::Erase(Map::iterator it) {
  const JobEntry& job = it->second;
  for (int32_t i = 0; i < job.size(); ++i) Unindex({job.id(), i});
  auto pool = in_pool_.find(job.head.spec.pool);
  if (pool != in_pool_.end()) {
    pool->second.erase(job.id());
    if (pool->second.empty()) in_pool_.erase(pool);
  }
  return jobs_.erase(it);
}

const std::set<TaskKey>& JobTable::OnNode(const std::string& node) const {
  auto it = on_node_.find(node);
  return it == on_node_.end() ? kNoTasks : it->second;
}

const std::set<int64_t>& JobTable::InPool(const std::string& pool) const {
  auto it = in_pool_.find(pool);
  return it == in_pool_.end() ? kNoJobs : it->second;
}

Status JobTable::CheckIndexes() const {
  std::map<std::string, std::set<TaskKey>> on_node;
  std::map<std::string, std::set<int64_t>> in_pool;
  for (const auto& [id, job] : jobs_) {
    in_pool[job.head.spec.pool].insert(id);
    for (int32_t i = 0; i < job.size(); ++i) {
      const std::string& node = PlacedOn(job.task(i).rec);
      if (!node.empty()) on_node[node].insert({id, i});
    }
  }
  for (const auto& [node, tasks] : on_node) {
    if (OnNode(node) != tasks) {
      return Status::Internal("job table: node index of '" + node + "' holds " +
                              std::to_string(OnNode(node).size()) + " task(s), the jobs say " +
                              std::to_string(tasks.size()));
    }
  }
  for (const auto& [node, tasks] : on_node_) {
    if (!on_node.contains(node)) {
      return Status::Internal("job table: node index of '" + node + "' holds " +
                              std::to_string(tasks.size()) + " task(s) placed nowhere there");
    }
  }
  size_t indexed = 0;
  for (const auto& [node, tasks] : on_node_) indexed += tasks.size();
  if (indexed != node_of_.size()) return Status::Internal("job table: node index out of step");
  if (in_pool != in_pool_) return Status::Internal("job table: pool index differs from the jobs");
  return Status::Ok();
}

}  // namespace gpupool
