// What a configuration reload (SIGHUP, cmd/daemon/reload.h) does with the billing and metering
// keys (docs/operations.md, "Reloading the configuration"):
//
//  * price_plans: when the file's list differs from what the daemon runs with, each plan is
//    stored as a new version where its terms differ from the newest stored one (exactly as at
//    start-up: ApplyConfiguredPricePlans, effective now or at its effective_time), so invoices
//    of past periods read the same. Plans are append-only: a version stored before an error
//    stays, and the next reload adds only what still differs.
//  * metering.report_concurrency and metering.report_timeout_ms: applied at once to the store's
//    report connections (the next report sees them).
//  * the core's metering settings (enabled, interval_s, metrics_tenant_depth, rollup_after_days,
//    max_intervals_per_batch): at the next restart (the open intervals of running attempts are
//    cut at the interval the core started with).
//
// Thread safety: plain functions; call from the reloading thread.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "base/status.h"
#include "cmd/daemon/config.h"

namespace gpupool {

class Store;

struct BillingReloadTargets {
  Store* plans = nullptr;  // where price plans are stored; null: price plans are not reloaded
  // Sets the store's usage report limits; null: they apply at the next restart.
  std::function<void(int concurrency, int64_t timeout_ms)> set_report_limits;
};

// Price plans: stores what changed; appends "price plans: N new versions stored" to `changes`.
// The store's error (UNAVAILABLE while the database is away) is returned as is.
Status ReloadPricePlans(const BillingReloadTargets& t, const DaemonConfig& running,
                        const DaemonConfig& next, int64_t now_ms,
                        std::vector<std::string>* changes);

// Report limits: applied at once. Cannot fail.
void ReloadReportLimits(const BillingReloadTargets& t, const DaemonConfig& running,
                        const DaemonConfig& next, std::vector<std::string>* changes);

// The core's metering settings: whether they differ (then they apply at the next restart).
bool CoreMeteringSame(const MeteringOptions& a, const MeteringOptions& b);

}  // namespace gpupool
