// Core: the scheduler's state machine. It owns every job, task, pool and node in memory, decides
// placements through one placement::Engine per pool, persists each change through the Store port
// and acts on agents through the AgentGateway port.
//
// Single-threaded by design: every method must be called on the core's thread (the daemon runs
// it on one Asio strand; tests call it directly and drain a queue). There are no locks inside.
// Store completions come back through the injected Executor. Time comes from the injected Clock.
//
// Flows (see docs/architecture.md):
//  * Submit: validate against pools, SKUs, classes and capacity → assign an id → Store::Apply →
//    only when durable: queue the tasks and answer the caller.
//  * Schedule: pending tasks by priority class, then fair share of their tenants, then age;
//    quota check → Place (or PlaceGang) → reserve in the engine → persist SCHEDULED with
//    allocations → only when durable: StartTask to the agent. A failed commit releases the
//    reservation and puts the tasks back in the queue. A task that does not fit may preempt
//    (higher priority, or reclaim of a guarantee): its victims stop and their room is reserved
//    for it (docs/tenancy.md).
//  * Agents: Register upserts the node and reconciles tasks; TaskUpdate drives RUNNING and the
//    exits; a node silent past the heartbeat timeout turns NOT_READY and its tasks are LOST and
//    requeued (within the job's retry limit).
//
// Invariant: a task holds an allocation in its pool's engine iff it is SCHEDULED or RUNNING.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/status.h"
#include "placement/workload_model.h"
#include "scheduler/dispatch.h"
#include "scheduler/model.h"
#include "scheduler/options.h"
#include "scheduler/store.h"

namespace gpupool {

class SchedulerMetrics;

// What an agent says about itself when it (re)connects.
// A fatal fault (XID / uncorrectable ECC) an agent reports on one device (device_faults.h).
struct DeviceFaultReport {
  std::string device;
  std::string reason;
  int64_t fault_id = 0;
};

struct AgentRegistration {
  NodeRecord node;  // name, pool, labels, cpu, memory, spill budget, devices, links
  struct Running {
    std::string task_id;
    int32_t attempt = 0;
  };
  std::vector<Running> running;
  std::vector<NodeCapabilityRecord> capabilities;  // what the agent can and cannot enforce
  std::vector<DeviceFaultReport> faults;           // devices the agent reports a fatal fault on
};

struct RegistrationResult {
  int64_t epoch = 0;
  int64_t heartbeat_interval_ms = 0;
  std::vector<std::string> stop_task_ids;  // running on the agent, unknown to the scheduler
  int64_t lease_ms = 0;                    // the node lease (scheduler/node_lease.h)
  int64_t lease_stop_grace_ms = 0;         // SIGTERM → SIGKILL when the lease lapses
};

// A task transition reported by an agent.
struct TaskReport {
  std::string node;
  std::string task_id;
  int32_t attempt = 0;
  TaskState state = TaskState::kRunning;
  int32_t exit_code = 0;
  int32_t signal = 0;
  bool oom = false;
  std::string reason;
  bool device_fault = false;  // failed by the agent for a device fault: requeued if retries allow
  TaskUsageRecord usage;      // from the task's cgroup, on a final report
  bool lease_expired = false;  // stopped by its agent because the node lease lapsed
};

// The answer to a heartbeat (scheduler/node_lease.h): the node's lease is renewed, or the node
// was declared lost (or is unknown) and must register again to reconcile before it may run work.
enum class LeaseVerdict { kRenewed, kRegisterAgain };
struct LeaseAnswer {
  LeaseVerdict verdict = LeaseVerdict::kRegisterAgain;
  int64_t epoch = 0;  // the leader epoch the renewal is granted under
};

struct DeviceHealth {
  std::string id;
  bool healthy = true;
  DeviceFaultReport fault;  // fault.fault_id > 0: a fatal fault (core_device_faults.cc)
};

// Pool capacity as the API shows it.
struct CapacityView {
  Resources physical, offered, allocated;
  int32_t devices = 0;
  int32_t nodes = 0;
};

struct DeviceView {
  DeviceRecord device;
  CapacityView capacity;
  std::optional<DeviceFaultRecord> fault;  // set while a fault keeps it out of service
};

struct NodeView {
  NodeRecord node;  // state and last heartbeat included
  std::vector<DeviceView> devices;
  CapacityView capacity;
  int32_t running_tasks = 0;
  std::vector<NodeCapabilityRecord> capabilities;  // from the agent's last registration
};

// What a pool's placement has learned of its workload (scheduler/pool_workload.h).
struct LearnedWorkload {
  int64_t tasks_observed = 0;                // since start, retained jobs included
  std::vector<placement::LearnedClass> top;  // heaviest first, at most kShownLearnedClasses
};

struct PoolView {
  PoolRecord pool;
  CapacityView capacity;
  LearnedWorkload learned;
};

struct JobFilter {
  std::string tenant;  // prefix match on the tenant path
  std::string pool;
  std::optional<JobState> state;
  int64_t after_id = 0;  // pagination: ids greater than this
  int32_t limit = 100;
};

struct JobPage {
  std::vector<JobRecord> jobs;
  int64_t next_after_id = 0;  // 0 when this is the last page
};

// A change to a job, for watchers.
struct JobChange {
  JobRecord job;
  std::string message;
  int64_t time_us = 0;
};

// A quota as the API shows it: the record and what the tenant's subtree holds in the pool now.
struct QuotaView {
  QuotaRecord quota;
  QuotaAmount used;      // held by SCHEDULED and RUNNING tasks of the tenant and its descendants
  QuotaAmount borrowed;  // the part of `used` beyond `guaranteed`, per dimension
};

struct TenantView {
  TenantRecord tenant;
  std::vector<QuotaView> quotas;  // one per pool the tenant has a quota in
};

class Core {
 public:
  template <typename T>
  using Callback = std::function<void(Result<T>)>;
  using WatchFn = std::function<void(const JobChange&)>;

  // REQUIRES: every pointer outlives the core. `metrics` may be null.
  Core(SchedulerOptions options, Clock* clock, Store* store, AgentGateway* agents,
       Executor executor, SchedulerMetrics* metrics = nullptr);
  ~Core();
  Core(const Core&) = delete;
  Core& operator=(const Core&) = delete;

  // Rebuilds state from what the store holds and takes the given epoch. Call once, first.
  Status Recover(const RecoveredState& state, int64_t epoch);
  int64_t epoch() const;

  // Jobs.
  void SubmitJob(JobSpec spec, Callback<JobRecord> done);
  Result<JobRecord> GetJob(int64_t id) const;
  JobPage ListJobs(const JobFilter& filter) const;
  void CancelJob(int64_t id, std::string reason, Callback<JobRecord> done);
  // Calls `fn` with the current job at once and on every change until Unwatch or the job ends.
  Result<int64_t> WatchJob(int64_t job_id, WatchFn fn);
  void Unwatch(int64_t watch_id);
  // The node a task runs (or ran) on; NOT_FOUND for an unknown task.
  Result<std::string> NodeOfTask(const std::string& task_id) const;

  // Pools (admin).
  void CreatePool(PoolRecord pool, Callback<PoolView> done);
  void UpdatePool(PoolRecord pool, Callback<PoolView> done);
  void DeletePool(const std::string& name, Callback<bool> done);
  Result<PoolView> GetPool(const std::string& name) const;
  std::vector<PoolView> ListPools() const;

  // Tenants and quotas (admin); see docs/tenancy.md. A tenant's parent must exist; a tenant
  // with children cannot be deleted; deleting a tenant deletes its quotas. SetQuota refuses a
  // quota that would let a child exceed its parent (INVALID_ARGUMENT / FAILED_PRECONDITION
  // naming both), and a pool that does not exist (NOT_FOUND).
  void CreateTenant(TenantRecord tenant, Callback<TenantView> done);
  void DeleteTenant(const std::string& path, Callback<bool> done);
  Result<TenantView> GetTenant(const std::string& path) const;
  // Tenants whose path is `prefix` or under it ("" for all), ordered by path.
  std::vector<TenantView> ListTenants(const std::string& prefix) const;
  void SetQuota(QuotaRecord quota, Callback<QuotaView> done);
  void DeleteQuota(const std::string& tenant, const std::string& pool, Callback<bool> done);
  Result<QuotaView> GetQuota(const std::string& tenant, const std::string& pool) const;
  // Quotas of tenants under `tenant_prefix` ("" for all), in `pool` ("" for every pool).
  std::vector<QuotaView> ListQuotas(const std::string& tenant_prefix,
                                    const std::string& pool) const;

  // Nodes (admin).
  std::vector<NodeView> ListNodes(const std::string& pool) const;
  Result<NodeView> GetNode(const std::string& name) const;
  void SetNodeState(const std::string& name, NodeState state, Callback<NodeView> done);
  // Puts a device a fatal fault took out of service back in (core_device_faults.cc); NOT_FOUND
  // when the node, or a fault on that device, does not exist. `by` is recorded.
  void ClearDeviceFault(const std::string& node, const std::string& device, const std::string& by,
                        Callback<NodeView> done);

  // Agents.
  void OnAgentRegister(AgentRegistration reg, Callback<RegistrationResult> done);
  void OnHeartbeat(const std::string& node, const std::vector<DeviceHealth>& devices);
  // OnHeartbeat, then whether the node's lease is renewed (scheduler/node_lease.cc).
  LeaseAnswer OnLeaseHeartbeat(const std::string& node, const std::vector<DeviceHealth>& devices);
  void OnTaskReport(const TaskReport& report);

  // Periodic work: heartbeat timeouts, retries, a scheduling pass if anything is pending.
  void Tick();
  // Runs a scheduling pass now (normally triggered by submissions and releases).
  void Schedule();

  // Introspection for metrics and tests.
  size_t pending_tasks() const;
  size_t running_tasks() const;
  // Changes the store refused and that wait to be stored again (task changes, dirty records):
  // while it is not 0, memory holds more than the database (see core_change.cc).
  size_t unstored_changes() const;

 private:
  Status ApplyRegistration(const NodeRecord& node);
  void Reconcile(const AgentRegistration& reg, std::vector<std::string>* stop,
                 std::vector<std::pair<int64_t, int32_t>>* resend);
  void PublishMetrics();
  // Device faults (core_device_faults.cc): stores new ones, then takes the devices out.
  void OnDeviceFaults(const std::string& node, const std::vector<DeviceFaultReport>& faults);
  // Marks every device with an active fault unhealthy in its pool's engine.
  void ApplyDeviceFaults(const std::string& node);
  // Requeues the tasks of nodes whose lease has certainly lapsed (scheduler/node_lease.cc).
  void ReleaseLapsedNodes();
  // One scheduling pass; full or over the fresh submissions only (see core_state.h).
  void RunPass();

  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace gpupool
