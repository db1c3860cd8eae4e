// MemoryBudgets: the BudgetStore port (billing/budget.h) in memory, for tests that need no
// database. It passes the same conformance suite as PgBudgets (tests/store/budget_conformance.cc).
//
// Thread safety: every method may be called from any thread (one mutex).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "base/mutex.h"
#include "billing/budget.h"

namespace gpupool {

class MemoryBudgets final : public billing::BudgetStore {
 public:
  Status Put(const billing::Budget& b) override;
  Result<std::vector<billing::Budget>> List(const std::string& tenant_prefix) override;
  Status Delete(const std::string& tenant) override;

 private:
  Mutex mu_;
  std::map<std::string, billing::Budget> rows_ GPUPOOL_GUARDED_BY(mu_);
};

}  // namespace gpupool
