// gpupoold's `price_plans:` (cmd/daemon/price_plans.h): parsed with errors naming file, line and
// key; applied to a store as a new version only when the terms changed.
#include <gtest/gtest.h>

#include "cmd/daemon/config.h"
#include "cmd/daemon/price_plans.h"
#include "store/memory_store.h"

namespace gpupool {
namespace {

constexpr char kYaml[] = R"(
price_plans:
  - name: default
    currency: USD
    rates:
      - {unit: tflops-hour, price: 0.45}
      - {unit: mig-profile-hour, model: A100-80GB, mig_profile: 1g.10gb, price: "0.30"}
    priority_multipliers: {high: 1.5}
    preemption_credit_percent: 50
  - name: research
    currency: USD
    tenants: [acme/research]
    rates: [{unit: device-hour, pool: h100, price: 2.5}]
)";

TEST(DaemonPricePlansTest, ParsesExactDecimals) {
  Result<DaemonConfig> c = ParseDaemonConfig(kYaml, "gpupoold.yaml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_EQ(c->price_plans.size(), 2u);
  const billing::PricePlan& p = c->price_plans[0];
  EXPECT_EQ(p.name, "default");
  EXPECT_EQ(p.rates[0].price.nanos(), 450'000'000);  // 0.45 read as text, not as a double
  EXPECT_EQ(p.rates[1].mig_profile, "1g.10gb");
  EXPECT_EQ(p.priority_multipliers.at("high").nanos(), 1'500'000'000);
  EXPECT_EQ(p.preemption_credit_bps, 5000);
  EXPECT_EQ(c->price_plans[1].tenants, std::vector<std::string>{"acme/research"});
}

TEST(DaemonPricePlansTest, ErrorsNameFileLineAndKey) {
  struct Case {
    const char* yaml;
    const char* want;
  };
  const Case cases[] = {
      {"price_plans:\n  - {name: a, currency: USD, rates: [{unit: tflops-hour, price: 0,45}]}\n",
       "gpupoold.yaml:2"},
      {"price_plans:\n  - name: a\n    currency: USD\n    rates:\n      - {unit: gpu-hour, price: "
       "1}\n",
       "gpupoold.yaml:2: price_plans[0]: plan.rates[0].unit: 'gpu-hour' is not one of"},
      {"price_plans:\n  - name: a\n    currency: USD\n    rates:\n      - {unit: tflops-hour}\n",
       "gpupoold.yaml:5: price_plans[0].rates[0].price: missing required key"},
      {"price_plans:\n  - {name: a, currency: USD, colour: red, rates: []}\n", "colour"},
      {"price_plans:\n  - {name: a, currency: USD, rates: [{unit: tflops-hour, price: 1}]}\n"
       "  - {name: a, currency: USD, rates: [{unit: tflops-hour, price: 2}]}\n",
       "gpupoold.yaml:3: price_plans[1]: a second plan named 'a'"},
  };
  for (const Case& k : cases) {
    Result<DaemonConfig> c = ParseDaemonConfig(k.yaml, "gpupoold.yaml");
    ASSERT_FALSE(c.ok()) << k.yaml;
    EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(c.status().message().find(k.want), std::string::npos) << c.status().message();
  }
}

TEST(DaemonPricePlansTest, AppliesANewVersionOnlyWhenTheTermsChange) {
  Result<DaemonConfig> c = ParseDaemonConfig(kYaml, "gpupoold.yaml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  MemoryStore store;
  EXPECT_EQ(*ApplyConfiguredPricePlans(store, c->price_plans, 1000), 2);
  EXPECT_EQ(*ApplyConfiguredPricePlans(store, c->price_plans, 2000), 0);  // a restart
  c->price_plans[0].rates[0].price = billing::Decimal::Parse("0.50").value();
  EXPECT_EQ(*ApplyConfiguredPricePlans(store, c->price_plans, 3000), 1);
  Result<std::vector<billing::PricePlan>> v = store.ListPricePlans("default");
  ASSERT_TRUE(v.ok());
  ASSERT_EQ(v->size(), 2u);
  EXPECT_EQ((*v)[0].effective_from_ms, 0);  // the first version rates its whole first hour
  EXPECT_EQ((*v)[1].version, 2);
  EXPECT_EQ((*v)[1].effective_from_ms, 3000);
  EXPECT_EQ((*v)[1].created_by, "config");
}

// A daemon that first stores its configured plan mid-hour can invoice that hour: the hour's usage
// is rated by the version in effect at its start, so the first version starts with the hour.
TEST(DaemonPricePlansTest, TheFirstVersionRatesTheHourItIsStoredIn) {
  Result<DaemonConfig> c = ParseDaemonConfig(kYaml, "gpupoold.yaml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  MemoryStore store;
  const int64_t hour = 3'600'000;
  const int64_t now = 500 * hour + 1'234'567;
  ASSERT_EQ(*ApplyConfiguredPricePlans(store, c->price_plans, now), 2);
  c->price_plans[0].rates[0].price = billing::Decimal::Parse("0.75").value();
  ASSERT_EQ(*ApplyConfiguredPricePlans(store, c->price_plans, now + 10), 1);
  Result<std::vector<billing::PricePlan>> v = store.ListPricePlans("default");
  ASSERT_TRUE(v.ok());
  ASSERT_EQ(v->size(), 2u);
  EXPECT_EQ((*v)[0].effective_from_ms, 500 * hour);
  EXPECT_EQ((*v)[1].effective_from_ms, now + 10);  // a change never reaches back
  const billing::PlanBook book(*v);
  const billing::PricePlan* at_start = book.VersionAt("default", 500 * hour);
  ASSERT_NE(at_start, nullptr);
  EXPECT_EQ(at_start->version, 1);
}

}  // namespace
}  // namespace gpupool
