#include "billing/period.h"

#include <cstdio>

#include "billing/export.h"

namespace gpupool::billing {
namespace {

constexpr int64_t kDayMs = 86'400'000;

bool Digits(std::string_view s, int64_t* out) {
  if (s.empty()) return false;
  int64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  *out = v;
  return true;
}

int64_t DaysInMonth(int64_t y, int64_t m) {
  return DaysFromCivil(m == 12 ? y + 1 : y, m == 12 ? 1 : m + 1, 1) - DaysFromCivil(y, m, 1);
}

}  // namespace

// Howard Hinnant's days_from_civil / civil_from_days.
int64_t DaysFromCivil(int64_t y, int64_t m, int64_t d) {
  y -= m <= 2 ? 1 : 0;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const int64_t yoe = y - era * 400;
  const int64_t doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
  const int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

void CivilFromDays(int64_t days, int64_t* y, int64_t* m, int64_t* d) {
  const int64_t z = days + 719468;
  const int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const int64_t doe = z - era * 146097;
  const int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const int64_t mp = (5 * doy + 2) / 153;
  *d = doy - (153 * mp + 2) / 5 + 1;
  *m = mp < 10 ? mp + 3 : mp - 9;
  *y = yoe + era * 400 + (*m <= 2 ? 1 : 0);
}

Result<Period> ParsePeriod(std::string_view text) {
  const Status bad = Status::InvalidArgument(
      "period: '" + std::string(text) +
      "' is not a month (YYYY-MM, e.g. 2026-11) or a day (YYYY-MM-DD, e.g. 2026-11-05)");
  int64_t y = 0, m = 0, d = 0;
  if (text.size() != 7 && text.size() != 10) return bad;
  if (text[4] != '-' || !Digits(text.substr(0, 4), &y) || !Digits(text.substr(5, 2), &m)) {
    return bad;
  }
  if (y < 1970 || m < 1 || m > 12) return bad;
  if (text.size() == 7) {
    const int64_t first = DaysFromCivil(y, m, 1);
    return Period{first * kDayMs, (first + DaysInMonth(y, m)) * kDayMs};
  }
  if (text[7] != '-' || !Digits(text.substr(8, 2), &d) || d < 1 || d > DaysInMonth(y, m)) {
    return bad;
  }
  const int64_t day = DaysFromCivil(y, m, d);
  return Period{day * kDayMs, (day + 1) * kDayMs};
}

Period MonthOf(int64_t unix_ms) {
  int64_t days = unix_ms / kDayMs;
  if (unix_ms % kDayMs < 0) --days;
  int64_t y = 0, m = 0, d = 0;
  CivilFromDays(days, &y, &m, &d);
  const int64_t first = DaysFromCivil(y, m, 1);
  return Period{first * kDayMs, (first + DaysInMonth(y, m)) * kDayMs};
}

std::string PeriodLabel(const Period& p) {
  if (p.start_ms % kDayMs == 0) {
    int64_t y = 0, m = 0, d = 0;
    CivilFromDays(p.start_ms / kDayMs, &y, &m, &d);
    char buf[64];
    if (MonthOf(p.start_ms) == p) {
      std::snprintf(buf, sizeof buf, "%04lld-%02lld", static_cast<long long>(y),
                    static_cast<long long>(m));
      return buf;
    }
    if (p.end_ms - p.start_ms == kDayMs) {
      std::snprintf(buf, sizeof buf, "%04lld-%02lld-%02lld", static_cast<long long>(y),
                    static_cast<long long>(m), static_cast<long long>(d));
      return buf;
    }
  }
  return Rfc3339(p.start_ms) + "_" + Rfc3339(p.end_ms);
}

}  // namespace gpupool::billing
