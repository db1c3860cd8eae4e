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
#include "scheduler/device_samples.h"
#include "scheduler/dispatch.h"
#include "scheduler/model.h"
#include "scheduler/options.h"
#include "scheduler/store.h"
#include "scheduler/views.h"

namespace gpupool {

class SchedulerMetrics;
struct JobEntry;

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

  // A config reload's priority classes, default class and SKUs (scheduler/core_policy.cc); jobs
  // already accepted keep what they resolved. FAILED_PRECONDITION, changing nothing, when a class
  // that unfinished jobs use would go or the default class is not among `classes`.
  Status SetPolicy(const SchedulerOptions& policy);

  // Jobs.
  void SubmitJob(JobSpec spec, Callback<JobRecord> done);
  Result<JobRecord> GetJob(int64_t id) const;
  // The job a tenant submitted with this idempotency key, if any (scheduler/core_idempotency.cc).
  std::optional<JobRecord> FindJobByIdempotencyKey(const std::string& tenant,
                                                   const std::string& key) const;
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
  // An admin's word that a silent (NOT_READY) node is powered off: its tasks are requeued now
  // instead of after the node lease (scheduler/node_lease.h). FAILED_PRECONDITION for a node
  // whose agent is connected. `by` is recorded in the node's event.
  void FenceNode(const std::string& name, const std::string& by, Callback<NodeView> done);
  // Appends `event` (its time now when unset) to the event log in the next batch; `done` once it
  // is stored. INVALID_ARGUMENT without a kind or a subject (core_events.cc).
  void RecordEvent(EventRecord event, Callback<bool> done);
  // Puts a device a fatal fault took out of service back in (core_device_faults.cc); NOT_FOUND
  // when the node, or a fault on that device, does not exist. `by` is recorded.
  void ClearDeviceFault(const std::string& node, const std::string& device, const std::string& by,
                        Callback<NodeView> done);

  // Time-slices one device (or MIG instance) into `slots` slots, or gives it back to its pool's
  // default with 0 (core_device_slots.cc). Stored before placement sees it. NOT_FOUND for an
  // unknown node or device; INVALID_ARGUMENT for slots outside 0..kMaxDeviceSlots;
  // FAILED_PRECONDITION for a device that holds work, a MIG-partitioned GPU, or a node that cannot
  // enforce what the pool requires of shared work. `by` is recorded.
  void SetDeviceSlots(const std::string& node, const std::string& device, int32_t slots,
                      const std::string& by, Callback<NodeView> done);

  // Re-partitions a GPU in MIG mode into `layout` (pool/mig_layout.h's text; "" = no instance)
  // (core_mig_layouts.cc): stored, then its agent is asked; the node view shows the row until
  // the agent's registration settles it. NOT_FOUND for an unknown node or device;
  // INVALID_ARGUMENT for a layout the GPU's model refuses (named); FAILED_PRECONDITION for a MIG
  // instance, a GPU not in MIG mode, one with running work, or one whose re-layout is under way.
  void SetMigLayout(const std::string& node, const std::string& gpu, const std::string& layout,
                    const std::string& by, Callback<NodeView> done);

  // Agents.
  void OnAgentRegister(AgentRegistration reg, Callback<RegistrationResult> done);
  void OnHeartbeat(const std::string& node, const std::vector<DeviceHealth>& devices);
  // OnHeartbeat, then whether the node's lease is renewed (scheduler/node_lease.cc).
  LeaseAnswer OnLeaseHeartbeat(const std::string& node, const std::vector<DeviceHealth>& devices);
  void OnTaskReport(const TaskReport& report);
  // The images a node's store holds (scheduler/image_locality.h): kept for placement only, for
  // nodes this core knows.
  void OnNodeImages(const std::string& node, const std::vector<NodeImage>& images);

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
  // OK when the job table's indexes (tasks by node, jobs by pool) equal what its jobs say;
  // otherwise the first difference. A full walk: for tests and debugging, not for a hot path.
  Status CheckInvariants() const;

 private:
  Status ApplyRegistration(const NodeRecord& node);
  // A stored registration applied and answered (core_agents.cc).
  void AnswerRegistration(const AgentRegistration& reg, const Callback<RegistrationResult>& done);
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
  // An image pull's progress on a SCHEDULED task (core_agents.cc).
  void NotePull(JobEntry& job, int32_t index, const TaskReport& r);
  // Dynamic MIG (core_mig_layouts.cc): a registration settles the node's rows; the tick plans
  // re-layouts for the pools whose policy allows them.
  void SettleMigLayouts(const AgentRegistration& reg);
  void PlanMigLayouts();
  // UpdatePool when only the pinned images change (core_inventory.cc).
  void UpdatePoolPins(PoolRecord pool, Callback<PoolView> done);

  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace gpupool
