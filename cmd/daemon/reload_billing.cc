#include "cmd/daemon/reload_billing.h"

#include <tuple>

#include "cmd/daemon/price_plans.h"

namespace gpupool {

Status ReloadPricePlans(const BillingReloadTargets& t, const DaemonConfig& running,
                        const DaemonConfig& next, int64_t now_ms,
                        std::vector<std::string>* changes) {
  if (t.plans == nullptr || running.price_plans == next.price_plans) return Status::Ok();
  Result<int> added = ApplyConfiguredPricePlans(*t.plans, next.price_plans, now_ms);
  if (!added.ok()) return added.status();  // the caller names price_plans
  if (*added > 0) {
    changes->push_back("price plans: " + std::to_string(*added) + " new version" +
                       (*added == 1 ? "" : "s") + " stored");
  }
  return Status::Ok();
}

void ReloadReportLimits(const BillingReloadTargets& t, const DaemonConfig& running,
                        const DaemonConfig& next, std::vector<std::string>* changes) {
  const MeteringOptions &a = running.scheduler.metering, &b = next.scheduler.metering;
  if (!t.set_report_limits || (a.report_concurrency == b.report_concurrency &&
                               a.report_timeout_ms == b.report_timeout_ms)) {
    return;
  }
  t.set_report_limits(b.report_concurrency, b.report_timeout_ms);
  changes->push_back("metering.report_concurrency " + std::to_string(b.report_concurrency) +
                     ", metering.report_timeout_ms " + std::to_string(b.report_timeout_ms));
}

bool CoreMeteringSame(const MeteringOptions& a, const MeteringOptions& b) {
  return std::tie(a.enabled, a.interval_s, a.metrics_tenant_depth, a.rollup_after_days,
                  a.max_intervals_per_batch) ==
         std::tie(b.enabled, b.interval_s, b.metrics_tenant_depth, b.rollup_after_days,
                  b.max_intervals_per_batch);
}

}  // namespace gpupool
