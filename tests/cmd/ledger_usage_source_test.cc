// LedgerUsageSource: invoices are rated from what the ledger holds. Two tenants' intervals in
// two hours go into a MemoryStore (the same Store port PostgreSQL implements, held to one
// conformance suite); the source returns hourly quantities of the asked subtree only, in the
// ledger's exact units, and the invoice rated from them has the amounts written out below.
#include "cmd/daemon/ledger_usage_source.h"

#include <gtest/gtest.h>

#include "billing/rating.h"
#include "store/memory_store.h"
#include "tests/store/store_testing.h"

namespace gpupool {
namespace {

constexpr int64_t kS = 1'000'000;
constexpr int64_t kHourUs = 3600 * kS;
constexpr int64_t kNov23Us = 1'795'392'000 * kS;  // 2026-11-23T00:00:00Z
constexpr int64_t kNov23Ms = kNov23Us / 1000;

UsageInterval Interval(std::string tenant, int64_t start_us, int64_t seconds) {
  UsageInterval u;
  u.job_id = 7;
  u.task_index = 0;
  u.attempt = 0;
  u.start_us = start_us;
  u.end_us = start_us + seconds * kS;
  u.tenant = std::move(tenant);
  u.pool = "gpu-a";
  u.node = "node-0";
  u.model = "H100-SXM";
  u.sharing_mode = SharingMode::kFractional;
  u.priority_class = "normal";
  u.totals.milli_tflops_seconds = 500'000 * seconds;  // 500 TFLOPS held
  u.totals.vram_mib_seconds = 10 * 1024 * seconds;    // 10 GiB held
  u.totals.intervals = 1;
  return u;
}

TEST(LedgerUsageSource, RatesTheSubtreesLedgerRowsHourByHour) {
  MemoryStore store;
  ASSERT_TRUE(store.AcquireLeadership().ok());
  // acme/ml: 1800 s in hour 0 and 3600 s in hour 1; globex: 3600 s in hour 0 (another tenant).
  UsageInterval a0 = Interval("acme/ml", kNov23Us, 1800);
  UsageInterval a1 = Interval("acme/ml", kNov23Us + kHourUs, 3600);
  a1.job_id = 8;
  UsageInterval g0 = Interval("globex", kNov23Us, 3600);
  g0.job_id = 9;
  Status applied = testing::ApplyAndWait(store, {AppendUsage{{a0, a1, g0}}});
  ASSERT_TRUE(applied.ok()) << applied.ToString();

  LedgerUsageSource source(&store);
  Result<std::vector<billing::MeteredQuantity>> q =
      source.Usage("acme", kNov23Ms, kNov23Ms + 2 * 3'600'000);
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  // Two hours × two units (TFLOPS, VRAM), none of globex's.
  ASSERT_EQ(q->size(), 4u);
  int64_t tflops = 0, vram = 0;
  for (const billing::MeteredQuantity& m : *q) {
    EXPECT_EQ(m.dims.tenant, "acme/ml");
    EXPECT_EQ(m.end_ms - m.start_ms, 3'600'000);
    if (m.unit == billing::Unit::kTflopsHour) tflops += m.quantity;
    if (m.unit == billing::Unit::kVramGibHour) vram += m.quantity;
  }
  EXPECT_EQ(tflops, int64_t{500'000} * 5400);  // milli-TFLOPS-seconds, unchanged from the ledger
  EXPECT_EQ(vram, int64_t{10} * 1024 * 5400);  // MiB-seconds

  billing::PricePlan plan;
  plan.name = "default";
  plan.version = 1;
  plan.currency = "USD";
  plan.rates = {{"", "", "", billing::Unit::kTflopsHour, billing::Decimal::Parse("0.01").value()},
                {"", "", "", billing::Unit::kVramGibHour, billing::Decimal::Parse("0.02").value()}};
  Result<billing::Invoice> inv = billing::RateInvoice("acme", kNov23Ms, kNov23Ms + 2 * 3'600'000,
                                                      *q, billing::PlanBook({plan}));
  ASSERT_TRUE(inv.ok()) << inv.status().ToString();
  // TFLOPS: 500 TFLOPS × 1.5 h = 750 TFLOPS-h × 0.01 = 7.50 (over two lines: 2.50 + 5.00).
  // VRAM:   10 GiB × 1.5 h = 15 GiB-h × 0.02 = 0.30 (0.10 + 0.20).   Total 7.80.
  EXPECT_EQ(inv->subtotal, billing::Decimal::Parse("7.80").value());
  EXPECT_EQ(inv->total, billing::Decimal::Parse("7.80").value());
}

// Preemption credits from the ledger: an attempt preempted after 30 minutes (its last interval
// says PREEMPTED, its first does not) is charged like the rest and credited at the plan's
// credit percent; its requeued attempt is charged only.
TEST(LedgerUsageSource, CreditsEveryIntervalOfAPreemptedAttempt) {
  MemoryStore store;
  ASSERT_TRUE(store.AcquireLeadership().ok());
  // Attempt 0: 1200 s + 600 s in hour 0, then preempted. Attempt 1: all of hour 1, succeeded.
  UsageInterval p0 = Interval("acme/ml", kNov23Us, 1200);
  UsageInterval p1 = Interval("acme/ml", kNov23Us + 1200 * kS, 600);
  p1.end = AttemptEnd::kPreempted;
  UsageInterval r0 = Interval("acme/ml", kNov23Us + kHourUs, 3600);
  r0.attempt = 1;
  r0.end = AttemptEnd::kSucceeded;
  Status applied = testing::ApplyAndWait(store, {AppendUsage{{p0, p1, r0}}});
  ASSERT_TRUE(applied.ok()) << applied.ToString();

  LedgerUsageSource source(&store);
  Result<std::vector<billing::MeteredQuantity>> q =
      source.Usage("acme", kNov23Ms, kNov23Ms + 2 * 3'600'000);
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  int64_t preempted_tflops = 0, kept_tflops = 0;
  for (const billing::MeteredQuantity& m : *q) {
    if (m.unit != billing::Unit::kTflopsHour) continue;
    (m.ended_by_preemption ? preempted_tflops : kept_tflops) += m.quantity;
  }
  // Both intervals of attempt 0 are preempted usage: 500 TFLOPS × 1800 s.
  EXPECT_EQ(preempted_tflops, int64_t{500'000} * 1800);
  EXPECT_EQ(kept_tflops, int64_t{500'000} * 3600);

  billing::PricePlan plan;
  plan.name = "default";
  plan.version = 1;
  plan.currency = "USD";
  plan.rates = {{"", "", "", billing::Unit::kTflopsHour, billing::Decimal::Parse("0.01").value()}};
  plan.priority_multipliers = {{"normal", billing::Decimal::Parse("1.5").value()}};
  plan.preemption_credit_bps = 5000;  // 50 %
  Result<billing::Invoice> inv = billing::RateInvoice("acme", kNov23Ms, kNov23Ms + 2 * 3'600'000,
                                                      *q, billing::PlanBook({plan}));
  ASSERT_TRUE(inv.ok()) << inv.status().ToString();
  // Charged: 500 TFLOPS × (0.5 h + 1 h) = 750 TFLOPS-h × 0.01 × 1.5 = 11.25.
  // Credited: 500 TFLOPS × 0.5 h = 250 TFLOPS-h × 0.01 × 1.5 × 50 % = 1.875 → 1.88 (half-even).
  // Total: 11.25 − 1.88 = 9.37.
  EXPECT_EQ(inv->subtotal, billing::Decimal::Parse("11.25").value());
  ASSERT_EQ(inv->credits.size(), 1u);
  EXPECT_EQ(inv->credits[0].base_quantity, int64_t{500'000} * 1800);
  EXPECT_EQ(inv->credits[0].credit_bps, 5000);
  EXPECT_EQ(inv->credits[0].amount, billing::Decimal::Parse("1.88").value());
  EXPECT_EQ(inv->credit_total, billing::Decimal::Parse("1.88").value());
  EXPECT_EQ(inv->total, billing::Decimal::Parse("9.37").value());
}

}  // namespace
}  // namespace gpupool
