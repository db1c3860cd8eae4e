// The price-plan part of the Store conformance suite (Store::AddPricePlan / ListPricePlans):
// versions are numbered per name from 1, every field round-trips exactly, a version may not
// take effect before its predecessor, and create/update refuse a name that does / does not exist.
#include "tests/store/store_conformance.h"
#include "tests/support/status_macros.h"

namespace gpupool::testing {
namespace {

billing::Decimal D(std::string_view s) { return billing::Decimal::Parse(s).value(); }

billing::PricePlan Plan(std::string name, int64_t effective_ms, std::string_view tflops_price) {
  billing::PricePlan p;
  p.name = std::move(name);
  p.effective_from_ms = effective_ms;
  p.currency = "USD";
  p.description = "list prices, Ünïcode ok";
  p.tenants = {"acme", "globex/lab"};
  p.rates = {{"", "", "", billing::Unit::kTflopsHour, D(tflops_price)},
             {"a100", "A100-80GB", "1g.10gb", billing::Unit::kMigProfileHour, D("0.000000001")},
             {"h100", "", "", billing::Unit::kDeviceHour, D("2.5")}};
  p.priority_multipliers = {{"high", D("1.5")}, {"low", D("0.25")}};
  p.preemption_credit_bps = 7500;
  p.created_by = "token:admin";
  p.create_ms = 1000 + effective_ms;
  return p;
}

TEST_P(StoreConformanceTest, PricePlansAreVersionedAndRoundTrip) {
  ASSERT_OK_AND_ASSIGN(billing::PricePlan v1, store_->AddPricePlan(Plan("std", 100, "0.45"), true));
  EXPECT_EQ(v1.version, 1);
  ASSERT_OK_AND_ASSIGN(billing::PricePlan v2, store_->AddPricePlan(Plan("std", 200, "0.5"), false));
  EXPECT_EQ(v2.version, 2);
  ASSERT_OK_AND_ASSIGN(billing::PricePlan other,
                       store_->AddPricePlan(Plan("alpha", 0, "0.1"), true));
  EXPECT_EQ(other.version, 1);

  ASSERT_OK_AND_ASSIGN(std::vector<billing::PricePlan> all, store_->ListPricePlans(""));
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0], other);  // by name, then version
  EXPECT_EQ(all[1], v1);
  EXPECT_EQ(all[2], v2);
  billing::PricePlan want = Plan("std", 200, "0.5");
  want.version = 2;
  EXPECT_EQ(all[2], want);  // every field, exactly

  ASSERT_OK_AND_ASSIGN(std::vector<billing::PricePlan> std_only, store_->ListPricePlans("std"));
  EXPECT_EQ(std_only.size(), 2u);
  ASSERT_OK_AND_ASSIGN(std::vector<billing::PricePlan> none, store_->ListPricePlans("nope"));
  EXPECT_TRUE(none.empty());

  // A second handle (another daemon) sees the same versions.
  std::unique_ptr<Store> other_handle = OpenStore();
  ASSERT_OK_AND_ASSIGN(std::vector<billing::PricePlan> seen, other_handle->ListPricePlans(""));
  EXPECT_EQ(seen, all);
}

TEST_P(StoreConformanceTest, PricePlanVersionRules) {
  ASSERT_OK(store_->AddPricePlan(Plan("std", 100, "0.45"), true).status());
  // Create of an existing name; update of a missing one.
  EXPECT_EQ(store_->AddPricePlan(Plan("std", 300, "1"), true).status().code(),
            StatusCode::kAlreadyExists);
  EXPECT_EQ(store_->AddPricePlan(Plan("missing", 300, "1"), false).status().code(),
            StatusCode::kNotFound);
  // Back-dated before version 1: refused, nothing stored.
  Result<billing::PricePlan> early = store_->AddPricePlan(Plan("std", 99, "1"), false);
  EXPECT_EQ(early.status().code(), StatusCode::kFailedPrecondition);
  // Invalid plans name the field.
  billing::PricePlan bad = Plan("std", 300, "1");
  bad.currency = "dollars";
  Result<billing::PricePlan> r = store_->AddPricePlan(bad, false);
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  bad = Plan("std", 300, "1");
  bad.description = std::string("bad \xff utf-8");
  EXPECT_EQ(store_->AddPricePlan(bad, false).status().code(), StatusCode::kInvalidArgument);
  ASSERT_OK_AND_ASSIGN(std::vector<billing::PricePlan> all, store_->ListPricePlans("std"));
  EXPECT_EQ(all.size(), 1u);
}

}  // namespace
}  // namespace gpupool::testing
