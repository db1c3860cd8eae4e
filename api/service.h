// ApiService: the gpupool v1 API as a plain C++ interface over the protobuf messages.
//
// The gRPC handlers (api/grpc/) and the REST gateway (api/rest/) are thin adapters over this one
// interface: they authenticate, convert the wire format, call a method here and convert the
// reply. The implementation (api/service_impl.h) validates input, converts to the scheduler's
// domain types (api/convert.h) and posts to the scheduler core. Nothing here knows of gRPC or
// HTTP, so both faces behave identically by construction.
//
// Calls are asynchronous: each method returns at once and later calls `done` exactly once, from
// any thread. A Status that is not OK carries a message naming the offending field or object;
// the adapters map its code to a gRPC status or an HTTP status in one place each.
//
// Streams (WatchJob, GetTaskLogs) call `on_item` zero or more times, then `done` once. The
// returned Cancel function stops the stream early (after it, no more callbacks start); it may be
// called from any thread, more than once, and after `done`.
//
// The tenant and quota methods have default bodies that answer UNIMPLEMENTED, so an
// implementation that does not serve tenancy (a test double) need not mention them.
//
// Thread safety: implementations are thread-safe.
#pragma once

#include <functional>
#include <string>

#include "api/caller.h"
#include "base/status.h"
#include "gpupool/v1/audit.pb.h"
#include "gpupool/v1/billing.pb.h"
#include "gpupool/v1/jobs.pb.h"
#include "gpupool/v1/keys.pb.h"
#include "gpupool/v1/pools.pb.h"
#include "gpupool/v1/services.pb.h"
#include "gpupool/v1/tenants.pb.h"
#include "gpupool/v1/usage.pb.h"
#include "gpupool/v1/webhooks.pb.h"
#include "gpupool/v1/whatif.pb.h"

namespace gpupool::api {

namespace v1 = ::gpupool::v1;

template <typename T>
using Reply = std::function<void(Status, T)>;
using Cancel = std::function<void()>;

class ApiService {
 public:
  virtual ~ApiService() = default;

  // Jobs.
  virtual void SubmitJob(const CallContext& ctx, const v1::SubmitJobRequest& req,
                         Reply<v1::SubmitJobResponse> done) = 0;
  virtual void GetJob(const CallContext& ctx, const v1::GetJobRequest& req,
                      Reply<v1::Job> done) = 0;
  virtual void ListJobs(const CallContext& ctx, const v1::ListJobsRequest& req,
                        Reply<v1::ListJobsResponse> done) = 0;
  virtual void CancelJob(const CallContext& ctx, const v1::CancelJobRequest& req,
                         Reply<v1::Job> done) = 0;
  virtual Cancel WatchJob(const CallContext& ctx, const v1::WatchJobRequest& req,
                          std::function<void(const v1::JobEvent&)> on_item,
                          std::function<void(Status)> done) = 0;
  virtual Cancel GetTaskLogs(const CallContext& ctx, const v1::GetTaskLogsRequest& req,
                             std::function<void(const v1::TaskLogChunk&)> on_item,
                             std::function<void(Status)> done) = 0;

  // Pools (admin).
  virtual void CreatePool(const CallContext& ctx, const v1::CreatePoolRequest& req,
                          Reply<v1::Pool> done) = 0;
  virtual void GetPool(const CallContext& ctx, const v1::GetPoolRequest& req,
                       Reply<v1::Pool> done) = 0;
  virtual void ListPools(const CallContext& ctx, const v1::ListPoolsRequest& req,
                         Reply<v1::ListPoolsResponse> done) = 0;
  virtual void UpdatePool(const CallContext& ctx, const v1::UpdatePoolRequest& req,
                          Reply<v1::Pool> done) = 0;
  virtual void DeletePool(const CallContext& ctx, const v1::DeletePoolRequest& req,
                          Reply<v1::DeletePoolResponse> done) = 0;

  // Nodes (admin).
  virtual void ListNodes(const CallContext& ctx, const v1::ListNodesRequest& req,
                         Reply<v1::ListNodesResponse> done) = 0;
  virtual void GetNode(const CallContext& ctx, const v1::GetNodeRequest& req,
                       Reply<v1::Node> done) = 0;
  virtual void CordonNode(const CallContext& ctx, const v1::NodeActionRequest& req,
                          Reply<v1::Node> done) = 0;
  virtual void UncordonNode(const CallContext& ctx, const v1::NodeActionRequest& req,
                            Reply<v1::Node> done) = 0;
  virtual void DrainNode(const CallContext& ctx, const v1::NodeActionRequest& req,
                         Reply<v1::Node> done) = 0;
  // Admins only: a device a fatal XID/ECC fault took out of service goes back into service.
  virtual void ClearDeviceFault(const CallContext& ctx, const v1::ClearDeviceFaultRequest& req,
                                Reply<v1::Node> done) = 0;
  // Admins only: time-slices a device (0: the pool's default).
  virtual void SetDeviceSlots(const CallContext& ctx, const v1::SetDeviceSlotsRequest& req,
                              Reply<v1::Node> done) = 0;
  // Admins only: re-partitions a GPU in MIG mode (docs/placement.md, "Dynamic MIG").
  virtual void SetMigLayout(const CallContext& ctx, const v1::SetMigLayoutRequest& req,
                            Reply<v1::Node> done) = 0;
  // Admins only: a silent node is powered off; its tasks are requeued now.
  virtual void FenceNode(const CallContext& ctx, const v1::NodeActionRequest& req,
                         Reply<v1::Node> done) = 0;

  // Catalog.
  virtual void ListGpuModels(const CallContext& ctx, const v1::ListGpuModelsRequest& req,
                             Reply<v1::ListGpuModelsResponse> done) = 0;
  virtual void ListPriorityClasses(const CallContext& ctx,
                                   const v1::ListPriorityClassesRequest& req,
                                   Reply<v1::ListPriorityClassesResponse> done) = 0;
  virtual void ListSkus(const CallContext& ctx, const v1::ListSkusRequest& req,
                        Reply<v1::ListSkusResponse> done) = 0;

  // Tenants and quotas (mutations: admin). Default: UNIMPLEMENTED.
  virtual void CreateTenant(const CallContext& ctx, const v1::CreateTenantRequest& req,
                            Reply<v1::Tenant> done);
  virtual void GetTenant(const CallContext& ctx, const v1::GetTenantRequest& req,
                         Reply<v1::Tenant> done);
  virtual void ListTenants(const CallContext& ctx, const v1::ListTenantsRequest& req,
                           Reply<v1::ListTenantsResponse> done);
  virtual void DeleteTenant(const CallContext& ctx, const v1::DeleteTenantRequest& req,
                            Reply<v1::DeleteTenantResponse> done);
  virtual void SetQuota(const CallContext& ctx, const v1::SetQuotaRequest& req,
                        Reply<v1::Quota> done);
  virtual void GetQuota(const CallContext& ctx, const v1::GetQuotaRequest& req,
                        Reply<v1::Quota> done);
  virtual void ListQuotas(const CallContext& ctx, const v1::ListQuotasRequest& req,
                          Reply<v1::ListQuotasResponse> done);
  virtual void DeleteQuota(const CallContext& ctx, const v1::DeleteQuotaRequest& req,
                           Reply<v1::DeleteQuotaResponse> done);

  // Audit log (admins: every record; a tenant principal: its subtree's). Default: UNIMPLEMENTED.
  virtual void ListAuditRecords(const CallContext& ctx, const v1::ListAuditRecordsRequest& req,
                                Reply<v1::ListAuditRecordsResponse> done);
  // API keys (admin, or tenant-admin within its subtree). Default: UNIMPLEMENTED.
  virtual void CreateApiKey(const CallContext& ctx, const v1::CreateApiKeyRequest& req,
                            Reply<v1::CreateApiKeyResponse> done);
  virtual void ListApiKeys(const CallContext& ctx, const v1::ListApiKeysRequest& req,
                           Reply<v1::ListApiKeysResponse> done);
  virtual void RevokeApiKey(const CallContext& ctx, const v1::RevokeApiKeyRequest& req,
                            Reply<v1::ApiKey> done);
  virtual void CreateRegistryCredential(const CallContext& ctx,
                                        const v1::CreateRegistryCredentialRequest& req,
                                        Reply<v1::RegistryCredential> done);
  virtual void ListRegistryCredentials(const CallContext& ctx,
                                       const v1::ListRegistryCredentialsRequest& req,
                                       Reply<v1::ListRegistryCredentialsResponse> done);
  virtual void DeleteRegistryCredential(const CallContext& ctx,
                                        const v1::DeleteRegistryCredentialRequest& req,
                                        Reply<v1::DeleteRegistryCredentialResponse> done);
  // Webhooks (docs/webhooks.md; admin, or tenant-admin within its subtree). Default:
  // UNIMPLEMENTED.
  virtual void CreateWebhook(const CallContext& ctx, const v1::CreateWebhookRequest& req,
                             Reply<v1::CreateWebhookResponse> done);
  virtual void ListWebhooks(const CallContext& ctx, const v1::ListWebhooksRequest& req,
                            Reply<v1::ListWebhooksResponse> done);
  virtual void GetWebhook(const CallContext& ctx, const v1::GetWebhookRequest& req,
                          Reply<v1::GetWebhookResponse> done);
  virtual void DeleteWebhook(const CallContext& ctx, const v1::DeleteWebhookRequest& req,
                             Reply<v1::DeleteWebhookResponse> done);
  virtual void EnableWebhook(const CallContext& ctx, const v1::EnableWebhookRequest& req,
                             Reply<v1::Webhook> done);

  // Billing (docs/billing.md): price plans (mutations: admin), invoices, their CSV export and
  // the billing-engine usage feed (admin, or tenant-admin within its subtree). Default:
  // UNIMPLEMENTED.
  virtual void CreatePricePlan(const CallContext& ctx, const v1::CreatePricePlanRequest& req,
                               Reply<v1::PricePlan> done);
  virtual void UpdatePricePlan(const CallContext& ctx, const v1::UpdatePricePlanRequest& req,
                               Reply<v1::PricePlan> done);
  virtual void ListPricePlans(const CallContext& ctx, const v1::ListPricePlansRequest& req,
                              Reply<v1::ListPricePlansResponse> done);
  virtual void ListInvoices(const CallContext& ctx, const v1::ListInvoicesRequest& req,
                            Reply<v1::ListInvoicesResponse> done);
  virtual void ExportInvoices(const CallContext& ctx, const v1::ListInvoicesRequest& req,
                              Reply<v1::ExportResponse> done);
  virtual void GetUsageFeed(const CallContext& ctx, const v1::GetUsageFeedRequest& req,
                            Reply<v1::GetUsageFeedResponse> done);
  virtual void ExportUsageFeed(const CallContext& ctx, const v1::GetUsageFeedRequest& req,
                               Reply<v1::ExportResponse> done);
  // Budgets (docs/billing.md, "Budgets"): admin, or tenant-admin within its subtree.
  virtual void SetBudget(const CallContext& ctx, const v1::SetBudgetRequest& req,
                         Reply<v1::Budget> done);
  virtual void ListBudgets(const CallContext& ctx, const v1::ListBudgetsRequest& req,
                           Reply<v1::ListBudgetsResponse> done);
  virtual void DeleteBudget(const CallContext& ctx, const v1::DeleteBudgetRequest& req,
                            Reply<v1::DeleteBudgetResponse> done);
  // Usage report (docs/billing.md): admins any tenant, others their own subtree. Default:
  // UNIMPLEMENTED.
  virtual void GetUsage(const CallContext& ctx, const v1::GetUsageRequest& req,
                        Reply<v1::GetUsageResponse> done);

  // What-if pre-flight (docs/twin.md): admins only. Default: UNIMPLEMENTED.
  virtual void CompareWhatIf(const CallContext& ctx, const v1::CompareWhatIfRequest& req,
                             Reply<v1::CompareWhatIfResponse> done);

  // Services (docs/services.md): members create and change their own, tenant-admins their
  // subtree's, viewers read. Default: UNIMPLEMENTED.
  virtual void CreateService(const CallContext& ctx, const v1::CreateServiceRequest& req,
                             Reply<v1::Service> done);
  virtual void GetService(const CallContext& ctx, const v1::GetServiceRequest& req,
                          Reply<v1::Service> done);
  virtual void ListServices(const CallContext& ctx, const v1::ListServicesRequest& req,
                            Reply<v1::ListServicesResponse> done);
  virtual void UpdateService(const CallContext& ctx, const v1::UpdateServiceRequest& req,
                             Reply<v1::Service> done);
  virtual void RollbackService(const CallContext& ctx, const v1::RollbackServiceRequest& req,
                               Reply<v1::Service> done);
  virtual void DeleteService(const CallContext& ctx, const v1::DeleteServiceRequest& req,
                             Reply<v1::DeleteServiceResponse> done);

  // Health for /readyz: OK once state is recovered and the database answers.
  virtual Status Ready() const = 0;
};

// The UNIMPLEMENTED defaults: inline so that every implementation links without an extra
// library, and so that a server without tenancy says which method it lacks.
#define GPUPOOL_API_UNIMPLEMENTED(Name, Req, Resp)                                         \
  inline void ApiService::Name(const CallContext&, const v1::Req&, Reply<v1::Resp> done) { \
    done(Status::Unimplemented(#Name ": this server does not serve tenants and quotas"),   \
         v1::Resp{});                                                                      \
  }
GPUPOOL_API_UNIMPLEMENTED(CreateTenant, CreateTenantRequest, Tenant)
GPUPOOL_API_UNIMPLEMENTED(GetTenant, GetTenantRequest, Tenant)
GPUPOOL_API_UNIMPLEMENTED(ListTenants, ListTenantsRequest, ListTenantsResponse)
GPUPOOL_API_UNIMPLEMENTED(DeleteTenant, DeleteTenantRequest, DeleteTenantResponse)
GPUPOOL_API_UNIMPLEMENTED(SetQuota, SetQuotaRequest, Quota)
GPUPOOL_API_UNIMPLEMENTED(GetQuota, GetQuotaRequest, Quota)
GPUPOOL_API_UNIMPLEMENTED(ListQuotas, ListQuotasRequest, ListQuotasResponse)
GPUPOOL_API_UNIMPLEMENTED(DeleteQuota, DeleteQuotaRequest, DeleteQuotaResponse)
inline void ApiService::ListAuditRecords(const CallContext&, const v1::ListAuditRecordsRequest&,
                                         Reply<v1::ListAuditRecordsResponse> done) {
  done(Status::Unimplemented("ListAuditRecords: this server keeps no audit log"),
       v1::ListAuditRecordsResponse{});
}
GPUPOOL_API_UNIMPLEMENTED(CreateApiKey, CreateApiKeyRequest, CreateApiKeyResponse)
GPUPOOL_API_UNIMPLEMENTED(ListApiKeys, ListApiKeysRequest, ListApiKeysResponse)
GPUPOOL_API_UNIMPLEMENTED(RevokeApiKey, RevokeApiKeyRequest, ApiKey)
GPUPOOL_API_UNIMPLEMENTED(CreateRegistryCredential, CreateRegistryCredentialRequest,
                          RegistryCredential)
GPUPOOL_API_UNIMPLEMENTED(ListRegistryCredentials, ListRegistryCredentialsRequest,
                          ListRegistryCredentialsResponse)
GPUPOOL_API_UNIMPLEMENTED(DeleteRegistryCredential, DeleteRegistryCredentialRequest,
                          DeleteRegistryCredentialResponse)
GPUPOOL_API_UNIMPLEMENTED(CreateWebhook, CreateWebhookRequest, CreateWebhookResponse)
GPUPOOL_API_UNIMPLEMENTED(ListWebhooks, ListWebhooksRequest, ListWebhooksResponse)
GPUPOOL_API_UNIMPLEMENTED(GetWebhook, GetWebhookRequest, GetWebhookResponse)
GPUPOOL_API_UNIMPLEMENTED(DeleteWebhook, DeleteWebhookRequest, DeleteWebhookResponse)
GPUPOOL_API_UNIMPLEMENTED(EnableWebhook, EnableWebhookRequest, Webhook)
inline void ApiService::GetUsage(const CallContext&, const v1::GetUsageRequest&,
                                 Reply<v1::GetUsageResponse> done) {
  done(Status::Unimplemented("GetUsage: this server keeps no usage ledger"),
       v1::GetUsageResponse{});
}
inline void ApiService::CompareWhatIf(const CallContext&, const v1::CompareWhatIfRequest&,
                                      Reply<v1::CompareWhatIfResponse> done) {
  done(Status::Unimplemented("CompareWhatIf: this server runs no what-if replays"),
       v1::CompareWhatIfResponse{});
}
#undef GPUPOOL_API_UNIMPLEMENTED
#define GPUPOOL_API_NO_SERVICES(Name, Req, Resp)                                           \
  inline void ApiService::Name(const CallContext&, const v1::Req&, Reply<v1::Resp> done) { \
    done(Status::Unimplemented(#Name ": this server runs no services"), v1::Resp{});       \
  }
GPUPOOL_API_NO_SERVICES(CreateService, CreateServiceRequest, Service)
GPUPOOL_API_NO_SERVICES(GetService, GetServiceRequest, Service)
GPUPOOL_API_NO_SERVICES(ListServices, ListServicesRequest, ListServicesResponse)
GPUPOOL_API_NO_SERVICES(UpdateService, UpdateServiceRequest, Service)
GPUPOOL_API_NO_SERVICES(RollbackService, RollbackServiceRequest, Service)
GPUPOOL_API_NO_SERVICES(DeleteService, DeleteServiceRequest, DeleteServiceResponse)
#undef GPUPOOL_API_NO_SERVICES
#define GPUPOOL_API_NO_BILLING(Name, Req, Resp)                                            \
  inline void ApiService::Name(const CallContext&, const v1::Req&, Reply<v1::Resp> done) { \
    done(Status::Unimplemented(#Name ": this server does not serve billing"), v1::Resp{}); \
  }
GPUPOOL_API_NO_BILLING(CreatePricePlan, CreatePricePlanRequest, PricePlan)
GPUPOOL_API_NO_BILLING(UpdatePricePlan, UpdatePricePlanRequest, PricePlan)
GPUPOOL_API_NO_BILLING(ListPricePlans, ListPricePlansRequest, ListPricePlansResponse)
GPUPOOL_API_NO_BILLING(ListInvoices, ListInvoicesRequest, ListInvoicesResponse)
GPUPOOL_API_NO_BILLING(ExportInvoices, ListInvoicesRequest, ExportResponse)
GPUPOOL_API_NO_BILLING(GetUsageFeed, GetUsageFeedRequest, GetUsageFeedResponse)
GPUPOOL_API_NO_BILLING(ExportUsageFeed, GetUsageFeedRequest, ExportResponse)
GPUPOOL_API_NO_BILLING(SetBudget, SetBudgetRequest, Budget)
GPUPOOL_API_NO_BILLING(ListBudgets, ListBudgetsRequest, ListBudgetsResponse)
GPUPOOL_API_NO_BILLING(DeleteBudget, DeleteBudgetRequest, DeleteBudgetResponse)
#undef GPUPOOL_API_NO_BILLING

}  // namespace gpupool::api
