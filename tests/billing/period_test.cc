#include "billing/period.h"

#include <gtest/gtest.h>

namespace gpupool::billing {
namespace {

constexpr int64_t kNov1 = 1'793'491'200'000;  // 2026-11-01T00:00:00Z
constexpr int64_t kDay = 86'400'000;

TEST(PeriodTest, MonthsAndDays) {
  EXPECT_EQ(*ParsePeriod("2026-11"), (Period{kNov1, kNov1 + 30 * kDay}));
  EXPECT_EQ(*ParsePeriod("2026-11-05"), (Period{kNov1 + 4 * kDay, kNov1 + 5 * kDay}));
  EXPECT_EQ(ParsePeriod("2028-02")->end_ms - ParsePeriod("2028-02")->start_ms, 29 * kDay);
  EXPECT_EQ(ParsePeriod("2026-12")->end_ms, ParsePeriod("2027-01")->start_ms);
  EXPECT_EQ(MonthOf(kNov1 + 12 * kDay + 5), *ParsePeriod("2026-11"));
  EXPECT_EQ(PeriodLabel(*ParsePeriod("2026-11")), "2026-11");
  EXPECT_EQ(PeriodLabel(*ParsePeriod("2026-11-05")), "2026-11-05");
  EXPECT_EQ(PeriodLabel({kNov1, kNov1 + 3 * kDay}), "2026-11-01T00:00:00Z_2026-11-04T00:00:00Z");
}

TEST(PeriodTest, RefusesWhatIsNotAMonthOrDay) {
  for (std::string_view bad : {"", "2026", "2026-13", "2026-00", "2026-11-31", "2026-02-29",
                               "26-11", "2026/11", "2026-11-5", "november"}) {
    Result<Period> p = ParsePeriod(bad);
    ASSERT_FALSE(p.ok()) << bad;
    EXPECT_NE(p.status().message().find("YYYY-MM"), std::string::npos);
  }
}

}  // namespace
}  // namespace gpupool::billing
