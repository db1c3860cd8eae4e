#include "billing/export.h"

#include <gtest/gtest.h>

namespace gpupool::billing {
namespace {

Decimal D(std::string_view s) { return Decimal::Parse(s).value(); }
constexpr int64_t kNov1 = 1'793'491'200'000;  // 2026-11-01T00:00:00Z
constexpr int64_t kDec1 = kNov1 + 30LL * 86'400'000;

Invoice Sample() {
  PricePlan p;
  p.name = "default";
  p.version = 3;
  p.currency = "USD";
  p.rates = {{"", "", "", Unit::kTflopsHour, D("0.45")}};
  MeteredQuantity a;
  a.dims = {"acme/research", "shared", "H100-80GB", "", "batch", ""};
  a.quantity = 360'000'000;  // 100 TFLOPS-h → 45.00
  a.start_ms = kNov1;
  MeteredQuantity b = a;
  b.quantity = 18'000'000;  // 5 TFLOPS-h preempted → 2.25 charged, 2.25 credited
  b.ended_by_preemption = true;
  const std::vector<MeteredQuantity> usage = {a, b};
  return RateInvoice("acme", kNov1, kDec1, usage, PlanBook({p})).value();
}

TEST(ExportTest, Rfc3339) {
  EXPECT_EQ(Rfc3339(0), "1970-01-01T00:00:00Z");
  EXPECT_EQ(Rfc3339(kNov1), "2026-11-01T00:00:00Z");
  EXPECT_EQ(Rfc3339(kDec1 - 1), "2026-11-30T23:59:59.999Z");
  EXPECT_EQ(Rfc3339(951'782'400'000), "2000-02-29T00:00:00Z");
}

TEST(ExportTest, CsvCellsAreQuotedAndFormulaGuarded) {
  EXPECT_EQ(CsvCell("plain"), "plain");
  EXPECT_EQ(CsvCell("a,b"), "\"a,b\"");
  EXPECT_EQ(CsvCell("say \"hi\""), "\"say \"\"hi\"\"\"");
  EXPECT_EQ(CsvCell("=HYPERLINK(1)"), "'=HYPERLINK(1)");
  EXPECT_EQ(CsvCell("-1.5", false), "-1.5");
}

TEST(ExportTest, InvoiceCsv) {
  const Invoice inv = Sample();
  const std::string csv = InvoicesCsv(std::span<const Invoice>(&inv, 1));
  const std::string head = "acme,2026-11-01T00:00:00Z,2026-12-01T00:00:00Z,USD,";
  EXPECT_EQ(csv,
            "invoice_tenant,period_start,period_end,currency,kind,tenant,pool,model,mig_profile,"
            "priority_class,unit,quantity,base_quantity,base_measure,unit_price,multiplier,"
            "credit_percent,amount,plan,plan_version,service\r\n" +
                head +
                "charge,acme/research,shared,H100-80GB,,batch,tflops-hour,105,378000000,"
                "milli-tflops-seconds,0.45,1,,47.25,default,3,\r\n" +
                head +
                "credit,acme/research,shared,H100-80GB,,batch,tflops-hour,5,18000000,"
                "milli-tflops-seconds,0.45,1,100,2.25,default,3,\r\n" +
                head + "subtotal,,,,,,,,,,,,,47.25,,,\r\n" + head +
                "credits,,,,,,,,,,,,,2.25,,,\r\n" + head + "total,,,,,,,,,,,,,45.00,,,\r\n");
}

// A service's lines name it in the last CSV column and in the feed's description; the product
// code stays the one its jobs' usage has (a service is not a product).
TEST(ExportTest, AServicesLinesNameIt) {
  Invoice inv = Sample();
  inv.lines[0].dims.service = "chat";
  inv.credits.clear();
  const std::string csv = InvoicesCsv(std::span<const Invoice>(&inv, 1));
  EXPECT_NE(csv.find("milli-tflops-seconds,0.45,1,,47.25,default,3,chat\r\n"), std::string::npos)
      << csv;
  const std::vector<FeedItem> items = FeedItems(inv);
  ASSERT_EQ(items.size(), 1u);
  EXPECT_EQ(items[0].item_code, "gpu.tflops-hour.shared.H100-80GB.batch");
  EXPECT_EQ(items[0].description,
            "tflops-hour in pool shared on H100-80GB, class batch, service chat");
}

TEST(ExportTest, FeedItemsPerAccountAndProductCode) {
  const std::vector<FeedItem> items = FeedItems(Sample());
  ASSERT_EQ(items.size(), 2u);
  EXPECT_EQ(items[0].account, "acme/research");
  EXPECT_EQ(items[0].item_code, "gpu.tflops-hour.shared.H100-80GB.batch");
  EXPECT_EQ(items[0].quantity, D("105"));
  EXPECT_EQ(items[0].amount, D("47.25"));
  EXPECT_EQ(items[1].item_code, "gpu.tflops-hour.shared.H100-80GB.batch.credit");
  EXPECT_EQ(items[1].amount, D("-2.25"));
  // The feed's amounts add up to the invoice total: 47.25 - 2.25 = 45.00.
  EXPECT_EQ(items[0].amount.nanos() + items[1].amount.nanos(), Sample().total.nanos());
  EXPECT_EQ(FeedCsv(items),
            "account,item_code,description,quantity,unit,unit_price,amount,currency,period_start,"
            "period_end\r\n"
            "acme/research,gpu.tflops-hour.shared.H100-80GB.batch,"
            "\"tflops-hour in pool shared on H100-80GB, class batch\",105,tflops-hour,0.45,47.25,"
            "USD,2026-11-01T00:00:00Z,2026-12-01T00:00:00Z\r\n"
            "acme/research,gpu.tflops-hour.shared.H100-80GB.batch.credit,"
            "\"Preemption credit: tflops-hour in pool shared on H100-80GB, class batch\",5,"
            "tflops-hour,0.45,-2.25,USD,2026-11-01T00:00:00Z,2026-12-01T00:00:00Z\r\n");
}

}  // namespace
}  // namespace gpupool::billing
