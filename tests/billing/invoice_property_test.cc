// Property test: for random usage and random plans, an invoice's totals are the sums of its lines,
// and every line is within half a minor unit of its exact (unrounded) value.
#include <gtest/gtest.h>

#include <random>

#include "billing/rating.h"

namespace gpupool::billing {
namespace {

constexpr int64_t kStart = 1'793'491'200'000;  // 2026-11-01T00:00:00Z
constexpr int64_t kEnd = kStart + 30LL * 86'400'000;

template <typename T>
const T& Pick(std::mt19937_64& rng, const std::vector<T>& v) {
  return v[std::uniform_int_distribution<size_t>(0, v.size() - 1)(rng)];
}

PricePlan RandomPlan(std::mt19937_64& rng, const std::string& currency) {
  PricePlan p;
  p.name = "default";
  p.version = 1;
  p.currency = currency;
  std::uniform_int_distribution<int64_t> price(0, 5'000'000'000);  // 0 .. 5.000000000
  for (Unit u : kAllUnits) p.rates.push_back({"", "", "", u, Decimal::FromNanos(price(rng))});
  p.rates.push_back({"p1", "", "", Unit::kTflopsHour, Decimal::FromNanos(price(rng))});
  p.rates.push_back({"", "m1", "", Unit::kDeviceHour, Decimal::FromNanos(price(rng))});
  std::uniform_int_distribution<int64_t> mult(1, 3'000'000'000);
  p.priority_multipliers = {{"high", Decimal::FromNanos(mult(rng))},
                            {"low", Decimal::FromNanos(mult(rng))}};
  p.preemption_credit_bps = std::uniform_int_distribution<int32_t>(0, 10000)(rng);
  return p;
}

TEST(InvoicePropertyTest, TotalsAreTheSumsOfTheLines) {
  const std::vector<std::string> tenants = {"acme", "acme/a", "acme/b/c", "globex"};
  const std::vector<std::string> pools = {"p1", "p2"};
  const std::vector<std::string> models = {"m1", "m2", ""};
  const std::vector<std::string> classes = {"high", "low", "batch"};
  const std::vector<std::string> currencies = {"USD", "JPY", "KWD"};
  for (uint64_t seed = 1; seed <= 300; ++seed) {
    std::mt19937_64 rng(seed);
    const PricePlan plan = RandomPlan(rng, Pick(rng, currencies));
    std::vector<MeteredQuantity> usage;
    const int n = std::uniform_int_distribution<int>(0, 60)(rng);
    for (int i = 0; i < n; ++i) {
      MeteredQuantity q;
      q.dims = {
          Pick(rng, tenants), Pick(rng, pools), Pick(rng, models), "", Pick(rng, classes), ""};
      q.unit = kAllUnits[std::uniform_int_distribution<int>(0, 4)(rng)];
      q.quantity = std::uniform_int_distribution<int64_t>(0, 50'000'000'000)(rng);
      q.ended_by_preemption = std::bernoulli_distribution(0.3)(rng);
      q.start_ms = std::uniform_int_distribution<int64_t>(kStart - 86'400'000, kEnd)(rng);
      q.end_ms = q.start_ms + 60'000;
      usage.push_back(q);
    }
    Result<Invoice> inv = RateInvoice("acme", kStart, kEnd, usage, PlanBook({plan}));
    ASSERT_TRUE(inv.ok()) << "seed " << seed << ": " << inv.status().ToString();

    // Sums recomputed independently, in 128 bits.
    __int128 lines = 0, credits = 0;
    const int64_t step = 1'000'000'000 / (MinorDigits(plan.currency) == 0   ? 1
                                          : MinorDigits(plan.currency) == 2 ? 100
                                                                            : 1000);
    auto check_line = [&](const InvoiceLine& l, int32_t bps) {
      EXPECT_GE(l.amount.nanos(), 0);
      EXPECT_EQ(l.amount.nanos() % step, 0) << "seed " << seed << ": not rounded to minor unit";
      // |amount - exact| <= half a minor unit, with exact = q x price x mult x bps / 1e4 / base.
      const __int128 den = static_cast<__int128>(BasePerUnitHour(l.unit)) * 1'000'000'000 * 10000;
      const __int128 num = static_cast<__int128>(l.base_quantity) * l.unit_price.nanos() *
                           l.multiplier.nanos() * bps;
      __int128 diff = static_cast<__int128>(l.amount.nanos()) * den - num;
      if (diff < 0) diff = -diff;
      EXPECT_LE(diff * 2, static_cast<__int128>(step) * den) << "seed " << seed;
    };
    int64_t base_total = 0;
    for (const InvoiceLine& l : inv->lines) {
      lines += l.amount.nanos();
      base_total += l.base_quantity;
      check_line(l, 10000);
    }
    for (const InvoiceLine& l : inv->credits) {
      credits += l.amount.nanos();
      check_line(l, l.credit_bps);
    }
    EXPECT_EQ(static_cast<__int128>(inv->subtotal.nanos()), lines) << "seed " << seed;
    EXPECT_EQ(static_cast<__int128>(inv->credit_total.nanos()), credits) << "seed " << seed;
    EXPECT_EQ(static_cast<__int128>(inv->total.nanos()), lines - credits) << "seed " << seed;
    EXPECT_LE(credits, lines);

    // Conservation: every in-period quantity of the subtree is on exactly one line.
    int64_t want = 0;
    for (const MeteredQuantity& q : usage) {
      if (TenantWithinPath(q.dims.tenant, "acme") && q.start_ms >= kStart && q.start_ms < kEnd)
        want += q.quantity;
    }
    EXPECT_EQ(base_total, want) << "seed " << seed;
  }
}

}  // namespace
}  // namespace gpupool::billing
