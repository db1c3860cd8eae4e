// ServiceImpl's billing methods: price plans kept in a MemoryStore (the Store port's in-memory
// implementation, held to the same conformance suite as PostgreSQL), invoices rated from a fixed
// set of metered quantities, budgets kept in MemoryBudgets. Who may do what, and what a
// tenant-admin is shown.
#include <gtest/gtest.h>

#include <chrono>

#include "api/service_impl.h"
#include "billing/period.h"
#include "billing/usage_source.h"
#include "store/memory_budgets.h"
#include "store/memory_store.h"
#include "tests/api/service_harness.h"

namespace gpupool::api {
namespace {

using testing::Admin;
using testing::ServiceHarness;
using testing::Tenant;

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The ledger's answer, fixed: quantities filtered by subtree and period like the real query.
class FixedUsage final : public billing::UsageSource {
 public:
  std::vector<billing::MeteredQuantity> rows;
  Result<std::vector<billing::MeteredQuantity>> Usage(const std::string& tenant, int64_t start,
                                                      int64_t end) override {
    std::vector<billing::MeteredQuantity> out;
    for (const auto& q : rows) {
      if (billing::TenantWithinPath(q.dims.tenant, tenant) && q.start_ms >= start &&
          q.start_ms < end) {
        out.push_back(q);
      }
    }
    return out;
  }
};

v1::PricePlan Plan(const std::string& name, const std::string& price) {
  v1::PricePlan p;
  p.set_name(name);
  p.set_currency("USD");
  v1::PriceRate* r = p.add_rates();
  r->set_unit("tflops-hour");
  r->set_price(price);
  (*p.mutable_priority_multipliers())["high"] = "2";
  return p;
}

class ServiceBilling : public ::testing::Test {
 protected:
  ServiceBilling() : h_({}, Options()) {
    const int64_t t = NowMs() + 60'000;  // after the plans below take effect
    auto q = [t](std::string tenant, int64_t mtflops_s, std::string cls, bool preempted) {
      billing::MeteredQuantity m;
      m.dims = {std::move(tenant), "pub", "H100-80GB", "", std::move(cls), ""};
      m.unit = billing::Unit::kTflopsHour;
      m.quantity = mtflops_s;
      m.ended_by_preemption = preempted;
      m.start_ms = t;
      m.end_ms = t + 60'000;
      return m;
    };
    usage_.rows = {
        q("acme/research", 36'000'000, "normal", false),  // 10 TFLOPS-h x 0.50 = 5.00
        q("acme/research", 3'600'000, "high", true),      // 1 TFLOPS-h x 0.50 x 2 = 1.00, credited
        q("globex", 72'000'000, "normal", false),         // 20 TFLOPS-h x 0.45 = 9.00
    };
  }

  ServiceOptions Options() {
    ServiceOptions o;
    o.price_plans = &store_;
    o.usage = &usage_;
    o.budgets = &budgets_;
    return o;
  }

  void SetUp() override {
    auto [s1, d] = h_.Call(&ApiService::CreatePricePlan, Create(Plan("default", "0.45")));
    ASSERT_TRUE(s1.ok()) << s1.ToString();
    v1::PricePlan acme = Plan("acme-deal", "0.50");
    acme.add_tenants("acme");
    acme.add_tenants("globex/lab");
    auto [s2, a] = h_.Call(&ApiService::CreatePricePlan, Create(acme));
    ASSERT_TRUE(s2.ok()) << s2.ToString();
  }

  static v1::CreatePricePlanRequest Create(const v1::PricePlan& p) {
    v1::CreatePricePlanRequest r;
    *r.mutable_plan() = p;
    return r;
  }
  v1::ListInvoicesRequest Window(const std::string& tenant) {
    v1::ListInvoicesRequest r;
    r.set_tenant(tenant);
    r.mutable_start_time()->set_seconds(NowMs() / 1000 - 3600);
    r.mutable_end_time()->set_seconds(NowMs() / 1000 + 86400);
    return r;
  }

  MemoryStore store_;
  FixedUsage usage_;
  MemoryBudgets budgets_;
  ServiceHarness h_;
};

TEST_F(ServiceBilling, OnlyAdminsWritePlansAndAVersionNeverReachesIntoThePast) {
  v1::UpdatePricePlanRequest up;
  *up.mutable_plan() = Plan("default", "0.40");
  auto [s1, v2] = h_.Call(&ApiService::UpdatePricePlan, up);
  ASSERT_TRUE(s1.ok()) << s1.ToString();
  EXPECT_EQ(v2.version(), 2);
  EXPECT_EQ(v2.created_by(), "test-admin");
  EXPECT_EQ(v2.preemption_credit_percent(), "100");

  auto [s2, r2] = h_.Call(&ApiService::UpdatePricePlan, up, Tenant("acme", Role::kTenantAdmin));
  EXPECT_EQ(s2.code(), StatusCode::kPermissionDenied) << s2.ToString();
  auto [s3, r3] = h_.Call(&ApiService::CreatePricePlan, Create(Plan("x", "1")),
                          Tenant("acme", Role::kTenantAdmin));
  EXPECT_EQ(s3.code(), StatusCode::kPermissionDenied) << s3.ToString();

  up.mutable_plan()->mutable_effective_time()->set_seconds(NowMs() / 1000 - 3600);
  auto [s4, r4] = h_.Call(&ApiService::UpdatePricePlan, up);
  EXPECT_EQ(s4.code(), StatusCode::kInvalidArgument) << s4.ToString();
  EXPECT_NE(s4.message().find("plan.effective_time"), std::string::npos) << s4.ToString();

  v1::PricePlan bad = Plan("bad", "0,45");
  auto [s5, r5] = h_.Call(&ApiService::CreatePricePlan, Create(bad));
  EXPECT_EQ(s5.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s5.message().find("plan.rates[0].price"), std::string::npos) << s5.ToString();
  bad = Plan("bad", "1");
  bad.mutable_rates(0)->set_unit("gpu-hour");
  auto [s6, r6] = h_.Call(&ApiService::CreatePricePlan, Create(bad));
  EXPECT_NE(s6.message().find("plan.rates[0].unit"), std::string::npos) << s6.ToString();
  auto [s7, r7] = h_.Call(&ApiService::CreatePricePlan, Create(Plan("default", "1")));
  EXPECT_EQ(s7.code(), StatusCode::kAlreadyExists) << s7.ToString();
}

// A plan created through the API prices the hour it is created in: that hour is rated by the
// version in effect at its start, so a first version effective at the creation time left the hour
// unpriced and its invoices were refused. An update still takes effect from now on.
TEST(ServiceBillingFirstHour, ACreatedPlanPricesTheHourItIsCreatedIn) {
  constexpr int64_t kHour = 3'600'000;
  MemoryStore store;
  FixedUsage usage;
  ServiceOptions o;
  o.price_plans = &store;
  o.usage = &usage;
  ServiceHarness h({}, o);
  const int64_t before = NowMs();
  v1::CreatePricePlanRequest create;
  *create.mutable_plan() = Plan("default", "0.45");
  auto [s1, plan] = h.Call(&ApiService::CreatePricePlan, create);
  ASSERT_TRUE(s1.ok()) << s1.ToString();
  const int64_t after = NowMs();
  const int64_t from =
      plan.effective_time().seconds() * 1000 + plan.effective_time().nanos() / 1'000'000;
  EXPECT_EQ(from % kHour, 0) << from;
  EXPECT_GE(from, before - before % kHour);
  EXPECT_LE(from, after);

  // 10 TFLOPS-h metered from that hour's start, before the plan existed: 10 x 0.45 = 4.50.
  const int64_t hour = from - from % kHour;
  billing::MeteredQuantity q;
  q.dims = {"acme", "pub", "H100-80GB", "", "normal", ""};
  q.unit = billing::Unit::kTflopsHour;
  q.quantity = 36'000'000;
  q.start_ms = hour;
  q.end_ms = hour + 60'000;
  usage.rows = {q};
  v1::ListInvoicesRequest window;
  window.mutable_start_time()->set_seconds(hour / 1000);
  window.mutable_end_time()->set_seconds((hour + kHour) / 1000);
  auto [s2, invoices] = h.Call(&ApiService::ListInvoices, window);
  ASSERT_TRUE(s2.ok()) << s2.ToString();
  ASSERT_EQ(invoices.invoices_size(), 1);
  EXPECT_EQ(invoices.invoices(0).total(), "4.50");

  // A second version does not reach back into the hour the first one priced.
  v1::UpdatePricePlanRequest update;
  *update.mutable_plan() = Plan("default", "0.90");
  const int64_t before_update = NowMs();
  auto [s3, v2] = h.Call(&ApiService::UpdatePricePlan, update);
  ASSERT_TRUE(s3.ok()) << s3.ToString();
  EXPECT_GE(v2.effective_time().seconds() * 1000 + v2.effective_time().nanos() / 1'000'000,
            before_update);
  auto [s4, again] = h.Call(&ApiService::ListInvoices, window);
  ASSERT_TRUE(s4.ok()) << s4.ToString();
  EXPECT_EQ(again.invoices(0).total(), "4.50");
}

TEST_F(ServiceBilling, ATenantAdminSeesThePlansThatRateItWithoutOtherTenantsNames) {
  auto [s1, all] = h_.Call(&ApiService::ListPricePlans, v1::ListPricePlansRequest{});
  ASSERT_TRUE(s1.ok());
  ASSERT_EQ(all.plans_size(), 2);
  EXPECT_EQ(all.plans(0).tenants_size(), 2);  // acme-deal, as stored

  auto [s2, mine] = h_.Call(&ApiService::ListPricePlans, v1::ListPricePlansRequest{},
                            Tenant("acme/research", Role::kTenantAdmin));
  ASSERT_TRUE(s2.ok()) << s2.ToString();
  ASSERT_EQ(mine.plans_size(), 2);
  EXPECT_EQ(mine.plans(0).name(), "acme-deal");
  ASSERT_EQ(mine.plans(0).tenants_size(), 1);  // globex/lab is not shown to acme
  EXPECT_EQ(mine.plans(0).tenants(0), "acme");
  EXPECT_EQ(mine.plans(0).created_by(), "");

  auto [s3, globex] = h_.Call(&ApiService::ListPricePlans, v1::ListPricePlansRequest{},
                              Tenant("globex", Role::kTenantAdmin));
  ASSERT_TRUE(s3.ok());
  ASSERT_EQ(globex.plans_size(), 2);  // globex/lab is below globex
  auto [s4, member] = h_.Call(&ApiService::ListPricePlans, v1::ListPricePlansRequest{},
                              Tenant("acme", Role::kMember));
  EXPECT_EQ(s4.code(), StatusCode::kPermissionDenied);
}

TEST_F(ServiceBilling, InvoicesPerSubtreeWithTotalsAndExports) {
  // acme: 10 TFLOPS-h x 0.50 = 5.00; 1 TFLOPS-h x 0.50 x 2 (high) = 1.00, credited 100 %.
  auto [s1, acme] =
      h_.Call(&ApiService::ListInvoices, Window(""), Tenant("acme", Role::kTenantAdmin));
  ASSERT_TRUE(s1.ok()) << s1.ToString();
  ASSERT_EQ(acme.invoices_size(), 1);
  const v1::Invoice& inv = acme.invoices(0);
  EXPECT_EQ(inv.tenant(), "acme");
  EXPECT_EQ(inv.currency(), "USD");
  ASSERT_EQ(inv.lines_size(), 2);
  EXPECT_EQ(inv.lines(0).plan(), "acme-deal");
  EXPECT_EQ(inv.subtotal(), "6.00");
  EXPECT_EQ(inv.credit_total(), "1.00");
  EXPECT_EQ(inv.total(), "5.00");

  // Another subtree, or a member: refused.
  auto [s2, other] =
      h_.Call(&ApiService::ListInvoices, Window("globex"), Tenant("acme", Role::kTenantAdmin));
  EXPECT_EQ(s2.code(), StatusCode::kPermissionDenied) << s2.ToString();
  auto [s3, member] = h_.Call(&ApiService::ListInvoices, Window(""), Tenant("acme"));
  EXPECT_EQ(s3.code(), StatusCode::kPermissionDenied) << s3.ToString();

  // An admin without a tenant: one invoice per top-level tenant. globex: 20 x 0.45 = 9.00.
  auto [s4, all] = h_.Call(&ApiService::ListInvoices, Window(""));
  ASSERT_TRUE(s4.ok()) << s4.ToString();
  ASSERT_EQ(all.invoices_size(), 2);
  EXPECT_EQ(all.invoices(1).tenant(), "globex");
  EXPECT_EQ(all.invoices(1).total(), "9.00");

  auto [s5, csv] = h_.Call(&ApiService::ExportInvoices, Window("acme"));
  ASSERT_TRUE(s5.ok()) << s5.ToString();
  EXPECT_EQ(csv.content_type(), "text/csv; charset=utf-8");
  EXPECT_NE(csv.body().find(",total,,,,,,,,,,,,,5.00,,,\r\n"), std::string::npos) << csv.body();
  EXPECT_TRUE(csv.filename().starts_with("invoices-acme-")) << csv.filename();

  v1::GetUsageFeedRequest feed_req;
  feed_req.set_tenant("acme");
  *feed_req.mutable_start_time() = Window("").start_time();
  *feed_req.mutable_end_time() = Window("").end_time();
  auto [s6, feed] =
      h_.Call(&ApiService::GetUsageFeed, feed_req, Tenant("acme", Role::kTenantAdmin));
  ASSERT_TRUE(s6.ok()) << s6.ToString();
  ASSERT_EQ(feed.items_size(), 3);  // two charges, one credit
  EXPECT_EQ(feed.items(0).account(), "acme/research");
  EXPECT_EQ(feed.items(2).amount(), "-1.00");
  EXPECT_TRUE(feed.items(2).item_code().ends_with(".credit"));
}

TEST_F(ServiceBilling, PeriodsAreCheckedAndAMissingLedgerIsSaid) {
  v1::ListInvoicesRequest r;
  r.set_period("2026-13");
  auto [s1, x] = h_.Call(&ApiService::ListInvoices, r);
  EXPECT_EQ(s1.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s1.message().find("YYYY-MM"), std::string::npos) << s1.ToString();

  ServiceOptions o;
  o.price_plans = &store_;
  ServiceHarness no_ledger({}, o);
  auto [s2, y] = no_ledger.Call(&ApiService::ListInvoices, Window("acme"));
  EXPECT_EQ(s2.code(), StatusCode::kFailedPrecondition) << s2.ToString();
  auto [s3, z] = ServiceHarness().Call(&ApiService::ListPricePlans, v1::ListPricePlansRequest{});
  EXPECT_EQ(s3.code(), StatusCode::kUnimplemented) << s3.ToString();
}

v1::SetBudgetRequest Budget(const std::string& tenant, const std::string& amount,
                            const std::string& currency = "", std::vector<int32_t> percents = {}) {
  v1::SetBudgetRequest r;
  r.mutable_budget()->set_tenant(tenant);
  r.mutable_budget()->set_amount(amount);
  r.mutable_budget()->set_currency(currency);
  for (int32_t p : percents) r.mutable_budget()->add_alert_percents(p);
  return r;
}

TEST_F(ServiceBilling, ABudgetTakesItsTenantsCurrencyAndShowsTheMonthSoFar) {
  const CallContext acme_admin = Tenant("acme", Role::kTenantAdmin);
  auto [s1, b] = h_.Call(&ApiService::SetBudget, Budget("acme/research", "10"), acme_admin);
  ASSERT_TRUE(s1.ok()) << s1.ToString();
  EXPECT_EQ(b.tenant(), "acme/research");
  EXPECT_EQ(b.amount(), "10");
  EXPECT_EQ(b.currency(), "USD");  // the acme-deal plan's
  EXPECT_EQ(std::vector<int32_t>(b.alert_percents().begin(), b.alert_percents().end()),
            (std::vector<int32_t>{50, 80, 100}));
  // 5.00 charged, 1.00 charged and credited back: the invoice total, as ListInvoices says.
  EXPECT_EQ(b.spent(), "5.00");
  EXPECT_EQ(b.percent_used(), "50.00");
  EXPECT_EQ(b.period(), billing::PeriodLabel(billing::MonthOf(NowMs())));
  EXPECT_EQ(b.updated_by(), "");  // a credential id is the operators' business

  auto [s2, all] = h_.Call(&ApiService::ListBudgets, v1::ListBudgetsRequest());
  ASSERT_TRUE(s2.ok()) << s2.ToString();
  ASSERT_EQ(all.budgets_size(), 1);
  EXPECT_FALSE(all.budgets(0).updated_by().empty());  // an admin sees who set it

  // Replaced by a second call; thresholds sorted.
  auto [s3, b2] =
      h_.Call(&ApiService::SetBudget, Budget("acme/research", "4", "USD", {120, 90}), acme_admin);
  ASSERT_TRUE(s3.ok()) << s3.ToString();
  EXPECT_EQ(std::vector<int32_t>(b2.alert_percents().begin(), b2.alert_percents().end()),
            (std::vector<int32_t>{90, 120}));
  EXPECT_EQ(b2.percent_used(), "125.00");
}

TEST_F(ServiceBilling, BadBudgetsAreRefusedNamingTheField) {
  struct Case {
    v1::SetBudgetRequest req;
    StatusCode code;
    std::string words;
  };
  const Case cases[] = {
      {Budget("acme", "10", "EUR"), StatusCode::kInvalidArgument,
       "budget.currency: 'EUR' but 'acme' is rated in USD (plan 'acme-deal')"},
      {Budget("acme", "0"), StatusCode::kInvalidArgument, "budget.amount"},
      {Budget("acme", "ten"), StatusCode::kInvalidArgument, "budget.amount"},
      {Budget("acme", "10", "", {0}), StatusCode::kInvalidArgument, "budget.alert_percents"},
      {Budget("acme", "10", "", {50, 50}), StatusCode::kInvalidArgument, "listed twice"},
      {Budget("Acme!", "10"), StatusCode::kInvalidArgument, "budget.tenant"},
      {Budget("", "10"), StatusCode::kInvalidArgument, "budget.tenant"},
  };
  for (const Case& c : cases) {
    auto [s, b] = h_.Call(&ApiService::SetBudget, c.req);
    EXPECT_EQ(s.code(), c.code) << s.ToString();
    EXPECT_NE(s.message().find(c.words), std::string::npos) << s.ToString();
  }
  auto [s, none] = h_.Call(&ApiService::ListBudgets, v1::ListBudgetsRequest());
  EXPECT_EQ(none.budgets_size(), 0);  // nothing half-written
}

TEST_F(ServiceBilling, ATenantAdminKeepsTheBudgetsOfItsOwnSubtreeOnly) {
  ASSERT_TRUE(h_.Call(&ApiService::SetBudget, Budget("globex", "100")).first.ok());
  const CallContext acme_admin = Tenant("acme", Role::kTenantAdmin);
  ASSERT_TRUE(h_.Call(&ApiService::SetBudget, Budget("acme", "100"), acme_admin).first.ok());
  EXPECT_EQ(h_.Call(&ApiService::SetBudget, Budget("globex", "1"), acme_admin).first.code(),
            StatusCode::kPermissionDenied);
  // A member reads invoices of no one, and budgets neither.
  EXPECT_EQ(
      h_.Call(&ApiService::ListBudgets, v1::ListBudgetsRequest(), Tenant("acme")).first.code(),
      StatusCode::kPermissionDenied);

  auto [s1, mine] = h_.Call(&ApiService::ListBudgets, v1::ListBudgetsRequest(), acme_admin);
  ASSERT_TRUE(s1.ok()) << s1.ToString();
  ASSERT_EQ(mine.budgets_size(), 1);
  EXPECT_EQ(mine.budgets(0).tenant(), "acme");
  v1::ListBudgetsRequest other;
  other.set_tenant("globex");
  EXPECT_EQ(h_.Call(&ApiService::ListBudgets, other, acme_admin).first.code(),
            StatusCode::kPermissionDenied);

  v1::DeleteBudgetRequest del;
  del.set_tenant("globex");
  EXPECT_EQ(h_.Call(&ApiService::DeleteBudget, del, acme_admin).first.code(),
            StatusCode::kPermissionDenied);
  del.set_tenant("acme");
  EXPECT_TRUE(h_.Call(&ApiService::DeleteBudget, del, acme_admin).first.ok());
  Status again = h_.Call(&ApiService::DeleteBudget, del, acme_admin).first;
  EXPECT_EQ(again.code(), StatusCode::kNotFound) << again.ToString();
  auto [s2, left] = h_.Call(&ApiService::ListBudgets, v1::ListBudgetsRequest());
  ASSERT_EQ(left.budgets_size(), 1);
  EXPECT_EQ(left.budgets(0).tenant(), "globex");
}

TEST_F(ServiceBilling, ADeletedTenantsBudgetsGoWithIt) {
  // A tenant made later at the same path must not inherit them (nor their alerts).
  for (const char* t : {"acme", "acme/research", "acme/research/ann"}) {
    v1::CreateTenantRequest req;
    req.mutable_tenant()->set_path(t);
    ASSERT_TRUE(h_.Call(&ApiService::CreateTenant, req, Admin()).first.ok()) << t;
  }
  for (const char* t : {"acme", "acme/research"}) {
    ASSERT_TRUE(h_.Call(&ApiService::SetBudget, Budget(t, "10")).first.ok()) << t;
  }
  v1::DeleteTenantRequest del;
  del.set_path("acme/research/ann");
  ASSERT_TRUE(h_.Call(&ApiService::DeleteTenant, del, Admin()).first.ok());
  del.set_path("acme/research");
  ASSERT_TRUE(h_.Call(&ApiService::DeleteTenant, del, Admin()).first.ok());
  auto [s, left] = h_.Call(&ApiService::ListBudgets, v1::ListBudgetsRequest());
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_EQ(left.budgets_size(), 1);
  EXPECT_EQ(left.budgets(0).tenant(), "acme");
}

}  // namespace
}  // namespace gpupool::api
