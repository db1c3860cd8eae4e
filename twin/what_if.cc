// What-if configs (what_if.h).
#include "twin/what_if.h"

#include <filesystem>

#include "placement/strategy.h"
#include "pool/yaml_error.h"

namespace gpupool::twin {

Result<WhatIf> ParseWhatIf(std::string_view yaml, const std::string& source,
                           const TwinConfig& base) {
  GPUPOOL_ASSIGN_OR_RETURN(YAML::Node root, ParseYaml(yaml, source));
  YamlDoc doc{source};
  const YamlPath top{};
  WhatIf w;
  w.config = base;
  w.config.label = "candidate";
  if (!root || root.IsNull()) return w;
  GPUPOOL_RETURN_IF_ERROR(doc.RequireMap(root, top));
  GPUPOOL_RETURN_IF_ERROR(doc.CheckKeys(root, top,
                                        {"label", "strategy", "preemption", "queue_order",
                                         "compute_overcommit", "resume", "org_tree"}));
  if (root["label"]) {
    GPUPOOL_ASSIGN_OR_RETURN(w.config.label, doc.String(root, top, "label"));
  }
  if (root["strategy"]) {
    GPUPOOL_ASSIGN_OR_RETURN(std::string s, doc.String(root, top, "strategy"));
    if (!placement::ParseStrategy(s).ok())
      return doc.Error(root["strategy"], top.Key("strategy"), "unknown strategy '" + s + "'");
    w.config.strategy = s;
  }
  GPUPOOL_ASSIGN_OR_RETURN(w.config.preemption, doc.Bool(root, top, "preemption", base.preemption));
  if (root["queue_order"]) {
    GPUPOOL_ASSIGN_OR_RETURN(std::string s, doc.String(root, top, "queue_order"));
    Result<QueueOrderKind> k = ParseQueueOrder(s);
    if (!k.ok())
      return doc.Error(root["queue_order"], top.Key("queue_order"), k.status().message());
    w.config.queue_order = *k;
  }
  if (root["compute_overcommit"]) {
    GPUPOOL_ASSIGN_OR_RETURN(w.config.compute_overcommit_permille,
                             doc.Milli(root, top, "compute_overcommit", 1000, 16'000));
  }
  if (root["resume"]) {
    GPUPOOL_ASSIGN_OR_RETURN(std::string s, doc.String(root, top, "resume"));
    if (s != "full" && s != "remaining")
      return doc.Error(root["resume"], top.Key("resume"), "must be full or remaining");
    w.config.resume_remaining = s == "remaining";
  }
  if (root["org_tree"]) {
    GPUPOOL_ASSIGN_OR_RETURN(std::string p, doc.String(root, top, "org_tree"));
    std::filesystem::path path(p);
    if (path.is_relative()) path = std::filesystem::path(source).parent_path() / path;
    w.org_tree = path.string();
  }
  return w;
}

Result<WhatIf> LoadWhatIf(const std::string& path, const TwinConfig& base) {
  GPUPOOL_ASSIGN_OR_RETURN(std::string text, ReadTextFile(path));
  return ParseWhatIf(text, path, base);
}

}  // namespace gpupool::twin
