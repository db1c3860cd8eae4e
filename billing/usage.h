// Metered quantities: what rating takes in. The billing module's own input type, so that rating
// does not depend on how the usage ledger stores or aggregates (an adapter turns the ledger's
// report rows into these).
//
// A MeteredQuantity is one measured amount of one billing unit for one combination of
// dimensions over one period [start_ms, end_ms). Quantities are exact integers in the unit's
// base measure — the same integers the scheduler's capacity arithmetic uses:
//
//   unit                 base measure of `quantity`      per unit-hour
//   kTflopsHour          milli-TFLOPS x seconds          3,600,000
//   kVramGibHour         MiB x seconds                   3,686,400   (1024 MiB x 3600 s)
//   kDeviceHour          device x seconds (whole GPUs)   3,600
//   kMigProfileHour      MIG instance x seconds          3,600
//   kSpillGibHour        MiB x seconds of host-RAM spill 3,686,400
//   kSlotHour            time-slice slot x seconds       3,600
//
// `ended_by_preemption` marks usage of task attempts that the scheduler preempted: that work was
// lost through no fault of the tenant, and a plan may credit it (billing/price_plan.h).
//
// Thread safety: values.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace gpupool::billing {

enum class Unit {
  kTflopsHour,
  kVramGibHour,
  kDeviceHour,
  kMigProfileHour,
  kSpillGibHour,
  kSlotHour,
};
inline constexpr Unit kAllUnits[] = {Unit::kTflopsHour,     Unit::kVramGibHour,  Unit::kDeviceHour,
                                     Unit::kMigProfileHour, Unit::kSpillGibHour, Unit::kSlotHour};

// "tflops-hour", "vram-gib-hour", "device-hour", "mig-profile-hour", "spill-gib-hour",
// "slot-hour".
std::string_view UnitName(Unit unit);
std::optional<Unit> ParseUnit(std::string_view name);
// How many base-measure units make one unit-hour (the table above).
int64_t BasePerUnitHour(Unit unit);
// What the base measure is called, for exports ("milli-TFLOPS-seconds").
std::string_view BaseMeasureName(Unit unit);

struct UsageDimensions {
  std::string tenant;          // tenant path, e.g. "acme/research"
  std::string pool;            // pool name
  std::string model;           // GPU model or SKU name, e.g. "H100-80GB" or "large"
  std::string mig_profile;     // MIG profile ("1g.10gb") for kMigProfileHour, else empty
  std::string priority_class;  // e.g. "batch"
  std::string service;         // the service whose replicas used it (its name); "" for jobs
  friend auto operator<=>(const UsageDimensions&, const UsageDimensions&) = default;
};

struct MeteredQuantity {
  UsageDimensions dims;
  Unit unit = Unit::kTflopsHour;
  int64_t quantity = 0;  // >= 0, in the unit's base measure (see above)
  bool ended_by_preemption = false;
  int64_t start_ms = 0;  // the period this quantity was metered in, [start_ms, end_ms)
  int64_t end_ms = 0;
};

}  // namespace gpupool::billing
