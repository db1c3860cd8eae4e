// A service as the API writes it (v1::Service) into the controller's spec, checked as the
// controller will store it: each error is InvalidArgument naming its field ("service.port: ...";
// the template is checked as a job's). Shared by ServiceService and gpupoold's `services:` key.
//
// Defaults: target_in_flight 1, idle 5 minutes, and max_surge 1 / max_unavailable 0 when both
// are unset. created_by is left empty for the caller.
//
// Thread safety: pure function.
#pragma once

#include "base/status.h"
#include "gpupool/v1/services.pb.h"
#include "scheduler/service.h"

namespace gpupool::api {

Result<ServiceSpec> ServiceSpecFromProto(const v1::Service& in);

}  // namespace gpupool::api
