// Budgets (billing/budget.h): what a budget may hold, which thresholds a spend reaches (exactly,
// at the boundary), the percent shown, and alert subjects that parse back.
#include "billing/budget.h"

#include <gtest/gtest.h>

namespace gpupool::billing {
namespace {

Decimal D(const char* text) { return *Decimal::Parse(text); }

Budget Make(const char* amount, std::vector<int32_t> percents = {}) {
  Budget b;
  b.tenant = "acme/research";
  b.amount = D(amount);
  b.currency = "USD";
  b.alert_percents = std::move(percents);
  return b;
}

TEST(BudgetTest, NormalizeSortsTheThresholdsAndFillsInTheDefaults) {
  Budget b = Make("1000", {100, 50, 80});
  ASSERT_TRUE(NormalizeBudget(&b).ok());
  EXPECT_EQ(b.alert_percents, (std::vector<int32_t>{50, 80, 100}));
  Budget none = Make("1000");
  ASSERT_TRUE(NormalizeBudget(&none).ok());
  EXPECT_EQ(none.alert_percents, kDefaultAlertPercents);
}

TEST(BudgetTest, BadBudgetsAreRefusedNamingTheField) {
  struct Case {
    Budget b;
    std::string field;
  };
  Budget no_tenant = Make("10");
  no_tenant.tenant = "";
  Budget at = Make("10");
  at.tenant = "acme@x";
  Budget currency = Make("10");
  currency.currency = "usd";
  std::vector<int32_t> eleven(11);
  for (int i = 0; i < 11; ++i) eleven[i] = i + 1;
  const Case cases[] = {
      {no_tenant, "budget.tenant"},
      {at, "budget.tenant"},
      {Make("0"), "budget.amount"},
      {Make("-5"), "budget.amount"},
      {currency, "budget.currency"},
      {Make("10", {0}), "budget.alert_percents"},
      {Make("10", {1001}), "budget.alert_percents"},
      {Make("10", {80, 80}), "budget.alert_percents"},
      {Make("10", eleven), "budget.alert_percents"},
  };
  for (Case c : cases) {
    Status s = NormalizeBudget(&c.b);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << c.field;
    EXPECT_NE(s.message().find(c.field), std::string::npos) << s.message();
  }
}

TEST(BudgetTest, AThresholdIsReachedAtExactlyItsShareOfTheAmount) {
  Budget b = Make("1000", {50, 80, 100, 150});
  ASSERT_TRUE(NormalizeBudget(&b).ok());
  EXPECT_TRUE(ReachedAlerts(b, D("0")).empty());
  EXPECT_TRUE(ReachedAlerts(b, D("499.999999999")).empty());
  EXPECT_EQ(ReachedAlerts(b, D("500")), (std::vector<int32_t>{50}));
  EXPECT_EQ(ReachedAlerts(b, D("999.99")), (std::vector<int32_t>{50, 80}));
  EXPECT_EQ(ReachedAlerts(b, D("1000")), (std::vector<int32_t>{50, 80, 100}));
  EXPECT_EQ(ReachedAlerts(b, D("2000")), (std::vector<int32_t>{50, 80, 100, 150}));
  EXPECT_TRUE(ReachedAlerts(b, D("-3")).empty());  // credits beyond charges
  // Nine fractional digits and a huge amount: the comparison is exact in 128 bits.
  Budget big = Make("9000000000", {100});
  ASSERT_TRUE(NormalizeBudget(&big).ok());
  EXPECT_TRUE(ReachedAlerts(big, D("8999999999.999999999")).empty());
  EXPECT_EQ(ReachedAlerts(big, D("9000000000")), (std::vector<int32_t>{100}));
}

TEST(BudgetTest, PercentUsedRoundsHalfEvenToTwoDecimals) {
  EXPECT_EQ(PercentUsed(D("812.40"), D("1000")), "81.24");
  EXPECT_EQ(PercentUsed(D("0"), D("1000")), "0.00");
  EXPECT_EQ(PercentUsed(D("1"), D("3")), "33.33");
  EXPECT_EQ(PercentUsed(D("0.00125"), D("1")), "0.12");  // 0.125 → even
  EXPECT_EQ(PercentUsed(D("2500"), D("1000")), "250.00");
  EXPECT_EQ(PercentUsed(D("1"), D("0")), "0.00");
}

TEST(BudgetTest, AlertSubjectsParseBack) {
  const std::string s = BudgetAlertSubject("acme/research", "2026-12", 80);
  EXPECT_EQ(s, "budget/acme/research@2026-12/80");
  EXPECT_TRUE(s.starts_with(BudgetAlertPrefix("acme/research", "2026-12")));
  std::optional<BudgetAlertKey> k = ParseBudgetAlertSubject(s);
  ASSERT_TRUE(k.has_value());
  EXPECT_EQ(k->tenant, "acme/research");
  EXPECT_EQ(k->month, "2026-12");
  EXPECT_EQ(k->percent, 80);
  // A tenant's prefix does not take in another tenant whose path starts the same way.
  EXPECT_FALSE(BudgetAlertSubject("acme/research2", "2026-12", 80)
                   .starts_with(BudgetAlertPrefix("acme/research", "2026-12")));
  for (const char* bad : {"job/12", "budget/acme", "budget/@2026-12/80", "budget/acme@2026-12",
                          "budget/acme@2026-12/", "budget/acme@2026-12/x", "budget/acme@/80",
                          "budget/acme@2026-12/0"}) {
    EXPECT_FALSE(ParseBudgetAlertSubject(bad).has_value()) << bad;
  }
}

}  // namespace
}  // namespace gpupool::billing
