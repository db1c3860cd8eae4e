// MemoryServices: the ServiceStore port (scheduler/service.h) in memory, for tests that need no
// database. It passes the same conformance suite as PgServices
// (tests/store/service_conformance.cc); Share() gives another handle on one table, the way
// replicas share one database.
//
// Thread safety: every method may be called from any thread (one mutex per table).
#pragma once

#include <map>
#include <memory>

#include "base/mutex.h"
#include "scheduler/service.h"

namespace gpupool {

class MemoryServices final : public ServiceStore {
 public:
  MemoryServices();
  std::unique_ptr<MemoryServices> Share() const;

  Result<ServiceRecord> Create(const ServiceRecord& s) override;
  Status Update(const ServiceRecord& next, int64_t expected_generation) override;
  Status Delete(int64_t id) override;
  Result<std::vector<ServiceRecord>> List() override;

 private:
  // A service as stored: its record (spec.revision and previous unset) and its revisions by
  // generation, the newest kServiceRevisionsKept.
  struct Row {
    ServiceRecord service;
    std::map<int64_t, ServiceRevision> revisions;
  };
  struct Table {
    Mutex mu;
    int64_t last_id GPUPOOL_GUARDED_BY(mu) = 0;
    std::map<int64_t, Row> rows GPUPOOL_GUARDED_BY(mu);
  };
  explicit MemoryServices(std::shared_ptr<Table> table) : table_(std::move(table)) {}

  std::shared_ptr<Table> table_;
};

}  // namespace gpupool
