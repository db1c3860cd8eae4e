// SQL text for the PostgreSQL store: one group of batches becomes one multi-statement string
// (pg_sql.cc), and result rows become domain records (pg_rows.cc). Internal to store/.
//
// Writing: GroupSql appends, in order, the statements for each mutation. Runs of InsertJob and
// AppendEvent are folded into one multi-row INSERT per table (jobs, tasks, allocations, events);
// any other mutation first flushes the pending rows, so statements still run in batch order.
// Checks that a mutation needs (the job exists, the pool has no nodes…) are statements calling
// gp_require(), which raises a gpupool SQLSTATE that PgErrorToStatus maps to a Status.
//
// Literals are quoted by AppendQuoted (store/pg_conn.h); the batch has passed ValidateBatch, so
// no text holds a NUL byte or invalid UTF-8.
//
// Thread safety: GroupSql is a value used by one thread; the readers are pure functions.
#pragma once

#include <string>
#include <vector>

#include "base/crypto/secret_box.h"
#include "scheduler/store.h"

namespace pqxx {
class field;
class result;
class row;
}  // namespace pqxx

namespace gpupool {

class GroupSql {
 public:
  // Starts with the fence: renews the lease of `epoch` or raises GPF01. Secret values are sealed
  // with `ring` (store/pg_secrets.h); a job with secrets and no ring is an error.
  GroupSql(int64_t epoch, int64_t lease_us, const SecretKeyring* ring);

  void Add(const Mutation& m);
  // The whole text, or the first error an Add() met (sealing); call once, after the last Add().
  Result<std::string> Finish();

 private:
  void Flush();
  void Insert(const JobRecord& job);
  void Event(const EventRecord& event);
  void Update(const UpdateJob& m);
  void Update(const UpdateTask& m);
  void Upsert(const PoolRecord& pool);
  void Delete(const DeletePool& m);
  void Upsert(const NodeRecord& node);
  void Set(const SetNodeState& m);
  void Upsert(const TenantRecord& tenant);
  void Delete(const DeleteTenant& m);
  void Set(const QuotaRecord& quota);
  void Delete(const DeleteQuota& m);

  // The job's request digest and secret env as SQL literals, sealed when it has secrets.
  void SealedSecrets(const JobRecord& job, std::string* digest_sql, std::string* env_sql);

  const SecretKeyring* ring_;
  Status status_;
  std::string sql_;
  std::string job_ids_, jobs_, tasks_, allocs_, events_;  // rows waiting for Flush()
  std::string idempotency_keys_;  // ("tenant", "key") pairs of the jobs waiting for Flush()
};

// A text[] column's elements (a NULL element reads as "").
std::vector<std::string> TextArray(const pqxx::field& f);

// A task template's columns (GP_TEMPLATE_COLS in pg_columns.h), shared by jobs and
// service_revisions. secret_env is not among them: jobs keep it sealed in a column of their own,
// services keep none.
inline constexpr int kTemplateColumns = 17;
// Appends the template's values in GP_TEMPLATE_COLS order, separated by commas. REQUIRES: its
// text is UTF-8 without NUL (ValidateBatch, ValidateService).
void AppendTemplateValues(std::string* sql, const TaskTemplate& t);
// The template whose GP_TEMPLATE_COLS start at column `first` of `row` (secret_env empty);
// INTERNAL, naming `what` ("job 12"), when a stored port does not parse.
Result<TaskTemplate> ReadTemplate(const pqxx::row& row, int first, const std::string& what);

// SELECT lists that the readers below expect, in this column order.
extern const char* const kSelectPools;
extern const char* const kSelectNodes;
extern const char* const kSelectDevices;
extern const char* const kSelectLinks;
extern const char* const kSelectJobs;
extern const char* const kSelectTasks;
extern const char* const kSelectAllocations;
extern const char* const kSelectTenants;
extern const char* const kSelectQuotas;

// Each returns INTERNAL when a row holds a value this build cannot read (e.g. an unknown state).
Result<std::vector<PoolRecord>> ReadPools(const pqxx::result& pools);
Result<std::vector<NodeRecord>> ReadNodes(const pqxx::result& nodes, const pqxx::result& devices,
                                          const pqxx::result& links);
// kOpen: secret env values opened with the ring (store/pg_secrets.h), an error when one does not
// open; kOmit: left out, for readers that never dispatch (history).
enum class JobSecrets { kOpen, kOmit };
Result<std::vector<JobRecord>> ReadJobs(const pqxx::result& jobs, const pqxx::result& tasks,
                                        const pqxx::result& allocations, const SecretKeyring* ring,
                                        JobSecrets secrets);
std::vector<TenantRecord> ReadTenants(const pqxx::result& tenants);
std::vector<QuotaRecord> ReadQuotas(const pqxx::result& quotas);
std::vector<EventRecord> ReadEvents(const pqxx::result& events);

// device_slots (pg_device_slots.cc): the upsert or delete for SetDeviceSlots and its reader.
extern const char* const kSelectDeviceSlots;
void AppendDeviceSlotsSql(std::string* sql, const DeviceSlotsRecord& row);
std::vector<DeviceSlotsRecord> ReadDeviceSlots(const pqxx::result& rows);

// mig_layouts (pg_mig_layouts.cc): the upsert for PutMigLayout and its reader.
extern const char* const kSelectMigLayouts;
void AppendMigLayoutSql(std::string* sql, const MigLayoutRecord& row);
Result<std::vector<MigLayoutRecord>> ReadMigLayouts(const pqxx::result& rows);

// device_faults (pg_device_faults.cc): the upsert for SetDeviceFault and its reader.
extern const char* const kSelectDeviceFaults;
void AppendDeviceFaultSql(std::string* sql, const DeviceFaultRecord& fault);
std::vector<DeviceFaultRecord> ReadDeviceFaults(const pqxx::result& rows);

}  // namespace gpupool
