// ServiceController: keeps every service (scheduler/service.h) at the replica count it should
// have, through the jobs port — each replica is a one-task job submitted as a tenant's would be
// (JobSpec::service_id), so placement, quota, preemption, metering and billing treat it as any
// task. It runs in the leader only, beside the Scheduler, and holds no scheduling state: what it
// knows of replicas comes from watching their jobs, and after a restart from listing them.
//
// Each pass (every `tick`, and at once after a change):
//  * **Desired count.** The autoscaler's decision on the load the gateway last reported
//    (ReportLoad), within [min, max]. Until a service has a report, it keeps what it holds
//    (at least min) for its idle period, so a failover never drops replicas that serve traffic.
//  * **Replacing.** A replica that ended (failed, exited, lost beyond its retries, cancelled by
//    someone) is replaced. One that failed or exited makes the service back off before the next
//    start (1 s doubling to 5 min; reset once a replica has run 30 s), with the failure's reason.
//  * **Rollout.** A template change (a new generation) starts replicas of the new revision while
//    old and new together stay within desired + max_surge, and stops old ones while the ready
//    replicas stay at or above desired − max_unavailable; not-ready old replicas go first.
//  * **Below desired.** When fewer replicas are ready than desired the service says why, as a
//    code and a sentence: REPLICA_FAILING (backing off), PREEMPTED (a higher class took a
//    replica's devices: which job), the placement verdict of a pending replica (OVER_QUOTA,
//    NO_CAPACITY, …), or STARTING.
//  * **Deleting.** The service's record goes first (durable), then its replicas are cancelled;
//    replicas whose service no longer exists (a crash between the two) are cancelled too.
//  * **Events.** What a tenant would want told goes to the event log (subject "service/<id>",
//    the service's tenant), which its webhooks follow: service.created, .updated, .deleted,
//    .scaled (the desired count changed, and why), .degraded (short of desired for a reason
//    other than starting, once per reason), .recovered, .rollout_done. They are appended after
//    the change they tell of, without waiting: one lost to an outage is logged, not retried.
//
// Durability: a service exists once ServiceStore returned OK; a replica once its job is stored
// (SubmitJob's callback). Nothing about replicas is stored twice: the jobs are the record.
//
// Thread safety: every public method may be called from any thread. Calls into the jobs port are
// made with no lock held; its callbacks (on the scheduler's loop thread) take the lock briefly.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "base/clock.h"
#include "base/status.h"
#include "scheduler/autoscaler.h"
#include "scheduler/scheduler.h"
#include "scheduler/service.h"

namespace gpupool {

struct ServiceControllerOptions {
  std::chrono::milliseconds tick{250};  // 0: no thread; tests call Reconcile by hand
  int64_t min_backoff_ms = 1'000;
  int64_t max_backoff_ms = 300'000;
  int64_t healthy_after_ms = 30'000;  // a replica RUNNING this long resets the back-off
  int64_t hold_ms = 60'000;  // the gateway's longest hold of a request: a cold start's horizon
};

// One replica as the service shows it.
struct ServiceReplicaView {
  int64_t job_id = 0;
  int64_t generation = 0;
  TaskState state = TaskState::kPending;
  bool ready = false;  // RUNNING
  std::string node;
  std::vector<TaskEndpoint> endpoints;  // where its ports are reached, while RUNNING
  std::string reason;                   // the task's own reason (pending verdict, last exit …)
};

struct ServiceView {
  ServiceRecord record;
  int32_t desired = 0;  // the autoscaler's count within [min, max]
  std::string desired_reason;
  int32_t ready = 0;                         // replicas RUNNING, any generation
  int32_t updated = 0;                       // live replicas of the current generation
  std::vector<ServiceReplicaView> replicas;  // live ones, by job id
  // Why fewer are ready than desired ("" when not): see the header comment.
  std::string below_code;
  std::string below_reason;
  int32_t consecutive_failures = 0;
  // Requests that found no ready replica (the gateway held them until one was): how many since
  // this leader started, and the last one's wait.
  int64_t cold_starts = 0;
  int64_t last_cold_start_ms = 0;
};

class ServiceController {
 public:
  // REQUIRES: every pointer outlives the controller.
  ServiceController(ServiceStore* store, JobsPort* jobs, Clock* clock,
                    ServiceControllerOptions options = {});
  ~ServiceController();  // Stop()s
  ServiceController(const ServiceController&) = delete;
  ServiceController& operator=(const ServiceController&) = delete;

  // Loads the services, finds their unfinished replicas (and orphans), watches them, and starts
  // the pass thread. UNAVAILABLE when the store cannot be read. Call once, after the scheduler
  // has started.
  Status Start();
  void Stop();

  // Stores a new service (CheckServiceSpec first; INVALID_ARGUMENT naming the field) and starts
  // its replicas. ALREADY_EXISTS when the tenant has one of that name.
  Result<ServiceView> Create(ServiceSpec spec);
  // Reads the tenant's service `name`, lets `edit` change its spec (a non-OK status refuses; the
  // tenant, name and pool may not change), stores it — as a new generation when the revision
  // changed — and rolls it out. `check` runs on the current record first (the caller's rights).
  using ServiceCheck = std::function<Status(const ServiceRecord&)>;
  Result<ServiceView> Update(const std::string& tenant, const std::string& name,
                             const ServiceCheck& check,
                             const std::function<Status(ServiceSpec*)>& edit);
  // A new generation with the previous revision's content. FAILED_PRECONDITION with none.
  Result<ServiceView> Rollback(const std::string& tenant, const std::string& name,
                               const ServiceCheck& check);
  // Deletes the record, then stops the replicas.
  Status Delete(const std::string& tenant, const std::string& name, const ServiceCheck& check);
  Result<ServiceView> Get(const std::string& tenant, const std::string& name) const;
  // Services of `tenant_prefix` and its subtree ("" = all), by tenant then name.
  std::vector<ServiceView> List(const std::string& tenant_prefix) const;

  // The gateway's view of a service's load, fed to its autoscaler. Unknown ids are ignored.
  void ReportLoad(int64_t service_id, const ServiceLoadSample& sample);

  // A request of the service waited `wait_ms` for its first ready replica (the gateway).
  void ReportColdStart(int64_t service_id, int64_t wait_ms);

  // One pass over every service (tests; the thread runs one every tick).
  void Reconcile();

 private:
  struct Replica;
  struct Service;
  struct Action;

  std::vector<Action> PlanLocked(int64_t now_ms);
  void PlanService(Service& s, int64_t now_ms, std::vector<Action>* out);
  // A replica failed (or its job was refused): the next start waits, doubling each time.
  void BackOff(Service& s, std::string why, int64_t now_ms) const;
  void Execute(std::vector<Action> actions);
  static Action EventAction(EventRecord e);
  // Appends a service event to the event log through the jobs port, without waiting; one that
  // is refused is logged (the service's state is in its record and its jobs, not in events).
  void RecordEvent(EventRecord e);
  void Submit(int64_t service_id, int64_t generation, JobSpec spec);
  void Cancel(int64_t job_id, std::string reason);
  void Watch(int64_t job_id);
  void OnJob(const JobRecord& job);
  void Refresh(int64_t job_id);
  void CancelDone(int64_t job_id, const Status& s);
  ServiceView ViewLocked(const Service& s) const;
  // The service's record as it stands, once `check` (when set) accepts it. REQUIRES: write_mu_.
  Result<ServiceRecord> CheckedRecord(const std::string& tenant, const std::string& name,
                                      const ServiceCheck& check) const;
  std::pair<std::string, std::string> BelowLocked(const Service& s, int64_t now_ms) const;
  Service* FindLocked(const std::string& tenant, const std::string& name);
  const Service* FindLocked(const std::string& tenant, const std::string& name) const;
  void Wake();
  void Loop();
  int64_t NowMs() const { return clock_->NowMicros() / 1000; }

  ServiceStore* const store_;
  JobsPort* const jobs_;
  Clock* const clock_;
  const ServiceControllerOptions options_;

  std::mutex write_mu_;  // serialises Create/Update/Rollback/Delete (store, then memory)
  mutable std::mutex mu_;
  std::map<int64_t, std::unique_ptr<Service>> services_;  // by id
  std::map<int64_t, bool> orphans_;  // replicas of deleted services: job id → cancel asked
  std::vector<int64_t> watch_ids_;
  struct Life;  // lets callbacks that arrive after destruction do nothing
  std::shared_ptr<Life> life_;
  int64_t started_ms_ = 0;
  bool stopping_ = false;
  bool wake_ = false;
  std::condition_variable cv_;
  std::thread thread_;
};

}  // namespace gpupool
