// Budgets: a monthly spending limit on a tenant's subtree, with alerts (docs/billing.md,
// "Budgets"). A budget does not stop work: it tells the tenant, through its webhooks (event
// `budget.threshold`), when its month-to-date spend passes each alert threshold.
//
// Spend is what the subtree's invoice for the calendar month so far totals (billing/rating.h:
// charges less preemption credits), in the currency of the plan that rates the tenant; a budget
// names that currency and is refused when the plan's differs.
//
// Each alert is one event per (tenant, month, threshold), whose subject says all three:
//   budget/<tenant>@<YYYY-MM>/<percent>        e.g. "budget/acme/research@2026-12/80"
// '@' is not allowed in tenant paths, so the subject parses back (ParseBudgetAlertSubject), and a
// reader of the event log (the leader's BudgetWatcher after a fail-over) knows which alerts of a
// month were already sent.
//
// BudgetStore is the port budgets are kept behind (store/pg_budgets.h on PostgreSQL,
// store/memory_budgets.h for tests); one budget per tenant path. Errors: UNAVAILABLE when the
// database cannot be reached; NOT_FOUND from Delete for a tenant without a budget;
// INVALID_ARGUMENT for a malformed record.
//
// Thread safety: the functions are pure; BudgetStore implementations are thread-safe, every call
// synchronous and durable when it returns OK.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "billing/money.h"

namespace gpupool::billing {

// The alert thresholds a budget gets when it names none.
inline const std::vector<int32_t> kDefaultAlertPercents = {50, 80, 100};
inline constexpr size_t kMaxAlertPercents = 10;
inline constexpr int32_t kMaxAlertPercent = 1000;

struct Budget {
  std::string tenant;  // the subtree whose spend counts
  Decimal amount;      // per calendar month (UTC), > 0
  std::string currency;
  std::vector<int32_t> alert_percents;  // ascending, each 1..kMaxAlertPercent
  std::string updated_by;               // the credential that set it (audit identity)
  int64_t update_ms = 0;
  friend bool operator==(const Budget&, const Budget&) = default;
};

// INVALID_ARGUMENT naming the field: no tenant, an amount <= 0, a malformed currency, more than
// kMaxAlertPercents thresholds, one outside 1..kMaxAlertPercent, or one repeated. Sorts the
// thresholds, and fills in kDefaultAlertPercents when there are none.
Status NormalizeBudget(Budget* b);

// The thresholds `spent` has reached: every p with spent >= amount × p / 100, ascending.
std::vector<int32_t> ReachedAlerts(const Budget& b, Decimal spent);

// spent / amount as a percent with two decimals, rounded half-even ("81.24"); "0.00" for a
// non-positive amount.
std::string PercentUsed(Decimal spent, Decimal amount);

// "budget/<tenant>@<month>/<percent>" (month "2026-12"), and back. ParseBudgetAlertSubject
// answers nullopt for any other subject.
std::string BudgetAlertSubject(std::string_view tenant, std::string_view month, int32_t percent);
// The prefix every alert subject of that tenant and month starts with.
std::string BudgetAlertPrefix(std::string_view tenant, std::string_view month);
struct BudgetAlertKey {
  std::string tenant;
  std::string month;
  int32_t percent = 0;
};
std::optional<BudgetAlertKey> ParseBudgetAlertSubject(std::string_view subject);

class BudgetStore {
 public:
  virtual ~BudgetStore() = default;
  // Creates or replaces the budget of b.tenant.
  virtual Status Put(const Budget& b) = 0;
  // The budgets of `tenant_prefix` and its subtree ("" = all), by tenant.
  virtual Result<std::vector<Budget>> List(const std::string& tenant_prefix) = 0;
  virtual Status Delete(const std::string& tenant) = 0;
};

}  // namespace gpupool::billing
