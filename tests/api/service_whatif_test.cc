// CompareWhatIf (api/service_whatif.cc) over a real scheduler stack and PreflightRunner
// (twin/preflight.h): who may call it, bad input naming the field, a comparison of the pool's
// recent submissions, one what-if at a time (a second is refused while the first runs), and the
// deadline. The production end to end (real daemon, CLI, PostgreSQL) is
// tests/e2e/whatif_e2e_test.cc.
#include <gtest/gtest.h>

#include <future>

#include "tests/api/service_harness.h"
#include "twin/preflight.h"

namespace gpupool::api::testing {
namespace {

// The harness's store, with QueryPoolHistory held until the gate opens (when one is set).
class GatedStore final : public Store {
 public:
  explicit GatedStore(Store* inner) : inner_(inner) {}
  Result<int64_t> AcquireLeadership() override { return inner_->AcquireLeadership(); }
  Result<RecoveredState> Recover() override { return inner_->Recover(); }
  void Apply(std::vector<Mutation> batch, Done done) override {
    inner_->Apply(std::move(batch), std::move(done));
  }
  Result<std::vector<EventRecord>> ListEvents(const std::string& prefix, int limit) override {
    return inner_->ListEvents(prefix, limit);
  }
  Result<PoolHistory> QueryPoolHistory(const PoolHistoryQuery& query) override {
    entered.set_value();
    if (gate) gate->wait();
    return inner_->QueryPoolHistory(query);
  }

  std::promise<void> entered;
  std::optional<std::shared_future<void>> gate;

 private:
  Store* inner_;
};

class WhatIfServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(h_.CreatePool("gpu").first.ok());
    ASSERT_TRUE(h_.RegisterNode("n1", "gpu").ok());
    v1::CreateTenantRequest t;
    t.mutable_tenant()->set_path("acme");
    ASSERT_TRUE(h_.Call(&ApiService::CreateTenant, t).first.ok());
    for (int i = 0; i < 3; ++i)
      ASSERT_TRUE(h_.Submit(ServiceHarness::Job("acme", "gpu")).first.ok());
    h_.clock.Advance(60'000'000);
  }

  // A ServiceImpl over the harness's scheduler with `runner` as its what-if.
  std::unique_ptr<ServiceImpl> Service(twin::PreflightRunner* runner) {
    ServiceOptions o;
    o.what_if = runner;
    auto s = std::make_unique<ServiceImpl>(h_.scheduler.get(), h_.scheduler.get(), &h_.hub, o);
    s->SetRecovered(true);
    return s;
  }

  static std::pair<Status, v1::CompareWhatIfResponse> Compare(ServiceImpl& s,
                                                              const v1::CompareWhatIfRequest& req,
                                                              const CallContext& ctx = Admin()) {
    std::promise<std::pair<Status, v1::CompareWhatIfResponse>> p;
    auto f = p.get_future();
    s.CompareWhatIf(ctx, req, [&p](Status st, v1::CompareWhatIfResponse r) {
      p.set_value({std::move(st), std::move(r)});
    });
    return f.get();
  }

  static v1::CompareWhatIfRequest Request(const std::string& pool = "gpu") {
    v1::CompareWhatIfRequest r;
    r.set_pool(pool);
    r.set_window("1h");
    return r;
  }

  ServiceHarness h_;
};

TEST_F(WhatIfServiceTest, ComparesThePoolsRecentSubmissions) {
  twin::PreflightRunner runner(h_.scheduler.get(), &h_.store, &h_.clock, {});
  auto service = Service(&runner);
  v1::CompareWhatIfRequest req = Request();
  req.mutable_change()->set_strategy("best-fit");
  req.mutable_change()->set_compute_overcommit(2);
  auto [st, resp] = Compare(*service, req);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(resp.tasks(), 3);
  EXPECT_EQ(resp.gpus(), 1);
  EXPECT_EQ(resp.to().seconds() - resp.from().seconds(), 3600);
  EXPECT_EQ(resp.candidate().strategy(), "best-fit");
  EXPECT_DOUBLE_EQ(resp.candidate().compute_overcommit(), 2.0);
  EXPECT_DOUBLE_EQ(resp.baseline().compute_overcommit(), 1.0);
  EXPECT_EQ(resp.baseline().wait_by_class().at("normal").count(), 3);
  EXPECT_EQ(runner.runs(), 1);
}

TEST_F(WhatIfServiceTest, AdminsOnlyAndBadInputNamesTheField) {
  twin::PreflightRunner runner(h_.scheduler.get(), &h_.store, &h_.clock, {});
  auto service = Service(&runner);
  EXPECT_EQ(Compare(*service, Request(), Tenant("acme", Role::kTenantAdmin)).first.code(),
            StatusCode::kPermissionDenied);
  struct Case {
    std::function<void(v1::CompareWhatIfRequest*)> edit;
    StatusCode code;
    std::string message;
  };
  const std::vector<Case> cases = {
      {[](auto* r) { r->set_pool(""); }, StatusCode::kInvalidArgument, "pool: must not be empty"},
      {[](auto* r) { r->set_pool("nope"); }, StatusCode::kNotFound, "pool: unknown pool 'nope'"},
      {[](auto* r) { r->set_window("soon"); }, StatusCode::kInvalidArgument,
       "window: 'soon' is not a duration such as 90m or 24h"},
      {[](auto* r) { r->set_window("30s"); }, StatusCode::kInvalidArgument,
       "window: must be 1m..168h, got '30s'"},
      {[](auto* r) { r->set_window("8d"); }, StatusCode::kInvalidArgument,
       "window: must be 1m..168h, got '8d'"},
      {[](auto* r) { r->mutable_change()->set_strategy("tetris"); }, StatusCode::kInvalidArgument,
       "change.strategy: unknown placement strategy 'tetris'"},
      {[](auto* r) { r->mutable_change()->set_compute_overcommit(0.5); },
       StatusCode::kInvalidArgument,
       "change.compute_overcommit: must be 1..100 (a ratio such as 1.5), got 0.500000"},
      {[](auto* r) { r->mutable_change()->set_preemption("maybe"); }, StatusCode::kInvalidArgument,
       "change.preemption: must be on or off, got 'maybe'"},
      {[](auto* r) { r->mutable_change()->set_mig_relayout("always"); },
       StatusCode::kInvalidArgument,
       "change.mig_relayout: must be off, idle or drain, got 'always'"},
      {[](auto* r) { r->mutable_change()->add_quotas()->set_tenant("acme"); },
       StatusCode::kInvalidArgument, "change.quotas[0]: give a guaranteed amount, a limit or both"},
      {[](auto* r) {
         v1::WhatIfQuota* q = r->mutable_change()->add_quotas();
         q->set_tenant("initech");
         q->mutable_limit()->set_devices(1);
       },
       StatusCode::kInvalidArgument, "quota: unknown tenant 'initech'"},
      {[](auto* r) {
         for (int i = 0; i < 2; ++i) {
           v1::WhatIfQuota* q = r->mutable_change()->add_quotas();
           q->set_tenant("acme");
           q->mutable_limit()->set_devices(1);
         }
       },
       StatusCode::kInvalidArgument, "change.quotas[1].tenant: 'acme' is given twice"},
  };
  for (const Case& c : cases) {
    v1::CompareWhatIfRequest req = Request();
    c.edit(&req);
    Status st = Compare(*service, req).first;
    EXPECT_EQ(st.code(), c.code) << c.message << " → " << st.ToString();
    EXPECT_EQ(st.message(), c.message);
  }
}

TEST_F(WhatIfServiceTest, OneAtATimeASecondIsRefusedWhileTheFirstRuns) {
  GatedStore store(&h_.store);
  std::promise<void> open;
  store.gate = open.get_future().share();
  std::future<void> entered = store.entered.get_future();
  twin::PreflightRunner runner(h_.scheduler.get(), &store, &h_.clock, {});
  auto service = Service(&runner);
  std::promise<std::pair<Status, v1::CompareWhatIfResponse>> first;
  service->CompareWhatIf(Admin(), Request(), [&first](Status st, v1::CompareWhatIfResponse r) {
    first.set_value({std::move(st), std::move(r)});
  });
  entered.wait();  // the first is reading the history on the worker
  auto [st, resp] = Compare(*service, Request());
  EXPECT_EQ(st.code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(st.message(),
            "whatif: another what-if is running on this daemon (one at a time); retry in a minute");
  open.set_value();
  auto done = first.get_future().get();
  EXPECT_TRUE(done.first.ok()) << done.first.ToString();
  EXPECT_EQ(done.second.tasks(), 3);
  EXPECT_EQ(runner.runs(), 1);
}

TEST_F(WhatIfServiceTest, TheDeadlineStopsTheReplays) {
  twin::PreflightRunner runner(h_.scheduler.get(), &h_.store, &h_.clock,
                               {.deadline = std::chrono::milliseconds(0)});
  auto service = Service(&runner);
  Status st = Compare(*service, Request()).first;
  EXPECT_EQ(st.code(), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(st.message(), "whatif: the replays did not finish within 0 s; try a shorter --window");
}

}  // namespace
}  // namespace gpupool::api::testing
