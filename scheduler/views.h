// The scheduler's value types at its edges: what agents report, what the API shows (views of
// jobs, pools, nodes, tenants, quotas) and the filters it takes. Plain values; no behaviour.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "placement/workload_model.h"
#include "scheduler/device_samples.h"
#include "scheduler/model.h"

namespace gpupool {

// A fatal fault (XID / uncorrectable ECC) an agent reports on one device (device_faults.h).
struct DeviceFaultReport {
  std::string device;
  std::string reason;
  int64_t fault_id = 0;
};

// What an agent says about itself when it (re)connects.
struct AgentRegistration {
  NodeRecord node;  // name, pool, labels, cpu, memory, spill budget, devices, links
  struct Running {
    std::string task_id;
    int32_t attempt = 0;
  };
  std::vector<Running> running;
  std::vector<NodeCapabilityRecord> capabilities;  // what the agent can and cannot enforce
  std::vector<DeviceFaultReport> faults;           // devices the agent reports a fatal fault on
  // What became of the MIG layouts the node was asked for (Register.mig_outcomes).
  struct MigOutcome {
    std::string gpu;
    int64_t generation = 0;
    std::string error;     // "" = applied
    bool faulted = false;  // the previous layout was lost too: the GPU is out of service
  };
  std::vector<MigOutcome> mig_outcomes;
};

struct RegistrationResult {
  int64_t epoch = 0;
  int64_t heartbeat_interval_ms = 0;
  std::vector<std::string> stop_task_ids;  // running on the agent, unknown to the scheduler
  int64_t lease_ms = 0;                    // the node lease (scheduler/node_lease.h)
  int64_t lease_stop_grace_ms = 0;         // SIGTERM → SIGKILL when the lease lapses
  std::vector<std::string> pinned_images;  // its pool's (PoolRecord::pinned_images)
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
  bool device_fault = false;   // failed by the agent for a device fault: requeued if retries allow
  TaskUsageRecord usage;       // from the task's cgroup, on a final report
  bool lease_expired = false;  // stopped by its agent because the node lease lapsed
  // state kScheduled: not an end but the progress of its image pull (pull.attempt unset).
  PullProgress pull;
  // state kRunning: where its declared ports are reached.
  std::vector<TaskEndpoint> endpoints;
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
  std::optional<DeviceSample> sample;  // kept for the API (scheduler/device_samples.h)
  DeviceFaultReport fault;             // fault.fault_id > 0: a fatal fault (core_device_faults.cc)
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
  std::optional<DeviceSample> sample;      // the last one its agent sent
  std::optional<DeviceFaultRecord> fault;  // set while a fault keeps it out of service
  int32_t slots = 0;                       // time-slice slots it offers (0: not time-sliced)
  int32_t slots_used = 0;                  // of which taken
};

// A GPU in MIG mode (DeviceRecord::mig_enabled): the layout its agent reports and the last one
// asked of it.
struct MigGpuView {
  DeviceRecord gpu;
  std::string layout;  // FormatMigLayout of its instances
  std::optional<MigLayoutRecord> row;
  std::optional<DeviceFaultRecord> fault;
};

struct NodeView {
  NodeRecord node;  // state and last heartbeat included
  std::vector<DeviceView> devices;
  CapacityView capacity;
  int32_t running_tasks = 0;
  std::vector<NodeCapabilityRecord> capabilities;  // from the agent's last registration
  std::vector<std::string> cached_images;          // canonical references its agent last reported
  std::vector<MigGpuView> mig_gpus;
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
  bool replicas_only = false;  // only services' replicas (JobSpec::service_id != 0)
  bool unfinished_only = false;
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

}  // namespace gpupool
