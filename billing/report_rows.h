// FromReportRows: the usage ledger's report rows (scheduler/usage_report.h, UsageReportRow) into
// metered quantities for rating — one quantity per non-zero unit of a row:
//
//   row field                       -> unit (base measure unchanged, exact)
//   totals.milli_tflops_seconds     -> tflops-hour      (offered TFLOPS: what the tenant held)
//   totals.vram_mib_seconds         -> vram-gib-hour
//   totals.device_seconds           -> device-hour
//   totals.mig_instance_seconds     -> mig-profile-hour (with the row's mig_profile)
//   totals.spill_mib_seconds        -> spill-gib-hour
//   totals.slot_seconds             -> slot-hour        (time-slice slots of GPUs or instances)
//
// A template over the row type, so that billing/ stays free of the scheduler: any type with
// those fields and period_start_us, tenant, pool, model, priority_class, mig_profile and service
// works.
// Rows should come from an hourly report (the shortest span a plan version is priced over), and
// `preempted` marks rows of a query restricted to attempts that ended by preemption.
//
// Thread safety: pure function.
#pragma once

#include <cstdint>
#include <vector>

#include "billing/usage.h"

namespace gpupool::billing {

template <typename Rows>
std::vector<MeteredQuantity> FromReportRows(const Rows& rows, int64_t period_ms,
                                            bool preempted = false) {
  std::vector<MeteredQuantity> out;
  for (const auto& r : rows) {
    const int64_t start_ms = r.period_start_us / 1000;
    auto add = [&](Unit unit, int64_t quantity, const std::string& profile) {
      if (quantity <= 0) return;
      MeteredQuantity q;
      q.dims = {r.tenant, r.pool, r.model, profile, r.priority_class, r.service};
      q.unit = unit;
      q.quantity = quantity;
      q.ended_by_preemption = preempted;
      q.start_ms = start_ms;
      q.end_ms = start_ms + period_ms;
      out.push_back(std::move(q));
    };
    add(Unit::kTflopsHour, r.totals.milli_tflops_seconds, "");
    add(Unit::kVramGibHour, r.totals.vram_mib_seconds, "");
    add(Unit::kDeviceHour, r.totals.device_seconds, "");
    add(Unit::kMigProfileHour, r.totals.mig_instance_seconds, r.mig_profile);
    add(Unit::kSpillGibHour, r.totals.spill_mib_seconds, "");
    add(Unit::kSlotHour, r.totals.slot_seconds, "");
  }
  return out;
}

}  // namespace gpupool::billing
