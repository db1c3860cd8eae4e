#include "api/price_plan_yaml.h"

#include <google/protobuf/util/time_util.h>

namespace gpupool::api {
namespace {

// A scalar's text exactly as written.
Result<std::string> Text(const YamlDoc& doc, const YAML::Node& map, const YamlPath& path,
                         std::string_view key) {
  const YAML::Node v = map[std::string(key)];
  if (!v.IsScalar()) return doc.Error(v, path.Key(key), "must be a single value");
  return v.Scalar();
}

}  // namespace

Status PricePlanFromYaml(const YamlDoc& doc, const YAML::Node& node, const YamlPath& path,
                         gpupool::v1::PricePlan* out) {
  GPUPOOL_RETURN_IF_ERROR(doc.RequireMap(node, path));
  GPUPOOL_RETURN_IF_ERROR(
      doc.CheckKeys(node, path,
                    {"name", "currency", "description", "effective_time", "tenants", "rates",
                     "priority_multipliers", "preemption_credit_percent"}));
  GPUPOOL_ASSIGN_OR_RETURN(std::string name, doc.String(node, path, "name"));
  out->set_name(name);
  GPUPOOL_ASSIGN_OR_RETURN(std::string currency, doc.String(node, path, "currency"));
  out->set_currency(currency);
  GPUPOOL_ASSIGN_OR_RETURN(std::optional<std::string> description,
                           doc.OptionalString(node, path, "description"));
  if (description) out->set_description(*description);
  if (node["effective_time"]) {
    GPUPOOL_ASSIGN_OR_RETURN(std::string t, Text(doc, node, path, "effective_time"));
    if (!google::protobuf::util::TimeUtil::FromString(t, out->mutable_effective_time())) {
      return doc.Error(node["effective_time"], path.Key("effective_time"),
                       "must be an RFC 3339 time, e.g. 2026-12-01T00:00:00Z");
    }
  }
  GPUPOOL_ASSIGN_OR_RETURN(std::vector<std::string> tenants, doc.StringList(node, path, "tenants"));
  for (const std::string& t : tenants) out->add_tenants(t);
  const YAML::Node rates = node["rates"];
  if (!rates) return doc.Error(node, path.Key("rates"), "missing required key");
  GPUPOOL_RETURN_IF_ERROR(doc.RequireSequence(rates, path.Key("rates")));
  for (size_t i = 0; i < rates.size(); ++i) {
    const YamlPath rp = path.Key("rates").Index(i);
    const YAML::Node r = rates[i];
    GPUPOOL_RETURN_IF_ERROR(doc.RequireMap(r, rp));
    GPUPOOL_RETURN_IF_ERROR(
        doc.CheckKeys(r, rp, {"unit", "price", "pool", "model", "mig_profile"}));
    gpupool::v1::PriceRate* rate = out->add_rates();
    GPUPOOL_ASSIGN_OR_RETURN(std::string unit, doc.String(r, rp, "unit"));
    rate->set_unit(unit);
    if (!r["price"]) return doc.Error(r, rp.Key("price"), "missing required key");
    GPUPOOL_ASSIGN_OR_RETURN(std::string price, Text(doc, r, rp, "price"));
    rate->set_price(price);
    for (const char* key : {"pool", "model", "mig_profile"}) {
      GPUPOOL_ASSIGN_OR_RETURN(std::optional<std::string> v, doc.OptionalString(r, rp, key));
      if (!v) continue;
      if (std::string_view(key) == "pool") rate->set_pool(*v);
      if (std::string_view(key) == "model") rate->set_model(*v);
      if (std::string_view(key) == "mig_profile") rate->set_mig_profile(*v);
    }
  }
  if (const YAML::Node m = node["priority_multipliers"]) {
    const YamlPath mp = path.Key("priority_multipliers");
    GPUPOOL_RETURN_IF_ERROR(doc.RequireMap(m, mp));
    for (const auto& kv : m) {
      const std::string cls = kv.first.Scalar();
      if (!kv.second.IsScalar()) return doc.Error(kv.second, mp.Key(cls), "must be a decimal");
      (*out->mutable_priority_multipliers())[cls] = kv.second.Scalar();
    }
  }
  if (node["preemption_credit_percent"]) {
    GPUPOOL_ASSIGN_OR_RETURN(std::string pct, Text(doc, node, path, "preemption_credit_percent"));
    out->set_preemption_credit_percent(pct);
  }
  return Status::Ok();
}

}  // namespace gpupool::api
