#include "billing/money.h"

#include <gtest/gtest.h>

namespace gpupool::billing {
namespace {

Decimal D(std::string_view s) { return Decimal::Parse(s).value(); }

TEST(DecimalTest, ParsesAndPrintsExactly) {
  EXPECT_EQ(D("12").nanos(), 12'000'000'000);
  EXPECT_EQ(D("0.45").nanos(), 450'000'000);
  EXPECT_EQ(D("-0.000000001").nanos(), -1);
  EXPECT_EQ(D("1.000000001").ToString(), "1.000000001");
  EXPECT_EQ(D("2.50").ToString(), "2.5");
  EXPECT_EQ(D("-3").ToString(), "-3");
  EXPECT_EQ(D("0").ToString(), "0");
  EXPECT_EQ(D("2.5").ToFixed(2), "2.50");
  EXPECT_EQ(D("-0.05").ToFixed(2), "-0.05");
}

TEST(DecimalTest, RefusesWhatIsNotADecimal) {
  for (std::string_view bad :
       {"", "-", "1.", ".5", "1e3", "1,5", " 1", "+1", "0.1234567891", "99999999999", "abc"}) {
    Result<Decimal> d = Decimal::Parse(bad, "rate.price");
    ASSERT_FALSE(d.ok()) << bad;
    EXPECT_EQ(d.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(d.status().message().find("rate.price"), std::string::npos) << d.status().message();
  }
}

// Banker's rounding to cents: ties go to the even cent.
TEST(RoundHalfEvenTest, TiesGoToEven) {
  struct Case {
    __int128 num;  // nanos
    __int128 den;
    int digits;
    const char* want;
  };
  const Case cases[] = {
      {12'345'000'000, 1000, 2, "0.01"},  // 0.012345 → 0.01
      {5'000'000, 1, 2, "0.00"},          // 0.005 → tie, 0 is even → 0.00
      {15'000'000, 1, 2, "0.02"},         // 0.015 → tie, 2 is even → 0.02
      {25'000'000, 1, 2, "0.02"},         // 0.025 → tie → 0.02
      {25'000'001, 1, 2, "0.03"},         // just above the tie → up
      {-15'000'000, 1, 2, "-0.02"},       // symmetric for negatives
      {1'000'000'000, 3, 2, "0.33"},      // 1/3 → 0.33
      {2'000'000'000, 3, 2, "0.67"},      // 2/3 → 0.67
      {2'500'000'000, 1, 0, "2"},         // 2.5 → 2 (JPY)
      {3'500'000'000, 1, 0, "4"},         // 3.5 → 4
  };
  for (const Case& c : cases) {
    Result<Decimal> d = RoundHalfEven(c.num, c.den, c.digits);
    ASSERT_TRUE(d.ok());
    EXPECT_EQ(d->ToFixed(c.digits), c.want) << static_cast<long long>(c.num);
  }
}

TEST(MoneyTest, RefusesToMixCurrencies) {
  const Money usd("USD", D("1.50"));
  const Money eur("EUR", D("2"));
  Result<Money> sum = Add(usd, eur);
  ASSERT_FALSE(sum.ok());
  EXPECT_EQ(sum.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(sum.status().message(), "cannot add amounts in USD and EUR: currencies differ");
  EXPECT_FALSE(Sub(usd, eur).ok());
  EXPECT_FALSE(Compare(usd, eur).ok());
  EXPECT_EQ(Add(usd, Money("USD", D("0.25")))->ToString(), "1.75 USD");
  EXPECT_EQ(*Compare(usd, Money("USD", D("1.5"))), 0);
}

TEST(MoneyTest, OverflowIsAnErrorNotAWrap) {
  const Decimal big = Decimal::FromNanos(INT64_MAX - 1);
  Result<Decimal> d = Add(big, D("1"));
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), StatusCode::kOutOfRange);
}

TEST(MoneyTest, CurrencyCodesAndMinorUnits) {
  EXPECT_TRUE(ValidateCurrency("USD").ok());
  EXPECT_FALSE(ValidateCurrency("usd").ok());
  EXPECT_FALSE(ValidateCurrency("US").ok());
  EXPECT_EQ(MinorDigits("USD"), 2);
  EXPECT_EQ(MinorDigits("JPY"), 0);
  EXPECT_EQ(MinorDigits("KWD"), 3);
  EXPECT_EQ(Money("JPY", D("120")).ToString(), "120 JPY");
  EXPECT_EQ(Money("USD", D("0.0001")).ToString(), "0.0001 USD");  // unrounded: full precision
}

}  // namespace
}  // namespace gpupool::billing
