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

template <typename Req, typename Resp>
grpc::ServerUnaryReactor* Unary(const Deps& d, grpc::CallbackServerContext* ctx, const Req* req,
                                Resp* resp, UnaryMethod<Req, Resp> method) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  Result<CallContext> caller = Authenticate(d, ctx);  // 1. check
  if (!caller.ok()) {
    reactor->Finish(ToGrpcStatus(caller.status()));
    return reactor;
  }
  // 2. convert in: `*req` is already the ApiService's request type. gRPC keeps `req`, `resp`
  // and the reactor alive until Finish, which only the reply below calls.
  (d.service->*method)(*caller, *req, [reactor, resp](Status status, Resp reply) {  // 3. call
    if (status.ok()) *resp = std::move(reply);  // 4. convert out
    reactor->Finish(ToGrpcStatus(status));      // 5. finish
  });
  return reactor;
}

template <typename Req, typename Item>
grpc::ServerWriteReactor<Item>* Stream(const Deps& d, grpc::CallbackServerContext* ctx,
                                       const Req* req, StreamMethod<Req, Item> method) {
  auto [reactor, writer] = StreamWriter<Item>::Create(d.streams);
  Result<CallContext> caller = Authenticate(d, ctx);  // 1. check
  if (!caller.ok()) {
    writer->Done(caller.status());
    return reactor;
  }
  // 2. convert in: nothing to do. 3. call; 4 and 5 happen in the writer as items and the final
  // status arrive.
  Cancel cancel = (d.service->*method)(
      *caller, *req, [writer](const Item& item) { writer->Push(item); },
      [writer](Status status) { writer->Done(status); });
  writer->SetUpstreamCancel(std::move(cancel));
  return reactor;
}

}  // namespace

// JobService.
grpc::ServerUnaryReactor* JobServiceImpl::SubmitJob(grpc::CallbackServerContext* ctx,
                                                    const v1::SubmitJobRequest* req,
                                                    v1::SubmitJobResponse* resp) {
  return Unary(d_, ctx, req, resp, &ApiService::SubmitJob);
}
grpc::ServerUnaryReactor* JobServiceImpl::GetJob(grpc::CallbackServerContext* ctx,
                                                 const v1::GetJobRequest* req, v1::Job* resp) {
  return Unary(d_, ctx, req, resp, &ApiService::GetJob);
}
grpc::ServerUnaryReactor* JobServiceImpl::ListJobs(grpc::CallbackServerContext* ctx,
                                                   const v1::ListJobsRequest* req,
                                                   v1::ListJobsResponse* resp) {
  return Unary(d_, ctx, req, resp, &ApiService::ListJobs);
}
grpc::ServerUnaryReactor* JobServiceImpl::CancelJob(grpc::CallbackServerContext* ctx,
                                                    const v1::CancelJobRequest* req,
                                                    v1::Job* resp) {
  return Unary(d_, ctx, req, resp, &ApiService::CancelJob);
}
grpc::ServerWriteReactor<v1::JobEvent>* JobServiceImpl::WatchJob(grpc::CallbackServerContext* ctx,
                                                                 const v1::WatchJobRequest* req) {
  return Stream(d_, ctx, req, &ApiService::WatchJob);
}
grpc::ServerWriteReactor<v1::TaskLogChunk>* JobServiceImpl::GetTaskLogs(
    grpc::CallbackServerContext* ctx, const v1::GetTaskLogsRequest* req) {
  return Stream(d_, ctx, req, &ApiService::GetTaskLogs);
}

// PoolService.
grpc::ServerUnaryReactor* PoolServiceImpl::CreatePool(grpc::CallbackServerContext* ctx,
                                                      const v1::CreatePoolRequest* req,
                                                      v1::Pool* resp) {
  return Unary(d_, ctx, req, resp, &ApiService::CreatePool);
}
grpc::ServerUnaryReactor* PoolServiceImpl::GetPool(grpc::CallbackServerContext* ctx,
                                                   const v1::GetPoolRequest* req, v1::Pool* resp) {
  return Unary(d_, ctx, req, resp, &ApiService::GetPool);
}
grpc::ServerUnaryReactor* PoolServiceImpl::ListPools(grpc::CallbackServerContext* ctx,
                                                     const v1::ListPoolsRequest* req,
                                                     v1::ListPoolsResponse* resp) {
  return Unary(d_, ctx, req, resp, &ApiService::ListPools);
}
grpc::ServerUnaryReactor* PoolServiceImpl::UpdatePool(grpc::CallbackServerContext* ctx,
                                                      const v1::UpdatePoolRequest* req,
                                                      v1::Pool* resp) {
  return Unary(d_, ctx, req, resp, &ApiService::UpdatePool);
}
grpc::ServerUnaryReactor* PoolServiceImpl::DeletePool(grpc::CallbackServerContext* ctx,
                                                      const v1::DeletePoolRequest* req,
                                                      v1::DeletePoolResponse* resp) {
  return Unary(d_, ctx, req, resp, &ApiService::DeletePool);
}

// NodeService.
grpc::ServerUnaryReactor* NodeServiceImpl::ListNodes(grpc::CallbackServerContext* ctx,
                                                     const v1::ListNodesRequest* req,
                                                     v1::ListNodesResponse* resp) {
  return Unary(d_, ctx, req, resp, &ApiService::ListNodes);
}
grpc::ServerUnaryReactor* NodeServiceImpl::GetNode(grpc::CallbackServerContext* ctx,
                                                   const v1::GetNodeRequest* req, v1::Node* resp) {
  return Unary(d_, ctx, req, resp, &ApiService::GetNode);
}
grpc::ServerUnaryReactor* NodeServiceImpl::CordonNode(grpc::CallbackServerContext* ctx,
                                                      const v1::NodeActionRequest* req,
                                                      v1::Node* resp) {
  return Unary(d_, ctx, req, resp, &ApiService::CordonNode);
}
grpc::ServerUnaryReactor* NodeServiceImpl::UncordonNode(grpc::CallbackServerContext* ctx,
                                                        const v1::NodeActionRequest* req,
                                                        v1::Node* resp) {
  return Unary(d_, ctx, req, resp, &ApiService::UncordonNode);
}
grpc::ServerUnaryReactor* NodeServiceImpl::DrainNode(grpc::CallbackServerContext* ctx,
                                                     const v1::NodeActionRequest* req,
                                                     v1::Node* resp) {
  return Unary(d_, ctx, req, resp, &ApiService::DrainNode);
}
grpc::ServerUnaryReactor* NodeServiceImpl::ClearDeviceFault(grpc::CallbackServerContext* ctx,
                                                            const v1::ClearDeviceFaultRequest* req,
                                                            v1::Node* resp) {
  return Unary(d_, ctx, req, resp, &ApiService::ClearDeviceFault);
}

// CatalogService.
grpc::ServerUnaryReactor* CatalogServiceImpl::ListGpuModels(grpc::CallbackServerContext* ctx,
                                                            const v1::ListGpuModelsRequest* req,
                                                            v1::ListGpuModelsResponse* resp) {
  return Unary(d_, ctx, req, resp, &ApiService::ListGpuModels);
}

// TenantService.
grpc::ServerUnaryReactor* TenantServiceImpl::CreateTenant(grpc::CallbackServerContext* ctx,
                                                          const v1::CreateTenantRequest* req,
                                                          v1::Tenant* resp) {
  return Unary(d_, ctx, req, resp, &ApiService::CreateTenant);
}
grpc::ServerUnaryReactor* TenantServiceImpl::GetTenant(grpc::CallbackServerContext* ctx,
                                                       const v1::GetTenantRequest* req,
                                                       v1::Tenant* resp) {
  return Unary(d_, ctx, req, resp, &ApiService::GetTenant);
}
grpc::ServerUnaryReactor* TenantServiceImpl::ListTenants(grpc::CallbackServerContext* ctx,
                                                         const v1::ListTenantsRequest* req,
                                                         v1::ListTenantsResponse* resp) {
  return Unary(d_, ctx, req, resp, &ApiService::ListTenants);
}
grpc::ServerUnaryReactor* TenantServiceImpl::DeleteTenant(grpc::CallbackServerContext* ctx,
                                                          const v1::DeleteTenantRequest* req,
                                                          v1::DeleteTenantResponse* resp) {
  return Unary(d_, ctx, req, resp, &ApiService::DeleteTenant);
}
grpc::ServerUnaryReactor* TenantServiceImpl::SetQuota(grpc::CallbackServerContext* ctx,
                                                      const v1::SetQuotaRequest* req,
                                                      v1::Quota* resp) {
  return Unary(d_, ctx, req, resp, &ApiService::SetQuota);
}
grpc::ServerUnaryReactor* TenantServiceImpl::GetQuota(grpc::CallbackServerContext* ctx,
                                                      const v1::GetQuotaRequest* req,
                                                      v1::Quota* resp) {
  return Unary(d_, ctx, req, resp, &ApiService::GetQuota);
}
grpc::ServerUnaryReactor* TenantServiceImpl::ListQuotas(grpc::CallbackServerContext* ctx,
                                                        const v1::ListQuotasRequest* req,
                                                        v1::ListQuotasResponse* resp) {
  return Unary(d_, ctx, req, resp, &ApiService::ListQuotas);
}
grpc::ServerUnaryReactor* TenantServiceImpl::DeleteQuota(grpc::CallbackServerContext* ctx,
                                                         const v1::DeleteQuotaRequest* req,
                                                         v1::DeleteQuotaResponse* resp) {
  return Unary(d_, ctx, req, resp, &ApiService::DeleteQuota);
}

// KeyService.
grpc::ServerUnaryReactor* KeyServiceImpl::CreateApiKey(grpc::CallbackServerContext* ctx,
                                                       const v1::CreateApiKeyRequest* req,
                                                       v1::CreateApiKeyResponse* resp) {
  return Unary(d_, ctx, req, resp, &ApiService::CreateApiKey);
}
grpc::ServerUnaryReactor* KeyServiceImpl::ListApiKeys(grpc::CallbackServerContext* ctx,
                                                      const v1::ListApiKeysRequest* req,
                                                      v1::ListApiKeysResponse* resp) {
  return Unary(d_, ctx, req, resp, &ApiService::ListApiKeys);
}
grpc::ServerUnaryReactor* KeyServiceImpl::RevokeApiKey(grpc::CallbackServerContext* ctx,
                                                       const v1::RevokeApiKeyRequest* req,
                                                       v1::ApiKey* resp) {
  return Unary(d_, ctx, req, resp, &ApiService::RevokeApiKey);
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

}  // namespace gpupool::api::grpcface
