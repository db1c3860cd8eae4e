// FromReportRows on rows shaped like the usage ledger's report (scheduler/usage_report.h): each
// non-zero total becomes one quantity in its unit, exact, with the row's dimensions and period.
#include "billing/report_rows.h"

#include <gtest/gtest.h>

#include "billing/rating.h"

namespace gpupool::billing {
namespace {

struct Totals {
  int64_t milli_tflops_seconds = 0;
  int64_t vram_mib_seconds = 0;
  int64_t spill_mib_seconds = 0;
  int64_t device_seconds = 0;
  int64_t mig_instance_seconds = 0;
  int64_t slot_seconds = 0;
};
struct Row {  // the fields of UsageReportRow that rating reads
  int64_t period_start_us = 0;
  std::string tenant, pool, model, priority_class, mig_profile;
  Totals totals;
  std::string service;
};

constexpr int64_t kNov1Us = 1'793'491'200'000'000;  // 2026-11-01T00:00:00Z

TEST(ReportRowsTest, EachNonZeroTotalIsOneQuantity) {
  Row a{
      kNov1Us, "acme/r", "shared", "H100-80GB", "batch", "", {360'000'000, 442'368'000, 0, 0, 0, 0},
      ""};
  Row b{kNov1Us + 3'600'000'000,    "acme/r", "a100", "A100-80GB", "batch", "1g.10gb",
        {0, 0, 0, 0, 1'000, 7'200}, "chat"};
  const std::vector<Row> rows = {a, b};
  const std::vector<MeteredQuantity> q = FromReportRows(rows, 3'600'000);
  ASSERT_EQ(q.size(), 4u);
  EXPECT_EQ(q[0].unit, Unit::kTflopsHour);
  EXPECT_EQ(q[0].quantity, 360'000'000);
  EXPECT_EQ(q[0].start_ms, kNov1Us / 1000);
  EXPECT_EQ(q[0].end_ms, kNov1Us / 1000 + 3'600'000);
  EXPECT_EQ(q[1].unit, Unit::kVramGibHour);
  EXPECT_EQ(q[2].unit, Unit::kMigProfileHour);
  EXPECT_EQ(q[2].dims.mig_profile, "1g.10gb");
  EXPECT_EQ(q[0].dims.service, "");
  EXPECT_EQ(q[2].dims.service, "chat");  // a service's replicas keep its name on the quantity
  EXPECT_EQ(q[2].dims.pool, "a100");
  EXPECT_FALSE(q[2].ended_by_preemption);
  // Time-slice slots (issue 27): slot-seconds become slot-hours, without the MIG profile.
  EXPECT_EQ(q[3].unit, Unit::kSlotHour);
  EXPECT_EQ(q[3].quantity, 7'200);
  EXPECT_EQ(q[3].dims.mig_profile, "");

  // Rated: 100 TFLOPS-h x 0.45 = 45.00; 120 GiB-h x 0.01 = 1.20; MIG and slots unpriced → no
  // line.
  PricePlan p;
  p.name = "default";
  p.version = 1;
  p.currency = "USD";
  p.rates = {{"", "", "", Unit::kTflopsHour, Decimal::Parse("0.45").value()},
             {"", "", "", Unit::kVramGibHour, Decimal::Parse("0.01").value()}};
  Result<Invoice> inv =
      RateInvoice("acme", kNov1Us / 1000, kNov1Us / 1000 + 86'400'000, q, PlanBook({p}));
  ASSERT_TRUE(inv.ok()) << inv.status().ToString();
  EXPECT_EQ(inv->total, Decimal::Parse("46.20").value());
  EXPECT_TRUE(FromReportRows(rows, 3'600'000, true)[0].ended_by_preemption);
}

}  // namespace
}  // namespace gpupool::billing
