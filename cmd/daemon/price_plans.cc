#include "cmd/daemon/price_plans.h"

#include <set>

#include "api/convert_billing.h"
#include "api/price_plan_yaml.h"
#include "billing/price_plan.h"
#include "scheduler/store.h"

namespace gpupool {
namespace {

// Equal in what a plan says, whatever its version, times and author.
bool SameTerms(billing::PricePlan a, billing::PricePlan b) {
  for (billing::PricePlan* p : {&a, &b}) {
    p->version = 0;
    p->effective_from_ms = 0;
    p->created_by.clear();
    p->create_ms = 0;
  }
  return a == b;
}

}  // namespace

Status ParsePricePlans(const YamlDoc& doc, const YAML::Node& root,
                       std::vector<billing::PricePlan>* out) {
  const YAML::Node n = root["price_plans"];
  if (!n) return Status::Ok();
  const YamlPath path = YamlPath{}.Key("price_plans");
  GPUPOOL_RETURN_IF_ERROR(doc.RequireSequence(n, path));
  std::set<std::string> names;
  for (size_t i = 0; i < n.size(); ++i) {
    v1::PricePlan proto;
    GPUPOOL_RETURN_IF_ERROR(api::PricePlanFromYaml(doc, n[i], path.Index(i), &proto));
    // Checked as the API checks it; the time is settled at start-up (never in the past).
    Result<billing::PricePlan> plan = api::PricePlanFromProto(proto, 0);
    if (!plan.ok()) return doc.Error(n[i], path.Index(i), plan.status().message());
    if (!names.insert(plan->name).second) {
      return doc.Error(n[i], path.Index(i), "a second plan named '" + plan->name + "'");
    }
    plan->created_by = "config";
    out->push_back(std::move(plan).value());
  }
  return Status::Ok();
}

Result<int> ApplyConfiguredPricePlans(Store& store, const std::vector<billing::PricePlan>& plans,
                                      int64_t now_ms) {
  int added = 0;
  for (billing::PricePlan plan : plans) {
    GPUPOOL_ASSIGN_OR_RETURN(std::vector<billing::PricePlan> versions,
                             store.ListPricePlans(plan.name));
    if (!versions.empty() && SameTerms(versions.back(), plan)) continue;
    // The API's rule (a first version starts with its hour; later ones never reach back).
    plan.effective_from_ms =
        billing::EffectiveFrom(plan.effective_from_ms, now_ms, versions.empty());
    if (!versions.empty()) {
      plan.effective_from_ms = std::max(plan.effective_from_ms, versions.back().effective_from_ms);
    }
    plan.create_ms = now_ms;
    GPUPOOL_RETURN_IF_ERROR(store.AddPricePlan(plan, versions.empty())
                                .status()
                                .WithContext("price plan '" + plan.name + "' from the config"));
    ++added;
  }
  return added;
}

}  // namespace gpupool
