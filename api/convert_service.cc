#include "api/convert_service.h"

#include "api/convert.h"
#include "api/validate.h"

namespace gpupool::api {
namespace {

constexpr int64_t kDefaultIdleMs = 300'000;

}  // namespace

Result<ServiceSpec> ServiceSpecFromProto(const v1::Service& in) {
  ServiceSpec s;
  GPUPOOL_RETURN_IF_ERROR(ValidateTenantPath(in.tenant(), "service.tenant"));
  s.tenant = in.tenant();
  s.name = in.name();
  GPUPOOL_RETURN_IF_ERROR(ValidateName(in.pool(), "service.pool"));
  s.pool = in.pool();
  if (!in.priority_class().empty()) {
    GPUPOOL_RETURN_IF_ERROR(ValidateName(in.priority_class(), "service.priority_class"));
  }
  s.priority_class = in.priority_class();
  s.preemptible = in.preemptible();
  if (!in.has_template_()) {
    return Invalid("service.template", "must be set (a command or an image, resources, ports)");
  }
  GPUPOOL_ASSIGN_OR_RETURN(s.revision.task_template,
                           TaskTemplateFromProto(in.template_(), "service.template"));
  if (in.port() == 0 || in.port() > 65535) {
    return Invalid("service.port", "must be 1..65535, one of template.ports");
  }
  s.revision.port = static_cast<int32_t>(in.port());
  s.revision.readiness_path = in.readiness_path();
  s.min_replicas = in.min_replicas();
  s.max_replicas = in.max_replicas();
  s.target_in_flight = in.target_in_flight() == 0 ? 1 : in.target_in_flight();
  s.idle_ms = kDefaultIdleMs;
  if (in.has_idle()) {
    const auto& d = in.idle();
    if (d.seconds() < 0 || d.nanos() < 0) return Invalid("service.idle", "must not be negative");
    s.idle_ms = d.seconds() * 1000 + d.nanos() / 1'000'000;
  }
  if (in.max_surge() == 0 && in.max_unavailable() == 0) {
    s.max_surge = 1, s.max_unavailable = 0;
  } else {
    s.max_surge = in.max_surge(), s.max_unavailable = in.max_unavailable();
  }
  GPUPOOL_RETURN_IF_ERROR(CheckServiceSpec(s));
  return s;
}

}  // namespace gpupool::api
