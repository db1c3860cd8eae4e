// PgBudgets: the BudgetStore port (billing/budget.h) on PostgreSQL, table `budgets` (migration
// 81), one row per tenant path. The alerts a budget sent are not kept here: they are events in
// the event log (billing/budget.h), written by the leader's core.
//
// One connection of its own, guarded by a mutex, reconnecting with backoff (store/pg_conn.h).
//
// Thread safety: every method may be called from any thread (calls are serialised).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "base/mutex.h"
#include "billing/budget.h"

namespace gpupool {

class PgConnection;

class PgBudgets final : public billing::BudgetStore {
 public:
  // Connects lazily; INVALID_ARGUMENT for a malformed URI. The schema comes from PgStore::Open.
  static Result<std::unique_ptr<PgBudgets>> Open(const std::string& uri);
  ~PgBudgets() override;

  Status Put(const billing::Budget& b) override;
  Result<std::vector<billing::Budget>> List(const std::string& tenant_prefix) override;
  Status Delete(const std::string& tenant) override;

 private:
  explicit PgBudgets(std::unique_ptr<PgConnection> conn);

  Mutex mu_;
  std::unique_ptr<PgConnection> conn_ GPUPOOL_GUARDED_BY(mu_);
};

}  // namespace gpupool
