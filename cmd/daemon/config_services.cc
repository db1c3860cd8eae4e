#include "cmd/daemon/config_services.h"

#include <set>
#include <utility>

#include "api/convert_service.h"
#include "api/message_yaml.h"
#include "gpupool/v1/services.pb.h"

namespace gpupool {

Status ParseConfiguredServices(const YamlDoc& doc, const YAML::Node& root,
                               std::vector<ServiceSpec>* out) {
  const YAML::Node n = root["services"];
  if (!n) return Status::Ok();
  const YamlPath path = YamlPath{}.Key("services");
  GPUPOOL_RETURN_IF_ERROR(doc.RequireSequence(n, path));
  std::set<std::pair<std::string, std::string>> names;
  for (size_t i = 0; i < n.size(); ++i) {
    const YamlPath p = path.Index(i);
    GPUPOOL_RETURN_IF_ERROR(doc.RequireMap(n[i], p));
    for (const char* output :
         {"id", "generation", "has_previous", "status", "created_by", "create_time", "update_time",
          "hasPrevious", "createdBy", "createTime", "updateTime"}) {
      if (n[i][output]) {
        return doc.Error(n[i][output], p.Key(output),
                         "is set by gpupoold, not by a configuration: remove it");
      }
    }
    Result<std::string> json = api::YamlNodeToJson(n[i], v1::Service::descriptor());
    if (!json.ok()) return doc.Error(n[i], p, json.status().message());
    v1::Service proto;
    if (Status parsed = api::MessageFromJson(*json, &proto); !parsed.ok()) {
      return doc.Error(n[i], p, parsed.message());
    }
    Result<ServiceSpec> spec = api::ServiceSpecFromProto(proto);
    if (!spec.ok()) return doc.Error(n[i], p, spec.status().message());
    if (!names.insert({spec->tenant, spec->name}).second) {
      return doc.Error(n[i], p,
                       "a second service '" + spec->name + "' of tenant '" + spec->tenant + "'");
    }
    spec->created_by = "config";
    out->push_back(std::move(spec).value());
  }
  return Status::Ok();
}

}  // namespace gpupool
