// ParseErrorInterceptorFactory: a request whose bytes do not parse as the method's message gets
// INVALID_ARGUMENT saying so, instead of gRPC's bare UNIMPLEMENTED.
//
// gRPC C++ (1.51) answers a callback method whose request fails to deserialize with
// UNIMPLEMENTED and an empty message, which tells the caller the method does not exist. Every
// handler of ours that answers UNIMPLEMENTED says why, so an UNIMPLEMENTED with no message on a
// method the linked-in protobuf services define can only be that parse failure; this interceptor
// rewrites it at PRE_SEND_STATUS:
//   INVALID_ARGUMENT "request: the message is not a valid gpupool.v1.SubmitJobRequest"
// Unknown methods keep their UNIMPLEMENTED.
//
// Thread safety: interceptors are created per call on gRPC threads; the factory is stateless.
#pragma once

#include <grpcpp/support/server_interceptor.h>

namespace gpupool::api::grpcface {

class ParseErrorInterceptorFactory final
    : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override;
};

}  // namespace gpupool::api::grpcface
