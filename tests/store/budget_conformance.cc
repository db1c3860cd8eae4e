// The BudgetStore conformance suite (billing/budget.h), against the memory implementation and
// PostgreSQL: a budget round-trips exactly (nanos, thresholds sorted), a second Put replaces the
// first, lists are per subtree on path segments, a malformed budget is refused with nothing
// written, and deleting a tenant without a budget is NOT_FOUND. Then PostgreSQL alone: a budget
// survives a new handle (another replica, a restart).
#include <gtest/gtest.h>

#include <functional>

#include "store/memory_budgets.h"
#include "store/pg_budgets.h"
#include "store/pg_store.h"
#include "tests/support/pg_fixture.h"
#include "tests/support/status_macros.h"

namespace gpupool::testing {
namespace {

using billing::Budget;
using billing::Decimal;

Budget Make(const std::string& tenant, const char* amount, std::vector<int32_t> percents = {}) {
  Budget b;
  b.tenant = tenant;
  b.amount = *Decimal::Parse(amount);
  b.currency = "USD";
  b.alert_percents = std::move(percents);
  b.updated_by = "key:0123456789ab";
  b.update_ms = 1'000;
  return b;
}

struct Factory {
  std::string name;
  // A fresh store, and (PostgreSQL) a way to open a second handle on the same table.
  std::function<Result<std::unique_ptr<billing::BudgetStore>>(std::string* uri)> make;
  friend void PrintTo(const Factory& f, std::ostream* os) { *os << f.name; }
};

class BudgetConformanceTest : public ::testing::TestWithParam<Factory> {
 protected:
  void SetUp() override { ASSERT_OK_AND_ASSIGN(store_, GetParam().make(&uri_)); }
  std::vector<Budget> List(const std::string& prefix) {
    Result<std::vector<Budget>> r = store_->List(prefix);
    EXPECT_OK(r.status());
    return r.ok() ? *r : std::vector<Budget>{};
  }
  std::unique_ptr<billing::BudgetStore> store_;
  std::string uri_;
};

TEST_P(BudgetConformanceTest, ABudgetRoundTripsExactlyAndASecondPutReplacesIt) {
  ASSERT_OK(store_->Put(Make("acme/research", "1234.567890123", {100, 25})));
  std::vector<Budget> got = List("");
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].amount, *Decimal::Parse("1234.567890123"));
  EXPECT_EQ(got[0].currency, "USD");
  EXPECT_EQ(got[0].alert_percents, (std::vector<int32_t>{25, 100}));
  EXPECT_EQ(got[0].updated_by, "key:0123456789ab");
  EXPECT_EQ(got[0].update_ms, 1'000);

  Budget next = Make("acme/research", "50");
  next.currency = "EUR";
  next.update_ms = 2'000;
  ASSERT_OK(store_->Put(next));
  got = List("acme/research");
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].amount, *Decimal::Parse("50"));
  EXPECT_EQ(got[0].currency, "EUR");
  EXPECT_EQ(got[0].alert_percents, billing::kDefaultAlertPercents);
  EXPECT_EQ(got[0].update_ms, 2'000);
}

TEST_P(BudgetConformanceTest, ListsArePerSubtreeOnPathSegments) {
  for (const char* t :
       {"acme", "acme/research", "acme/research/ann", "acme/research_x", "globex"}) {
    ASSERT_OK(store_->Put(Make(t, "10")));
  }
  auto tenants = [&](const std::string& prefix) {
    std::vector<std::string> out;
    for (const Budget& b : List(prefix)) out.push_back(b.tenant);
    return out;
  };
  EXPECT_EQ(tenants("acme/research"),
            (std::vector<std::string>{"acme/research", "acme/research/ann"}));
  EXPECT_EQ(tenants("acme").size(), 4u);
  EXPECT_EQ(tenants("").size(), 5u);
  EXPECT_TRUE(tenants("initech").empty());
}

TEST_P(BudgetConformanceTest, AMalformedBudgetIsRefusedWithNothingWritten) {
  ASSERT_OK(store_->Put(Make("acme", "10")));
  EXPECT_EQ(store_->Put(Make("acme", "0")).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(store_->Put(Make("acme", "10", {80, 80})).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(store_->Put(Make("globex", "10", {2000})).code(), StatusCode::kInvalidArgument);
  std::vector<Budget> got = List("");
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].amount, *Decimal::Parse("10"));
}

TEST_P(BudgetConformanceTest, DeleteRemovesOneBudgetAndAnUnknownOneIsNotFound) {
  ASSERT_OK(store_->Put(Make("acme", "10")));
  ASSERT_OK(store_->Put(Make("acme/research", "5")));
  ASSERT_OK(store_->Delete("acme"));
  ASSERT_EQ(List("").size(), 1u);
  EXPECT_EQ(List("")[0].tenant, "acme/research");
  Status again = store_->Delete("acme");
  EXPECT_EQ(again.code(), StatusCode::kNotFound);
  EXPECT_NE(again.message().find("'acme'"), std::string::npos) << again.message();
}

TEST_P(BudgetConformanceTest, ABudgetOutlivesItsHandle) {
  if (uri_.empty()) GTEST_SKIP() << "in memory: a budget lives as long as its store";
  ASSERT_OK(store_->Put(Make("acme", "10", {90})));
  store_.reset();
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<PgBudgets> reopened, PgBudgets::Open(uri_));
  ASSERT_OK_AND_ASSIGN(std::vector<Budget> got, reopened->List("acme"));
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].alert_percents, (std::vector<int32_t>{90}));
}

INSTANTIATE_TEST_SUITE_P(
    All, BudgetConformanceTest,
    ::testing::Values(Factory{"memory",
                              [](std::string*) -> Result<std::unique_ptr<billing::BudgetStore>> {
                                return std::unique_ptr<billing::BudgetStore>(
                                    std::make_unique<MemoryBudgets>());
                              }},
                      Factory{
                          "pg",
                          [](std::string* uri) -> Result<std::unique_ptr<billing::BudgetStore>> {
                            GPUPOOL_ASSIGN_OR_RETURN(*uri, CreateTestDatabase());
                            PgStoreOptions o;
                            o.uri = *uri;
                            GPUPOOL_RETURN_IF_ERROR(PgStore::Open(o).status());
                            GPUPOOL_ASSIGN_OR_RETURN(auto s, PgBudgets::Open(*uri));
                            return std::unique_ptr<billing::BudgetStore>(std::move(s));
                          }}),
    [](const ::testing::TestParamInfo<Factory>& p) { return p.param.name; });

}  // namespace
}  // namespace gpupool::testing
