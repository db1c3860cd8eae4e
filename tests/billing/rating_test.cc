// Rating tests: every expected amount is derived in a comment from the plan and the quantities.
#include "billing/rating.h"

#include <gtest/gtest.h>

namespace gpupool::billing {
namespace {

Decimal D(std::string_view s) { return Decimal::Parse(s).value(); }

constexpr int64_t kNov1 = 1'793'491'200'000;  // 2026-11-01T00:00:00Z
constexpr int64_t kDec1 = kNov1 + 30LL * 86'400'000;
constexpr int64_t kNov15 = kNov1 + 14LL * 86'400'000;

PriceRate Rate(Unit u, std::string_view price, std::string pool = "", std::string model = "",
               std::string profile = "") {
  return PriceRate{std::move(pool), std::move(model), std::move(profile), u, D(price)};
}

PricePlan DefaultPlan() {
  PricePlan p;
  p.name = "default";
  p.version = 1;
  p.currency = "USD";
  p.rates = {Rate(Unit::kTflopsHour, "0.45"),
             Rate(Unit::kTflopsHour, "0.40", "a100", "A100-80GB"),
             Rate(Unit::kVramGibHour, "0.01"),
             Rate(Unit::kDeviceHour, "2.50", "h100"),
             Rate(Unit::kMigProfileHour, "0.30", "", "A100-80GB", "1g.10gb"),
             Rate(Unit::kSpillGibHour, "0.005")};
  p.priority_multipliers = {{"high", D("1.5")}, {"low", D("0.5")}};
  return p;
}

MeteredQuantity Q(std::string tenant, std::string pool, std::string model, std::string cls, Unit u,
                  int64_t quantity, bool preempted = false, std::string profile = "",
                  int64_t start = kNov1) {
  MeteredQuantity q;
  q.dims = {std::move(tenant),  std::move(pool), std::move(model),
            std::move(profile), std::move(cls),  ""};
  q.unit = u;
  q.quantity = quantity;
  q.ended_by_preemption = preempted;
  q.start_ms = start;
  q.end_ms = start + 3'600'000;
  return q;
}

const InvoiceLine* Find(const std::vector<InvoiceLine>& lines, std::string_view tenant, Unit u,
                        std::string_view pool) {
  for (const InvoiceLine& l : lines) {
    if (l.dims.tenant == tenant && l.unit == u && l.dims.pool == pool) return &l;
  }
  return nullptr;
}

TEST(RatingTest, AMonthOfMixedUsageWithTheArithmeticWrittenOut) {
  const std::vector<MeteredQuantity> usage = {
      // 50 TFLOPS for 2 h: 50,000 mTFLOPS x 7,200 s = 360,000,000 mTFLOPS-s = 100 TFLOPS-h.
      Q("acme/research", "shared", "H100-80GB", "batch", Unit::kTflopsHour, 360'000'000),
      // 10 TFLOPS for 30 min, then preempted: 10,000 x 1,800 = 18,000,000 = 5 TFLOPS-h.
      Q("acme/research", "shared", "H100-80GB", "batch", Unit::kTflopsHour, 18'000'000, true),
      // 20 TFLOPS for 1 h on the a100 pool at class high: 20,000 x 3,600 = 72,000,000 = 20 h.
      Q("acme/research", "a100", "A100-80GB", "high", Unit::kTflopsHour, 72'000'000),
      // 40 GiB for 3 h: 40,960 MiB x 10,800 s = 442,368,000 MiB-s = 120 GiB-h.
      Q("acme/research", "shared", "H100-80GB", "batch", Unit::kVramGibHour, 442'368'000),
      // 2 whole GPUs for 90 min at class low: 2 x 5,400 = 10,800 device-s = 3 device-h.
      Q("acme/research", "h100", "H100-80GB", "low", Unit::kDeviceHour, 10'800),
      // One 1g.10gb instance for 1,000 s = 0.277... h.
      Q("acme/research", "a100", "A100-80GB", "batch", Unit::kMigProfileHour, 1'000, false,
        "1g.10gb"),
      // 1 GiB spilled for 1 h: 1,024 x 3,600 = 3,686,400 MiB-s = 1 GiB-h.
      Q("acme/research", "shared", "H100-80GB", "batch", Unit::kSpillGibHour, 3'686'400),
      // 3 GiB spilled for 1 h in another project: 3 GiB-h.
      Q("acme/infer", "shared", "H100-80GB", "batch", Unit::kSpillGibHour, 11'059'200),
      // Someone else's usage: not on acme's invoice.
      Q("globex", "shared", "H100-80GB", "batch", Unit::kTflopsHour, 360'000'000),
      // Usage from before the period: not on this invoice.
      Q("acme/research", "shared", "H100-80GB", "batch", Unit::kTflopsHour, 360'000'000, false, "",
        kNov1 - 3'600'000),
  };
  Result<Invoice> inv = RateInvoice("acme", kNov1, kDec1, usage, PlanBook({DefaultPlan()}));
  ASSERT_TRUE(inv.ok()) << inv.status().ToString();
  EXPECT_EQ(inv->currency, "USD");
  ASSERT_EQ(inv->lines.size(), 7u);

  // TFLOPS on shared: 100 + 5 = 105 TFLOPS-h x 0.45 (any-pool rate) x 1 (batch) = 47.25.
  const InvoiceLine* l = Find(inv->lines, "acme/research", Unit::kTflopsHour, "shared");
  ASSERT_NE(l, nullptr);
  EXPECT_EQ(l->base_quantity, 378'000'000);
  EXPECT_EQ(l->quantity, D("105"));
  EXPECT_EQ(l->unit_price, D("0.45"));
  EXPECT_EQ(l->amount, D("47.25"));
  // TFLOPS on a100: 20 TFLOPS-h x 0.40 (the pool+model rate beats the any rate) x 1.5 = 12.00.
  l = Find(inv->lines, "acme/research", Unit::kTflopsHour, "a100");
  ASSERT_NE(l, nullptr);
  EXPECT_EQ(l->unit_price, D("0.40"));
  EXPECT_EQ(l->multiplier, D("1.5"));
  EXPECT_EQ(l->amount, D("12"));
  // VRAM: 120 GiB-h x 0.01 = 1.20.
  EXPECT_EQ(Find(inv->lines, "acme/research", Unit::kVramGibHour, "shared")->amount, D("1.2"));
  // Devices: 3 device-h x 2.50 x 0.5 (low) = 3.75.
  EXPECT_EQ(Find(inv->lines, "acme/research", Unit::kDeviceHour, "h100")->amount, D("3.75"));
  // MIG: 1,000 s / 3,600 x 0.30 = 0.08333... → 0.08.
  l = Find(inv->lines, "acme/research", Unit::kMigProfileHour, "a100");
  ASSERT_NE(l, nullptr);
  EXPECT_EQ(l->quantity, D("0.277777778"));  // display: rounded to 1e-9
  EXPECT_EQ(l->amount, D("0.08"));
  // Spill: 1 GiB-h x 0.005 = 0.005, a tie → the even cent, 0.00.
  EXPECT_EQ(Find(inv->lines, "acme/research", Unit::kSpillGibHour, "shared")->amount, D("0"));
  // Spill: 3 GiB-h x 0.005 = 0.015, a tie → the even cent, 0.02.
  EXPECT_EQ(Find(inv->lines, "acme/infer", Unit::kSpillGibHour, "shared")->amount, D("0.02"));

  // Credit: the preempted 5 TFLOPS-h x 0.45 x 100 % = 2.25.
  ASSERT_EQ(inv->credits.size(), 1u);
  EXPECT_EQ(inv->credits[0].base_quantity, 18'000'000);
  EXPECT_EQ(inv->credits[0].credit_bps, 10000);
  EXPECT_EQ(inv->credits[0].amount, D("2.25"));

  // 47.25 + 12.00 + 1.20 + 3.75 + 0.08 + 0.00 + 0.02 = 64.30; 64.30 - 2.25 = 62.05.
  EXPECT_EQ(inv->subtotal, D("64.30"));
  EXPECT_EQ(inv->credit_total, D("2.25"));
  EXPECT_EQ(inv->total, D("62.05"));
}

// A service's replicas are rated at the plan's rates like jobs, on lines of their own: after the
// tenant's jobs, one group per service (docs/billing.md, "Services").
TEST(RatingTest, EachServiceHasLinesOfItsOwnAfterTheJobs) {
  auto at = [](std::string service, int64_t quantity) {
    MeteredQuantity q = Q("acme/ml", "shared", "H100-80GB", "batch", Unit::kTflopsHour, quantity);
    q.dims.service = std::move(service);
    return q;
  };
  // Jobs 10 TFLOPS-h (36,000,000 mTFLOPS-s) → 4.50; "chat" 2 + 3 TFLOPS-h → 5 × 0.45 = 2.25;
  // "embed" 1 TFLOPS-h → 0.45. Total 7.20.
  const std::vector<MeteredQuantity> usage = {at("chat", 7'200'000), at("", 36'000'000),
                                              at("embed", 3'600'000), at("chat", 10'800'000)};
  Result<Invoice> inv = RateInvoice("acme", kNov1, kDec1, usage, PlanBook({DefaultPlan()}));
  ASSERT_TRUE(inv.ok()) << inv.status().ToString();
  ASSERT_EQ(inv->lines.size(), 3u);
  EXPECT_EQ(inv->lines[0].dims.service, "");
  EXPECT_EQ(inv->lines[0].amount, D("4.50"));
  EXPECT_EQ(inv->lines[1].dims.service, "chat");
  EXPECT_EQ(inv->lines[1].base_quantity, 18'000'000);
  EXPECT_EQ(inv->lines[1].amount, D("2.25"));
  EXPECT_EQ(inv->lines[2].dims.service, "embed");
  EXPECT_EQ(inv->lines[2].amount, D("0.45"));
  EXPECT_EQ(inv->total, D("7.20"));
}

TEST(RatingTest, PartialPreemptionCredit) {
  PricePlan p = DefaultPlan();
  p.preemption_credit_bps = 5000;  // 50 %
  // 7 TFLOPS-h preempted: charge 7 x 0.45 = 3.15; credit 3.15 x 50 % = 1.575 → tie → 1.58
  // (8 is even); total 3.15 - 1.58 = 1.57.
  const std::vector<MeteredQuantity> usage = {
      Q("acme", "shared", "H100-80GB", "batch", Unit::kTflopsHour, 25'200'000, true)};
  Result<Invoice> inv = RateInvoice("acme", kNov1, kDec1, usage, PlanBook({p}));
  ASSERT_TRUE(inv.ok()) << inv.status().ToString();
  EXPECT_EQ(inv->subtotal, D("3.15"));
  ASSERT_EQ(inv->credits.size(), 1u);
  EXPECT_EQ(inv->credits[0].amount, D("1.58"));
  EXPECT_EQ(inv->total, D("1.57"));

  p.preemption_credit_bps = 0;  // no credit at all: no credit line
  inv = RateInvoice("acme", kNov1, kDec1, usage, PlanBook({p}));
  ASSERT_TRUE(inv.ok());
  EXPECT_TRUE(inv->credits.empty());
  EXPECT_EQ(inv->total, D("3.15"));
}

TEST(RatingTest, AVersionRatesOnlyUsageFromItsEffectiveTimeOn) {
  PricePlan v1 = DefaultPlan();
  PricePlan v2 = DefaultPlan();
  v2.version = 2;
  v2.effective_from_ms = kNov15;
  v2.rates[0].price = D("0.60");
  // 10 TFLOPS-h on Nov 1 (v1: 0.45 → 4.50) and 10 TFLOPS-h on Nov 20 (v2: 0.60 → 6.00).
  const std::vector<MeteredQuantity> usage = {
      Q("acme", "shared", "H100-80GB", "batch", Unit::kTflopsHour, 36'000'000),
      Q("acme", "shared", "H100-80GB", "batch", Unit::kTflopsHour, 36'000'000, false, "",
        kNov15 + 5LL * 86'400'000)};
  Result<Invoice> inv = RateInvoice("acme", kNov1, kDec1, usage, PlanBook({v1, v2}));
  ASSERT_TRUE(inv.ok()) << inv.status().ToString();
  ASSERT_EQ(inv->lines.size(), 2u);
  EXPECT_EQ(inv->lines[0].plan_version, 1);
  EXPECT_EQ(inv->lines[0].amount, D("4.5"));
  EXPECT_EQ(inv->lines[1].plan_version, 2);
  EXPECT_EQ(inv->lines[1].amount, D("6"));
  EXPECT_EQ(inv->total, D("10.5"));

  // The first half of November reads the same with or without v2: 4.50.
  Result<Invoice> before = RateInvoice("acme", kNov1, kNov15, usage, PlanBook({v1}));
  Result<Invoice> after = RateInvoice("acme", kNov1, kNov15, usage, PlanBook({v1, v2}));
  ASSERT_TRUE(before.ok() && after.ok());
  EXPECT_EQ(before->total, D("4.5"));
  EXPECT_EQ(after->total, before->total);
}

// When a stored version takes effect (the one rule the API and the configured plans share). A
// first version starts with its hour: an hour is rated by the version in effect at its start, so
// a first version stored at 10:20 and effective at 10:20 would leave 10:00–11:00 unpriced.
TEST(RatingTest, AFirstVersionStartsWithItsHourALaterOneNeverReachesBack) {
  constexpr int64_t kHour = 3'600'000;
  const int64_t ten = kNov15 + 10 * kHour;  // 10:00
  const int64_t ten_twenty = ten + 20 * 60'000;
  struct Case {
    int64_t requested, now;
    bool first;
    int64_t want;
  } cases[] = {
      {0, ten_twenty, true, ten},                  // at once: 10:00
      {ten_twenty, ten_twenty, true, ten},         // "now", asked for explicitly: 10:00
      {ten + 30 * 60'000, ten_twenty, true, ten},  // 10:30, later this hour: 10:00
      {ten + 2 * kHour + 5, ten_twenty, true, ten + 2 * kHour},  // 12:00:00.005: 12:00
      {0, ten_twenty, false, ten_twenty},                        // a later version: from now on
      {ten - kHour, ten_twenty, false, ten_twenty},              // never before now
      {ten + 2 * kHour + 5, ten_twenty, false, ten + 2 * kHour + 5},  // as asked, in the future
  };
  for (const Case& c : cases) {
    EXPECT_EQ(EffectiveFrom(c.requested, c.now, c.first), c.want)
        << c.requested << " " << c.now << " " << c.first;
  }

  // The hour it is created in is priced: usage from 10:00 rated by the first version.
  PricePlan v1 = DefaultPlan();
  v1.effective_from_ms = EffectiveFrom(0, ten_twenty, true);
  const std::vector<MeteredQuantity> usage = {
      Q("acme", "shared", "H100-80GB", "batch", Unit::kTflopsHour, 36'000'000, false, "", ten)};
  Result<Invoice> inv = RateInvoice("acme", ten, ten + kHour, usage, PlanBook({v1}));
  ASSERT_TRUE(inv.ok()) << inv.status().ToString();
  EXPECT_EQ(inv->total, D("4.5"));  // 10 TFLOPS-h x 0.45
}

TEST(RatingTest, TheDeepestTenantAssignmentWinsOverDefault) {
  PricePlan research = DefaultPlan();
  research.name = "research";
  research.tenants = {"acme/research"};
  research.rates = {Rate(Unit::kTflopsHour, "0.20")};
  // acme/research/x: the research plan, 10 TFLOPS-h x 0.20 = 2.00; acme/infer: default,
  // 10 x 0.45 = 4.50.
  const std::vector<MeteredQuantity> usage = {
      Q("acme/research/x", "shared", "H100-80GB", "batch", Unit::kTflopsHour, 36'000'000),
      Q("acme/infer", "shared", "H100-80GB", "batch", Unit::kTflopsHour, 36'000'000)};
  Result<Invoice> inv =
      RateInvoice("acme", kNov1, kDec1, usage, PlanBook({DefaultPlan(), research}));
  ASSERT_TRUE(inv.ok()) << inv.status().ToString();
  ASSERT_EQ(inv->lines.size(), 2u);
  EXPECT_EQ(inv->lines[0].dims.tenant, "acme/infer");
  EXPECT_EQ(inv->lines[0].plan, "default");
  EXPECT_EQ(inv->lines[0].amount, D("4.5"));
  EXPECT_EQ(inv->lines[1].plan, "research");
  EXPECT_EQ(inv->lines[1].amount, D("2"));
}

TEST(RatingTest, AUnitThePlanDoesNotPriceIsNotBilled) {
  PricePlan p = DefaultPlan();
  p.rates = {Rate(Unit::kTflopsHour, "0.45")};
  const std::vector<MeteredQuantity> usage = {
      Q("acme", "shared", "H100-80GB", "batch", Unit::kVramGibHour, 442'368'000)};
  Result<Invoice> inv = RateInvoice("acme", kNov1, kDec1, usage, PlanBook({p}));
  ASSERT_TRUE(inv.ok());
  EXPECT_TRUE(inv->lines.empty());
  EXPECT_EQ(inv->total, D("0"));
  EXPECT_EQ(inv->currency, "USD");
}

TEST(RatingTest, AHoleInThePriceListIsAnErrorNamingIt) {
  // Device-hours are priced for pool h100 only; usage on pool shared has no rate.
  const std::vector<MeteredQuantity> usage = {
      Q("acme", "shared", "H100-80GB", "batch", Unit::kDeviceHour, 3600)};
  Result<Invoice> inv = RateInvoice("acme", kNov1, kDec1, usage, PlanBook({DefaultPlan()}));
  ASSERT_FALSE(inv.ok());
  EXPECT_EQ(inv.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(inv.status().message().find("device-hour"), std::string::npos);
  EXPECT_NE(inv.status().message().find("pool 'shared'"), std::string::npos);
}

TEST(RatingTest, MixedCurrenciesAreRefused) {
  PricePlan eur = DefaultPlan();
  eur.name = "europe";
  eur.currency = "EUR";
  eur.tenants = {"acme/eu"};
  const std::vector<MeteredQuantity> usage = {
      Q("acme/us", "shared", "H100-80GB", "batch", Unit::kTflopsHour, 36'000'000),
      Q("acme/eu", "shared", "H100-80GB", "batch", Unit::kTflopsHour, 36'000'000)};
  Result<Invoice> inv = RateInvoice("acme", kNov1, kDec1, usage, PlanBook({DefaultPlan(), eur}));
  ASSERT_FALSE(inv.ok());
  EXPECT_EQ(inv.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(inv.status().message().find("EUR"), std::string::npos);
  // Each subtree alone is fine.
  EXPECT_TRUE(RateInvoice("acme/eu", kNov1, kDec1, usage, PlanBook({DefaultPlan(), eur})).ok());
}

TEST(RatingTest, NoPlanIsAFailedPrecondition) {
  PricePlan p = DefaultPlan();
  p.name = "other";
  const std::vector<MeteredQuantity> usage = {
      Q("acme", "shared", "H100-80GB", "batch", Unit::kTflopsHour, 36'000'000)};
  Result<Invoice> inv = RateInvoice("acme", kNov1, kDec1, usage, PlanBook({p}));
  ASSERT_FALSE(inv.ok());
  EXPECT_EQ(inv.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_FALSE(RateInvoice("acme", kDec1, kNov1, {}, PlanBook({p})).ok());  // start after end
}

TEST(RatingTest, YenRoundsToWholeUnits) {
  PricePlan p = DefaultPlan();
  p.currency = "JPY";
  p.rates = {Rate(Unit::kDeviceHour, "350")};
  // 2.5 device-h (9,000 s) x 350 = 875 yen; 1 s x 350 / 3600 = 0.0972 → 0 yen.
  const std::vector<MeteredQuantity> usage = {Q("acme", "a", "m", "batch", Unit::kDeviceHour, 9000),
                                              Q("acme", "b", "m", "batch", Unit::kDeviceHour, 1)};
  Result<Invoice> inv = RateInvoice("acme", kNov1, kDec1, usage, PlanBook({p}));
  ASSERT_TRUE(inv.ok());
  EXPECT_EQ(inv->lines[0].amount, D("875"));
  EXPECT_EQ(inv->lines[1].amount, D("0"));
  EXPECT_EQ(inv->total, D("875"));
}

TEST(PricePlanTest, ValidationNamesTheField) {
  PricePlan p = DefaultPlan();
  EXPECT_TRUE(ValidatePricePlan(p).ok());
  auto expect_bad = [](PricePlan bad, std::string_view field) {
    Status s = ValidatePricePlan(bad);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << field;
    EXPECT_NE(s.message().find(field), std::string::npos) << s.message();
  };
  PricePlan bad = p;
  bad.name = "Bad Name";
  expect_bad(bad, "plan.name");
  bad = p;
  bad.currency = "usd";
  expect_bad(bad, "currency");
  bad = p;
  bad.rates[1].price = D("-1");
  expect_bad(bad, "plan.rates[1].price");
  bad = p;
  bad.rates.push_back(bad.rates[0]);
  expect_bad(bad, "plan.rates[6]");
  bad = p;
  bad.priority_multipliers["high"] = D("0");
  expect_bad(bad, "plan.priority_multipliers['high']");
  bad = p;
  bad.preemption_credit_bps = 10001;
  expect_bad(bad, "plan.preemption_credit");
  bad = p;
  bad.tenants = {"acme//x"};
  expect_bad(bad, "plan.tenants");
  bad = p;
  bad.rates[0].mig_profile = "1g.10gb";
  expect_bad(bad, "plan.rates[0].mig_profile");
  bad = p;
  bad.rates.clear();
  expect_bad(bad, "plan.rates");
}

}  // namespace
}  // namespace gpupool::billing
