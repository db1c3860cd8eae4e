#include "scheduler/service.h"

#include <algorithm>

namespace gpupool {
namespace {

Status Invalid(const std::string& field, const std::string& what) {
  return Status::InvalidArgument(field + ": " + what);
}

}  // namespace

Status CheckServiceSpec(const ServiceSpec& s) {
  const std::string& n = s.name;
  if (n.empty()) return Invalid("service.name", "required");
  if (n.size() > 63) return Invalid("service.name", "at most 63 characters");
  for (size_t i = 0; i < n.size(); ++i) {
    const char c = n[i];
    const bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || (i > 0 && c == '-');
    if (!ok) {
      return Invalid("service.name", "'" + n +
                                         "' must be lower-case letters, digits and '-', "
                                         "starting with a letter or digit");
    }
  }
  if (s.tenant.empty()) return Invalid("service.tenant", "required");
  if (s.pool.empty()) return Invalid("service.pool", "required");
  if (s.max_replicas < 1 || s.max_replicas > kMaxServiceReplicas) {
    return Invalid("service.max_replicas", "must be 1.." + std::to_string(kMaxServiceReplicas) +
                                               ", got " + std::to_string(s.max_replicas));
  }
  if (s.min_replicas < 0 || s.min_replicas > s.max_replicas) {
    return Invalid("service.min_replicas", "must be 0..max_replicas (" +
                                               std::to_string(s.max_replicas) + "), got " +
                                               std::to_string(s.min_replicas));
  }
  if (s.target_in_flight < 1 || s.target_in_flight > 100'000) {
    return Invalid("service.target_in_flight",
                   "must be 1..100000, got " + std::to_string(s.target_in_flight));
  }
  if (s.idle_ms < 10'000 || s.idle_ms > int64_t{30} * 86'400'000) {
    return Invalid("service.idle", "must be 10s..30d, got " + std::to_string(s.idle_ms) + " ms");
  }
  if (s.max_surge < 0 || s.max_unavailable < 0 || s.max_surge + s.max_unavailable == 0 ||
      s.max_surge > kMaxServiceReplicas || s.max_unavailable > kMaxServiceReplicas) {
    return Invalid("service.max_surge",
                   "max_surge and max_unavailable must be 0..1000 and not both 0 (a rollout "
                   "could never move)");
  }
  const ServiceRevision& r = s.revision;
  if (!r.task_template.secret_env.empty()) {
    return Invalid("service.template.secret_env",
                   "not kept for services; name a stored registry credential instead");
  }
  if (r.task_template.ports.empty()) {
    return Invalid("service.template.ports",
                   "a service's replicas must declare the port they serve");
  }
  const auto serves = std::find_if(r.task_template.ports.begin(), r.task_template.ports.end(),
                                   [&](const TaskPort& p) { return p.port == r.port; });
  if (serves == r.task_template.ports.end()) {
    return Invalid("service.port", std::to_string(r.port) + " is not one of template.ports");
  }
  if (serves->protocol != "tcp") return Invalid("service.port", "must be a tcp port");
  if (!r.readiness_path.empty()) {
    if (r.readiness_path.front() != '/' || r.readiness_path.size() > 1024) {
      return Invalid("service.readiness_path", "must start with '/', at most 1024 bytes");
    }
    for (unsigned char c : r.readiness_path) {
      if (c <= 0x20 || c >= 0x7f) {
        return Invalid("service.readiness_path", "must be printable ASCII without spaces");
      }
    }
  }
  return Status::Ok();
}

}  // namespace gpupool
