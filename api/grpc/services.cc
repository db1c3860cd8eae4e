#include "api/grpc/services.h"

#include <string_view>
#include <utility>

#include "api/status_convert.h"

namespace gpupool::api::grpcface {
namespace {

template <typename Req, typename Resp>
using UnaryMethod = void (ApiService::*)(const CallContext&, const Req&, Reply<Resp>);

template <typename Req, typename Item>
using StreamMethod = Cancel (ApiService::*)(const CallContext&, const Req&,
                                            std::function<void(const Item&)>,
                                            std::function<void(Status)>);

// Step 1: the caller's identity from the `authorization` metadata.
Result<CallContext> Authenticate(const Deps& d, const grpc::CallbackServerContext* ctx) {
  const auto& md = ctx->client_metadata();
  auto it = md.find("authorization");
  std::string_view value;
  if (it != md.end()) value = std::string_view(it->second.data(), it->second.size());
  Result<CallContext> caller = d.auth->Authenticate(value);
  if (caller.ok()) caller->source = ctx->peer();
  return caller;
}

// Where the call came from: the caller's x-request-id (or a new one, sent back as initial
// metadata) and its peer address.
CallOrigin OriginOf(grpc::CallbackServerContext* ctx) {
  const auto& md = ctx->client_metadata();
  auto it = md.find("x-request-id");
  std::string_view given;
  if (it != md.end()) given = std::string_view(it->second.data(), it->second.size());
  CallOrigin origin{RequestIdOr(given), ctx->peer()};
  ctx->AddInitialMetadata("x-request-id", origin.request_id);
  return origin;
}

// Every RPC passes here: the five steps, with the audit hook around step 3 (api/audit.h).
template <typename Req, typename Resp>
grpc::ServerUnaryReactor* Unary(const Deps& d, grpc::CallbackServerContext* ctx, const Req* req,
                                Resp* resp, UnaryMethod<Req, Resp> method, std::string_view verb) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  const CallOrigin origin = OriginOf(ctx);
  const AuditHook* audit = d.audit;
  Result<CallContext> caller = Authenticate(d, ctx);  // 1. check
  if (!caller.ok()) {
    audit->Finish(origin, nullptr, verb, req, nullptr, caller.status(),
                  [reactor, st = caller.status()] { reactor->Finish(ToGrpcStatus(st)); });
    return reactor;
  }
  if (Status admit = audit->Admit(verb); !admit.ok()) {
    audit->Finish(origin, &*caller, verb, req, nullptr, admit,
                  [reactor, admit] { reactor->Finish(ToGrpcStatus(admit)); });
    return reactor;
  }
  // 2. convert in: `*req` is already the ApiService's request type. gRPC keeps `req`, `resp`
  // and the reactor alive until Finish, which only the reply below calls.
  (d.service->*method)(*caller, *req,
                       [reactor, req, resp, audit, origin, caller = *caller, verb](
                           Status status, Resp reply) {              // 3.
                         if (status.ok()) *resp = std::move(reply);  // 4. convert out
                         audit->Finish(origin, &caller, verb, req, resp, status, [reactor, status] {
                           reactor->Finish(ToGrpcStatus(status));
                         });  // 5. finish
                       });
  return reactor;
}

template <typename Req, typename Item>
grpc::ServerWriteReactor<Item>* Stream(const Deps& d, grpc::CallbackServerContext* ctx,
                                       const Req* req, StreamMethod<Req, Item> method,
                                       std::string_view verb) {
  auto [reactor, writer] = StreamWriter<Item>::Create(d.streams);
  const CallOrigin origin = OriginOf(ctx);
  const AuditHook* audit = d.audit;
  Result<CallContext> caller = Authenticate(d, ctx);  // 1. check
  if (!caller.ok()) {
    audit->Finish(origin, nullptr, verb, req, nullptr, caller.status(),
                  [writer, st = caller.status()] { writer->Done(st); });
    return reactor;
  }
  // 2. convert in: nothing to do. 3. call; 4 and 5 happen in the writer as items and the final
  // status arrive. Streams are reads: only a denial is recorded. `req` is a copy, as the stream
  // may end after gRPC let go of the request.
  Cancel cancel = (d.service->*method)(
      *caller, *req, [writer](const Item& item) { writer->Push(item); },
      [writer, audit, origin, caller = *caller, verb, copy = *req](Status status) {
        audit->Finish(origin, &caller, verb, &copy, nullptr, status,
                      [writer, status] { writer->Done(status); });
      });
  writer->SetUpstreamCancel(std::move(cancel));
  return reactor;
}

}  // namespace

// JobService.
grpc::ServerUnaryReactor* JobServiceImpl::SubmitJob(grpc::CallbackServerContext* ctx,
                                                    const v1::SubmitJobRequest* req,
                                                    v1::SubmitJobResponse* resp) {
  return Unary(d_, ctx, req, resp, &ApiService::SubmitJob, "SubmitJob");
}
grpc::ServerUnaryReactor* JobServiceImpl::GetJob(grpc::CallbackServerContext* ctx,
                                                 const v1::GetJobRequest* req, v1::Job* resp) {
  return Unary(d_, ctx, req, resp, &ApiService::GetJob, "GetJob");
}
grpc::ServerUnaryReactor* JobServiceImpl::ListJobs(grpc::CallbackServerContext* ctx,
                                                   const v1::ListJobsRequest* req,
                                                   v1::ListJobsResponse* resp) {
  return Unary(d_, ctx, req, resp, &ApiService::ListJobs, "ListJobs");
}
grpc::ServerUnaryReactor* JobServiceImpl::CancelJob(grpc::CallbackServerContext* ctx,
                                                    const v1::CancelJobRequest* req,
                                                    v1::Job* resp) {
  return Unary(d_, ctx, req, resp, &ApiService::CancelJob, "CancelJob");
}
grpc::ServerWriteReactor<v1::JobEvent>* JobServiceImpl::WatchJob(grpc::CallbackServerContext* ctx,
                                                                 const v1::WatchJobRequest* req) {
  return Stream(d_, ctx, req, &ApiService::WatchJob, "WatchJob");
}
grpc::ServerWriteReactor<v1::TaskLogChunk>* JobServiceImpl::GetTaskLogs(
    grpc::CallbackServerContext* ctx, const v1::GetTaskLogsRequest* req) {
  return Stream(d_, ctx, req, &ApiService::GetTaskLogs, "GetTaskLogs");
}

// PoolService.
grpc::ServerUnaryReactor* PoolServiceImpl::CreatePool(grpc::CallbackServerContext* ctx,
                                                      const v1::CreatePoolRequest* req,
                                                      v1::Pool* resp) {
  return Unary(d_, ctx, req, resp, &ApiService::CreatePool, "CreatePool");
}
grpc::ServerUnaryReactor* PoolServiceImpl::GetPool(grpc::CallbackServerContext* ctx,
                                                   const v1::GetPoolRequest* req, v1::Pool* resp) {
  return Unary(d_, ctx, req, resp, &ApiService::GetPool, "GetPool");
}
grpc::ServerUnaryReactor* PoolServiceImpl::ListPools(grpc::CallbackServerContext* ctx,
                                                     const v1::ListPoolsRequest* req,
                                                     v1::ListPoolsResponse* resp) {
  return Unary(d_, ctx, req, resp, &ApiService::ListPools, "ListPools");
}
grpc::ServerUnaryReactor* PoolServiceImpl::UpdatePool(grpc::CallbackServerContext* ctx,
                                                      const v1::UpdatePoolRequest* req,
                                                      v1::Pool* resp) {
  return Unary(d_, ctx, req, resp, &ApiService::UpdatePool, "UpdatePool");
}
grpc::ServerUnaryReactor* PoolServiceImpl::DeletePool(grpc::CallbackServerContext* ctx,
                                                      const v1::DeletePoolRequest* req,
                                                      v1::DeletePoolResponse* resp) {
  return Unary(d_, ctx, req, resp, &ApiService::DeletePool, "DeletePool");
}

// NodeService.
grpc::ServerUnaryReactor* NodeServiceImpl::ListNodes(grpc::CallbackServerContext* ctx,
                                                     const v1::ListNodesRequest* req,
                                                     v1::ListNodesResponse* resp) {
  return Unary(d_, ctx, req, resp, &ApiService::ListNodes, "ListNodes");
}
grpc::ServerUnaryReactor* NodeServiceImpl::GetNode(grpc::CallbackServerContext* ctx,
                                                   const v1::GetNodeRequest* req, v1::Node* resp) {
  return Unary(d_, ctx, req, resp, &ApiService::GetNode, "GetNode");
}
grpc::ServerUnaryReactor* NodeServiceImpl::CordonNode(grpc::CallbackServerContext* ctx,
                                                      const v1::NodeActionRequest* req,
                                                      v1::Node* resp) {
  return Unary(d_, ctx, req, resp, &ApiService::CordonNode, "CordonNode");
}
grpc::ServerUnaryReactor* NodeServiceImpl::UncordonNode(grpc::CallbackServerContext* ctx,
                                                        const v1::NodeActionRequest* req,
                                                        v1::Node* resp) {
  return Unary(d_, ctx, req, resp, &ApiService::UncordonNode, "UncordonNode");
}
grpc::ServerUnaryReactor* NodeServiceImpl::DrainNode(grpc::CallbackServerContext* ctx,
                                                     const v1::NodeActionRequest* req,
                                                     v1::Node* resp) {
  return Unary(d_, ctx, req, resp, &ApiService::DrainNode, "DrainNode");
}
grpc::ServerUnaryReactor* NodeServiceImpl::SetMigLayout(grpc::CallbackServerContext* ctx,
                                                        const v1::SetMigLayoutRequest* req,
                                                        v1::Node* resp) {
  return Unary(d_, ctx, req, resp, &ApiService::SetMigLayout, "SetMigLayout");
}

grpc::ServerUnaryReactor* NodeServiceImpl::SetDeviceSlots(grpc::CallbackServerContext* ctx,
                                                          const v1::SetDeviceSlotsRequest* req,
                                                          v1::Node* resp) {
  return Unary(d_, ctx, req, resp, &ApiService::SetDeviceSlots, "SetDeviceSlots");
}
grpc::ServerUnaryReactor* NodeServiceImpl::ClearDeviceFault(grpc::CallbackServerContext* ctx,
                                                            const v1::ClearDeviceFaultRequest* req,
                                                            v1::Node* resp) {
  return Unary(d_, ctx, req, resp, &ApiService::ClearDeviceFault, "ClearDeviceFault");
}
grpc::ServerUnaryReactor* NodeServiceImpl::FenceNode(grpc::CallbackServerContext* ctx,
                                                     const v1::NodeActionRequest* req,
                                                     v1::Node* resp) {
  return Unary(d_, ctx, req, resp, &ApiService::FenceNode, "FenceNode");
}

// CatalogService.
grpc::ServerUnaryReactor* CatalogServiceImpl::ListGpuModels(grpc::CallbackServerContext* ctx,
                                                            const v1::ListGpuModelsRequest* req,
                                                            v1::ListGpuModelsResponse* resp) {
  return Unary(d_, ctx, req, resp, &ApiService::ListGpuModels, "ListGpuModels");
}
grpc::ServerUnaryReactor* CatalogServiceImpl::ListPriorityClasses(
    grpc::CallbackServerContext* ctx, const v1::ListPriorityClassesRequest* req,
    v1::ListPriorityClassesResponse* resp) {
  return Unary(d_, ctx, req, resp, &ApiService::ListPriorityClasses, "ListPriorityClasses");
}
grpc::ServerUnaryReactor* CatalogServiceImpl::ListSkus(grpc::CallbackServerContext* ctx,
                                                       const v1::ListSkusRequest* req,
                                                       v1::ListSkusResponse* resp) {
  return Unary(d_, ctx, req, resp, &ApiService::ListSkus, "ListSkus");
}

// TenantService.
grpc::ServerUnaryReactor* TenantServiceImpl::CreateTenant(grpc::CallbackServerContext* ctx,
                                                          const v1::CreateTenantRequest* req,
                                                          v1::Tenant* resp) {
  return Unary(d_, ctx, req, resp, &ApiService::CreateTenant, "CreateTenant");
}
grpc::ServerUnaryReactor* TenantServiceImpl::GetTenant(grpc::CallbackServerContext* ctx,
                                                       const v1::GetTenantRequest* req,
                                                       v1::Tenant* resp) {
  return Unary(d_, ctx, req, resp, &ApiService::GetTenant, "GetTenant");
}
grpc::ServerUnaryReactor* TenantServiceImpl::ListTenants(grpc::CallbackServerContext* ctx,
                                                         const v1::ListTenantsRequest* req,
                                                         v1::ListTenantsResponse* resp) {
  return Unary(d_, ctx, req, resp, &ApiService::ListTenants, "ListTenants");
}
grpc::ServerUnaryReactor* TenantServiceImpl::DeleteTenant(grpc::CallbackServerContext* ctx,
                                                          const v1::DeleteTenantRequest* req,
                                                          v1::DeleteTenantResponse* resp) {
  return Unary(d_, ctx, req, resp, &ApiService::DeleteTenant, "DeleteTenant");
}
grpc::ServerUnaryReactor* TenantServiceImpl::SetQuota(grpc::CallbackServerContext* ctx,
                                                      const v1::SetQuotaRequest* req,
                                                      v1::Quota* resp) {
  return Unary(d_, ctx, req, resp, &ApiService::SetQuota, "SetQuota");
}
grpc::ServerUnaryReactor* TenantServiceImpl::GetQuota(grpc::CallbackServerContext* ctx,
                                                      const v1::GetQuotaRequest* req,
                                                      v1::Quota* resp) {
  return Unary(d_, ctx, req, resp, &ApiService::GetQuota, "GetQuota");
}
grpc::ServerUnaryReactor* TenantServiceImpl::ListQuotas(grpc::CallbackServerContext* ctx,
                                                        const v1::ListQuotasRequest* req,
                                                        v1::ListQuotasResponse* resp) {
  return Unary(d_, ctx, req, resp, &ApiService::ListQuotas, "ListQuotas");
}
grpc::ServerUnaryReactor* TenantServiceImpl::DeleteQuota(grpc::CallbackServerContext* ctx,
                                                         const v1::DeleteQuotaRequest* req,
                                                         v1::DeleteQuotaResponse* resp) {
  return Unary(d_, ctx, req, resp, &ApiService::DeleteQuota, "DeleteQuota");
}

// UsageService.
grpc::ServerUnaryReactor* UsageServiceImpl::GetUsage(grpc::CallbackServerContext* ctx,
                                                     const v1::GetUsageRequest* req,
                                                     v1::GetUsageResponse* resp) {
  return Unary(d_, ctx, req, resp, &ApiService::GetUsage, "GetUsage");
}

// ServiceService.
#define GPUPOOL_SERVICE_RPC(Name, Req, Resp)                                               \
  grpc::ServerUnaryReactor* ServiceServiceImpl::Name(grpc::CallbackServerContext* ctx,     \
                                                     const v1::Req* req, v1::Resp* resp) { \
    return Unary(d_, ctx, req, resp, &ApiService::Name, #Name);                            \
  }
GPUPOOL_SERVICE_RPC(CreateService, CreateServiceRequest, Service)
GPUPOOL_SERVICE_RPC(GetService, GetServiceRequest, Service)
GPUPOOL_SERVICE_RPC(ListServices, ListServicesRequest, ListServicesResponse)
GPUPOOL_SERVICE_RPC(UpdateService, UpdateServiceRequest, Service)
GPUPOOL_SERVICE_RPC(RollbackService, RollbackServiceRequest, Service)
GPUPOOL_SERVICE_RPC(DeleteService, DeleteServiceRequest, DeleteServiceResponse)
#undef GPUPOOL_SERVICE_RPC

// WhatIfService.
grpc::ServerUnaryReactor* WhatIfServiceImpl::Compare(grpc::CallbackServerContext* ctx,
                                                     const v1::CompareWhatIfRequest* req,
                                                     v1::CompareWhatIfResponse* resp) {
  return Unary(d_, ctx, req, resp, &ApiService::CompareWhatIf, "CompareWhatIf");
}

// AuditService.
grpc::ServerUnaryReactor* AuditServiceImpl::ListAuditRecords(grpc::CallbackServerContext* ctx,
                                                             const v1::ListAuditRecordsRequest* req,
                                                             v1::ListAuditRecordsResponse* resp) {
  return Unary(d_, ctx, req, resp, &ApiService::ListAuditRecords, "ListAuditRecords");
}

// KeyService.
grpc::ServerUnaryReactor* KeyServiceImpl::CreateApiKey(grpc::CallbackServerContext* ctx,
                                                       const v1::CreateApiKeyRequest* req,
                                                       v1::CreateApiKeyResponse* resp) {
  return Unary(d_, ctx, req, resp, &ApiService::CreateApiKey, "CreateApiKey");
}
grpc::ServerUnaryReactor* KeyServiceImpl::ListApiKeys(grpc::CallbackServerContext* ctx,
                                                      const v1::ListApiKeysRequest* req,
                                                      v1::ListApiKeysResponse* resp) {
  return Unary(d_, ctx, req, resp, &ApiService::ListApiKeys, "ListApiKeys");
}
grpc::ServerUnaryReactor* KeyServiceImpl::RevokeApiKey(grpc::CallbackServerContext* ctx,
                                                       const v1::RevokeApiKeyRequest* req,
                                                       v1::ApiKey* resp) {
  return Unary(d_, ctx, req, resp, &ApiService::RevokeApiKey, "RevokeApiKey");
}
grpc::ServerUnaryReactor* KeyServiceImpl::CreateRegistryCredential(
    grpc::CallbackServerContext* ctx, const v1::CreateRegistryCredentialRequest* req,
    v1::RegistryCredential* resp) {
  return Unary(d_, ctx, req, resp, &ApiService::CreateRegistryCredential,
               "CreateRegistryCredential");
}
grpc::ServerUnaryReactor* KeyServiceImpl::ListRegistryCredentials(
    grpc::CallbackServerContext* ctx, const v1::ListRegistryCredentialsRequest* req,
    v1::ListRegistryCredentialsResponse* resp) {
  return Unary(d_, ctx, req, resp, &ApiService::ListRegistryCredentials, "ListRegistryCredentials");
}
grpc::ServerUnaryReactor* KeyServiceImpl::DeleteRegistryCredential(
    grpc::CallbackServerContext* ctx, const v1::DeleteRegistryCredentialRequest* req,
    v1::DeleteRegistryCredentialResponse* resp) {
  return Unary(d_, ctx, req, resp, &ApiService::DeleteRegistryCredential,
               "DeleteRegistryCredential");
}

// WebhookService.
grpc::ServerUnaryReactor* WebhookServiceImpl::CreateWebhook(grpc::CallbackServerContext* ctx,
                                                            const v1::CreateWebhookRequest* req,
                                                            v1::CreateWebhookResponse* resp) {
  return Unary(d_, ctx, req, resp, &ApiService::CreateWebhook, "CreateWebhook");
}
grpc::ServerUnaryReactor* WebhookServiceImpl::ListWebhooks(grpc::CallbackServerContext* ctx,
                                                           const v1::ListWebhooksRequest* req,
                                                           v1::ListWebhooksResponse* resp) {
  return Unary(d_, ctx, req, resp, &ApiService::ListWebhooks, "ListWebhooks");
}
grpc::ServerUnaryReactor* WebhookServiceImpl::GetWebhook(grpc::CallbackServerContext* ctx,
                                                         const v1::GetWebhookRequest* req,
                                                         v1::GetWebhookResponse* resp) {
  return Unary(d_, ctx, req, resp, &ApiService::GetWebhook, "GetWebhook");
}
grpc::ServerUnaryReactor* WebhookServiceImpl::DeleteWebhook(grpc::CallbackServerContext* ctx,
                                                            const v1::DeleteWebhookRequest* req,
                                                            v1::DeleteWebhookResponse* resp) {
  return Unary(d_, ctx, req, resp, &ApiService::DeleteWebhook, "DeleteWebhook");
}
grpc::ServerUnaryReactor* WebhookServiceImpl::EnableWebhook(grpc::CallbackServerContext* ctx,
                                                            const v1::EnableWebhookRequest* req,
                                                            v1::Webhook* resp) {
  return Unary(d_, ctx, req, resp, &ApiService::EnableWebhook, "EnableWebhook");
}

// StreamTracker (declared in stream_writer.h).
void StreamTracker::Add(const std::shared_ptr<Abortable>& s) {
  {
    std::lock_guard lock(mu_);
    if (!closed_) {
      live_.insert(s);
      return;
    }
  }
  s->Abort(Status::Unavailable("the server is shutting down"));
}

void StreamTracker::Remove(const std::shared_ptr<Abortable>& s) {
  std::lock_guard lock(mu_);
  live_.erase(s);
}

void StreamTracker::AbortAll(const Status& status) {
  std::set<std::shared_ptr<Abortable>> live;
  {
    std::lock_guard lock(mu_);
    closed_ = true;
    live.swap(live_);
  }
  for (const auto& s : live) s->Abort(status);
}

// BillingService.
grpc::ServerUnaryReactor* BillingServiceImpl::CreatePricePlan(grpc::CallbackServerContext* ctx,
                                                              const v1::CreatePricePlanRequest* req,
                                                              v1::PricePlan* resp) {
  return Unary(d_, ctx, req, resp, &ApiService::CreatePricePlan, "CreatePricePlan");
}
grpc::ServerUnaryReactor* BillingServiceImpl::UpdatePricePlan(grpc::CallbackServerContext* ctx,
                                                              const v1::UpdatePricePlanRequest* req,
                                                              v1::PricePlan* resp) {
  return Unary(d_, ctx, req, resp, &ApiService::UpdatePricePlan, "UpdatePricePlan");
}
grpc::ServerUnaryReactor* BillingServiceImpl::ListPricePlans(grpc::CallbackServerContext* ctx,
                                                             const v1::ListPricePlansRequest* req,
                                                             v1::ListPricePlansResponse* resp) {
  return Unary(d_, ctx, req, resp, &ApiService::ListPricePlans, "ListPricePlans");
}
grpc::ServerUnaryReactor* BillingServiceImpl::ListInvoices(grpc::CallbackServerContext* ctx,
                                                           const v1::ListInvoicesRequest* req,
                                                           v1::ListInvoicesResponse* resp) {
  return Unary(d_, ctx, req, resp, &ApiService::ListInvoices, "ListInvoices");
}
grpc::ServerUnaryReactor* BillingServiceImpl::ExportInvoices(grpc::CallbackServerContext* ctx,
                                                             const v1::ListInvoicesRequest* req,
                                                             v1::ExportResponse* resp) {
  return Unary(d_, ctx, req, resp, &ApiService::ExportInvoices, "ExportInvoices");
}
grpc::ServerUnaryReactor* BillingServiceImpl::GetUsageFeed(grpc::CallbackServerContext* ctx,
                                                           const v1::GetUsageFeedRequest* req,
                                                           v1::GetUsageFeedResponse* resp) {
  return Unary(d_, ctx, req, resp, &ApiService::GetUsageFeed, "GetUsageFeed");
}
grpc::ServerUnaryReactor* BillingServiceImpl::ExportUsageFeed(grpc::CallbackServerContext* ctx,
                                                              const v1::GetUsageFeedRequest* req,
                                                              v1::ExportResponse* resp) {
  return Unary(d_, ctx, req, resp, &ApiService::ExportUsageFeed, "ExportUsageFeed");
}
grpc::ServerUnaryReactor* BillingServiceImpl::SetBudget(grpc::CallbackServerContext* ctx,
                                                        const v1::SetBudgetRequest* req,
                                                        v1::Budget* resp) {
  return Unary(d_, ctx, req, resp, &ApiService::SetBudget, "SetBudget");
}
grpc::ServerUnaryReactor* BillingServiceImpl::ListBudgets(grpc::CallbackServerContext* ctx,
                                                          const v1::ListBudgetsRequest* req,
                                                          v1::ListBudgetsResponse* resp) {
  return Unary(d_, ctx, req, resp, &ApiService::ListBudgets, "ListBudgets");
}
grpc::ServerUnaryReactor* BillingServiceImpl::DeleteBudget(grpc::CallbackServerContext* ctx,
                                                           const v1::DeleteBudgetRequest* req,
                                                           v1::DeleteBudgetResponse* resp) {
  return Unary(d_, ctx, req, resp, &ApiService::DeleteBudget, "DeleteBudget");
}

}  // namespace gpupool::api::grpcface
