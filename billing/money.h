// Money and Decimal: exact decimal amounts for rating and invoices. No floating point anywhere.
//
// A Decimal is a signed count of nanos (1e-9) held in an int64_t: nine fractional digits, about
// ±9.2e9 whole units. Prices, multipliers and amounts are Decimals; quantities stay the integers
// the ledger measures (billing/usage.h). Products are formed in 128-bit integers and divided
// once, so an amount is exact until the one rounding step.
//
// Rounding rule (the only one): RoundHalfEven(exact, minor_digits) — banker's rounding to the
// currency's minor unit (cents for USD/EUR, whole yen for JPY). It is applied once per invoice
// line and once per credit line; subtotals and totals are sums of rounded lines, so an invoice's
// total always equals the sum of what it shows.
//
// Money is a Decimal with an ISO 4217 currency ("USD"). Adding or comparing two amounts of
// different currencies is refused with INVALID_ARGUMENT naming both; overflow is OUT_OF_RANGE.
//
// Thread safety: values.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "base/status.h"

namespace gpupool::billing {

inline constexpr int64_t kNanosPerUnit = 1'000'000'000;

class Decimal {
 public:
  constexpr Decimal() = default;
  static constexpr Decimal FromNanos(int64_t nanos) { return Decimal(nanos); }
  static constexpr Decimal FromUnits(int64_t units) { return Decimal(units * kNanosPerUnit); }

  // Parses "12", "-0.5", "1.000000001". At most nine fractional digits; no exponent, no sign
  // other than a leading '-', no spaces. `what` names the value in the error ("rate.price").
  static Result<Decimal> Parse(std::string_view text, std::string_view what = "decimal");

  int64_t nanos() const { return nanos_; }
  bool negative() const { return nanos_ < 0; }
  bool zero() const { return nanos_ == 0; }

  // Shortest exact text: "1.5", "-0.000000001", "12". Parse(ToString()) gives the same value.
  std::string ToString() const;
  // Fixed number of fractional digits (0..9), padded with zeros; REQUIRES: the value has no
  // more significant digits than that (use after rounding).
  std::string ToFixed(int digits) const;

  friend auto operator<=>(const Decimal&, const Decimal&) = default;

 private:
  constexpr explicit Decimal(int64_t nanos) : nanos_(nanos) {}
  int64_t nanos_ = 0;
};

// Checked arithmetic: OUT_OF_RANGE on overflow of the 64-bit nanos.
Result<Decimal> Add(Decimal a, Decimal b);
Result<Decimal> Sub(Decimal a, Decimal b);

// Rounds numerator/denominator nanos (an exact rational, denominator > 0) to `minor_digits`
// fractional digits, ties to even. Returns OUT_OF_RANGE when the result does not fit.
Result<Decimal> RoundHalfEven(__int128 numerator_nanos, __int128 denominator, int minor_digits);

// A currency: three upper-case ASCII letters. MinorDigits: 0 for JPY/KRW and similar, 3 for
// BHD/KWD/OMR/JOD/TND, else 2.
Status ValidateCurrency(std::string_view code);
int MinorDigits(std::string_view currency);

class Money {
 public:
  Money() = default;
  Money(std::string currency, Decimal amount) : currency_(std::move(currency)), amount_(amount) {}
  static Money Zero(std::string currency) { return Money(std::move(currency), Decimal()); }

  const std::string& currency() const { return currency_; }
  Decimal amount() const { return amount_; }

  // "12.34 USD", with the currency's minor digits when the amount has no more precision.
  std::string ToString() const;

  friend bool operator==(const Money&, const Money&) = default;

 private:
  std::string currency_;
  Decimal amount_;
};

// Sum and difference of two amounts of the same currency; INVALID_ARGUMENT when the currencies
// differ ("cannot add USD and EUR"), OUT_OF_RANGE on overflow.
Result<Money> Add(const Money& a, const Money& b);
Result<Money> Sub(const Money& a, const Money& b);
// -1, 0, 1; INVALID_ARGUMENT when the currencies differ.
Result<int> Compare(const Money& a, const Money& b);

}  // namespace gpupool::billing
