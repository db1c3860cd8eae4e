// ServiceImpl: the ApiService over the scheduler core.
//
// Every method does the same steps: check the caller's rights and validate + convert the request
// on the caller's thread (api/convert.h; bad input never reaches the core), call the scheduler's
// JobsPort / AdminPort (scheduler/scheduler.h), convert the result and call `done` (from the
// core's thread — callers must not block in `done`).
//
// Authorization (CallContext):
//  * admins may do anything;
//  * a non-admin may submit only at the priority classes its tenant is allowed
//    (ServiceOptions::priority_access), and only as fast as its organisation's rate limit
//    (ServiceOptions::submit_limiter: RESOURCE_EXHAUSTED with the wait);
//  * a non-admin principal is a tenant path and may submit, see, watch, read logs of and cancel
//    only jobs whose tenant is the principal or lies below it (prefix on path segments);
//  * pool create/update/delete and every node method require admin; non-admins may get and list
//    pools they can use (public ones, and private ones that allow them);
//  * the audit log: admins read every record, a tenant principal only its subtree's
//    (api/service_audit.cc);
//  * tenant and quota mutations require admin; non-admins may get and list the tenants and
//    quotas of their own subtree, as with jobs (api/service_tenants.cc).
//
// The catalog methods (GPU models with the fleet's counts, priority classes, SKUs) are in
// api/service_catalog.cc; anyone authenticated may call them, and a tenant sees the fleet of the
// pools it may use and the classes it may submit at.
//
// GetTaskLogs asks the scheduler where the task runs (its job's record) and reads through the
// LogFetcher; with follow=true it polls every `log_poll_interval` until the agent has sent
// everything and the task is terminal, then sends a chunk with eof=true.
//
// Lifetime: construct after the Scheduler; destroy after the API servers have stopped (no calls
// or streams in flight) and before the Scheduler and the LogFetcher.
// Thread safety: all methods may be called from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>

#include "api/audit_log.h"
#include "api/log_fetcher.h"
#include "api/priority_access.h"
#include "api/rate_limiter.h"
#include "api/service.h"
#include "scheduler/options.h"
#include "scheduler/usage_report.h"

namespace gpupool {
class ApiKeyStore;
class RegistryCredentialStore;
class WebhookStore;
class ServiceController;
struct ServiceSpec;
class Store;
namespace twin {
class PreflightRunner;
}
namespace billing {
class BudgetStore;
struct Budget;
class UsageSource;
struct Invoice;
struct Period;
}  // namespace billing
class Catalog;
class AdminPort;
class JobsPort;
class SchedulerMetrics;
}  // namespace gpupool

namespace gpupool::api {

struct ServiceOptions {
  // The GPU models ListGpuModels shows; null = Catalog::Builtin().
  const Catalog* catalog = nullptr;
  // The SKU table that quotas given in SKU units are converted with: the core's own options.
  // Null = SchedulerOptions::Defaults().
  const SchedulerOptions* scheduler = nullptr;
  // Optional probe of the store for Ready() (e.g. a cheap "SELECT 1"); empty = not checked.
  std::function<Status()> store_health;
  // Counts submissions refused here, before the core (which counts the rest): field validation
  // as outcome "invalid", a tenant outside the caller's subtree as "denied". Null = not counted.
  SchedulerMetrics* metrics = nullptr;
  std::chrono::milliseconds log_poll_interval{500};
  // A FetchLogs the agent leaves unanswered this long fails the stream with UNAVAILABLE.
  std::chrono::milliseconds log_fetch_timeout{10000};
  int64_t log_chunk_bytes = 256 * 1024;
  // Which priority classes each tenant may submit at (api/priority_access.h); null = any.
  const PriorityAccess* priority_access = nullptr;
  // Per-organisation submission rate limit for non-admin callers (api/rate_limiter.h); null =
  // none. Not owned.
  RateLimiter* submit_limiter = nullptr;
  // The audit log ListAuditRecords reads (api/audit_log.h); null = UNIMPLEMENTED. Not owned.
  AuditLog* audit = nullptr;
  // Where API keys live (scheduler/api_keys.h); null = KeyService answers UNIMPLEMENTED.
  ApiKeyStore* api_keys = nullptr;
  // Where tenants' registry credentials live (scheduler/registry_credentials.h); null = their
  // RPCs answer UNIMPLEMENTED and a job may name only its own secret_env entry.
  RegistryCredentialStore* registry_credentials = nullptr;
  // Where tenants' webhooks live (scheduler/webhooks.h); null = WebhookService answers
  // UNIMPLEMENTED. Not owned. http:// URLs to a loopback host are accepted only with
  // webhooks_allow_loopback (demos, tests); a tenant keeps at most webhooks_per_tenant.
  WebhookStore* webhooks = nullptr;
  bool webhooks_allow_loopback = false;
  int webhooks_per_tenant = 50;
  // Billing (api/service_billing.cc): where price plans live (the Store's AddPricePlan /
  // ListPricePlans) and the usage ledger invoices are rated from. price_plans null =
  // BillingService answers UNIMPLEMENTED; usage null = invoices and the feed answer
  // FAILED_PRECONDITION. Not owned.
  Store* price_plans = nullptr;
  billing::UsageSource* usage = nullptr;
  // Where budgets live (billing/budget.h); null = the budget calls answer UNIMPLEMENTED.
  billing::BudgetStore* budgets = nullptr;
  // The usage report GetUsage reads (Store::QueryUsage); empty = UNIMPLEMENTED. Called on the
  // API's thread.
  std::function<Result<std::vector<UsageReportRow>>(const UsageQuery&)> usage_report;
  // What-if replays (twin/preflight.h) CompareWhatIf runs; null = UNIMPLEMENTED. Not owned.
  twin::PreflightRunner* what_if = nullptr;
  // The services' controller (scheduler/service_controller.h); null = ServiceService answers
  // UNIMPLEMENTED. Not owned.
  ServiceController* services = nullptr;
};

// The part of the edge's policy that a config reload may replace (SetPolicy): the priority classes
// and SKU table the API lists and converts quotas with, and who may use which class.
struct ServicePolicy {
  SchedulerOptions scheduler = SchedulerOptions::Defaults();
  PriorityAccess access;  // default-constructed: every class for everyone
};

class ServiceImpl final : public ApiService {
 public:
  // REQUIRES: jobs, admin and logs outlive this (the daemon passes its Scheduler for both).
  ServiceImpl(JobsPort* jobs, AdminPort* admin, LogFetcher* logs, ServiceOptions options = {});
  ~ServiceImpl() override;
  ServiceImpl(const ServiceImpl&) = delete;
  ServiceImpl& operator=(const ServiceImpl&) = delete;

  // The daemon calls this once Scheduler::Start (recovery) succeeded; until then Ready() is
  // UNAVAILABLE.
  void SetRecovered(bool recovered) { recovered_ = recovered; }

  // Replaces the policy built from ServiceOptions::scheduler and ::priority_access (a config
  // reload). Calls already past their check keep the policy they saw.
  void SetPolicy(ServicePolicy policy);
  std::shared_ptr<const ServicePolicy> policy() const;

  void SubmitJob(const CallContext& ctx, const v1::SubmitJobRequest& req,
                 Reply<v1::SubmitJobResponse> done) override;
  void GetJob(const CallContext& ctx, const v1::GetJobRequest& req, Reply<v1::Job> done) override;
  void ListJobs(const CallContext& ctx, const v1::ListJobsRequest& req,
                Reply<v1::ListJobsResponse> done) override;
  void CancelJob(const CallContext& ctx, const v1::CancelJobRequest& req,
                 Reply<v1::Job> done) override;
  Cancel WatchJob(const CallContext& ctx, const v1::WatchJobRequest& req,
                  std::function<void(const v1::JobEvent&)> on_item,
                  std::function<void(Status)> done) override;
  Cancel GetTaskLogs(const CallContext& ctx, const v1::GetTaskLogsRequest& req,
                     std::function<void(const v1::TaskLogChunk&)> on_item,
                     std::function<void(Status)> done) override;

  void CreatePool(const CallContext& ctx, const v1::CreatePoolRequest& req,
                  Reply<v1::Pool> done) override;
  void GetPool(const CallContext& ctx, const v1::GetPoolRequest& req,
               Reply<v1::Pool> done) override;
  void ListPools(const CallContext& ctx, const v1::ListPoolsRequest& req,
                 Reply<v1::ListPoolsResponse> done) override;
  void UpdatePool(const CallContext& ctx, const v1::UpdatePoolRequest& req,
                  Reply<v1::Pool> done) override;
  void DeletePool(const CallContext& ctx, const v1::DeletePoolRequest& req,
                  Reply<v1::DeletePoolResponse> done) override;

  void ListNodes(const CallContext& ctx, const v1::ListNodesRequest& req,
                 Reply<v1::ListNodesResponse> done) override;
  void GetNode(const CallContext& ctx, const v1::GetNodeRequest& req,
               Reply<v1::Node> done) override;
  void CordonNode(const CallContext& ctx, const v1::NodeActionRequest& req,
                  Reply<v1::Node> done) override;
  void UncordonNode(const CallContext& ctx, const v1::NodeActionRequest& req,
                    Reply<v1::Node> done) override;
  void DrainNode(const CallContext& ctx, const v1::NodeActionRequest& req,
                 Reply<v1::Node> done) override;
  void SetDeviceSlots(const CallContext& ctx, const v1::SetDeviceSlotsRequest& req,
                      Reply<v1::Node> done) override;
  void ClearDeviceFault(const CallContext& ctx, const v1::ClearDeviceFaultRequest& req,
                        Reply<v1::Node> done) override;
  void SetMigLayout(const CallContext& ctx, const v1::SetMigLayoutRequest& req,
                    Reply<v1::Node> done) override;
  void FenceNode(const CallContext& ctx, const v1::NodeActionRequest& req,
                 Reply<v1::Node> done) override;

  void ListGpuModels(const CallContext& ctx, const v1::ListGpuModelsRequest& req,
                     Reply<v1::ListGpuModelsResponse> done) override;
  void ListPriorityClasses(const CallContext& ctx, const v1::ListPriorityClassesRequest& req,
                           Reply<v1::ListPriorityClassesResponse> done) override;
  void ListSkus(const CallContext& ctx, const v1::ListSkusRequest& req,
                Reply<v1::ListSkusResponse> done) override;

  void CreateTenant(const CallContext& ctx, const v1::CreateTenantRequest& req,
                    Reply<v1::Tenant> done) override;
  void GetTenant(const CallContext& ctx, const v1::GetTenantRequest& req,
                 Reply<v1::Tenant> done) override;
  void ListTenants(const CallContext& ctx, const v1::ListTenantsRequest& req,
                   Reply<v1::ListTenantsResponse> done) override;
  void DeleteTenant(const CallContext& ctx, const v1::DeleteTenantRequest& req,
                    Reply<v1::DeleteTenantResponse> done) override;
  void SetQuota(const CallContext& ctx, const v1::SetQuotaRequest& req,
                Reply<v1::Quota> done) override;
  void GetQuota(const CallContext& ctx, const v1::GetQuotaRequest& req,
                Reply<v1::Quota> done) override;
  void ListQuotas(const CallContext& ctx, const v1::ListQuotasRequest& req,
                  Reply<v1::ListQuotasResponse> done) override;
  void DeleteQuota(const CallContext& ctx, const v1::DeleteQuotaRequest& req,
                   Reply<v1::DeleteQuotaResponse> done) override;

  void ListAuditRecords(const CallContext& ctx, const v1::ListAuditRecordsRequest& req,
                        Reply<v1::ListAuditRecordsResponse> done) override;
  void GetUsage(const CallContext& ctx, const v1::GetUsageRequest& req,
                Reply<v1::GetUsageResponse> done) override;  // api/service_usage.cc
  void CompareWhatIf(const CallContext& ctx, const v1::CompareWhatIfRequest& req,
                     Reply<v1::CompareWhatIfResponse> done) override;  // api/service_whatif.cc
  void CreateApiKey(const CallContext& ctx, const v1::CreateApiKeyRequest& req,
                    Reply<v1::CreateApiKeyResponse> done) override;
  void ListApiKeys(const CallContext& ctx, const v1::ListApiKeysRequest& req,
                   Reply<v1::ListApiKeysResponse> done) override;
  void RevokeApiKey(const CallContext& ctx, const v1::RevokeApiKeyRequest& req,
                    Reply<v1::ApiKey> done) override;
  // api/service_services.cc
  void CreateService(const CallContext& ctx, const v1::CreateServiceRequest& req,
                     Reply<v1::Service> done) override;
  void GetService(const CallContext& ctx, const v1::GetServiceRequest& req,
                  Reply<v1::Service> done) override;
  void ListServices(const CallContext& ctx, const v1::ListServicesRequest& req,
                    Reply<v1::ListServicesResponse> done) override;
  void UpdateService(const CallContext& ctx, const v1::UpdateServiceRequest& req,
                     Reply<v1::Service> done) override;
  void RollbackService(const CallContext& ctx, const v1::RollbackServiceRequest& req,
                       Reply<v1::Service> done) override;
  void DeleteService(const CallContext& ctx, const v1::DeleteServiceRequest& req,
                     Reply<v1::DeleteServiceResponse> done) override;

  // api/service_registry_credentials.cc
  void CreateRegistryCredential(const CallContext& ctx,
                                const v1::CreateRegistryCredentialRequest& req,
                                Reply<v1::RegistryCredential> done) override;
  void ListRegistryCredentials(const CallContext& ctx,
                               const v1::ListRegistryCredentialsRequest& req,
                               Reply<v1::ListRegistryCredentialsResponse> done) override;
  void DeleteRegistryCredential(const CallContext& ctx,
                                const v1::DeleteRegistryCredentialRequest& req,
                                Reply<v1::DeleteRegistryCredentialResponse> done) override;

  // api/service_webhooks.cc
  void CreateWebhook(const CallContext& ctx, const v1::CreateWebhookRequest& req,
                     Reply<v1::CreateWebhookResponse> done) override;
  void ListWebhooks(const CallContext& ctx, const v1::ListWebhooksRequest& req,
                    Reply<v1::ListWebhooksResponse> done) override;
  void GetWebhook(const CallContext& ctx, const v1::GetWebhookRequest& req,
                  Reply<v1::GetWebhookResponse> done) override;
  void DeleteWebhook(const CallContext& ctx, const v1::DeleteWebhookRequest& req,
                     Reply<v1::DeleteWebhookResponse> done) override;
  void EnableWebhook(const CallContext& ctx, const v1::EnableWebhookRequest& req,
                     Reply<v1::Webhook> done) override;

  void CreatePricePlan(const CallContext& ctx, const v1::CreatePricePlanRequest& req,
                       Reply<v1::PricePlan> done) override;
  void UpdatePricePlan(const CallContext& ctx, const v1::UpdatePricePlanRequest& req,
                       Reply<v1::PricePlan> done) override;
  void ListPricePlans(const CallContext& ctx, const v1::ListPricePlansRequest& req,
                      Reply<v1::ListPricePlansResponse> done) override;
  void ListInvoices(const CallContext& ctx, const v1::ListInvoicesRequest& req,
                    Reply<v1::ListInvoicesResponse> done) override;
  void ExportInvoices(const CallContext& ctx, const v1::ListInvoicesRequest& req,
                      Reply<v1::ExportResponse> done) override;
  void GetUsageFeed(const CallContext& ctx, const v1::GetUsageFeedRequest& req,
                    Reply<v1::GetUsageFeedResponse> done) override;
  void ExportUsageFeed(const CallContext& ctx, const v1::GetUsageFeedRequest& req,
                       Reply<v1::ExportResponse> done) override;
  void SetBudget(const CallContext& ctx, const v1::SetBudgetRequest& req,
                 Reply<v1::Budget> done) override;
  void ListBudgets(const CallContext& ctx, const v1::ListBudgetsRequest& req,
                   Reply<v1::ListBudgetsResponse> done) override;
  void DeleteBudget(const CallContext& ctx, const v1::DeleteBudgetRequest& req,
                    Reply<v1::DeleteBudgetResponse> done) override;

  Status Ready() const override;

 private:
  // INVALID_ARGUMENT naming the field when the job names a registry credential that is not its
  // own secret_env entry and its tenant keeps none of that name for the image's registry
  // (api/service_registry_credentials.cc).
  Status CheckStoredRegistryCredential(const JobSpec& spec) const;
  // The priority class and stored registry credential a service names are the caller's to use
  // (api/service_services.cc).
  Status CheckServiceUse(const CallContext& ctx, const ServiceSpec& spec) const;
  // Deletes the registry credentials of `tenant` and its subtree (DeleteTenant).
  Status PurgeRegistryCredentials(const std::string& tenant) const;
  // Deletes the webhooks of `tenant` and its subtree (DeleteTenant); OK without a store.
  Status PurgeWebhooks(const std::string& tenant) const;
  // Deletes the budgets of `tenant` and its subtree (DeleteTenant); OK without a store.
  Status PurgeBudgets(const std::string& tenant) const;
  // The budget as the API shows it, with its month so far rated when it can be (budgets.cc).
  v1::Budget BudgetProto(const CallContext& ctx, const billing::Budget& b);
  // Billing helpers (api/service_billing.cc).
  Status CheckBilling(const CallContext& ctx, std::string_view what) const;
  void AddPricePlan(const CallContext& ctx, const v1::PricePlan& in, bool create,
                    Reply<v1::PricePlan> done);
  Result<std::vector<billing::Invoice>> RateInvoices(const CallContext& ctx,
                                                     const std::string& tenant,
                                                     const billing::Period& period);
  template <typename Req>
  Result<std::pair<billing::Period, std::vector<billing::Invoice>>> InvoicesFor(
      const CallContext& ctx, const Req& req, std::string_view what);

  struct Timers;
  class LogStream;

  void SetNodeState(const CallContext& ctx, const v1::NodeActionRequest& req, int state,
                    Reply<v1::Node> done);

  JobsPort* jobs_;
  AdminPort* admin_;
  LogFetcher* logs_;
  ServiceOptions options_;
  std::atomic<bool> recovered_{false};
  mutable std::mutex policy_mu_;
  std::shared_ptr<const ServicePolicy> policy_;  // guarded by policy_mu_
  std::unique_ptr<Timers> timers_;
};

}  // namespace gpupool::api
