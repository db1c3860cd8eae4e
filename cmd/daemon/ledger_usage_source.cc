#include "cmd/daemon/ledger_usage_source.h"

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
  GPUPOOL_ASSIGN_OR_RETURN(std::vector<UsageReportRow> rows, store_->QueryUsage(q));
  return billing::FromReportRows(rows, kHourMs);
}

}  // namespace gpupool
