#include "api/grpc/metrics_interceptor.h"

#include <google/protobuf/descriptor.h>
#include <prometheus/counter.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <chrono>
#include <string>
#include <string_view>

#include "api/status_convert.h"

namespace gpupool::api::grpcface {

struct GrpcMetrics {
  prometheus::Family<prometheus::Counter>* requests;
  prometheus::Family<prometheus::Histogram>* duration;
};

namespace {

const prometheus::Histogram::BucketBoundaries& LatencyBuckets() {
  static const prometheus::Histogram::BucketBoundaries kBuckets = {
      0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
  return kBuckets;
}

// "/pkg.Service/Method" when the generated pool knows the method, else "unknown".
std::string MethodLabel(const char* method) {
  if (method == nullptr) return "unknown";
  std::string_view path(method);
  if (path.size() < 4 || path.front() != '/') return "unknown";
  const std::string_view full = path.substr(1);  // "pkg.Service/Method"
  const size_t slash = full.find('/');
  if (slash == std::string_view::npos) return "unknown";
  // Look the service up first: the generated pool loads files lazily by top-level symbol.
  const auto* service = google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(
      std::string(full.substr(0, slash)));
  if (service == nullptr ||
      service->FindMethodByName(std::string(full.substr(slash + 1))) == nullptr) {
    return "unknown";
  }
  return std::string(path);
}

class MetricsInterceptor final : public grpc::experimental::Interceptor {
 public:
  MetricsInterceptor(std::shared_ptr<GrpcMetrics> metrics, std::string method)
      : metrics_(std::move(metrics)),
        method_(std::move(method)),
        start_(std::chrono::steady_clock::now()) {}

  // A call that never sent a status (torn down mid-flight) counts as CANCELLED.
  ~MetricsInterceptor() override {
    if (!recorded_) Record(StatusCode::kCancelled);
  }

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::PRE_SEND_STATUS)) {
      Record(FromGrpcStatus(methods->GetSendStatus()).code());
    }
    methods->Proceed();
  }

 private:
  void Record(StatusCode code) {
    recorded_ = true;
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    metrics_->requests->Add({{"method", method_}, {"code", std::string(StatusCodeName(code))}})
        .Increment();
    metrics_->duration->Add({{"method", method_}}, LatencyBuckets()).Observe(seconds);
  }

  std::shared_ptr<GrpcMetrics> metrics_;
  std::string method_;
  std::chrono::steady_clock::time_point start_;
  bool recorded_ = false;
};

}  // namespace

MetricsInterceptorFactory::MetricsInterceptorFactory(prometheus::Registry& registry)
    : metrics_(std::make_shared<GrpcMetrics>()) {
  metrics_->requests = &prometheus::BuildCounter()
                            .Name("gpupool_grpc_requests_total")
                            .Help("gRPC requests handled, by method and gRPC status code.")
                            .Register(registry);
  metrics_->duration = &prometheus::BuildHistogram()
                            .Name("gpupool_grpc_request_duration_seconds")
                            .Help("Time from a gRPC call's arrival to its status, by method.")
                            .Register(registry);
}

MetricsInterceptorFactory::~MetricsInterceptorFactory() = default;

grpc::experimental::Interceptor* MetricsInterceptorFactory::CreateServerInterceptor(
    grpc::experimental::ServerRpcInfo* info) {
  return new MetricsInterceptor(metrics_, MethodLabel(info->method()));
}

}  // namespace gpupool::api::grpcface
