#include "billing/money.h"

#include <array>
#include <limits>

namespace gpupool::billing {
namespace {

constexpr int64_t kPow10[] = {1,      10,      100,      1000,      10000,
                              100000, 1000000, 10000000, 100000000, 1000000000};

std::string Digits(uint64_t v) { return std::to_string(v); }

uint64_t Magnitude(int64_t v) {
  return v < 0 ? static_cast<uint64_t>(-(v + 1)) + 1 : static_cast<uint64_t>(v);
}

}  // namespace

Result<Decimal> Decimal::Parse(std::string_view text, std::string_view what) {
  auto bad = [&](std::string_view why) {
    return Status::InvalidArgument(std::string(what) + ": '" + std::string(text) + "' " +
                                   std::string(why));
  };
  std::string_view s = text;
  bool neg = false;
  if (!s.empty() && s.front() == '-') {
    neg = true;
    s.remove_prefix(1);
  }
  const size_t dot = s.find('.');
  std::string_view whole = s.substr(0, dot);
  std::string_view frac = dot == std::string_view::npos ? std::string_view() : s.substr(dot + 1);
  if (whole.empty() || (dot != std::string_view::npos && frac.empty())) {
    return bad("is not a decimal number (expected digits, e.g. 12 or 0.45)");
  }
  if (frac.size() > 9) return bad("has more than 9 fractional digits");
  __int128 nanos = 0;
  for (char c : whole) {
    if (c < '0' || c > '9') return bad("is not a decimal number (expected digits, e.g. 0.45)");
    nanos = nanos * 10 + (c - '0');
    if (nanos > std::numeric_limits<int64_t>::max() / kNanosPerUnit + 1) return bad("is too large");
  }
  nanos *= kNanosPerUnit;
  int64_t f = 0;
  for (char c : frac) {
    if (c < '0' || c > '9') return bad("is not a decimal number (expected digits, e.g. 0.45)");
    f = f * 10 + (c - '0');
  }
  nanos += static_cast<__int128>(f) * kPow10[9 - frac.size()];
  if (neg) nanos = -nanos;
  if (nanos > std::numeric_limits<int64_t>::max() || nanos < std::numeric_limits<int64_t>::min()) {
    return bad("is too large");
  }
  return Decimal(static_cast<int64_t>(nanos));
}

std::string Decimal::ToString() const {
  const uint64_t mag = Magnitude(nanos_);
  std::string out = nanos_ < 0 ? "-" : "";
  out += Digits(mag / kNanosPerUnit);
  uint64_t frac = mag % kNanosPerUnit;
  if (frac != 0) {
    std::string f = Digits(frac);
    f.insert(0, 9 - f.size(), '0');
    while (f.back() == '0') f.pop_back();
    out += "." + f;
  }
  return out;
}

std::string Decimal::ToFixed(int digits) const {
  if (digits < 0) digits = 0;
  if (digits > 9) digits = 9;
  const uint64_t mag = Magnitude(nanos_);
  std::string out = nanos_ < 0 ? "-" : "";
  out += Digits(mag / kNanosPerUnit);
  if (digits > 0) {
    std::string f = Digits(mag % kNanosPerUnit);
    f.insert(0, 9 - f.size(), '0');
    out += "." + f.substr(0, static_cast<size_t>(digits));
  }
  return out;
}

Result<Decimal> Add(Decimal a, Decimal b) {
  int64_t r = 0;
  if (__builtin_add_overflow(a.nanos(), b.nanos(), &r)) {
    return Status(StatusCode::kOutOfRange, "amount overflow: " + a.ToString() + " + " +
                                               b.ToString() + " exceeds 9.2e9 units");
  }
  return Decimal::FromNanos(r);
}

Result<Decimal> Sub(Decimal a, Decimal b) {
  int64_t r = 0;
  if (__builtin_sub_overflow(a.nanos(), b.nanos(), &r)) {
    return Status(StatusCode::kOutOfRange, "amount overflow: " + a.ToString() + " - " +
                                               b.ToString() + " exceeds 9.2e9 units");
  }
  return Decimal::FromNanos(r);
}

Result<Decimal> RoundHalfEven(__int128 numerator, __int128 denominator, int minor_digits) {
  if (denominator <= 0) return Status::Internal("RoundHalfEven: denominator must be positive");
  if (minor_digits < 0 || minor_digits > 9) {
    return Status::Internal("RoundHalfEven: minor digits must be 0..9");
  }
  // Work in steps of one minor unit: step = 10^(9 - minor) nanos.
  const __int128 step = kPow10[9 - minor_digits];
  __int128 den = 0;
  if (__builtin_mul_overflow(denominator, step, &den)) {
    return Status(StatusCode::kOutOfRange, "amount overflow while rounding");
  }
  const bool neg = numerator < 0;
  const __int128 mag = neg ? -numerator : numerator;
  __int128 q = mag / den;
  const __int128 r = mag % den;
  // Compare 2r with den without overflow: r < den, so r >= den - r is the same as 2r >= den.
  const __int128 rest = den - r;
  if (r > rest || (r == rest && (q % 2) == 1)) ++q;
  __int128 nanos = q * step;
  if (neg) nanos = -nanos;
  if (nanos > std::numeric_limits<int64_t>::max() || nanos < std::numeric_limits<int64_t>::min()) {
    return Status(StatusCode::kOutOfRange, "amount overflow: exceeds 9.2e9 units");
  }
  return Decimal::FromNanos(static_cast<int64_t>(nanos));
}

Status ValidateCurrency(std::string_view code) {
  bool ok = code.size() == 3;
  for (char c : code) ok = ok && c >= 'A' && c <= 'Z';
  if (!ok) {
    return Status::InvalidArgument("currency: '" + std::string(code) +
                                   "' must be an ISO 4217 code of three upper-case letters, "
                                   "e.g. USD");
  }
  return Status::Ok();
}

int MinorDigits(std::string_view currency) {
  static constexpr std::array<std::string_view, 9> kZero = {"JPY", "KRW", "VND", "CLP", "ISK",
                                                            "UGX", "XAF", "XOF", "PYG"};
  static constexpr std::array<std::string_view, 6> kThree = {"BHD", "KWD", "OMR",
                                                             "JOD", "TND", "LYD"};
  for (std::string_view c : kZero) {
    if (c == currency) return 0;
  }
  for (std::string_view c : kThree) {
    if (c == currency) return 3;
  }
  return 2;
}

std::string Money::ToString() const {
  const int minor = MinorDigits(currency_);
  const bool fits = amount_.nanos() % kPow10[9 - minor] == 0;
  return (fits ? amount_.ToFixed(minor) : amount_.ToString()) + " " + currency_;
}

namespace {
Status Mixed(const Money& a, const Money& b, std::string_view op) {
  return Status::InvalidArgument("cannot " + std::string(op) + " amounts in " + a.currency() +
                                 " and " + b.currency() + ": currencies differ");
}
}  // namespace

Result<Money> Add(const Money& a, const Money& b) {
  if (a.currency() != b.currency()) return Mixed(a, b, "add");
  GPUPOOL_ASSIGN_OR_RETURN(Decimal d, Add(a.amount(), b.amount()));
  return Money(a.currency(), d);
}

Result<Money> Sub(const Money& a, const Money& b) {
  if (a.currency() != b.currency()) return Mixed(a, b, "subtract");
  GPUPOOL_ASSIGN_OR_RETURN(Decimal d, Sub(a.amount(), b.amount()));
  return Money(a.currency(), d);
}

Result<int> Compare(const Money& a, const Money& b) {
  if (a.currency() != b.currency()) return Mixed(a, b, "compare");
  return a.amount() < b.amount() ? -1 : (a.amount() == b.amount() ? 0 : 1);
}

}  // namespace gpupool::billing
