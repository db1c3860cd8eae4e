// MemoryStore: the Store port kept in memory, for the scheduler's scenario tests and the
// simulator. It passes the same conformance suite as PgStore (tests/store/store_conformance.h):
// batches are all-or-nothing (applied in order, undone in reverse order on the first error),
// writes are fenced by epoch, events keep their append order, errors use the same codes and
// messages (store/validate.h).
//
// Several MemoryStore handles may share one MemoryDatabase, the way several daemons share one
// PostgreSQL database: each handle holds the epoch its own AcquireLeadership() returned.
//
// Differences from PgStore, by design: Apply() runs `done` before it returns, on the caller's
// thread; nothing survives the process. SetUnavailable() lets tests play a database outage.
//
// Thread safety: every method may be called from any thread (one mutex per database).
#pragma once

#include <memory>

#include "scheduler/store.h"

namespace gpupool {

struct MemoryDatabase;

class MemoryStore final : public Store {
 public:
  // A store on a fresh, empty database.
  MemoryStore();
  // Another handle on `db` (e.g. a second "daemon" for fencing tests).
  explicit MemoryStore(std::shared_ptr<MemoryDatabase> db);
  ~MemoryStore() override;

  std::shared_ptr<MemoryDatabase> database() const { return db_; }

  // While set, every call fails with UNAVAILABLE and `message`; clear with an OK status.
  void SetUnavailable(Status status);

  Result<int64_t> AcquireLeadership() override;
  Result<RecoveredState> Recover() override;
  void Apply(std::vector<Mutation> batch, Done done) override;
  Result<std::vector<EventRecord>> ListEvents(const std::string& subject_prefix,
                                              int limit) override;
  void AppendAudit(std::vector<AuditRecord> records, Done done) override;
  Result<AuditPage> ListAudit(const AuditQuery& query) override;
  Result<std::vector<UsageReportRow>> QueryUsage(const UsageQuery& query) override;
  Result<PoolHistory> QueryPoolHistory(const PoolHistoryQuery& query) override;
  Result<billing::PricePlan> AddPricePlan(billing::PricePlan plan, bool create) override;
  Result<std::vector<billing::PricePlan>> ListPricePlans(const std::string& name) override;

 private:
  std::shared_ptr<MemoryDatabase> db_;
  int64_t epoch_ = 0;  // guarded by db_->mu
};

}  // namespace gpupool
