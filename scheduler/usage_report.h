// Usage reports: the aggregate the ledger answers (Store::QueryUsage), the one query the API's
// UsageService and the billing side (rating, invoices, exports) read usage through.
//
// Units are exact integers, so sums are exact and rows add up to their totals (docs/billing.md,
// "Ledger"): compute in milli-TFLOPS × seconds, memory in MiB × seconds, devices and MIG
// instances in instance × seconds, CPU in microseconds, peak memory in bytes (a maximum, not a
// sum). The *Seconds() helpers convert to the units the API shows (TFLOPS-seconds, GiB-seconds).
//
// A row is one (period, tenant, pool, device model, priority class, MIG profile, service[,
// preempted]) group; rows come ordered by those keys. Periods are UTC: an hour, a day, or a
// calendar month, named by the period's first microsecond. A ledger interval belongs to the period
// and to [from, to) by its start; intervals never straddle an hour (they are cut at multiples of
// the metering interval, which divides an hour), and daily roll-ups (retention) start at midnight.
//
// Thread safety: plain values.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace gpupool {

enum class UsagePeriod { kHour = 1, kDay, kMonth };
std::string_view ToString(UsagePeriod p);  // "hour", "day", "month"
std::optional<UsagePeriod> ParseUsagePeriod(std::string_view s);
// The first microsecond of the UTC period that holds `time_us` (>= 0).
int64_t PeriodStart(UsagePeriod p, int64_t time_us);

// What to aggregate. Empty text filters match everything.
struct UsageQuery {
  std::string tenant;          // a subtree: this tenant and every tenant below it
  std::string pool;            // exactly this pool
  std::string model;           // exactly this device model (as the ledger names it)
  std::string priority_class;  // exactly this class
  UsagePeriod period = UsagePeriod::kDay;
  int64_t from_us = 0;  // intervals starting at or after this
  int64_t to_us = 0;    // ... and before this; 0 = no upper bound
  // Tenants are reported at this depth of the tree ("acme/research/alice" at depth 2 is
  // "acme/research"); 0 = the full path. Lets an org see its projects without every user.
  int32_t tenant_depth = 0;
  // Also group by whether the interval's attempt ended by preemption (its last interval's end
  // state is PREEMPTED): every interval of such an attempt, not only the last, lands in a row
  // with `preempted` set. Billing credits those rows (docs/billing.md, "Preemption credit").
  bool split_preempted = false;
};

// Sums over ledger intervals, in exact integer units.
struct UsageTotals {
  int64_t milli_tflops_seconds = 0;           // offered TFLOPS held × time
  int64_t physical_milli_tflops_seconds = 0;  // the physical share behind it (÷ compute ratio)
  int64_t vram_mib_seconds = 0;               // offered VRAM held × time
  int64_t spill_mib_seconds = 0;              // the part of it backed by host RAM (overcommit)
  int64_t device_seconds = 0;                 // whole devices held exclusively × time
  int64_t mig_instance_seconds = 0;           // MIG instances × time (the row's mig_profile)
  int64_t slot_seconds = 0;                   // time-slice slots × time (of GPUs or MIG instances)
  int64_t cpu_usage_us = 0;                   // sandbox CPU time of ended attempts
  int64_t peak_memory_bytes = 0;              // the largest sandbox peak (max, not sum)
  int64_t intervals = 0;                      // ledger rows behind these sums

  double TflopsSeconds() const { return static_cast<double>(milli_tflops_seconds) / 1000.0; }
  double PhysicalTflopsSeconds() const {
    return static_cast<double>(physical_milli_tflops_seconds) / 1000.0;
  }
  double VramGibSeconds() const { return static_cast<double>(vram_mib_seconds) / 1024.0; }
  double SpillGibSeconds() const { return static_cast<double>(spill_mib_seconds) / 1024.0; }

  UsageTotals& operator+=(const UsageTotals& o) {
    milli_tflops_seconds += o.milli_tflops_seconds;
    physical_milli_tflops_seconds += o.physical_milli_tflops_seconds;
    vram_mib_seconds += o.vram_mib_seconds;
    spill_mib_seconds += o.spill_mib_seconds;
    device_seconds += o.device_seconds;
    mig_instance_seconds += o.mig_instance_seconds;
    slot_seconds += o.slot_seconds;
    cpu_usage_us += o.cpu_usage_us;
    peak_memory_bytes = std::max(peak_memory_bytes, o.peak_memory_bytes);
    intervals += o.intervals;
    return *this;
  }
  friend bool operator==(const UsageTotals&, const UsageTotals&) = default;
};

// One group of the report.
struct UsageReportRow {
  int64_t period_start_us = 0;
  std::string tenant;  // at the query's tenant_depth
  std::string pool;
  std::string model;  // device model; "A100+H100" when one attempt spanned models
  std::string priority_class;
  std::string mig_profile;  // "" unless MIG instances were held
  UsageTotals totals;
  // With UsageQuery::split_preempted: the intervals of attempts that ended by preemption (a
  // grouping key after mig_profile). Always false otherwise.
  bool preempted = false;
  // The service whose replicas held it ("" for jobs); a grouping key after mig_profile, before
  // preempted (listed last so that rows written before services still read the same).
  std::string service;
  friend bool operator==(const UsageReportRow&, const UsageReportRow&) = default;
};

// `tenant` cut to its first `depth` segments (depth <= 0: unchanged).
std::string TenantAtDepth(std::string_view tenant, int32_t depth);

}  // namespace gpupool
