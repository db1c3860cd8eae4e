// TaskQueue (task_queue.h).
#include "scheduler/task_queue.h"

#include <algorithm>

namespace gpupool {

bool TaskQueue::Add(const JobEntry& job, int32_t index, bool fresh) {
  Key k = KeyOf(job, index);
  if (!pending_.insert(k).second) return false;
  ++depth_[{job.head.spec.pool, job.head.spec.priority_class}];
  queues_[FairKey{-job.priority, job.head.spec.pool, job.head.spec.tenant}].insert(
      {job.id(), index});
  if (fresh) fresh_.push_back(k);
  return true;
}

bool TaskQueue::Remove(const JobEntry& job, int32_t index) {
  if (pending_.erase(KeyOf(job, index)) == 0) return false;
  if (auto d = depth_.find({job.head.spec.pool, job.head.spec.priority_class});
      d != depth_.end() && --d->second == 0) {
    depth_.erase(d);
  }
  auto q = queues_.find(FairKey{-job.priority, job.head.spec.pool, job.head.spec.tenant});
  if (q != queues_.end()) {
    q->second.erase({job.id(), index});
    if (q->second.empty()) queues_.erase(q);
  }
  return true;
}

bool TaskQueue::Contains(const JobEntry& job, int32_t index) const {
  return pending_.contains(KeyOf(job, index));
}

void TaskQueue::Walk(JobTable& jobs, const QueueOrder& order, int32_t budget, const ShareFn& share,
                     const TryFn& try_place, std::map<std::string, int32_t>* behind) {
  int32_t considered = 0;
  auto level_it = queues_.begin();
  while (level_it != queues_.end() && considered < budget) {
    const int32_t level = level_it->first.neg_priority;
    std::vector<FairKey> keys;
    std::vector<std::vector<TaskKey>> tasks;
    const auto left = static_cast<size_t>(budget - considered);
    for (; level_it != queues_.end() && level_it->first.neg_priority == level; ++level_it) {
      keys.push_back(level_it->first);
      std::vector<TaskKey>& head = tasks.emplace_back();
      head.reserve(std::min(left, level_it->second.size()));
      for (auto it = level_it->second.begin(); it != level_it->second.end() && head.size() < left;
           ++it) {
        head.push_back(*it);
      }
    }
    order.Merge(
        tasks, [&](size_t q) { return share(keys[q]); },
        [&](const TaskKey& k) {
          ++considered;
          if (pending_.contains(Key{level, k.first, k.second})) {
            if (JobEntry* job = jobs.Find(k.first); job != nullptr) try_place(*job, k.second);
          }
          return considered < budget;
        });
    if (behind == nullptr) continue;
    for (const FairKey& key : keys) {
      if (auto q = queues_.find(key); q != queues_.end()) {
        (*behind)[key.pool] += static_cast<int32_t>(q->second.size());
      }
    }
  }
}

void TaskQueue::WalkFresh(JobTable& jobs, const TryFn& try_place) {
  std::vector<Key> fresh = std::move(fresh_);
  fresh_.clear();
  std::sort(fresh.begin(), fresh.end());
  for (const Key& k : fresh) {
    if (!pending_.contains(k)) continue;
    if (JobEntry* job = jobs.Find(k.job_id); job != nullptr) try_place(*job, k.index);
  }
}

}  // namespace gpupool
