// Internal state of the Core, shared by core.cc, core_schedule.cc and core_agents.cc.
// Not part of the public API. Single-threaded: only the core's thread touches it.
#pragma once

#include <map>
#include <memory>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "placement/placement.h"
#include "scheduler/core.h"
#include "scheduler/metrics.h"

namespace gpupool {

// Position in the pending queue: higher priority first, then older job, then lower index.
struct QueueKey {
  int32_t neg_priority = 0;
  int64_t job_id = 0;
  int32_t index = 0;
  friend auto operator<=>(const QueueKey&, const QueueKey&) = default;
};

// Why the core asked a running task to stop, so the exit report is read correctly.
enum class StopIntent { kNone, kCancel, kRequeue };

// Per-task scheduling facts that are not part of the durable record.
struct TaskRuntime {
  placement::Allocation allocation;  // what the engine holds for the task
  bool holds = false;                // allocation committed in the engine
  bool committing = false;           // SCHEDULED, store commit in flight, not yet dispatched
  StopIntent stop = StopIntent::kNone;
};

struct JobEntry {
  JobRecord rec;
  int32_t priority = 0;
  ResourceRequest request;      // the task template's request with any SKU resolved
  std::vector<TaskRuntime> rt;  // one per task
};

// What the pool's devices can ever offer, for "larger than any device" admission checks.
struct PoolLimits {
  Resources largest_device;       // offered, per dimension
  int32_t most_gpus_on_node = 0;  // whole GPUs (non-MIG devices)
  std::set<std::string> mig_profiles;
  std::set<std::string> models;
};

struct PoolEntry {
  PoolRecord rec;
  std::unique_ptr<placement::Engine> engine;
  std::set<std::string> nodes;
  PoolLimits limits;
};

struct NodeEntry {
  NodeRecord rec;
  std::map<std::string, int> device_index;  // device id → index in rec.devices
  int64_t last_seen_us = 0;                 // monotonic
};

struct Watcher {
  int64_t job_id = 0;
  Core::WatchFn fn;
};

struct Core::State {
  SchedulerOptions options;
  Clock* clock = nullptr;
  Store* store = nullptr;
  AgentGateway* agents = nullptr;
  Executor executor;
  SchedulerMetrics* metrics = nullptr;

  int64_t epoch = 0;
  int64_t max_job_id = 0;
  bool schedule_posted = false;
  std::map<int64_t, JobEntry> jobs;
  std::map<std::string, PoolEntry> pools;
  std::map<std::string, NodeEntry> nodes;
  std::set<QueueKey> pending;
  std::map<int64_t, Watcher> watchers;
  std::multimap<int64_t, int64_t> watchers_by_job;
  int64_t next_watch_id = 1;
  size_t running = 0;

  // Persists a batch; `then` runs on the core's thread with the outcome.
  void Persist(std::vector<Mutation> batch, std::function<void(Status)> then);
  // Posts one scheduling pass (coalesced).
  void RequestSchedule(Core* core);
  EventRecord Event(std::string kind, std::string subject, std::string message) const;

  JobEntry* FindJob(int64_t id);
  // Task lookup by "<job>.<index>"; nullptr when unknown.
  JobEntry* FindTask(const std::string& task_id, int32_t* index);
  PoolEntry* FindPool(const std::string& name);

  // Resolves priority class and SKU and checks pool, access and size. Fills entry fields.
  Status Admit(const JobSpec& spec, int32_t* priority, ResourceRequest* request) const;
  placement::Request ToPlacement(const ResourceRequest& r) const;
  // Rebuilds the engine allocation of a task from its durable record (after restart).
  placement::Allocation AllocationOf(const JobEntry& job, const TaskRecord& task) const;

  void Enqueue(const JobEntry& job, int32_t index);
  void Dequeue(const JobEntry& job, int32_t index);
  void ReleaseTask(JobEntry& job, int32_t index);
  // Recomputes the job's state from its tasks; returns true when it changed.
  bool RefreshJobState(JobEntry& job);
  void Notify(const JobEntry& job, const std::string& message);
  void RecomputeLimits(PoolEntry& pool);
  CapacityView PoolCapacity(const PoolEntry& pool) const;
  NodeView ViewOf(const NodeEntry& node) const;
  // The task ends or is requeued for another attempt; returns mutations to persist.
  void FinishTask(JobEntry& job, int32_t index, TaskState state, std::string reason,
                  int32_t exit_code, std::vector<Mutation>* out);
  void RequeueOrFail(JobEntry& job, int32_t index, const std::string& why,
                     std::vector<Mutation>* out);
  void SendStart(const JobEntry& job, int32_t index);
  void SendStop(const JobEntry& job, int32_t index, const std::string& reason);
  int32_t RetryLimit(const JobEntry& job) const;
};

}  // namespace gpupool
