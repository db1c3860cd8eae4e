#include "cmd/daemon/ledger_usage_source.h"

#include <iterator>

#include "billing/report_rows.h"
#include "scheduler/usage_report.h"

namespace gpupool {

Result<std::vector<billing::MeteredQuantity>> LedgerUsageSource::Usage(const std::string& tenant,
                                                                       int64_t start_ms,
                                                                       int64_t end_ms) {
  constexpr int64_t kHourMs = 3'600'000;
  UsageQuery q;
  q.tenant = tenant;
  q.period = UsagePeriod::kHour;
  q.from_us = start_ms * 1000;
  q.to_us = end_ms * 1000;
  q.split_preempted = true;  // one query, one snapshot: no interval in both halves
  GPUPOOL_ASSIGN_OR_RETURN(std::vector<UsageReportRow> rows, store_->QueryUsage(q));
  std::vector<UsageReportRow> kept, preempted;
  for (UsageReportRow& r : rows) (r.preempted ? preempted : kept).push_back(std::move(r));
  std::vector<billing::MeteredQuantity> out = billing::FromReportRows(kept, kHourMs);
  std::vector<billing::MeteredQuantity> credited =
      billing::FromReportRows(preempted, kHourMs, /*preempted=*/true);
  out.insert(out.end(), std::make_move_iterator(credited.begin()),
             std::make_move_iterator(credited.end()));
  return out;
}

}  // namespace gpupool
