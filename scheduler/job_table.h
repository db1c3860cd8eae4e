// The job table: every job the core holds in memory, each with its tasks as ONE entity (`Task`:
// the durable record and the scheduling facts that go with it), and lookups by id.
//
// Invariants:
//  * `JobEntry::head` is the job's durable record WITHOUT its tasks (`head.tasks` is always
//    empty); the tasks are `JobEntry::tasks`, in index order (task i is `tasks[i]`, its record's
//    `index` is i). `Record()` puts the two together for the store, the API and watchers.
//  * A task holds an allocation in its pool's engine (`holds`) iff it is SCHEDULED or RUNNING,
//    or a change of it is in flight (`changing`) that has not released it yet.
//  * Jobs are ordered by id; retention (core_retention.cc) erases them, nothing else does.
//
// Single-threaded: only the core's thread touches it (see core.h). No I/O.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

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
  // REQUIRES: no job with the entry's id is in the table.
  JobEntry& Insert(JobEntry entry);

  // Iteration in id order.
  Map::iterator begin() { return jobs_.begin(); }
  Map::iterator end() { return jobs_.end(); }
  Map::const_iterator begin() const { return jobs_.begin(); }
  Map::const_iterator end() const { return jobs_.end(); }
  Map::iterator upper_bound(int64_t id) { return jobs_.upper_bound(id); }
  Map::const_iterator upper_bound(int64_t id) const { return jobs_.upper_bound(id); }
  Map::iterator Erase(Map::iterator it) { return jobs_.erase(it); }
  size_t size() const { return jobs_.size(); }
  bool empty() const { return jobs_.empty(); }

 private:
  Map jobs_;
};

}  // namespace gpupool
