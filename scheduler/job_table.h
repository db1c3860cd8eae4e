// The job table: every job the core holds in memory, each with its tasks as ONE entity (`Task`:
// the durable record and the scheduling facts that go with it), lookups by id, and two indexes
// that spare the core walks over every task: the tasks placed on a node, and the jobs of a pool.
//
// Invariants:
//  * `JobEntry::head` is the job's durable record WITHOUT its tasks (`head.tasks` is always
//    empty); the tasks are `JobEntry::tasks`, in index order (task i is `tasks[i]`, its record's
//    `index` is i). `Record()` puts the two together for the store, the API and watchers.
//  * A task holds an allocation in its pool's engine (`holds`) iff it is SCHEDULED or RUNNING,
//    or a change of it is in flight (`changing`) that has not released it yet.
//  * Jobs are ordered by id; retention (core_retention.cc) erases them, nothing else does.
//  * Node index: `OnNode(n)` is exactly the set of tasks whose record is SCHEDULED or RUNNING
//    with `node == n` ("placed on n"). Whoever changes a task record's `node` or `state` in
//    memory calls `Reindex` for it right after (the core does so in Reserve, the change path's
//    apply, a refused placement and a stored cancel); Insert and Erase keep it for whole jobs.
//    A task that holds room on a node is placed there (the invariant above), so the index also
//    finds every task holding room on a node.
//  * Pool index: `InPool(p)` is exactly the set of ids of jobs whose `spec.pool` is p; a job's
//    pool never changes once it is in the table.
//  * `CheckIndexes()` recomputes both indexes from the jobs and says what differs (tests call it
//    after every step of the core's scenarios).
//
// Single-threaded: only the core's thread touches it (see core.h). No I/O.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "base/status.h"
#include "placement/placement.h"
#include "scheduler/model.h"

namespace gpupool {

using TaskKey = std::pair<int64_t, int32_t>;  // (job id, index)

// One task: its durable record and the per-task scheduling facts that are not stored (the
// durable ones — stop intent, last preemption — are typed fields of `rec`).
struct Task {
  TaskRecord rec;
  placement::Allocation allocation;  // what the engine holds for the task
  bool holds = false;                // allocation committed in the engine
  bool committing = false;           // SCHEDULED, store commit in flight, not yet dispatched
  bool charged = false;              // `usage` is charged to the tenant tree
  QuotaAmount usage;                 // what the allocation counts against quotas
  int64_t reservation = 0;           // preemptor: the reservation keeping room for it
  int64_t reserved_for = 0;          // victim: the reservation its room goes to when it stops
  std::string stop_cause;            // victim: why it was preempted (display text for its requeue)
  std::set<int64_t> preempted_by;    // jobs that preempted this task: never preempted back
  // A TaskChange of this task is planned and not yet applied (in flight or waiting for the store
  // to come back): nothing else may plan a change of the task until it is.
  bool changing = false;
  int32_t preemptions = 0;    // times it was preempted and requeued (memory only)
  int64_t not_before_us = 0;  // back-off: not placed again before this (core_backoff.cc)
};

struct JobEntry {
  JobRecord head;  // the job's record; `head.tasks` is empty (the tasks are `tasks`)
  int32_t priority = 0;
  ResourceRequest request;      // the task template's request with any SKU resolved
  std::vector<Task> tasks;      // task i at [i]
  bool restarting = false;      // a gang preempted whole: placed again once every member stopped
  bool cancel_storing = false;  // CancelJob's change is in flight: the pass leaves the job alone

  int64_t id() const { return head.id; }
  int32_t size() const { return static_cast<int32_t>(tasks.size()); }
  bool Has(int32_t index) const { return index >= 0 && index < size(); }
  // REQUIRES: Has(index).
  Task& task(int32_t index) { return tasks[static_cast<size_t>(index)]; }
  const Task& task(int32_t index) const { return tasks[static_cast<size_t>(index)]; }
  // The job's full record: `head` with the tasks' records.
  JobRecord Record() const;
  // Splits a full record into an entry (head + tasks), runtime facts empty.
  static JobEntry FromRecord(JobRecord rec);
};

class JobTable {
 public:
  using Map = std::map<int64_t, JobEntry>;

  JobEntry* Find(int64_t id);
  const JobEntry* Find(int64_t id) const;
  // REQUIRES: the job is in the table.
  JobEntry& at(int64_t id) { return jobs_.at(id); }
  const JobEntry& at(int64_t id) const { return jobs_.at(id); }
  // Task lookup by "<job>.<index>"; nullptr when malformed or unknown.
  JobEntry* FindTask(const std::string& task_id, int32_t* index);
  const JobEntry* FindTask(const std::string& task_id, int32_t* index) const;
  // Adds the job and indexes it and its tasks. REQUIRES: no job with the entry's id is in the
  // table.
  JobEntry& Insert(JobEntry entry);
  // Removes the job and its tasks from the table and the indexes; the next job's iterator.
  Map::iterator Erase(Map::iterator it);

  // The node index follows task `index` of `job` after its record's `node` or `state` changed.
  // REQUIRES: the job is in the table and job.Has(index).
  void Reindex(const JobEntry& job, int32_t index);
  // Tasks placed on `node` (SCHEDULED or RUNNING there), in (job id, index) order.
  const std::set<TaskKey>& OnNode(const std::string& node) const;
  // Ids of the jobs of `pool`, in order.
  const std::set<int64_t>& InPool(const std::string& pool) const;
  // OK when both indexes equal what the jobs say; otherwise the first difference.
  Status CheckIndexes() const;

  // Iteration in id order.
  Map::iterator begin() { return jobs_.begin(); }
  Map::iterator end() { return jobs_.end(); }
  Map::const_iterator begin() const { return jobs_.begin(); }
  Map::const_iterator end() const { return jobs_.end(); }
  Map::iterator upper_bound(int64_t id) { return jobs_.upper_bound(id); }
  Map::const_iterator upper_bound(int64_t id) const { return jobs_.upper_bound(id); }
  size_t size() const { return jobs_.size(); }
  bool empty() const { return jobs_.empty(); }

 private:
  // The node a record is placed on, or "" when it is not placed.
  static const std::string& PlacedOn(const TaskRecord& t);
  void Unindex(const TaskKey& key);

  Map jobs_;
  std::map<std::string, std::set<TaskKey>> on_node_;  // node → tasks placed there
  std::map<TaskKey, std::string> node_of_;            // the reverse: task → its node in on_node_
  std::map<std::string, std::set<int64_t>> in_pool_;  // pool → job ids
};

}  // namespace gpupool
