// BudgetWatcher: tells tenants when their month's spend passes a budget's alert thresholds
// (billing/budget.h, docs/billing.md "Budgets"). It runs in the leading gpupoold only, on a thread
// of its own, and never blocks scheduling: every `interval` it rates each budget's subtree for the
// calendar month so far (the invoice's total: the same figure ListInvoices shows) and appends one
// `budget.threshold` event per threshold reached and not yet told, through the jobs port (the
// core's event log, which webhooks follow; scheduler/webhooks.h).
//
// Exactly one alert per (tenant, month, threshold), across restarts and fail-overs: the event log
// is the record of what was sent. Before a budget's first alert of a month, the watcher reads
// that month's alert subjects from the log (BudgetAlertPrefix); it counts an alert as sent only
// once the core acknowledged its event (durable). A failed append is read back from the log
// before the next try, so an append that committed but whose answer was lost is not repeated.
//
// A budget whose spend cannot be rated (no plan rates the tenant, the plan's currency is not the
// budget's, the ledger is away) is skipped with a warning and tried again next pass.
//
// Thread safety: Start and Stop from one thread; CheckOnce from one thread at a time (Start's
// thread, or a test's while the watcher is not started).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "base/clock.h"
#include "billing/budget.h"
#include "billing/price_plan.h"
#include "billing/usage_source.h"
#include "scheduler/scheduler.h"

namespace gpupool {

struct BudgetWatcherOptions {
  std::chrono::milliseconds interval{std::chrono::seconds(60)};
  // How long an event append may take before the pass gives up on it (tries again next pass).
  std::chrono::milliseconds append_timeout{std::chrono::seconds(30)};
};

// What the watcher reads besides the budgets and the ledger.
struct BudgetWatcherSources {
  // Every stored price plan version (Store::ListPricePlans("")).
  std::function<Result<std::vector<billing::PricePlan>>()> price_plans;
  // The event log's rows whose subject starts with the prefix, oldest first (Store::ListEvents).
  std::function<Result<std::vector<EventRecord>>(const std::string& subject_prefix)> events;
};

// One pass, as CheckOnce returns it.
struct BudgetCheck {
  int budgets = 0;  // looked at
  int alerts = 0;   // events appended
  int skipped = 0;  // budgets that could not be rated or whose alerts could not be appended
};

class BudgetWatcher {
 public:
  // REQUIRES: every pointer outlives this.
  BudgetWatcher(billing::BudgetStore* budgets, billing::UsageSource* usage, JobsPort* jobs,
                BudgetWatcherSources sources, const Clock* clock, BudgetWatcherOptions options);
  ~BudgetWatcher();  // Stop()s

  void Start();
  void Stop();

  // Rates every budget now and appends the alerts due. UNAVAILABLE when the budgets cannot be
  // listed or plans read; per-budget failures are counted in `skipped`.
  Result<BudgetCheck> CheckOnce();

 private:
  // The thresholds of `tenant` already told for `month`, read from the log when not known.
  Result<std::set<int32_t>*> Sent(const std::string& tenant, const std::string& month);
  Status Append(EventRecord event);
  void Loop();

  billing::BudgetStore* const budgets_;
  billing::UsageSource* const usage_;
  JobsPort* const jobs_;
  const BudgetWatcherSources sources_;
  const Clock* const clock_;
  const BudgetWatcherOptions options_;

  // tenant -> (month, thresholds told); touched by CheckOnce's thread only.
  std::map<std::string, std::pair<std::string, std::set<int32_t>>> sent_;

  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;  // guarded by mu_
  std::thread thread_;
};

}  // namespace gpupool
