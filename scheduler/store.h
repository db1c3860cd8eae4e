// Store: the scheduler's port to durable storage. The scheduler owns this interface; store/
// implements it on PostgreSQL (PgStore) and in memory (MemoryStore, for scenario tests). Both
// pass the same conformance suite (tests/store/store_conformance.h).
//
// Writes are named mutations applied in batches: Apply() makes the whole batch durable in one
// transaction, then calls `done` exactly once with OK, or with an error and nothing applied
// (all-or-nothing). Concurrent Apply() calls may be folded into one commit (group commit); each
// caller still hears only after its own batch is durable. Every write is fenced by the epoch
// from AcquireLeadership(): if another leader took over, Apply fails with ABORTED.
//
// Mutations apply in batch order (a later one sees the earlier ones); batches apply in the order
// Apply() was called. Errors (the same code and message from every store; see store/validate.h):
//   INVALID_ARGUMENT  malformed mutation: text not UTF-8 or with NUL, id <= 0, a task whose job_id
//                     is not its job's, a repeated task index, an empty name or path
//   ALREADY_EXISTS    InsertJob of a job id that exists
//   NOT_FOUND         UpdateJob/UpdateTask/SetNodeState/DeletePool/DeleteTenant/DeleteQuota of
//                     something unknown; UpsertNode into an unknown pool; SetQuota for an
//                     unknown tenant
//                     AppendUsage with an interval whose end is before its start (or equal,
//                     unless it is the attempt's last) or whose key is malformed; RollUpUsage whose
//                     cutoff is not a UTC midnight
//   FAILED_PRECONDITION  DeletePool of a pool that still has nodes; Apply() before
//                     AcquireLeadership()
//   ABORTED           fenced off: another leader took a newer epoch
//   UNAVAILABLE       the database cannot be reached (nothing was applied; the caller may retry),
//                     or the connection broke during COMMIT (the message says the outcome is
//                     unknown)
//   INTERNAL          anything else
//
// Thread safety: every method may be called from any thread. `done` runs on a store thread; it
// must not block (post back to your own thread instead).
#pragma once

#include <functional>
#include <variant>
#include <vector>

#include "base/status.h"
#include "billing/price_plan.h"
#include "scheduler/audit_record.h"
#include "scheduler/model.h"
#include "scheduler/pool_history.h"
#include "scheduler/usage_ledger.h"
#include "scheduler/usage_report.h"

namespace gpupool {

struct InsertJob {
  JobRecord job;  // with its tasks
};
struct UpdateJob {  // state, reason, finish time
  int64_t job_id = 0;
  JobState state = JobState::kPending;
  std::string reason;
  int64_t finish_us = 0;
};
struct UpdateTask {  // the whole task row, allocations included (replaces them)
  TaskRecord task;
};
struct UpsertPool {
  PoolRecord pool;
};
struct DeletePool {
  std::string name;
};
struct UpsertNode {  // node and its devices/links (replaces them)
  NodeRecord node;
};
struct SetNodeState {
  std::string name;
  NodeState state = NodeState::kReady;
};
struct AppendEvent {
  EventRecord event;
};
struct UpsertTenant {
  TenantRecord tenant;
};
struct DeleteTenant {  // the tenant and its quotas; NOT_FOUND when unknown
  std::string path;
};
struct SetQuota {  // inserts or replaces the quota of (tenant, pool); the tenant must exist
  QuotaRecord quota;
};
struct DeleteQuota {  // NOT_FOUND when there is none
  std::string tenant;
  std::string pool;
};
struct SetDeviceFault {  // inserts or replaces the fault row of (node, device)
  DeviceFaultRecord fault;
};

struct SetDeviceSlots {  // inserts or replaces the row of (node, device); slots 0 deletes it
  DeviceSlotsRecord slots;
};

struct PutMigLayout {  // inserts or replaces the row of (node, gpu)
  MigLayoutRecord layout;
};

// Appends closed intervals to the usage ledger (scheduler/usage_ledger.h). An interval whose key
// (job, task, attempt, start) is stored already is skipped, not an error: a retry, a restart or a
// second writer of the same interval never counts it twice.
struct AppendUsage {
  std::vector<UsageInterval> intervals;
};
// Retention: moves the ledger intervals that start before `before_us` (a UTC midnight) into
// daily rows per (day, tenant, pool, node, model, sharing mode, class, MIG profile), summed, so
// every report over whole days keeps its totals. Intervals of attempts still SCHEDULED or
// RUNNING stay (the core resumes metering from them).
struct RollUpUsage {
  int64_t before_us = 0;
};

using Mutation =
    std::variant<InsertJob, UpdateJob, UpdateTask, UpsertPool, DeletePool, UpsertNode, SetNodeState,
                 AppendEvent, UpsertTenant, DeleteTenant, SetQuota, DeleteQuota, SetDeviceFault,
                 SetDeviceSlots, AppendUsage, RollUpUsage, PutMigLayout>;

// Everything the scheduler needs to rebuild its state after a restart.
struct RecoveredState {
  std::vector<PoolRecord> pools;
  std::vector<NodeRecord> nodes;
  std::vector<JobRecord> jobs;  // every job, with its tasks, ordered by id
  int64_t max_job_id = 0;
  std::vector<TenantRecord> tenants;             // ordered by path
  std::vector<QuotaRecord> quotas;               // ordered by tenant, then pool
  std::vector<DeviceFaultRecord> device_faults;  // cleared ones included; by node, device
  std::vector<DeviceSlotsRecord> device_slots;   // by node, device
  std::vector<MigLayoutRecord> mig_layouts;      // by node, gpu
  // For every SCHEDULED or RUNNING task attempt with ledger rows: where its metering resumes.
  std::vector<UsageMark> usage_marks;  // by job, task
};

class Store {
 public:
  using Done = std::function<void(Status)>;

  virtual ~Store() = default;

  // Takes the leader lease and returns the new epoch (strictly greater than any before).
  virtual Result<int64_t> AcquireLeadership() = 0;

  // Reads the whole durable state.
  virtual Result<RecoveredState> Recover() = 0;

  // Makes `batch` durable (all or nothing), then calls done. See the contract above.
  virtual void Apply(std::vector<Mutation> batch, Done done) = 0;

  // Reads the event log for a subject prefix ("job/12" also matches "job/123"; the prefix is
  // literal text, not a pattern), oldest first, at most `limit` rows (<= 0: no limit).
  virtual Result<std::vector<EventRecord>> ListEvents(const std::string& subject_prefix,
                                                      int limit) = 0;

  // The audit log (scheduler/audit_record.h): append-only, not fenced by the epoch (a denied
  // call is recorded whoever leads). AppendAudit makes `records` durable in one transaction
  // (ids assigned in order), then calls done; INVALID_ARGUMENT for text with NUL or not UTF-8,
  // UNAVAILABLE during an outage (nothing written). ListAudit returns a page, newest first.
  // Defaults answer UNIMPLEMENTED, for stores that keep no audit log.
  virtual void AppendAudit(std::vector<AuditRecord> records, Done done);
  virtual Result<AuditPage> ListAudit(const AuditQuery& query);

  // The usage report (scheduler/usage_report.h): ledger intervals and daily roll-ups summed per
  // (period, tenant at the query's depth, pool, model, class, MIG profile), ordered by those.
  // INVALID_ARGUMENT for a negative range or depth, UNAVAILABLE during an outage. The default
  // answers UNIMPLEMENTED, for stores that keep no ledger.
  virtual Result<std::vector<UsageReportRow>> QueryUsage(const UsageQuery& query);

  // A pool's recent tasks for a what-if replay (scheduler/pool_history.h): read-only, bounded.
  // INVALID_ARGUMENT for a query ValidatePoolHistoryQuery refuses, UNAVAILABLE during an outage.
  // The default answers UNIMPLEMENTED.
  virtual Result<PoolHistory> QueryPoolHistory(const PoolHistoryQuery& query);

  // Price plans (billing/price_plan.h, docs/billing.md): versioned, append-only, not fenced by
  // the epoch (they are configuration, not scheduling state). AddPricePlan stores `plan` as the
  // next version of its name and returns it as stored: version 1 when `create` (ALREADY_EXISTS
  // if the name exists), else the latest version + 1 (NOT_FOUND if there is none). Refused:
  // INVALID_ARGUMENT for a plan billing::ValidatePricePlan refuses or text that is not UTF-8;
  // FAILED_PRECONDITION when effective_from_ms is before the latest version's (a version never
  // takes effect before its predecessor); ABORTED when another writer added a version of the
  // same name at the same moment (retry). ListPricePlans returns every version of `name` ("" =
  // of every plan), ordered by name, then version. Defaults answer UNIMPLEMENTED.
  virtual Result<billing::PricePlan> AddPricePlan(billing::PricePlan plan, bool create);
  virtual Result<std::vector<billing::PricePlan>> ListPricePlans(const std::string& name);
};

inline void Store::AppendAudit(std::vector<AuditRecord>, Done done) {
  done(Status::Unimplemented("this store keeps no audit log"));
}
inline Result<AuditPage> Store::ListAudit(const AuditQuery&) {
  return Status::Unimplemented("this store keeps no audit log");
}
inline Result<std::vector<UsageReportRow>> Store::QueryUsage(const UsageQuery&) {
  return Status::Unimplemented("this store keeps no usage ledger");
}
inline Result<PoolHistory> Store::QueryPoolHistory(const PoolHistoryQuery&) {
  return Status::Unimplemented("this store keeps no job history");
}
inline Result<billing::PricePlan> Store::AddPricePlan(billing::PricePlan, bool) {
  return Status::Unimplemented("this store keeps no price plans");
}
inline Result<std::vector<billing::PricePlan>> Store::ListPricePlans(const std::string&) {
  return Status::Unimplemented("this store keeps no price plans");
}

}  // namespace gpupool
