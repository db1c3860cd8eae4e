#include "api/grpc/parse_error_interceptor.h"

#include <google/protobuf/descriptor.h>

#include <string>
#include <string_view>

namespace gpupool::api::grpcface {
namespace {

// The request type's full name of "/pkg.Service/Method", or "" when no linked-in service has it.
std::string RequestTypeOf(const char* method) {
  if (method == nullptr) return "";
  std::string_view path(method);
  if (path.size() < 4 || path.front() != '/') return "";
  const std::string_view full = path.substr(1);
  const size_t slash = full.find('/');
  if (slash == std::string_view::npos) return "";
  const auto* service = google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(
      std::string(full.substr(0, slash)));
  if (service == nullptr) return "";
  const auto* m = service->FindMethodByName(std::string(full.substr(slash + 1)));
  return m == nullptr ? "" : m->input_type()->full_name();
}

class ParseErrorInterceptor final : public grpc::experimental::Interceptor {
 public:
  explicit ParseErrorInterceptor(const char* method) : method_(method) {}

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::PRE_SEND_STATUS)) {
      const grpc::Status s = methods->GetSendStatus();
      if (s.error_code() == grpc::StatusCode::UNIMPLEMENTED && s.error_message().empty()) {
        const std::string type = RequestTypeOf(method_);
        if (!type.empty()) {
          methods->ModifySendStatus(
              grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                           "request: the message is not a valid " + type + " (protobuf encoding)"));
        }
      }
    }
    methods->Proceed();
  }

 private:
  const char* method_;  // owned by gRPC for the call's life
};

}  // namespace

grpc::experimental::Interceptor* ParseErrorInterceptorFactory::CreateServerInterceptor(
    grpc::experimental::ServerRpcInfo* info) {
  return new ParseErrorInterceptor(info->method());
}

}  // namespace gpupool::api::grpcface
