// ServiceImpl: budgets (BillingService SetBudget / ListBudgets / DeleteBudget; billing/budget.h,
// docs/billing.md "Budgets"). Synchronous calls on the caller's thread to the BudgetStore; the
// core is not involved: the leader's BudgetWatcher (scheduler/budget_watcher.h) rates the
// budgets and appends their alerts.
//
// Rights: as the invoices — an admin any tenant's budget, a tenant-admin those of its own
// subtree (another subtree's budgets are not listed, and setting one is PERMISSION_DENIED).
// A budget's currency must be the one its tenant is rated in, so that its alerts compare like
// with like; an empty currency takes that one.
#include "api/service_internal.h"
#include "billing/budget.h"
#include "billing/period.h"
#include "billing/price_plan.h"
#include "billing/rating.h"
#include "scheduler/store.h"
#include "scheduler/tenancy.h"

namespace gpupool::api {
namespace {

Status NoBudgets(std::string_view what) {
  return Status::Unimplemented(std::string(what) + ": this server does not keep budgets");
}

}  // namespace

v1::Budget ServiceImpl::BudgetProto(const CallContext& ctx, const billing::Budget& b) {
  v1::Budget out;
  out.set_tenant(b.tenant);
  out.set_amount(b.amount.ToString());
  out.set_currency(b.currency);
  for (int32_t p : b.alert_percents) out.add_alert_percents(p);
  out.set_updated_by(ctx.admin() ? b.updated_by : "");  // a credential id is the operators'
  SetTimestamp(b.update_ms * 1000, out.mutable_update_time());
  const billing::Period month = billing::MonthOf(NowMs());
  Result<std::vector<billing::Invoice>> invoices = RateInvoices(ctx, b.tenant, month);
  // An invoice with nothing on it names the currency of the plan at the month's start, or none
  // ("XXX") when the plan is newer: nothing spent is nothing in any currency.
  if (invoices.ok() && invoices->size() == 1 &&
      ((*invoices)[0].currency == b.currency ||
       ((*invoices)[0].lines.empty() && (*invoices)[0].credits.empty()))) {
    out.set_period(billing::PeriodLabel(month));
    out.set_spent((*invoices)[0].total.ToFixed(billing::MinorDigits(b.currency)));
    out.set_percent_used(billing::PercentUsed((*invoices)[0].total, b.amount));
  }
  return out;
}

void ServiceImpl::SetBudget(const CallContext& ctx, const v1::SetBudgetRequest& req,
                            Reply<v1::Budget> done) {
  if (Status s = CheckBilling(ctx, "set budget"); !s.ok()) return Fail(done, s);
  if (options_.budgets == nullptr) return Fail(done, NoBudgets("set budget"));
  const v1::Budget& in = req.budget();
  if (Status s = ValidateTenantPath(in.tenant(), "budget.tenant"); !s.ok()) return Fail(done, s);
  if (Status s = RequireTenant(ctx, in.tenant(), "budget.tenant"); !s.ok()) return Fail(done, s);
  billing::Budget b;
  b.tenant = in.tenant();
  Result<billing::Decimal> amount = billing::Decimal::Parse(in.amount(), "budget.amount");
  if (!amount.ok()) return Fail(done, amount.status());
  b.amount = *amount;
  b.alert_percents.assign(in.alert_percents().begin(), in.alert_percents().end());
  // The currency the tenant is rated in now: the budget's must be it.
  Result<std::vector<billing::PricePlan>> versions = options_.price_plans->ListPricePlans("");
  if (!versions.ok()) return Fail(done, versions.status());
  const billing::PlanBook book(std::move(versions).value());
  const int64_t now = NowMs();
  Result<const billing::PricePlan*> plan = book.Resolve(b.tenant, now);
  if (!plan.ok() || *plan == nullptr) {
    return Fail(done, Status::FailedPrecondition(
                          "budget.tenant: no price plan rates '" + b.tenant +
                          "', so its spend cannot be measured (create a plan first; see "
                          "docs/billing.md)"));
  }
  b.currency = in.currency().empty() ? (*plan)->currency : in.currency();
  if (b.currency != (*plan)->currency) {
    return Fail(done,
                Invalid("budget.currency", "'" + b.currency.substr(0, 10) + "' but '" + b.tenant +
                                               "' is rated in " + (*plan)->currency + " (plan '" +
                                               (*plan)->name + "')"));
  }
  if (Status s = billing::NormalizeBudget(&b); !s.ok()) return Fail(done, s);
  b.updated_by = ctx.key_id;
  b.update_ms = now;
  if (Status s = options_.budgets->Put(b); !s.ok()) return Fail(done, s);
  done(Status::Ok(), BudgetProto(ctx, b));
}

void ServiceImpl::ListBudgets(const CallContext& ctx, const v1::ListBudgetsRequest& req,
                              Reply<v1::ListBudgetsResponse> done) {
  if (Status s = CheckBilling(ctx, "list budgets"); !s.ok()) return Fail(done, s);
  if (options_.budgets == nullptr) return Fail(done, NoBudgets("list budgets"));
  Result<std::string> prefix = ListPrefix(ctx, req.tenant(), "tenant");
  if (!prefix.ok()) return Fail(done, prefix.status());
  Result<std::vector<billing::Budget>> all = options_.budgets->List(*prefix);
  if (!all.ok()) return Fail(done, all.status());
  v1::ListBudgetsResponse resp;
  for (const billing::Budget& b : *all) *resp.add_budgets() = BudgetProto(ctx, b);
  done(Status::Ok(), std::move(resp));
}

void ServiceImpl::DeleteBudget(const CallContext& ctx, const v1::DeleteBudgetRequest& req,
                               Reply<v1::DeleteBudgetResponse> done) {
  if (Status s = CheckBilling(ctx, "delete budget"); !s.ok()) return Fail(done, s);
  if (options_.budgets == nullptr) return Fail(done, NoBudgets("delete budget"));
  if (Status s = ValidateTenantPath(req.tenant(), "tenant"); !s.ok()) return Fail(done, s);
  if (Status s = RequireTenant(ctx, req.tenant(), "tenant"); !s.ok()) return Fail(done, s);
  if (Status s = options_.budgets->Delete(req.tenant()); !s.ok()) return Fail(done, s);
  done(Status::Ok(), v1::DeleteBudgetResponse{});
}

Status ServiceImpl::PurgeBudgets(const std::string& tenant) const {
  if (options_.budgets == nullptr) return Status::Ok();
  GPUPOOL_ASSIGN_OR_RETURN(std::vector<billing::Budget> kept, options_.budgets->List(tenant));
  for (const billing::Budget& b : kept) {
    Status s = options_.budgets->Delete(b.tenant);
    if (!s.ok() && s.code() != StatusCode::kNotFound) return s;
  }
  return Status::Ok();
}

}  // namespace gpupool::api
