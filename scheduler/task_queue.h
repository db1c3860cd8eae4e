// TaskQueue: the pending tasks, by priority level and fair-share queue, and the walk a scheduling
// pass makes over them in a QueueOrder's order.
//
// Invariants (kept by Add/Remove, the only writers):
//  * a task is queued at most once; `size()` counts the queued tasks;
//  * each queued task sits in exactly one fair-share queue, (priority, pool, tenant), whose tasks
//    are ordered oldest first; empty queues are dropped;
//  * `depth()` holds, per (pool, priority class), how many tasks are queued (no zero entries),
//    so the metrics never walk a deep queue;
//  * `fresh` holds the tasks added by submissions since the last pass (TakeFresh empties it);
//    some may have left the queue since, and the fresh walk skips those.
// Single-threaded (the core's thread). No I/O.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "scheduler/job_table.h"
#include "scheduler/queue_order.h"

namespace gpupool {

// A fair-share queue: the pending tasks of one tenant path at one priority in one pool.
struct FairKey {
  int32_t neg_priority = 0;
  std::string pool;
  std::string tenant;
  friend auto operator<=>(const FairKey&, const FairKey&) = default;
};

class TaskQueue {
 public:
  using DepthMap = std::map<std::pair<std::string, std::string>, int32_t>;
  using ShareFn = std::function<QueueOrder::Share(const FairKey&)>;
  using TryFn = std::function<void(JobEntry& job, int32_t index)>;

  // Queues task `index` of `job`; `fresh` when a submission queued it. False if already queued.
  bool Add(const JobEntry& job, int32_t index, bool fresh = false);
  // False if it was not queued.
  bool Remove(const JobEntry& job, int32_t index);
  bool Contains(const JobEntry& job, int32_t index) const;
  size_t size() const { return pending_.size(); }
  bool empty() const { return pending_.empty(); }
  const DepthMap& depth() const { return depth_; }

  // Priority levels high to low; within each, the level's queues merged by `order`; calls `try`
  // for each task still queued when its turn comes, until `budget` tasks were considered. Adds to
  // `behind[pool]` the tasks of each walked level still queued after it (they are ahead of every
  // lower level in their pool). `try` may add and remove tasks: each level is copied first (only
  // as many tasks per queue as the budget has left, so a deep backlog is not walked).
  void Walk(JobTable& jobs, const QueueOrder& order, int32_t budget, const ShareFn& share,
            const TryFn& try_place, std::map<std::string, int32_t>* behind);
  // The fresh tasks alone, by priority then age; forgets them.
  void WalkFresh(JobTable& jobs, const TryFn& try_place);
  bool has_fresh() const { return !fresh_.empty(); }
  void ForgetFresh() { fresh_.clear(); }

 private:
  struct Key {  // position: higher priority first, then older job, then lower index
    int32_t neg_priority = 0;
    int64_t job_id = 0;
    int32_t index = 0;
    friend auto operator<=>(const Key&, const Key&) = default;
  };
  static Key KeyOf(const JobEntry& job, int32_t index) { return {-job.priority, job.id(), index}; }

  std::set<Key> pending_;
  std::map<FairKey, std::set<TaskKey>> queues_;  // the same tasks as `pending_`
  DepthMap depth_;
  std::vector<Key> fresh_;
};

}  // namespace gpupool
