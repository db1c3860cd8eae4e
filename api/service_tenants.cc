// ServiceImpl: tenants and quotas (TenantService). The same steps as the pool methods in
// service_impl.cc: rights and validation on the caller's thread, then a closure on the core's
// thread; a mutation answers only from the core's callback, once the store has committed it.
//
// Rights: a mutation needs an admin, or a tenant-admin acting strictly below its own tenant
// (child tenants and their quotas; the core keeps a child's quota within its parent's).
// Reads follow the jobs' rule: a tenant principal sees its own subtree — its tenant, those
// below it and their quotas — and a list without a prefix means its own subtree.
#include "api/convert.h"
#include "api/service_internal.h"
#include "scheduler/scheduler.h"
#include "scheduler/service_controller.h"

namespace gpupool::api {
namespace {

// Core callback of a deletion → the empty response.
template <typename Proto>
SchedulerCallback<bool> ReplyEmpty(Reply<Proto> done) {
  return [done = std::move(done)](Result<bool> r) {
    if (!r.ok()) return Fail(done, r.status());
    done(Status::Ok(), Proto{});
  };
}

}  // namespace

// ---- Tenants ----

void ServiceImpl::CreateTenant(const CallContext& ctx, const v1::CreateTenantRequest& req,
                               Reply<v1::Tenant> done) {
  if (Status s = RequireRole(ctx, Role::kTenantAdmin, "create tenant"); !s.ok()) {
    return Fail(done, s);
  }
  if (!req.has_tenant()) return Fail(done, Invalid("tenant", "must be set"));
  Result<TenantRecord> tenant = TenantFromProto(req.tenant());
  if (!tenant.ok()) return Fail(done, tenant.status());
  if (Status s = RequireTenantAdminBelow(ctx, tenant->path, "create tenant"); !s.ok()) {
    return Fail(done, s);
  }
  admin_->CreateTenant(std::move(tenant).value(), ReplyWith<TenantView, v1::Tenant>(done));
}

void ServiceImpl::GetTenant(const CallContext& ctx, const v1::GetTenantRequest& req,
                            Reply<v1::Tenant> done) {
  if (Status s = ValidateTenantPath(req.path(), "path"); !s.ok()) return Fail(done, s);
  if (Status s = RequireTenant(ctx, req.path(), "path"); !s.ok()) return Fail(done, s);
  admin_->GetTenant(req.path(), ReplyWith<TenantView, v1::Tenant>(done));
}

void ServiceImpl::ListTenants(const CallContext& ctx, const v1::ListTenantsRequest& req,
                              Reply<v1::ListTenantsResponse> done) {
  Result<std::string> prefix = ListPrefix(ctx, req.prefix(), "prefix");
  if (!prefix.ok()) return Fail(done, prefix.status());
  admin_->ListTenants(std::move(prefix).value(),
                      [done = std::move(done)](const std::vector<TenantView>& tenants) {
                        v1::ListTenantsResponse resp;
                        for (const TenantView& t : tenants) ToProto(t, resp.add_tenants());
                        done(Status::Ok(), std::move(resp));
                      });
}

void ServiceImpl::DeleteTenant(const CallContext& ctx, const v1::DeleteTenantRequest& req,
                               Reply<v1::DeleteTenantResponse> done) {
  if (Status s = RequireRole(ctx, Role::kTenantAdmin, "delete tenant"); !s.ok()) {
    return Fail(done, s);
  }
  if (Status s = ValidateTenantPath(req.path(), "path"); !s.ok()) return Fail(done, s);
  if (Status s = RequireTenantAdminBelow(ctx, req.path(), "delete tenant"); !s.ok()) {
    return Fail(done, s);
  }
  // Its services would otherwise go on submitting replicas for a tenant that is gone (and one
  // made later at the same path would inherit them): they are deleted first, by whoever may.
  if (options_.services != nullptr) {
    for (const ServiceView& v : options_.services->List(req.path())) {
      if (v.record.spec.tenant != req.path()) continue;  // a child's: refused below as a child
      return Fail(done, Status::FailedPrecondition(
                            "tenant '" + req.path() + "' still has service '" + v.record.spec.name +
                            "'; delete its services first (gpupoolctl "
                            "services delete " +
                            v.record.spec.name + " --tenant " + req.path() + ")"));
    }
  }
  if (options_.registry_credentials == nullptr && options_.webhooks == nullptr &&
      options_.budgets == nullptr) {
    return admin_->DeleteTenant(req.path(), ReplyEmpty(done));
  }
  // Its registry credentials, webhooks and budgets go with it, or a tenant made later at the same
  // path would inherit them. After the core's answer (a refused deletion keeps them), off the
  // core's thread; also when the tenant is already gone, so that a retry after a failed purge
  // finishes it.
  admin_->DeleteTenant(req.path(), [this, path = req.path(), done](Result<bool> r) {
    if (!r.ok() && r.status().code() != StatusCode::kNotFound) return Fail(done, r.status());
    timers_->After(std::chrono::milliseconds(0), [this, path, done, r = std::move(r)]() mutable {
      if (options_.registry_credentials != nullptr) {
        if (Status s = PurgeRegistryCredentials(path); !s.ok()) {
          return Fail(done, s.WithContext("tenant '" + path +
                                          "': its registry credentials were not all deleted "
                                          "(retry the deletion)"));
        }
      }
      if (Status s = PurgeWebhooks(path); !s.ok()) {
        return Fail(done, s.WithContext("tenant '" + path +
                                        "': its webhooks were not all deleted (retry the "
                                        "deletion)"));
      }
      if (Status s = PurgeBudgets(path); !s.ok()) {
        return Fail(done, s.WithContext("tenant '" + path +
                                        "': its budgets were not all deleted (retry the "
                                        "deletion)"));
      }
      ReplyEmpty(done)(std::move(r));
    });
  });
}

// ---- Quotas ----

void ServiceImpl::SetQuota(const CallContext& ctx, const v1::SetQuotaRequest& req,
                           Reply<v1::Quota> done) {
  if (Status s = RequireRole(ctx, Role::kTenantAdmin, "set quota"); !s.ok()) {
    return Fail(done, s);
  }
  if (!req.has_quota()) return Fail(done, Invalid("quota", "must be set"));
  Result<QuotaRecord> quota = QuotaFromProto(req.quota(), policy()->scheduler);
  if (!quota.ok()) return Fail(done, quota.status());
  if (Status s = RequireTenantAdminBelow(ctx, quota->tenant, "set quota"); !s.ok()) {
    return Fail(done, s);
  }
  admin_->SetQuota(std::move(quota).value(), ReplyWith<QuotaView, v1::Quota>(done));
}

void ServiceImpl::GetQuota(const CallContext& ctx, const v1::GetQuotaRequest& req,
                           Reply<v1::Quota> done) {
  if (Status s = ValidateTenantPath(req.tenant(), "tenant"); !s.ok()) return Fail(done, s);
  if (Status s = ValidateName(req.pool(), "pool"); !s.ok()) return Fail(done, s);
  if (Status s = RequireTenant(ctx, req.tenant(), "tenant"); !s.ok()) return Fail(done, s);
  admin_->GetQuota(req.tenant(), req.pool(), ReplyWith<QuotaView, v1::Quota>(done));
}

void ServiceImpl::ListQuotas(const CallContext& ctx, const v1::ListQuotasRequest& req,
                             Reply<v1::ListQuotasResponse> done) {
  Result<std::string> prefix = ListPrefix(ctx, req.tenant_prefix(), "tenant_prefix");
  if (!prefix.ok()) return Fail(done, prefix.status());
  if (!req.pool().empty()) {
    if (Status s = ValidateName(req.pool(), "pool"); !s.ok()) return Fail(done, s);
  }
  admin_->ListQuotas(std::move(prefix).value(), req.pool(),
                     [done = std::move(done)](const std::vector<QuotaView>& quotas) {
                       v1::ListQuotasResponse resp;
                       for (const QuotaView& q : quotas) ToProto(q, resp.add_quotas());
                       done(Status::Ok(), std::move(resp));
                     });
}

void ServiceImpl::DeleteQuota(const CallContext& ctx, const v1::DeleteQuotaRequest& req,
                              Reply<v1::DeleteQuotaResponse> done) {
  if (Status s = RequireRole(ctx, Role::kTenantAdmin, "delete quota"); !s.ok()) {
    return Fail(done, s);
  }
  if (Status s = ValidateTenantPath(req.tenant(), "tenant"); !s.ok()) return Fail(done, s);
  if (Status s = RequireTenantAdminBelow(ctx, req.tenant(), "delete quota"); !s.ok()) {
    return Fail(done, s);
  }
  if (Status s = ValidateName(req.pool(), "pool"); !s.ok()) return Fail(done, s);
  admin_->DeleteQuota(req.tenant(), req.pool(), ReplyEmpty(done));
}

}  // namespace gpupool::api
