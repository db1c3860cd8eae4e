#include "api/grpc/health_service.h"

#include <grpcpp/grpcpp.h>

#include "gpupool/v1/jobs.grpc.pb.h"
#include "gpupool/v1/pools.grpc.pb.h"
#include "gpupool/v1/tenants.grpc.pb.h"

namespace gpupool::api::grpcface {
namespace {

using grpc::health::v1::HealthCheckResponse;

// Answers at once and finishes; nothing to stream.
class Refusal final : public grpc::ServerWriteReactor<HealthCheckResponse> {
 public:
  Refusal() {
    Finish(grpc::Status(grpc::StatusCode::UNIMPLEMENTED,
                        "grpc.health.v1.Health/Watch is not offered; call Check"));
  }
  void OnDone() override { delete this; }
};

}  // namespace

HealthService::HealthService(const ApiService& service)
    : service_(service),
      known_{"",
             v1::JobService::service_full_name(),
             v1::PoolService::service_full_name(),
             v1::NodeService::service_full_name(),
             v1::CatalogService::service_full_name(),
             v1::TenantService::service_full_name()} {}

grpc::ServerUnaryReactor* HealthService::Check(grpc::CallbackServerContext* ctx,
                                               const grpc::health::v1::HealthCheckRequest* req,
                                               HealthCheckResponse* resp) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  if (known_.count(req->service()) == 0) {
    reactor->Finish(grpc::Status(grpc::StatusCode::NOT_FOUND,
                                 "service '" + req->service() + "' is not served here"));
    return reactor;
  }
  resp->set_status(service_.Ready().ok() ? HealthCheckResponse::SERVING
                                         : HealthCheckResponse::NOT_SERVING);
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerWriteReactor<HealthCheckResponse>* HealthService::Watch(
    grpc::CallbackServerContext*, const grpc::health::v1::HealthCheckRequest*) {
  return new Refusal();
}

}  // namespace gpupool::api::grpcface
