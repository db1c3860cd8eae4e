// Scheduler: the thread-safe face of the scheduler core, and all that api/ and cmd/ see of it.
//
// It owns the Core and the one thread that runs it (CoreLoop). Every call may come from any
// thread: it is posted to the loop and runs there, in the order calls were made; answers come
// back through the callbacks, ON THE LOOP THREAD — a callback must not block (hand long work to
// another thread). Nothing else reaches the Core: no Core* or Post outside scheduler/.
//
// The face is split into narrow ports, so each caller depends only on what it uses:
//  * JobsPort — submit, read, cancel, watch jobs (the API's job service, log streams);
//  * AdminPort — pools, nodes, tenants and quotas (the API's admin services, the config file);
//  * AgentEventsPort — what node agents report (the agent hub);
//  * lifecycle (Start, Stop) — the daemon's main.
// Calls that must check the caller's right to an object before acting on it take a `check`
// that runs on the loop thread, on the current record, in the same step as the action, so the
// check and the action see the same state.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/status.h"
#include "scheduler/dispatch.h"
#include "scheduler/options.h"
#include "scheduler/store.h"
#include "scheduler/views.h"

namespace gpupool {

class Core;
class CoreLoop;
class SchedulerMetrics;

template <typename T>
using SchedulerCallback = std::function<void(Result<T>)>;

class JobsPort {
 public:
  using WatchFn = std::function<void(const JobChange&)>;
  // Runs on the loop thread before the action: a non-OK status refuses it with that status.
  using JobCheck = std::function<Status(const JobRecord&)>;

  virtual ~JobsPort() = default;
  virtual void SubmitJob(JobSpec spec, SchedulerCallback<JobRecord> done) = 0;
  virtual void GetJob(int64_t id, SchedulerCallback<JobRecord> done) = 0;
  virtual void ListJobs(JobFilter filter, std::function<void(JobPage)> done) = 0;
  virtual void CancelJob(int64_t id, std::string reason, JobCheck check,
                         SchedulerCallback<JobRecord> done) = 0;
  // Registers `fn` (called at once with the current job, then on every change until the job
  // ends or Unwatch); `registered` gets the watch id (0: the job had already ended).
  virtual void WatchJob(int64_t id, JobCheck check, WatchFn fn,
                        SchedulerCallback<int64_t> registered) = 0;
  virtual void Unwatch(int64_t watch_id) = 0;
  // Appends `event` to the event log (Core::RecordEvent): for what happens to a tenant's work
  // outside the core — a service scaled, degraded, rolled out — that its webhooks follow.
  virtual void RecordEvent(EventRecord event, SchedulerCallback<bool> done) = 0;
};

class AdminPort {
 public:
  using PoolEdit = std::function<Status(PoolRecord*)>;

  virtual ~AdminPort() = default;
  virtual void CreatePool(PoolRecord pool, SchedulerCallback<PoolView> done) = 0;
  // Reads the pool, lets `edit` change its record (a non-OK status refuses), then updates it.
  virtual void UpdatePool(std::string name, PoolEdit edit, SchedulerCallback<PoolView> done) = 0;
  virtual void DeletePool(std::string name, SchedulerCallback<bool> done) = 0;
  virtual void GetPool(std::string name, SchedulerCallback<PoolView> done) = 0;
  virtual void ListPools(std::function<void(std::vector<PoolView>)> done) = 0;

  virtual void ListNodes(std::string pool, std::function<void(std::vector<NodeView>)> done) = 0;
  virtual void GetNode(std::string name, SchedulerCallback<NodeView> done) = 0;
  virtual void SetNodeState(std::string name, NodeState state,
                            SchedulerCallback<NodeView> done) = 0;
  // Returns a device an agent reported a fatal fault on to service (scheduler/device_faults.h);
  // `by` is recorded as who cleared it.
  virtual void ClearDeviceFault(std::string node, std::string device, std::string by,
                                SchedulerCallback<NodeView> done) = 0;
  // Core::SetDeviceSlots: time-slices one device (0: the pool's default); `by` is recorded.
  virtual void SetDeviceSlots(std::string node, std::string device, int32_t slots, std::string by,
                              SchedulerCallback<NodeView> done) = 0;
  // Core::SetMigLayout: re-partitions an idle GPU in MIG mode; `by` is recorded.
  virtual void SetMigLayout(std::string node, std::string gpu, std::string layout, std::string by,
                            SchedulerCallback<NodeView> done) = 0;
  // Core::FenceNode: a silent node an admin says is powered off; its tasks are requeued now.
  virtual void FenceNode(std::string name, std::string by, SchedulerCallback<NodeView> done) = 0;

  virtual void CreateTenant(TenantRecord tenant, SchedulerCallback<TenantView> done) = 0;
  virtual void DeleteTenant(std::string path, SchedulerCallback<bool> done) = 0;
  virtual void GetTenant(std::string path, SchedulerCallback<TenantView> done) = 0;
  virtual void ListTenants(std::string prefix,
                           std::function<void(std::vector<TenantView>)> done) = 0;
  virtual void SetQuota(QuotaRecord quota, SchedulerCallback<QuotaView> done) = 0;
  virtual void DeleteQuota(std::string tenant, std::string pool, SchedulerCallback<bool> done) = 0;
  virtual void GetQuota(std::string tenant, std::string pool,
                        SchedulerCallback<QuotaView> done) = 0;
  virtual void ListQuotas(std::string tenant_prefix, std::string pool,
                          std::function<void(std::vector<QuotaView>)> done) = 0;
  // Replaces the priority classes, the default class and the SKUs (a config reload); refused
  // while an unfinished job uses a class that would go.
  virtual void SetPolicy(SchedulerOptions policy, SchedulerCallback<bool> done) = 0;
};

class AgentEventsPort {
 public:
  virtual ~AgentEventsPort() = default;
  virtual void OnAgentRegister(AgentRegistration reg,
                               SchedulerCallback<RegistrationResult> done) = 0;
  virtual void OnHeartbeat(std::string node, std::vector<DeviceHealth> devices) = 0;
  // A heartbeat, then whether the node's lease is renewed (scheduler/node_lease.h).
  virtual void OnLeaseHeartbeat(std::string node, std::vector<DeviceHealth> devices,
                                std::function<void(LeaseAnswer)> done) = 0;
  virtual void OnTaskReport(TaskReport report) = 0;
  // The images the node's store holds, for placement (scheduler/image_locality.h).
  virtual void OnNodeImages(std::string node, std::vector<NodeImage> images) = 0;
};

class Scheduler final : public JobsPort, public AdminPort, public AgentEventsPort {
 public:
  // REQUIRES: every pointer outlives the scheduler; `metrics` may be null. Nothing runs until
  // Start.
  Scheduler(SchedulerOptions options, Clock* clock, Store* store, AgentGateway* agents,
            SchedulerMetrics* metrics = nullptr);
  ~Scheduler() override;  // Stop()s
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Starts the loop thread, rebuilds the core from `state` under `epoch` (waits for it), then
  // ticks every `tick` (0: never; tests tick by hand with Tick). Call once.
  Status Start(const RecoveredState& state, int64_t epoch,
               std::chrono::milliseconds tick = std::chrono::milliseconds(200));
  // Runs what is queued, then stops the loop thread. Idempotent. Callbacks not yet run are
  // dropped with the queue's closures.
  void Stop();
  // A Tick of the core, posted (tests; the daemon's loop ticks by itself).
  void Tick();
  // Waits until every call made before this one has run (tests).
  void Flush();
  int64_t epoch() const;

  // JobsPort.
  void SubmitJob(JobSpec spec, SchedulerCallback<JobRecord> done) override;
  void GetJob(int64_t id, SchedulerCallback<JobRecord> done) override;
  void ListJobs(JobFilter filter, std::function<void(JobPage)> done) override;
  void CancelJob(int64_t id, std::string reason, JobCheck check,
                 SchedulerCallback<JobRecord> done) override;
  void WatchJob(int64_t id, JobCheck check, WatchFn fn,
                SchedulerCallback<int64_t> registered) override;
  void Unwatch(int64_t watch_id) override;
  void RecordEvent(EventRecord event, SchedulerCallback<bool> done) override;

  // AdminPort.
  void CreatePool(PoolRecord pool, SchedulerCallback<PoolView> done) override;
  void UpdatePool(std::string name, PoolEdit edit, SchedulerCallback<PoolView> done) override;
  void DeletePool(std::string name, SchedulerCallback<bool> done) override;
  void GetPool(std::string name, SchedulerCallback<PoolView> done) override;
  void ListPools(std::function<void(std::vector<PoolView>)> done) override;
  void ListNodes(std::string pool, std::function<void(std::vector<NodeView>)> done) override;
  void GetNode(std::string name, SchedulerCallback<NodeView> done) override;
  void SetNodeState(std::string name, NodeState state, SchedulerCallback<NodeView> done) override;
  void SetDeviceSlots(std::string node, std::string device, int32_t slots, std::string by,
                      SchedulerCallback<NodeView> done) override;
  void ClearDeviceFault(std::string node, std::string device, std::string by,
                        SchedulerCallback<NodeView> done) override;
  void SetMigLayout(std::string node, std::string gpu, std::string layout, std::string by,
                    SchedulerCallback<NodeView> done) override;
  void FenceNode(std::string name, std::string by, SchedulerCallback<NodeView> done) override;
  void CreateTenant(TenantRecord tenant, SchedulerCallback<TenantView> done) override;
  void DeleteTenant(std::string path, SchedulerCallback<bool> done) override;
  void GetTenant(std::string path, SchedulerCallback<TenantView> done) override;
  void ListTenants(std::string prefix, std::function<void(std::vector<TenantView>)> done) override;
  void SetQuota(QuotaRecord quota, SchedulerCallback<QuotaView> done) override;
  void DeleteQuota(std::string tenant, std::string pool, SchedulerCallback<bool> done) override;
  void GetQuota(std::string tenant, std::string pool, SchedulerCallback<QuotaView> done) override;
  void ListQuotas(std::string tenant_prefix, std::string pool,
                  std::function<void(std::vector<QuotaView>)> done) override;
  void SetPolicy(SchedulerOptions policy, SchedulerCallback<bool> done) override;

  // AgentEventsPort.
  void OnAgentRegister(AgentRegistration reg, SchedulerCallback<RegistrationResult> done) override;
  void OnHeartbeat(std::string node, std::vector<DeviceHealth> devices) override;
  void OnLeaseHeartbeat(std::string node, std::vector<DeviceHealth> devices,
                        std::function<void(LeaseAnswer)> done) override;
  void OnTaskReport(TaskReport report) override;
  void OnNodeImages(std::string node, std::vector<NodeImage> images) override;

 private:
  void Post(std::function<void()> fn);

  std::unique_ptr<CoreLoop> loop_;
  std::unique_ptr<Core> core_;
  std::atomic<int64_t> epoch_{0};
};

// Runs an asynchronous scheduler call and waits for its outcome: start-up code and tests only,
// never on the loop thread (it would wait for itself).
template <typename T>
Status CallAndWait(const std::function<void(SchedulerCallback<T>)>& call) {
  auto done = std::make_shared<std::promise<Status>>();
  std::future<Status> outcome = done->get_future();
  call([done](Result<T> r) { done->set_value(r.status()); });
  return outcome.get();
}

// As CallAndWait, with the value.
template <typename T>
Result<T> CallAndGet(const std::function<void(SchedulerCallback<T>)>& call) {
  auto done = std::make_shared<std::promise<Result<T>>>();
  std::future<Result<T>> outcome = done->get_future();
  call([done](Result<T> r) { done->set_value(std::move(r)); });
  return outcome.get();
}

}  // namespace gpupool
