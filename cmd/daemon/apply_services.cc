// ApplyConfiguredServices (cmd/daemon/config_services.h): kept apart from the parser so that
// loading a configuration does not pull in the service controller.
#include "cmd/daemon/config_services.h"
#include "scheduler/service_controller.h"

namespace gpupool {
namespace {

// Equal in what the file can say: the author is whoever made it first.
bool SameAsConfigured(ServiceSpec stored, const ServiceSpec& configured) {
  stored.created_by = configured.created_by;
  return stored == configured;
}

}  // namespace

Result<ConfiguredServicesApplied> ApplyConfiguredServices(ServiceController& services,
                                                          const std::vector<ServiceSpec>& specs) {
  ConfiguredServicesApplied applied;
  for (const ServiceSpec& spec : specs) {
    const std::string what = "service '" + spec.name + "' of '" + spec.tenant + "' from the config";
    Result<ServiceView> current = services.Get(spec.tenant, spec.name);
    if (!current.ok() && current.status().code() != StatusCode::kNotFound) {
      return current.status().WithContext(what);
    }
    if (!current.ok()) {
      GPUPOOL_RETURN_IF_ERROR(services.Create(spec).status().WithContext(what));
      ++applied.created;
      continue;
    }
    if (SameAsConfigured(current->record.spec, spec)) continue;
    if (current->record.spec.pool != spec.pool) {
      return Status::FailedPrecondition(what + ": its pool is '" + current->record.spec.pool +
                                        "', not '" + spec.pool +
                                        "'; a service's pool never changes: delete it first");
    }
    Result<ServiceView> updated = services.Update(
        spec.tenant, spec.name, [](const ServiceRecord&) { return Status::Ok(); },
        [&spec](ServiceSpec* s) {
          const std::string author = s->created_by;
          *s = spec;
          s->created_by = author;
          return Status::Ok();
        });
    GPUPOOL_RETURN_IF_ERROR(updated.status().WithContext(what));
    ++applied.updated;
  }
  return applied;
}

}  // namespace gpupool
