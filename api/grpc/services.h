// The gRPC face of ApiService: JobService, PoolService, NodeService, CatalogService,
// TenantService and AuditService on gRPC's callback API. Each handler takes the same five steps,
// written once in services.cc:
//   1. check      — authenticate the `authorization` metadata (Authenticator), and refuse a
//                   mutating verb while the audit log cannot be written (api/audit.h);
//   2. convert in — the request message is ApiService's own type: nothing to translate;
//   3. call       — the ApiService method;
//   4. convert out — move the reply into gRPC's response message;
//   5. finish     — with the Status converted in api/status_convert, once the call's audit
//                   record (mutating verbs and denials) is durable.
// Every call carries an x-request-id (the caller's, or one made up and sent back as initial
// metadata) that the audit record keeps.
// Validation and permission checks belong to the ApiService, so the REST face gets the same.
//
// Thread safety: handlers run on gRPC's threads; ApiService replies arrive on any thread.
#pragma once

#include "api/audit.h"
#include "api/auth.h"
#include "api/grpc/stream_writer.h"
#include "api/service.h"
#include "gpupool/v1/audit.grpc.pb.h"
#include "gpupool/v1/billing.grpc.pb.h"
#include "gpupool/v1/jobs.grpc.pb.h"
#include "gpupool/v1/keys.grpc.pb.h"
#include "gpupool/v1/pools.grpc.pb.h"
#include "gpupool/v1/services.grpc.pb.h"
#include "gpupool/v1/tenants.grpc.pb.h"
#include "gpupool/v1/usage.grpc.pb.h"
#include "gpupool/v1/webhooks.grpc.pb.h"
#include "gpupool/v1/whatif.grpc.pb.h"

namespace gpupool::api::grpcface {

// What every handler needs; owned by GrpcServer and outliving the services.
struct Deps {
  ApiService* service;
  const Authenticator* auth;
  StreamTracker* streams;
  const AuditHook* audit;  // never null; a hook without a sink records nothing
};

class JobServiceImpl final : public v1::JobService::CallbackService {
 public:
  explicit JobServiceImpl(Deps deps) : d_(deps) {}

  grpc::ServerUnaryReactor* SubmitJob(grpc::CallbackServerContext* ctx,
                                      const v1::SubmitJobRequest* req,
                                      v1::SubmitJobResponse* resp) override;
  grpc::ServerUnaryReactor* GetJob(grpc::CallbackServerContext* ctx, const v1::GetJobRequest* req,
                                   v1::Job* resp) override;
  grpc::ServerUnaryReactor* ListJobs(grpc::CallbackServerContext* ctx,
                                     const v1::ListJobsRequest* req,
                                     v1::ListJobsResponse* resp) override;
  grpc::ServerUnaryReactor* CancelJob(grpc::CallbackServerContext* ctx,
                                      const v1::CancelJobRequest* req, v1::Job* resp) override;
  grpc::ServerWriteReactor<v1::JobEvent>* WatchJob(grpc::CallbackServerContext* ctx,
                                                   const v1::WatchJobRequest* req) override;
  grpc::ServerWriteReactor<v1::TaskLogChunk>* GetTaskLogs(
      grpc::CallbackServerContext* ctx, const v1::GetTaskLogsRequest* req) override;

 private:
  Deps d_;
};

class PoolServiceImpl final : public v1::PoolService::CallbackService {
 public:
  explicit PoolServiceImpl(Deps deps) : d_(deps) {}

  grpc::ServerUnaryReactor* CreatePool(grpc::CallbackServerContext* ctx,
                                       const v1::CreatePoolRequest* req, v1::Pool* resp) override;
  grpc::ServerUnaryReactor* GetPool(grpc::CallbackServerContext* ctx, const v1::GetPoolRequest* req,
                                    v1::Pool* resp) override;
  grpc::ServerUnaryReactor* ListPools(grpc::CallbackServerContext* ctx,
                                      const v1::ListPoolsRequest* req,
                                      v1::ListPoolsResponse* resp) override;
  grpc::ServerUnaryReactor* UpdatePool(grpc::CallbackServerContext* ctx,
                                       const v1::UpdatePoolRequest* req, v1::Pool* resp) override;
  grpc::ServerUnaryReactor* DeletePool(grpc::CallbackServerContext* ctx,
                                       const v1::DeletePoolRequest* req,
                                       v1::DeletePoolResponse* resp) override;

 private:
  Deps d_;
};

class NodeServiceImpl final : public v1::NodeService::CallbackService {
 public:
  explicit NodeServiceImpl(Deps deps) : d_(deps) {}

  grpc::ServerUnaryReactor* ListNodes(grpc::CallbackServerContext* ctx,
                                      const v1::ListNodesRequest* req,
                                      v1::ListNodesResponse* resp) override;
  grpc::ServerUnaryReactor* GetNode(grpc::CallbackServerContext* ctx, const v1::GetNodeRequest* req,
                                    v1::Node* resp) override;
  grpc::ServerUnaryReactor* CordonNode(grpc::CallbackServerContext* ctx,
                                       const v1::NodeActionRequest* req, v1::Node* resp) override;
  grpc::ServerUnaryReactor* UncordonNode(grpc::CallbackServerContext* ctx,
                                         const v1::NodeActionRequest* req, v1::Node* resp) override;
  grpc::ServerUnaryReactor* DrainNode(grpc::CallbackServerContext* ctx,
                                      const v1::NodeActionRequest* req, v1::Node* resp) override;
  grpc::ServerUnaryReactor* SetDeviceSlots(grpc::CallbackServerContext* ctx,
                                           const v1::SetDeviceSlotsRequest* req,
                                           v1::Node* resp) override;
  grpc::ServerUnaryReactor* SetMigLayout(grpc::CallbackServerContext* ctx,
                                         const v1::SetMigLayoutRequest* req,
                                         v1::Node* resp) override;
  grpc::ServerUnaryReactor* ClearDeviceFault(grpc::CallbackServerContext* ctx,
                                             const v1::ClearDeviceFaultRequest* req,
                                             v1::Node* resp) override;
  grpc::ServerUnaryReactor* FenceNode(grpc::CallbackServerContext* ctx,
                                      const v1::NodeActionRequest* req, v1::Node* resp) override;

 private:
  Deps d_;
};

class CatalogServiceImpl final : public v1::CatalogService::CallbackService {
 public:
  explicit CatalogServiceImpl(Deps deps) : d_(deps) {}

  grpc::ServerUnaryReactor* ListGpuModels(grpc::CallbackServerContext* ctx,
                                          const v1::ListGpuModelsRequest* req,
                                          v1::ListGpuModelsResponse* resp) override;
  grpc::ServerUnaryReactor* ListPriorityClasses(grpc::CallbackServerContext* ctx,
                                                const v1::ListPriorityClassesRequest* req,
                                                v1::ListPriorityClassesResponse* resp) override;
  grpc::ServerUnaryReactor* ListSkus(grpc::CallbackServerContext* ctx,
                                     const v1::ListSkusRequest* req,
                                     v1::ListSkusResponse* resp) override;

 private:
  Deps d_;
};

class TenantServiceImpl final : public v1::TenantService::CallbackService {
 public:
  explicit TenantServiceImpl(Deps deps) : d_(deps) {}

  grpc::ServerUnaryReactor* CreateTenant(grpc::CallbackServerContext* ctx,
                                         const v1::CreateTenantRequest* req,
                                         v1::Tenant* resp) override;
  grpc::ServerUnaryReactor* GetTenant(grpc::CallbackServerContext* ctx,
                                      const v1::GetTenantRequest* req, v1::Tenant* resp) override;
  grpc::ServerUnaryReactor* ListTenants(grpc::CallbackServerContext* ctx,
                                        const v1::ListTenantsRequest* req,
                                        v1::ListTenantsResponse* resp) override;
  grpc::ServerUnaryReactor* DeleteTenant(grpc::CallbackServerContext* ctx,
                                         const v1::DeleteTenantRequest* req,
                                         v1::DeleteTenantResponse* resp) override;
  grpc::ServerUnaryReactor* SetQuota(grpc::CallbackServerContext* ctx,
                                     const v1::SetQuotaRequest* req, v1::Quota* resp) override;
  grpc::ServerUnaryReactor* GetQuota(grpc::CallbackServerContext* ctx,
                                     const v1::GetQuotaRequest* req, v1::Quota* resp) override;
  grpc::ServerUnaryReactor* ListQuotas(grpc::CallbackServerContext* ctx,
                                       const v1::ListQuotasRequest* req,
                                       v1::ListQuotasResponse* resp) override;
  grpc::ServerUnaryReactor* DeleteQuota(grpc::CallbackServerContext* ctx,
                                        const v1::DeleteQuotaRequest* req,
                                        v1::DeleteQuotaResponse* resp) override;

 private:
  Deps d_;
};

class AuditServiceImpl final : public v1::AuditService::CallbackService {
 public:
  explicit AuditServiceImpl(Deps deps) : d_(deps) {}

  grpc::ServerUnaryReactor* ListAuditRecords(grpc::CallbackServerContext* ctx,
                                             const v1::ListAuditRecordsRequest* req,
                                             v1::ListAuditRecordsResponse* resp) override;

 private:
  Deps d_;
};

class UsageServiceImpl final : public v1::UsageService::CallbackService {
 public:
  explicit UsageServiceImpl(Deps deps) : d_(deps) {}

  grpc::ServerUnaryReactor* GetUsage(grpc::CallbackServerContext* ctx,
                                     const v1::GetUsageRequest* req,
                                     v1::GetUsageResponse* resp) override;

 private:
  Deps d_;
};

class WhatIfServiceImpl final : public v1::WhatIfService::CallbackService {
 public:
  explicit WhatIfServiceImpl(Deps deps) : d_(deps) {}

  grpc::ServerUnaryReactor* Compare(grpc::CallbackServerContext* ctx,
                                    const v1::CompareWhatIfRequest* req,
                                    v1::CompareWhatIfResponse* resp) override;

 private:
  Deps d_;
};

class ServiceServiceImpl final : public v1::ServiceService::CallbackService {
 public:
  explicit ServiceServiceImpl(Deps deps) : d_(deps) {}

  grpc::ServerUnaryReactor* CreateService(grpc::CallbackServerContext* ctx,
                                          const v1::CreateServiceRequest* req,
                                          v1::Service* resp) override;
  grpc::ServerUnaryReactor* GetService(grpc::CallbackServerContext* ctx,
                                       const v1::GetServiceRequest* req,
                                       v1::Service* resp) override;
  grpc::ServerUnaryReactor* ListServices(grpc::CallbackServerContext* ctx,
                                         const v1::ListServicesRequest* req,
                                         v1::ListServicesResponse* resp) override;
  grpc::ServerUnaryReactor* UpdateService(grpc::CallbackServerContext* ctx,
                                          const v1::UpdateServiceRequest* req,
                                          v1::Service* resp) override;
  grpc::ServerUnaryReactor* RollbackService(grpc::CallbackServerContext* ctx,
                                            const v1::RollbackServiceRequest* req,
                                            v1::Service* resp) override;
  grpc::ServerUnaryReactor* DeleteService(grpc::CallbackServerContext* ctx,
                                          const v1::DeleteServiceRequest* req,
                                          v1::DeleteServiceResponse* resp) override;

 private:
  Deps d_;
};

class KeyServiceImpl final : public v1::KeyService::CallbackService {
 public:
  explicit KeyServiceImpl(Deps deps) : d_(deps) {}

  grpc::ServerUnaryReactor* CreateApiKey(grpc::CallbackServerContext* ctx,
                                         const v1::CreateApiKeyRequest* req,
                                         v1::CreateApiKeyResponse* resp) override;
  grpc::ServerUnaryReactor* ListApiKeys(grpc::CallbackServerContext* ctx,
                                        const v1::ListApiKeysRequest* req,
                                        v1::ListApiKeysResponse* resp) override;
  grpc::ServerUnaryReactor* RevokeApiKey(grpc::CallbackServerContext* ctx,
                                         const v1::RevokeApiKeyRequest* req,
                                         v1::ApiKey* resp) override;
  grpc::ServerUnaryReactor* CreateRegistryCredential(grpc::CallbackServerContext* ctx,
                                                     const v1::CreateRegistryCredentialRequest* req,
                                                     v1::RegistryCredential* resp) override;
  grpc::ServerUnaryReactor* ListRegistryCredentials(
      grpc::CallbackServerContext* ctx, const v1::ListRegistryCredentialsRequest* req,
      v1::ListRegistryCredentialsResponse* resp) override;
  grpc::ServerUnaryReactor* DeleteRegistryCredential(
      grpc::CallbackServerContext* ctx, const v1::DeleteRegistryCredentialRequest* req,
      v1::DeleteRegistryCredentialResponse* resp) override;

 private:
  Deps d_;
};

class WebhookServiceImpl final : public v1::WebhookService::CallbackService {
 public:
  explicit WebhookServiceImpl(Deps deps) : d_(deps) {}

  grpc::ServerUnaryReactor* CreateWebhook(grpc::CallbackServerContext* ctx,
                                          const v1::CreateWebhookRequest* req,
                                          v1::CreateWebhookResponse* resp) override;
  grpc::ServerUnaryReactor* ListWebhooks(grpc::CallbackServerContext* ctx,
                                         const v1::ListWebhooksRequest* req,
                                         v1::ListWebhooksResponse* resp) override;
  grpc::ServerUnaryReactor* GetWebhook(grpc::CallbackServerContext* ctx,
                                       const v1::GetWebhookRequest* req,
                                       v1::GetWebhookResponse* resp) override;
  grpc::ServerUnaryReactor* DeleteWebhook(grpc::CallbackServerContext* ctx,
                                          const v1::DeleteWebhookRequest* req,
                                          v1::DeleteWebhookResponse* resp) override;
  grpc::ServerUnaryReactor* EnableWebhook(grpc::CallbackServerContext* ctx,
                                          const v1::EnableWebhookRequest* req,
                                          v1::Webhook* resp) override;

 private:
  Deps d_;
};

class BillingServiceImpl final : public v1::BillingService::CallbackService {
 public:
  explicit BillingServiceImpl(Deps deps) : d_(deps) {}

  grpc::ServerUnaryReactor* CreatePricePlan(grpc::CallbackServerContext* ctx,
                                            const v1::CreatePricePlanRequest* req,
                                            v1::PricePlan* resp) override;
  grpc::ServerUnaryReactor* UpdatePricePlan(grpc::CallbackServerContext* ctx,
                                            const v1::UpdatePricePlanRequest* req,
                                            v1::PricePlan* resp) override;
  grpc::ServerUnaryReactor* ListPricePlans(grpc::CallbackServerContext* ctx,
                                           const v1::ListPricePlansRequest* req,
                                           v1::ListPricePlansResponse* resp) override;
  grpc::ServerUnaryReactor* ListInvoices(grpc::CallbackServerContext* ctx,
                                         const v1::ListInvoicesRequest* req,
                                         v1::ListInvoicesResponse* resp) override;
  grpc::ServerUnaryReactor* ExportInvoices(grpc::CallbackServerContext* ctx,
                                           const v1::ListInvoicesRequest* req,
                                           v1::ExportResponse* resp) override;
  grpc::ServerUnaryReactor* GetUsageFeed(grpc::CallbackServerContext* ctx,
                                         const v1::GetUsageFeedRequest* req,
                                         v1::GetUsageFeedResponse* resp) override;
  grpc::ServerUnaryReactor* ExportUsageFeed(grpc::CallbackServerContext* ctx,
                                            const v1::GetUsageFeedRequest* req,
                                            v1::ExportResponse* resp) override;
  grpc::ServerUnaryReactor* SetBudget(grpc::CallbackServerContext* ctx,
                                      const v1::SetBudgetRequest* req, v1::Budget* resp) override;
  grpc::ServerUnaryReactor* ListBudgets(grpc::CallbackServerContext* ctx,
                                        const v1::ListBudgetsRequest* req,
                                        v1::ListBudgetsResponse* resp) override;
  grpc::ServerUnaryReactor* DeleteBudget(grpc::CallbackServerContext* ctx,
                                         const v1::DeleteBudgetRequest* req,
                                         v1::DeleteBudgetResponse* resp) override;

 private:
  Deps d_;
};

}  // namespace gpupool::api::grpcface
