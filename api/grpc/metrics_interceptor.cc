#include "api/grpc/metrics_interceptor.h"

#include <google/protobuf/descriptor.h>
#include <prometheus/counter.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <array>
#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

#include "api/status_convert.h"

namespace gpupool::api::grpcface {

namespace {
constexpr size_t kStatusCodes = 17;  // gRPC's codes 0..16
}  // namespace

// What one method records into: its histogram, and one counter per status code, made on first
// use. Found once per call by the method's path, so a call costs no label-set construction.
struct MethodMetrics {
  std::string label;
  prometheus::Family<prometheus::Counter>* requests = nullptr;
  prometheus::Histogram* duration = nullptr;
  std::array<std::atomic<prometheus::Counter*>, kStatusCodes> by_code{};

  prometheus::Counter& Requests(StatusCode code) {
    auto i = static_cast<size_t>(code);
    if (i >= kStatusCodes) i = static_cast<size_t>(StatusCode::kUnknown);
    prometheus::Counter* c = by_code[i].load(std::memory_order_acquire);
    if (c == nullptr) {  // Family::Add returns the same counter to racing callers
      c = &requests->Add({{"method", label}, {"code", std::string(StatusCodeName(code))}});
      by_code[i].store(c, std::memory_order_release);
    }
    return *c;
  }
};

struct GrpcMetrics {
  prometheus::Family<prometheus::Counter>* requests;
  prometheus::Family<prometheus::Histogram>* duration;
  std::mutex mu;
  // Keyed by the path gRPC reports; only methods of linked-in services get an entry, the rest
  // share `unknown`, so clients cannot grow this map.
  std::unordered_map<std::string, std::unique_ptr<MethodMetrics>> methods;
  std::unique_ptr<MethodMetrics> unknown;
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
  MetricsInterceptor(std::shared_ptr<GrpcMetrics> owner, MethodMetrics* metrics)
      : owner_(std::move(owner)), metrics_(metrics), start_(std::chrono::steady_clock::now()) {}

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
    metrics_->Requests(code).Increment();
    metrics_->duration->Observe(seconds);
  }

  std::shared_ptr<GrpcMetrics> owner_;  // keeps `metrics_` alive whatever is torn down first
  MethodMetrics* metrics_;
  std::chrono::steady_clock::time_point start_;
  bool recorded_ = false;
};

std::unique_ptr<MethodMetrics> NewMethodMetrics(const GrpcMetrics& m, std::string label) {
  auto out = std::make_unique<MethodMetrics>();
  out->label = std::move(label);
  out->requests = m.requests;
  out->duration = &m.duration->Add({{"method", out->label}}, LatencyBuckets());
  return out;
}

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
  const char* path = info->method() != nullptr ? info->method() : "";
  {
    std::lock_guard lock(metrics_->mu);
    auto it = metrics_->methods.find(path);
    if (it != metrics_->methods.end()) return new MetricsInterceptor(metrics_, it->second.get());
  }
  std::string label = MethodLabel(info->method());  // the descriptor lookup, once per method
  std::lock_guard lock(metrics_->mu);
  if (label == "unknown") {
    if (!metrics_->unknown) metrics_->unknown = NewMethodMetrics(*metrics_, label);
    return new MetricsInterceptor(metrics_, metrics_->unknown.get());
  }
  auto [it, _] = metrics_->methods.try_emplace(path, nullptr);
  if (!it->second) it->second = NewMethodMetrics(*metrics_, std::move(label));
  return new MetricsInterceptor(metrics_, it->second.get());
}

}  // namespace gpupool::api::grpcface
