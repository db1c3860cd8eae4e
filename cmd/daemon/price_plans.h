// Price plans in gpupoold's YAML (`price_plans:`, docs/billing.md): parsed and validated at load
// like every other key, then made the stored plans at start-up.
//
// ParsePricePlans reads each entry (the format of api/price_plan_yaml.h) and checks it as the API
// would, errors naming file, line and key ("gpupoold.yaml:40: price_plans[1]: plan.rates[0].price:
// ..."). ApplyConfiguredPricePlans then, for each configured plan, adds a version when the store
// has none of that name or its newest version differs (rates, currency, tenants, multipliers,
// credit, description): effective from the configured effective_time or from now, whichever is
// later, created_by "config". An unchanged plan adds nothing, so a restart is a no-op.
//
// Thread safety: plain functions.
#pragma once

#include <yaml-cpp/yaml.h>

#include <vector>

#include "base/status.h"
#include "billing/price_plan.h"
#include "pool/yaml_error.h"

namespace gpupool {

class Store;

Status ParsePricePlans(const YamlDoc& doc, const YAML::Node& root,
                       std::vector<billing::PricePlan>* out);

// Returns how many versions were added.
Result<int> ApplyConfiguredPricePlans(Store& store, const std::vector<billing::PricePlan>& plans,
                                      int64_t now_ms);

}  // namespace gpupool
