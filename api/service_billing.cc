// ServiceImpl: billing (BillingService; docs/billing.md). Synchronous calls on the caller's
// thread to the Store's price plans and to the UsageSource (the usage ledger); the core is not
// involved: plans are configuration and invoices are read-only views of the ledger.
//
// Rights: price plan create/update require admin. Listing plans, invoices, exports and the feed
// require tenant-admin or above; a tenant-admin sees only its own subtree — invoices of tenants
// within its scope, and the plans that rate them, with the plans' tenant lists cut down to
// paths on its own branch (another tenant's name is not revealed).
#include <chrono>
#include <map>
#include <set>

#include "api/convert_billing.h"
#include "api/service_internal.h"
#include "billing/price_plan.h"
#include "billing/usage_source.h"
#include "scheduler/store.h"
#include "scheduler/tenancy.h"

namespace gpupool::api {
namespace {

// Is `path` on the caller's branch: the scope itself, above it or below it?
bool OnBranch(const CallContext& ctx, const std::string& path) {
  return ctx.admin() || TenantWithin(path, ctx.scope) || TenantWithin(ctx.scope, path);
}

// The plan as `ctx` may see it, or nullopt when it does not rate the caller's subtree.
std::optional<billing::PricePlan> Visible(const CallContext& ctx, billing::PricePlan p) {
  if (ctx.admin()) return p;
  std::vector<std::string> kept;
  for (const std::string& t : p.tenants) {
    if (OnBranch(ctx, t)) kept.push_back(t);
  }
  if (kept.empty() && p.name != "default") return std::nullopt;
  p.tenants = std::move(kept);
  p.created_by.clear();  // a credential id is the operators' business
  return p;
}

std::string FileLabel(const std::string& tenant) {
  std::string out = tenant.empty() ? "all" : tenant;
  for (char& c : out) {
    if (c == '/') c = '_';
  }
  return out;
}

}  // namespace

Status ServiceImpl::CheckBilling(const CallContext& ctx, std::string_view what) const {
  if (options_.price_plans == nullptr) {
    return Status::Unimplemented(std::string(what) + ": this server does not serve billing");
  }
  return RequireRole(ctx, Role::kTenantAdmin, what);
}

void ServiceImpl::AddPricePlan(const CallContext& ctx, const v1::PricePlan& in, bool create,
                               Reply<v1::PricePlan> done) {
  const char* what = create ? "create price plan" : "update price plan";
  if (Status s = CheckBilling(ctx, what); !s.ok()) return Fail(done, s);
  if (Status s = RequireAdmin(ctx, what); !s.ok()) return Fail(done, s);
  const int64_t now = NowMs();
  Result<billing::PricePlan> plan = PricePlanFromProto(in, now);
  if (!plan.ok()) return Fail(done, plan.status());
  for (const std::string& t : plan->tenants) {
    if (Status s = ValidateTenantPath(t, "plan.tenants"); !s.ok()) return Fail(done, s);
  }
  // A created plan's first version also prices the hour it is created in (billing/price_plan.h).
  plan->effective_from_ms = billing::EffectiveFrom(plan->effective_from_ms, now, create);
  plan->created_by = ctx.key_id;
  plan->create_ms = now;
  Result<billing::PricePlan> stored = options_.price_plans->AddPricePlan(*plan, create);
  if (!stored.ok()) return Fail(done, stored.status());
  v1::PricePlan out;
  ToProto(*stored, &out);
  done(Status::Ok(), std::move(out));
}

void ServiceImpl::CreatePricePlan(const CallContext& ctx, const v1::CreatePricePlanRequest& req,
                                  Reply<v1::PricePlan> done) {
  AddPricePlan(ctx, req.plan(), true, std::move(done));
}

void ServiceImpl::UpdatePricePlan(const CallContext& ctx, const v1::UpdatePricePlanRequest& req,
                                  Reply<v1::PricePlan> done) {
  AddPricePlan(ctx, req.plan(), false, std::move(done));
}

void ServiceImpl::ListPricePlans(const CallContext& ctx, const v1::ListPricePlansRequest& req,
                                 Reply<v1::ListPricePlansResponse> done) {
  if (Status s = CheckBilling(ctx, "list price plans"); !s.ok()) return Fail(done, s);
  if (!req.name().empty()) {
    if (Status s = billing::ValidatePlanName(req.name(), "name"); !s.ok()) return Fail(done, s);
  }
  Result<std::vector<billing::PricePlan>> plans = options_.price_plans->ListPricePlans(req.name());
  if (!plans.ok()) return Fail(done, plans.status());
  v1::ListPricePlansResponse resp;
  for (size_t i = 0; i < plans->size(); ++i) {
    const billing::PricePlan& p = (*plans)[i];
    const bool newest = i + 1 == plans->size() || (*plans)[i + 1].name != p.name;
    if (!newest && !req.all_versions()) continue;
    if (std::optional<billing::PricePlan> v = Visible(ctx, p)) ToProto(*v, resp.add_plans());
  }
  done(Status::Ok(), std::move(resp));
}

Result<std::vector<billing::Invoice>> ServiceImpl::RateInvoices(const CallContext& ctx,
                                                                const std::string& tenant,
                                                                const billing::Period& period) {
  std::string root = tenant;
  if (!root.empty()) {
    GPUPOOL_RETURN_IF_ERROR(ValidateTenantPath(root, "tenant"));
    GPUPOOL_RETURN_IF_ERROR(RequireTenant(ctx, root, "invoices"));
  } else if (!ctx.admin()) {
    root = ctx.scope;
    GPUPOOL_RETURN_IF_ERROR(RequireTenant(ctx, root, "invoices"));
  }
  if (options_.usage == nullptr) {
    return Status::FailedPrecondition(
        "invoices: this server has no usage ledger to rate (see docs/billing.md)");
  }
  GPUPOOL_ASSIGN_OR_RETURN(std::vector<billing::PricePlan> versions,
                           options_.price_plans->ListPricePlans(""));
  const billing::PlanBook book(std::move(versions));
  GPUPOOL_ASSIGN_OR_RETURN(std::vector<billing::MeteredQuantity> usage,
                           options_.usage->Usage(root, period.start_ms, period.end_ms));
  std::set<std::string> roots;
  if (!root.empty()) {
    roots.insert(root);
  } else {
    for (const billing::MeteredQuantity& q : usage) {
      roots.insert(q.dims.tenant.substr(0, q.dims.tenant.find('/')));
    }
  }
  std::vector<billing::Invoice> out;
  for (const std::string& r : roots) {
    GPUPOOL_ASSIGN_OR_RETURN(billing::Invoice inv,
                             billing::RateInvoice(r, period.start_ms, period.end_ms, usage, book));
    out.push_back(std::move(inv));
  }
  return out;
}

// The period and invoices of a ListInvoices / ExportInvoices / feed request.
template <typename Req>
Result<std::pair<billing::Period, std::vector<billing::Invoice>>> ServiceImpl::InvoicesFor(
    const CallContext& ctx, const Req& req, std::string_view what) {
  GPUPOOL_RETURN_IF_ERROR(CheckBilling(ctx, what));
  GPUPOOL_ASSIGN_OR_RETURN(
      billing::Period period,
      PeriodFromRequest(req.period(), req.has_start_time() ? &req.start_time() : nullptr,
                        req.has_end_time() ? &req.end_time() : nullptr, NowMs()));
  GPUPOOL_ASSIGN_OR_RETURN(std::vector<billing::Invoice> invoices,
                           RateInvoices(ctx, req.tenant(), period));
  return std::pair{period, std::move(invoices)};
}

void ServiceImpl::ListInvoices(const CallContext& ctx, const v1::ListInvoicesRequest& req,
                               Reply<v1::ListInvoicesResponse> done) {
  auto r = InvoicesFor(ctx, req, "list invoices");
  if (!r.ok()) return Fail(done, r.status());
  v1::ListInvoicesResponse resp;
  for (const billing::Invoice& inv : r->second) ToProto(inv, resp.add_invoices());
  done(Status::Ok(), std::move(resp));
}

void ServiceImpl::ExportInvoices(const CallContext& ctx, const v1::ListInvoicesRequest& req,
                                 Reply<v1::ExportResponse> done) {
  auto r = InvoicesFor(ctx, req, "export invoices");
  if (!r.ok()) return Fail(done, r.status());
  v1::ExportResponse resp;
  resp.set_content_type("text/csv; charset=utf-8");
  resp.set_body(billing::InvoicesCsv(r->second));
  resp.set_filename("invoices-" + FileLabel(req.tenant()) + "-" + billing::PeriodLabel(r->first) +
                    ".csv");
  done(Status::Ok(), std::move(resp));
}

void ServiceImpl::GetUsageFeed(const CallContext& ctx, const v1::GetUsageFeedRequest& req,
                               Reply<v1::GetUsageFeedResponse> done) {
  auto r = InvoicesFor(ctx, req, "usage feed");
  if (!r.ok()) return Fail(done, r.status());
  v1::GetUsageFeedResponse resp;
  for (const billing::Invoice& inv : r->second) {
    for (const billing::FeedItem& it : billing::FeedItems(inv)) ToProto(it, resp.add_items());
  }
  done(Status::Ok(), std::move(resp));
}

void ServiceImpl::ExportUsageFeed(const CallContext& ctx, const v1::GetUsageFeedRequest& req,
                                  Reply<v1::ExportResponse> done) {
  auto r = InvoicesFor(ctx, req, "usage feed");
  if (!r.ok()) return Fail(done, r.status());
  std::vector<billing::FeedItem> items;
  for (const billing::Invoice& inv : r->second) {
    for (billing::FeedItem& it : billing::FeedItems(inv)) items.push_back(std::move(it));
  }
  v1::ExportResponse resp;
  resp.set_content_type("text/csv; charset=utf-8");
  resp.set_body(billing::FeedCsv(items));
  resp.set_filename("usage-feed-" + FileLabel(req.tenant()) + "-" + billing::PeriodLabel(r->first) +
                    ".csv");
  done(Status::Ok(), std::move(resp));
}

}  // namespace gpupool::api
