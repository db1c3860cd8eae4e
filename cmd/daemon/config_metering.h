// The daemon config's `metering:` section into MeteringOptions (scheduler/options.h); errors
// name the file, key and line. Absent: the defaults.
#pragma once

#include <yaml-cpp/yaml.h>

#include "pool/yaml_error.h"
#include "scheduler/options.h"

namespace gpupool {

Status ParseMetering(const YamlDoc& doc, const YAML::Node& root, MeteringOptions* m);

}  // namespace gpupool
