// status_convert: the one place where gpupool's Status meets the wire — as a grpc::Status for the
// gRPC face and as an HTTP status for the REST face.
//
// Status codes are numbered like grpc::StatusCode, so the gRPC conversion is a cast. The HTTP
// mapping is grpc-gateway's (runtime/errors.go HTTPStatusFromCode), so REST clients see the same
// status a grpc-gateway in front of the gRPC face would give them.
//
// Thread safety: pure functions.
#pragma once

#include <grpcpp/support/status.h>

#include "base/status.h"

namespace gpupool::api {

grpc::Status ToGrpcStatus(const Status& status);
Status FromGrpcStatus(const grpc::Status& status);

// The HTTP status grpc-gateway answers for a gRPC code: INVALID_ARGUMENT → 400, NOT_FOUND → 404,
// UNAVAILABLE → 503, CANCELLED → 499 (the client closed the request), …
int HttpStatusFromCode(StatusCode code);

}  // namespace gpupool::api
