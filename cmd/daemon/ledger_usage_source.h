// LedgerUsageSource: the usage ledger (Store::QueryUsage) as billing's UsageSource, so invoices
// and the usage feed are rated from what the scheduler metered (docs/billing.md, "From the
// ledger to rating").
//
// Usage(tenant, start, end) asks the store for the hourly report of `tenant`'s subtree over
// [start, end) and turns each row into metered quantities with billing::FromReportRows. Hourly
// rows are the finest a price plan version can change at, so each quantity is priced by the
// version in effect in its hour. Store errors pass through (UNAVAILABLE while the database is
// away).
//
// Preemption credits: the report is split by whether each interval's attempt ended by
// preemption (UsageQuery::split_preempted: every interval of an attempt whose last one says
// PREEMPTED), and those quantities are passed with ended_by_preemption, so rating charges them
// like the rest and credits them at the plan's preemption credit percent.
//
// Thread safety: as thread-safe as Store::QueryUsage (both stores allow concurrent queries).
#pragma once

#include <string>
#include <vector>

#include "billing/usage_source.h"
#include "scheduler/store.h"

namespace gpupool {

class LedgerUsageSource final : public billing::UsageSource {
 public:
  explicit LedgerUsageSource(Store* store) : store_(store) {}
  Result<std::vector<billing::MeteredQuantity>> Usage(const std::string& tenant, int64_t start_ms,
                                                      int64_t end_ms) override;

 private:
  Store* store_;  // not owned
};

}  // namespace gpupool
