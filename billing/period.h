// Billing periods: calendar months and days in UTC, as [start_ms, end_ms).
//
// ParsePeriod("2026-11") is November 2026; ParsePeriod("2026-11-05") is that day. Anything else
// is INVALID_ARGUMENT naming the expected forms. MonthOf(t) is the calendar month holding t.
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "base/status.h"

namespace gpupool::billing {

struct Period {
  int64_t start_ms = 0;
  int64_t end_ms = 0;
  friend bool operator==(const Period&, const Period&) = default;
};

Result<Period> ParsePeriod(std::string_view text);
Period MonthOf(int64_t unix_ms);
// "2026-11" for a whole calendar month, "2026-11-05" for a whole day, else "<start>_<end>" in
// RFC 3339 — for file names and labels.
std::string PeriodLabel(const Period& p);

// Days since 1970-01-01 of a civil date, and back (proleptic Gregorian).
int64_t DaysFromCivil(int64_t y, int64_t m, int64_t d);
void CivilFromDays(int64_t days, int64_t* y, int64_t* m, int64_t* d);

}  // namespace gpupool::billing
