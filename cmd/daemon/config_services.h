// Services in gpupoold's YAML (`services:`, docs/services.md): an operator's endpoints declared
// beside the pools and tenants they run in, parsed and checked at load like every other key,
// then made the stored services at start-up.
//
// ParseConfiguredServices reads each entry as the API's Service (the same fields as
// `gpupoolctl services create -f`; `idle: 5m` as people write it) and checks it as the API
// would; errors name file, line and key ("gpupoold.yaml:40: services[1]: service.port: ...").
// Two entries with one tenant and name are refused. Output-only fields (id, status, …) are
// refused too: a config names what should run, not what ran.
//
// ApplyConfiguredServices then, for each entry, creates the service when its tenant has none of
// that name, or updates it when it differs (a changed template is a new generation, rolled out
// with the service's surge and unavailability limits; scaling fields change in place). An
// unchanged service is left alone, so a restart is a no-op, and a service the file does not name
// is kept (it may have been made through the API). created_by is "config". A service whose
// pool changed is refused (a pool never changes): delete it first.
//
// Thread safety: plain functions; Apply calls the controller from the caller's thread.
#pragma once

#include <yaml-cpp/yaml.h>

#include <vector>

#include "base/status.h"
#include "pool/yaml_error.h"
#include "scheduler/service.h"

namespace gpupool {

class ServiceController;

Status ParseConfiguredServices(const YamlDoc& doc, const YAML::Node& root,
                               std::vector<ServiceSpec>* out);

// How many services were created and updated.
struct ConfiguredServicesApplied {
  int created = 0;
  int updated = 0;
};
Result<ConfiguredServicesApplied> ApplyConfiguredServices(ServiceController& services,
                                                          const std::vector<ServiceSpec>& specs);

}  // namespace gpupool
