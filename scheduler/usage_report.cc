#include "scheduler/usage_report.h"

#include "scheduler/usage_ledger.h"

namespace gpupool {
namespace {

constexpr int64_t kHourUs = 3600LL * 1'000'000;
constexpr int64_t kDayUs = 24 * kHourUs;

// Days since 1970-01-01 of the first day of the month holding `days` (proleptic Gregorian,
// UTC). The civil-calendar conversion in eras of 400 years (146097 days), whose years start in
// March so that the leap day is the era-year's last.
int64_t FirstOfMonth(int64_t days) {
  const int64_t z = days + 719468;  // days since 0000-03-01
  const int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const int64_t doe = z - era * 146097;                                       // [0, 146096]
  const int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;  // [0, 399]
  const int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);                // [0, 365]
  const int64_t mp = (5 * doy + 2) / 153;                                     // March = 0
  const int64_t day_of_month = doy - (153 * mp + 2) / 5;                      // 0-based
  return days - day_of_month;
}

}  // namespace

std::string_view ToString(UsagePeriod p) {
  switch (p) {
    case UsagePeriod::kHour:
      return "hour";
    case UsagePeriod::kDay:
      return "day";
    case UsagePeriod::kMonth:
      return "month";
  }
  return "";
}

std::optional<UsagePeriod> ParseUsagePeriod(std::string_view s) {
  for (UsagePeriod p : {UsagePeriod::kHour, UsagePeriod::kDay, UsagePeriod::kMonth}) {
    if (ToString(p) == s) return p;
  }
  return std::nullopt;
}

int64_t PeriodStart(UsagePeriod p, int64_t time_us) {
  switch (p) {
    case UsagePeriod::kHour:
      return time_us / kHourUs * kHourUs;
    case UsagePeriod::kDay:
      return time_us / kDayUs * kDayUs;
    case UsagePeriod::kMonth:
      return FirstOfMonth(time_us / kDayUs) * kDayUs;
  }
  return time_us;
}

std::string TenantAtDepth(std::string_view tenant, int32_t depth) {
  if (depth <= 0) return std::string(tenant);
  size_t pos = 0;
  for (int32_t d = 0; d < depth; ++d) {
    pos = tenant.find('/', d == 0 ? 0 : pos + 1);
    if (pos == std::string_view::npos) return std::string(tenant);
  }
  return std::string(tenant.substr(0, pos));
}

std::string_view ToString(AttemptEnd e) {
  switch (e) {
    case AttemptEnd::kNone:
      return "";
    case AttemptEnd::kSucceeded:
      return "SUCCEEDED";
    case AttemptEnd::kFailed:
      return "FAILED";
    case AttemptEnd::kPreempted:
      return "PREEMPTED";
    case AttemptEnd::kLost:
      return "LOST";
    case AttemptEnd::kCancelled:
      return "CANCELLED";
  }
  return "";
}

std::optional<AttemptEnd> ParseAttemptEnd(std::string_view s) {
  for (AttemptEnd e : {AttemptEnd::kNone, AttemptEnd::kSucceeded, AttemptEnd::kFailed,
                       AttemptEnd::kPreempted, AttemptEnd::kLost, AttemptEnd::kCancelled}) {
    if (ToString(e) == s) return e;
  }
  return std::nullopt;
}

}  // namespace gpupool
