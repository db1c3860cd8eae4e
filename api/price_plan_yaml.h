// PricePlanFromYaml: a price plan written in YAML — the daemon's `price_plans:` entries and the
// files `gpupoolctl priceplans create|update -f` reads — into the API message. Decimal values
// are read as the text written ("0.45" and 0.45 alike), never through floating point.
//
//   name: standard
//   currency: USD
//   description: list prices
//   effective_time: 2026-12-01T00:00:00Z     # optional; default: now
//   tenants: [acme, globex/lab]             # optional
//   rates:
//     - {unit: tflops-hour, price: 0.45}
//     - {unit: device-hour, pool: h100, price: 2.50}
//     - {unit: mig-profile-hour, model: A100-80GB, mig_profile: 1g.10gb, price: 0.30}
//   priority_multipliers: {high: 1.5, low: 0.5}
//   preemption_credit_percent: 100
//
// Unknown keys and malformed values are INVALID_ARGUMENT naming file, line and key
// (pool/yaml_error.h). Semantic checks (units, currency, decimals) are the server's.
//
// Thread safety: pure function.
#pragma once

#include <yaml-cpp/yaml.h>

#include "base/status.h"
#include "gpupool/v1/billing.pb.h"
#include "pool/yaml_error.h"

namespace gpupool::api {

Status PricePlanFromYaml(const YamlDoc& doc, const YAML::Node& node, const YamlPath& path,
                         gpupool::v1::PricePlan* out);

}  // namespace gpupool::api
