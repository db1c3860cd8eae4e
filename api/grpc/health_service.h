// HealthService: the standard gRPC health protocol (grpc.health.v1.Health) over ApiService::Ready,
// so Kubernetes gRPC probes, load balancers and grpc-health-probe see what /readyz says.
//
// Check("") and Check of any gpupool API service answer SERVING when the daemon is ready (a
// submission would commit) and NOT_SERVING otherwise; any other service name is NOT_FOUND, as the
// protocol asks. Watch is UNIMPLEMENTED. No credential is needed: the answer reveals no more than
// /readyz does.
//
// Thread safety: Check runs on gRPC's threads; the ApiService must outlive the service.
#pragma once

#include <set>
#include <string>

#include "api/service.h"
#include "grpc/health/v1/health.grpc.pb.h"

namespace gpupool::api::grpcface {

class HealthService final : public grpc::health::v1::Health::CallbackService {
 public:
  explicit HealthService(const ApiService& service);

  grpc::ServerUnaryReactor* Check(grpc::CallbackServerContext* ctx,
                                  const grpc::health::v1::HealthCheckRequest* req,
                                  grpc::health::v1::HealthCheckResponse* resp) override;
  grpc::ServerWriteReactor<grpc::health::v1::HealthCheckResponse>* Watch(
      grpc::CallbackServerContext* ctx, const grpc::health::v1::HealthCheckRequest* req) override;

 private:
  const ApiService& service_;
  const std::set<std::string> known_;  // the fully-qualified names of gpupool's services
};

}  // namespace gpupool::api::grpcface
