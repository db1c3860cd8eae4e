#include "scheduler/budget_watcher.h"

#include <future>
#include <memory>
#include <utility>

#include "base/log.h"
#include "billing/period.h"
#include "billing/rating.h"

namespace gpupool {

BudgetWatcher::BudgetWatcher(billing::BudgetStore* budgets, billing::UsageSource* usage,
                             JobsPort* jobs, BudgetWatcherSources sources, const Clock* clock,
                             BudgetWatcherOptions options)
    : budgets_(budgets),
      usage_(usage),
      jobs_(jobs),
      sources_(std::move(sources)),
      clock_(clock),
      options_(options) {}

BudgetWatcher::~BudgetWatcher() { Stop(); }

void BudgetWatcher::Start() {
  {
    std::lock_guard lock(mu_);
    stopping_ = false;
  }
  thread_ = std::thread([this] { Loop(); });
}

void BudgetWatcher::Stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void BudgetWatcher::Loop() {
  std::unique_lock lock(mu_);
  while (!stopping_) {
    lock.unlock();
    Result<BudgetCheck> r = CheckOnce();
    if (!r.ok()) {
      LogWarn("budgets", "budgets not checked", {{"error", r.status().ToString()}});
    }
    lock.lock();
    cv_.wait_for(lock, options_.interval, [this] { return stopping_; });
  }
}

Result<std::set<int32_t>*> BudgetWatcher::Sent(const std::string& tenant,
                                               const std::string& month) {
  auto it = sent_.find(tenant);
  if (it != sent_.end() && it->second.first == month) return &it->second.second;
  GPUPOOL_ASSIGN_OR_RETURN(std::vector<EventRecord> logged,
                           sources_.events(billing::BudgetAlertPrefix(tenant, month)));
  std::set<int32_t> told;
  for (const EventRecord& e : logged) {
    std::optional<billing::BudgetAlertKey> key = billing::ParseBudgetAlertSubject(e.subject);
    if (key && key->tenant == tenant && key->month == month) told.insert(key->percent);
  }
  auto& slot = sent_[tenant];
  slot = {month, std::move(told)};
  return &slot.second;
}

Status BudgetWatcher::Append(EventRecord event) {
  auto done = std::make_shared<std::promise<Status>>();
  std::future<Status> answer = done->get_future();
  jobs_->RecordEvent(std::move(event), [done](Result<bool> r) { done->set_value(r.status()); });
  if (answer.wait_for(options_.append_timeout) != std::future_status::ready) {
    return Status::Unavailable("the event log did not answer within " +
                               std::to_string(options_.append_timeout.count()) + " ms");
  }
  return answer.get();
}

Result<BudgetCheck> BudgetWatcher::CheckOnce() {
  GPUPOOL_ASSIGN_OR_RETURN(std::vector<billing::Budget> budgets, budgets_->List(""));
  BudgetCheck check;
  if (budgets.empty()) return check;
  GPUPOOL_ASSIGN_OR_RETURN(std::vector<billing::PricePlan> versions, sources_.price_plans());
  const billing::PlanBook book(std::move(versions));
  const int64_t now_ms = clock_->NowMicros() / 1000;
  const billing::Period month = billing::MonthOf(now_ms);
  const std::string label = billing::PeriodLabel(month);
  const int64_t end_ms = std::max(now_ms, month.start_ms + 1);
  for (const billing::Budget& b : budgets) {
    ++check.budgets;
    auto skip = [&](const Status& why) {
      ++check.skipped;
      LogWarn("budgets", "budget not checked", {{"tenant", b.tenant}, {"error", why.ToString()}});
    };
    Result<std::vector<billing::MeteredQuantity>> usage =
        usage_->Usage(b.tenant, month.start_ms, end_ms);
    if (!usage.ok()) {
      skip(usage.status());
      continue;
    }
    Result<billing::Invoice> invoice =
        billing::RateInvoice(b.tenant, month.start_ms, end_ms, *usage, book);
    if (!invoice.ok()) {
      skip(invoice.status());
      continue;
    }
    if (invoice->currency != b.currency && !invoice->lines.empty()) {
      skip(Status::FailedPrecondition("the budget is in " + b.currency + " but '" + b.tenant +
                                      "' is rated in " + invoice->currency));
      continue;
    }
    const std::vector<int32_t> reached = billing::ReachedAlerts(b, invoice->total);
    if (reached.empty()) continue;
    Result<std::set<int32_t>*> sent = Sent(b.tenant, label);
    if (!sent.ok()) {
      skip(sent.status());
      continue;
    }
    for (int32_t p : reached) {
      if ((*sent)->contains(p)) continue;
      EventRecord e;
      e.kind = "budget.threshold";
      e.subject = billing::BudgetAlertSubject(b.tenant, label, p);
      e.tenant = b.tenant;
      e.message = "'" + b.tenant + "' has spent " +
                  billing::Money(b.currency, invoice->total).ToString() + " of its " +
                  billing::Money(b.currency, b.amount).ToString() + " budget for " + label + " (" +
                  billing::PercentUsed(invoice->total, b.amount) + "%), past its " +
                  std::to_string(p) + "% alert";
      if (Status st = Append(std::move(e)); !st.ok()) {
        // Maybe committed after all: read the month back from the log before the next try.
        sent_.erase(b.tenant);
        skip(st);
        break;
      }
      (*sent)->insert(p);
      ++check.alerts;
      LogInfo("budgets", "budget alert",
              {{"tenant", b.tenant}, {"month", label}, {"percent", std::to_string(p)}});
    }
  }
  return check;
}

}  // namespace gpupool
