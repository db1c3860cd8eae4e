// BudgetWatcher over a real Scheduler (the core on its loop, the in-memory store, whose event log
// is what webhooks follow): each threshold of a budget is told once per month, in order, with
// the spend in the message; a watcher that starts after a fail-over reads what was told from the
// log and repeats nothing; a new month is told afresh; a budget that cannot be rated is skipped;
// an append whose answer is lost after it committed is not repeated. The ledger is a fixed
// UsageSource (the quantities the test says were metered) and the watcher's clock a manual one.
#include "scheduler/budget_watcher.h"

#include <gtest/gtest.h>

#include <chrono>
#include <mutex>
#include <thread>

#include "billing/period.h"
#include "store/memory_budgets.h"
#include "store/memory_store.h"

namespace gpupool {
namespace {

using namespace std::chrono_literals;
using billing::Budget;
using billing::Decimal;

constexpr int64_t kDec1 = 1'796'083'200'000;  // 2026-12-01T00:00:00Z
constexpr int64_t kHour = 3'600'000;

// Device-hours metered per tenant, at 10 USD each (the default plan below).
class FixedUsage final : public billing::UsageSource {
 public:
  void Set(const std::string& tenant, int64_t start_ms, int64_t device_hours) {
    std::lock_guard lock(mu_);
    billing::MeteredQuantity q;
    q.dims = {tenant, "gpu", "H100-SXM", "", "batch", ""};
    q.unit = billing::Unit::kDeviceHour;
    q.quantity = device_hours * 3600;
    q.start_ms = start_ms;
    q.end_ms = start_ms + kHour;
    rows_.push_back(q);
  }
  void Fail(bool fail) {
    std::lock_guard lock(mu_);
    fail_ = fail;
  }
  Result<std::vector<billing::MeteredQuantity>> Usage(const std::string& tenant, int64_t start_ms,
                                                      int64_t end_ms) override {
    std::lock_guard lock(mu_);
    if (fail_) return Status::Unavailable("the ledger is away");
    std::vector<billing::MeteredQuantity> out;
    for (const billing::MeteredQuantity& q : rows_) {
      if (billing::TenantWithinPath(q.dims.tenant, tenant) && q.start_ms >= start_ms &&
          q.start_ms < end_ms) {
        out.push_back(q);
      }
    }
    return out;
  }

 private:
  std::mutex mu_;
  bool fail_ = false;
  std::vector<billing::MeteredQuantity> rows_;
};

// The scheduler's jobs port, whose RecordEvent may be made to lose its answer after the event
// committed (a connection that broke after COMMIT), or to fail before it.
class FlakyJobs final : public JobsPort {
 public:
  explicit FlakyJobs(Scheduler* s) : s_(s) {}
  void SubmitJob(JobSpec spec, SchedulerCallback<JobRecord> done) override {
    s_->SubmitJob(std::move(spec), std::move(done));
  }
  void GetJob(int64_t id, SchedulerCallback<JobRecord> done) override { s_->GetJob(id, done); }
  void ListJobs(JobFilter f, std::function<void(JobPage)> done) override { s_->ListJobs(f, done); }
  void CancelJob(int64_t id, std::string reason, JobCheck check,
                 SchedulerCallback<JobRecord> done) override {
    s_->CancelJob(id, std::move(reason), std::move(check), std::move(done));
  }
  void WatchJob(int64_t id, JobCheck check, WatchFn fn,
                SchedulerCallback<int64_t> registered) override {
    s_->WatchJob(id, std::move(check), std::move(fn), std::move(registered));
  }
  void Unwatch(int64_t id) override { s_->Unwatch(id); }
  void RecordEvent(EventRecord e, SchedulerCallback<bool> done) override {
    ++appends;
    if (fail_before > 0) {
      --fail_before;
      done(Status::Unavailable("the database is away"));
      return;
    }
    if (lose_answer > 0) {
      --lose_answer;
      s_->RecordEvent(std::move(e), [done](Result<bool>) {
        done(Status::Unavailable("connection lost after COMMIT"));
      });
      return;
    }
    s_->RecordEvent(std::move(e), std::move(done));
  }
  int fail_before = 0;
  int lose_answer = 0;
  int appends = 0;

 private:
  Scheduler* s_;
};

// No node ever registers: the watcher's events need no agent.
class NoAgents final : public AgentGateway {
 public:
  bool StartTask(const std::string&, const StartTaskCommand&) override { return true; }
  bool StopTask(const std::string&, const StopTaskCommand&) override { return true; }
};

billing::PricePlan DefaultPlan(const std::string& currency = "USD") {
  billing::PricePlan p;
  p.name = "default";
  p.version = 1;
  p.currency = currency;
  billing::PriceRate r;
  r.unit = billing::Unit::kDeviceHour;
  r.price = *Decimal::Parse("10");
  p.rates = {r};
  return p;
}

class BudgetWatcherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    scheduler_ = std::make_unique<Scheduler>(SchedulerOptions::Defaults(), SystemClock::Get(),
                                             &store_, &agents_);
    Result<int64_t> epoch = store_.AcquireLeadership();
    Result<RecoveredState> state = store_.Recover();
    ASSERT_TRUE(epoch.ok() && state.ok());
    ASSERT_TRUE(scheduler_->Start(*state, *epoch, 20ms).ok());
    jobs_ = std::make_unique<FlakyJobs>(scheduler_.get());
    clock_.Set((kDec1 + 10 * 24 * kHour) * 1000);  // 2026-12-11
  }
  void TearDown() override { scheduler_->Stop(); }

  std::unique_ptr<BudgetWatcher> NewWatcher() {
    BudgetWatcherSources sources;
    sources.price_plans = [this]() -> Result<std::vector<billing::PricePlan>> {
      return std::vector<billing::PricePlan>{plan_};
    };
    sources.events = [this](const std::string& prefix) { return store_.ListEvents(prefix, 0); };
    return std::make_unique<BudgetWatcher>(&budgets_, &usage_, jobs_.get(), sources, &clock_,
                                           BudgetWatcherOptions{.interval = 50ms});
  }
  void SetBudget(const std::string& tenant, const char* amount, std::vector<int32_t> pct = {}) {
    Budget b;
    b.tenant = tenant;
    b.amount = *Decimal::Parse(amount);
    b.currency = "USD";
    b.alert_percents = std::move(pct);
    ASSERT_TRUE(budgets_.Put(b).ok());
  }
  // The budget events in the log, as "subject | message".
  std::vector<EventRecord> Alerts() {
    Result<std::vector<EventRecord>> all = store_.ListEvents("budget/", 0);
    EXPECT_TRUE(all.ok());
    return all.ok() ? *all : std::vector<EventRecord>{};
  }
  std::vector<std::string> Subjects() {
    std::vector<std::string> out;
    for (const EventRecord& e : Alerts()) out.push_back(e.subject);
    return out;
  }
  BudgetCheck Check(BudgetWatcher& w) {
    Result<BudgetCheck> r = w.CheckOnce();
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : BudgetCheck{};
  }

  MemoryStore store_;
  NoAgents agents_;
  std::unique_ptr<Scheduler> scheduler_;
  std::unique_ptr<FlakyJobs> jobs_;
  MemoryBudgets budgets_;
  FixedUsage usage_;
  ManualClock clock_;
  billing::PricePlan plan_ = DefaultPlan();
};

TEST_F(BudgetWatcherTest, EachThresholdIsToldOnceInOrderWithTheSpend) {
  SetBudget("acme/research", "1000");              // 50, 80, 100
  usage_.Set("acme/research", kDec1 + kHour, 30);  // 300 USD
  std::unique_ptr<BudgetWatcher> w = NewWatcher();
  EXPECT_EQ(Check(*w).alerts, 0);
  EXPECT_TRUE(Alerts().empty());

  usage_.Set("acme/research/ann", kDec1 + 2 * kHour, 31);  // 610 USD: the subtree counts
  usage_.Set("acme/other", kDec1 + 2 * kHour, 500);        // not the budget's subtree
  EXPECT_EQ(Check(*w).alerts, 1);
  ASSERT_EQ(Alerts().size(), 1u);
  const EventRecord first = Alerts()[0];
  EXPECT_EQ(first.kind, "budget.threshold");
  EXPECT_EQ(first.subject, "budget/acme/research@2026-12/50");
  EXPECT_EQ(first.tenant, "acme/research");
  EXPECT_EQ(first.message,
            "'acme/research' has spent 610.00 USD of its 1000.00 USD budget for 2026-12 "
            "(61.00%), past its 50% alert");
  EXPECT_EQ(Check(*w).alerts, 0);  // told once

  usage_.Set("acme/research", kDec1 + 3 * kHour, 50);  // 1110 USD: 80 and 100 in one pass
  EXPECT_EQ(Check(*w).alerts, 2);
  EXPECT_EQ(Subjects(), (std::vector<std::string>{"budget/acme/research@2026-12/50",
                                                  "budget/acme/research@2026-12/80",
                                                  "budget/acme/research@2026-12/100"}));
  EXPECT_EQ(Check(*w).alerts, 0);
}

TEST_F(BudgetWatcherTest, AWatcherAfterAFailOverRepeatsNothingAndANewMonthIsToldAfresh) {
  SetBudget("acme", "100", {50, 100});
  usage_.Set("acme", kDec1, 6);  // 60 USD
  EXPECT_EQ(Check(*NewWatcher()).alerts, 1);
  std::unique_ptr<BudgetWatcher> next = NewWatcher();  // a new leader's: knows nothing yet
  EXPECT_EQ(Check(*next).alerts, 0);
  EXPECT_EQ(Alerts().size(), 1u);

  // January: December's spend does not count; January's reaches both thresholds.
  const int64_t jan1 = billing::MonthOf(kDec1 + 40 * 24 * kHour).start_ms;
  clock_.Set((jan1 + 5 * kHour) * 1000);
  EXPECT_EQ(Check(*next).alerts, 0);
  usage_.Set("acme", jan1 + kHour, 11);  // 110 USD
  EXPECT_EQ(Check(*next).alerts, 2);
  EXPECT_EQ(Subjects(),
            (std::vector<std::string>{"budget/acme@2026-12/50", "budget/acme@2027-01/50",
                                      "budget/acme@2027-01/100"}));
}

TEST_F(BudgetWatcherTest, ABudgetThatCannotBeRatedIsSkippedAndTriedAgain) {
  SetBudget("acme", "100");
  SetBudget("globex", "100");
  usage_.Set("acme", kDec1, 20);
  usage_.Set("globex", kDec1, 20);
  std::unique_ptr<BudgetWatcher> w = NewWatcher();
  usage_.Fail(true);
  BudgetCheck c = Check(*w);
  EXPECT_EQ(c.budgets, 2);
  EXPECT_EQ(c.skipped, 2);
  EXPECT_TRUE(Alerts().empty());
  usage_.Fail(false);
  plan_ = DefaultPlan("EUR");  // the plan now rates in euros: a USD budget cannot compare
  c = Check(*w);
  EXPECT_EQ(c.skipped, 2);
  EXPECT_TRUE(Alerts().empty());
  plan_ = DefaultPlan();
  c = Check(*w);
  EXPECT_EQ(c.skipped, 0);
  EXPECT_EQ(c.alerts, 6);  // 200 USD: 50, 80, 100 of each
}

TEST_F(BudgetWatcherTest, AFailedAppendIsRetriedAndALostAnswerIsNotRepeated) {
  SetBudget("acme", "100", {50, 100});
  usage_.Set("acme", kDec1, 20);
  std::unique_ptr<BudgetWatcher> w = NewWatcher();
  jobs_->fail_before = 1;  // nothing written
  BudgetCheck c = Check(*w);
  EXPECT_EQ(c.alerts, 0);
  EXPECT_EQ(c.skipped, 1);
  EXPECT_TRUE(Alerts().empty());

  jobs_->lose_answer = 1;  // the 50 % alert commits, but its answer is lost
  c = Check(*w);
  EXPECT_EQ(c.alerts, 0);
  EXPECT_EQ(Alerts().size(), 1u);
  c = Check(*w);  // reads the month back: only the 100 % alert is still due
  EXPECT_EQ(c.alerts, 1);
  EXPECT_EQ(Subjects(),
            (std::vector<std::string>{"budget/acme@2026-12/50", "budget/acme@2026-12/100"}));
}

TEST_F(BudgetWatcherTest, StartedItChecksEveryIntervalUntilStopped) {
  SetBudget("acme", "100", {50});
  std::unique_ptr<BudgetWatcher> w = NewWatcher();
  w->Start();
  usage_.Set("acme", kDec1, 6);
  for (int i = 0; i < 200 && Alerts().empty(); ++i) std::this_thread::sleep_for(10ms);
  w->Stop();
  EXPECT_EQ(Subjects(), (std::vector<std::string>{"budget/acme@2026-12/50"}));
}

}  // namespace
}  // namespace gpupool
