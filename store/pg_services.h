// PgServices: the ServiceStore port (scheduler/service.h) on PostgreSQL, tables `services` and
// `service_revisions` (migration 33). A service's scaling fields live on its `services` row and
// change in place; its template is kept as numbered revisions, typed as the jobs table types a
// job's template (store/pg_columns.h GP_TEMPLATE_COLS), the newest kServiceRevisionsKept of them
// (store/validate.h). Every replica reads the same rows, with no cache.
//
// Update is one conditional UPDATE on (id, generation), so of two changes made from the same
// generation (two replicas, two admins) exactly one wins and the other is ABORTED.
//
// One connection of its own, guarded by a mutex, reconnecting with backoff (store/pg_conn.h):
// the controller's reads and writes never queue behind the core's group commits.
//
// Thread safety: every method may be called from any thread (calls are serialised).
#pragma once

#include <memory>
#include <string>

#include "base/mutex.h"
#include "scheduler/service.h"

namespace gpupool {

class PgConnection;

class PgServices final : public ServiceStore {
 public:
  // Connects lazily; INVALID_ARGUMENT for a malformed URI. The schema comes from PgStore::Open's
  // migrations.
  static Result<std::unique_ptr<PgServices>> Open(const std::string& uri);
  ~PgServices() override;

  Result<ServiceRecord> Create(const ServiceRecord& s) override;
  Status Update(const ServiceRecord& next, int64_t expected_generation) override;
  Status Delete(int64_t id) override;
  Result<std::vector<ServiceRecord>> List() override;

 private:
  explicit PgServices(std::unique_ptr<PgConnection> conn);

  Mutex mu_;
  std::unique_ptr<PgConnection> conn_ GPUPOOL_GUARDED_BY(mu_);
};

}  // namespace gpupool
