#include "api/status_convert.h"

#include "api/utf8.h"

namespace gpupool::api {

grpc::Status ToGrpcStatus(const Status& status) {
  if (status.ok()) return grpc::Status::OK;
  // The message may quote the caller's bytes: never hand back invalid UTF-8.
  return {static_cast<grpc::StatusCode>(status.code()), ValidUtf8(status.message())};
}

Status FromGrpcStatus(const grpc::Status& status) {
  if (status.ok()) return Status::Ok();
  const int code = static_cast<int>(status.error_code());
  if (code < 0 || code > static_cast<int>(StatusCode::kUnauthenticated)) {
    return {StatusCode::kUnknown, status.error_message()};
  }
  return {static_cast<StatusCode>(code), status.error_message()};
}

int HttpStatusFromCode(StatusCode code) {
  switch (code) {
    case StatusCode::kOk:
      return 200;
    case StatusCode::kCancelled:
      return 499;
    case StatusCode::kUnknown:
      return 500;
    case StatusCode::kInvalidArgument:
      return 400;
    case StatusCode::kDeadlineExceeded:
      return 504;
    case StatusCode::kNotFound:
      return 404;
    case StatusCode::kAlreadyExists:
      return 409;
    case StatusCode::kPermissionDenied:
      return 403;
    case StatusCode::kResourceExhausted:
      return 429;
    case StatusCode::kFailedPrecondition:
      return 400;
    case StatusCode::kAborted:
      return 409;
    case StatusCode::kOutOfRange:
      return 400;
    case StatusCode::kUnimplemented:
      return 501;
    case StatusCode::kInternal:
      return 500;
    case StatusCode::kUnavailable:
      return 503;
    case StatusCode::kDataLoss:
      return 500;
    case StatusCode::kUnauthenticated:
      return 401;
  }
  return 500;
}

}  // namespace gpupool::api
