// MetricsInterceptorFactory: request metrics for every RPC the gRPC server handles — the API
// services and any extra service registered beside them — in one interceptor, not in handlers.
//
//   gpupool_grpc_requests_total{method,code}          counter; code is the gRPC code name
//   gpupool_grpc_request_duration_seconds{method}     histogram, from the call's arrival to its
//                                                     status (a stream's whole life)
//
// `method` is the full gRPC path ("/gpupool.v1.JobService/SubmitJob") when the method is one of
// the linked-in protobuf services, else "unknown", so clients cannot grow the label set.
//
// Thread safety: interceptors are created per call on gRPC threads; prometheus-cpp is thread-safe.
#pragma once

#include <grpcpp/support/server_interceptor.h>

#include <memory>

namespace prometheus {
class Registry;
}

namespace gpupool::api::grpcface {

struct GrpcMetrics;

class MetricsInterceptorFactory final
    : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  explicit MetricsInterceptorFactory(prometheus::Registry& registry);
  ~MetricsInterceptorFactory() override;

  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override;

 private:
  std::shared_ptr<GrpcMetrics> metrics_;
};

}  // namespace gpupool::api::grpcface
