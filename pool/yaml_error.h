// YAML config helpers: parse with positions, and turn every problem into one Status whose message
// reads "FILE:LINE: KEY: MESSAGE", so that a person can go straight to the offending line.
//
//   catalog.yaml:42: models[3].mig_profiles[1].vram_mib: must be a positive integer, got "-5"
//
// LINE is 1-based (yaml-cpp's Mark is 0-based). KEY is a dotted path built by the caller
// (YamlPath). Every function here catches yaml-cpp's exceptions and returns Status
// InvalidArgument instead: no exception leaves this module.
//
// Typical loader:
//   GPUPOOL_ASSIGN_OR_RETURN(YAML::Node root, ParseYaml(text, "gpupoold.yaml"));
//   YamlDoc doc{"gpupoold.yaml"};
//   GPUPOOL_RETURN_IF_ERROR(doc.CheckKeys(root, YamlPath{}, {"listen", "data_dir"}));
//   GPUPOOL_ASSIGN_OR_RETURN(std::string listen, doc.String(root, YamlPath{}, "listen"));
//
// Thread safety: plain functions and values.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace gpupool {

// A dotted key path: YamlPath{}.Key("models").Index(3).Key("name") → "models[3].name".
class YamlPath {
 public:
  YamlPath() = default;
  YamlPath Key(std::string_view key) const;
  YamlPath Index(size_t i) const;
  const std::string& str() const { return path_; }
  bool empty() const { return path_.empty(); }

 private:
  explicit YamlPath(std::string p) : path_(std::move(p)) {}
  std::string path_;
};

// "source:line: key: message" (the key part is left out when key is empty, the line part when
// line is 0). line is 1-based.
std::string FormatYamlError(std::string_view source, int line, std::string_view key,
                            std::string_view message);

// InvalidArgument with the message above; line taken from the node's Mark (0 when unknown).
Status YamlError(std::string_view source, const YAML::Node& at, std::string_view key,
                 std::string_view message);

// Parses YAML text. Syntax errors → InvalidArgument "source:line: message".
// An empty document yields a Null node.
Result<YAML::Node> ParseYaml(std::string_view text, std::string_view source);

// Reads a whole file (NotFound when it cannot be opened).
Result<std::string> ReadTextFile(const std::string& path);

// Typed, position-aware accessors bound to one source name.
class YamlDoc {
 public:
  explicit YamlDoc(std::string source) : source_(std::move(source)) {}
  const std::string& source() const { return source_; }

  Status Error(const YAML::Node& at, const YamlPath& key, std::string_view message) const;

  // `node` must be a map; every key must be in `allowed`, and appear once.
  Status CheckKeys(const YAML::Node& node, const YamlPath& path,
                   std::initializer_list<std::string_view> allowed) const;
  // Requires a map / a sequence at `path` (node is the value itself).
  Status RequireMap(const YAML::Node& node, const YamlPath& path) const;
  Status RequireSequence(const YAML::Node& node, const YamlPath& path) const;

  // Field accessors on a map node. Required ones fail with "missing required key" naming the
  // parent's line; optional ones return std::nullopt when the key is absent.
  Result<std::string> String(const YAML::Node& map, const YamlPath& path,
                             std::string_view key) const;
  Result<std::optional<std::string>> OptionalString(const YAML::Node& map, const YamlPath& path,
                                                    std::string_view key) const;
  // An integer in [min, max].
  Result<int64_t> Int(const YAML::Node& map, const YamlPath& path, std::string_view key,
                      int64_t min, int64_t max) const;
  // A decimal with at most three places, returned ×1000 ("12.5" → 12500), in [min, max] (milli).
  Result<int64_t> Milli(const YAML::Node& map, const YamlPath& path, std::string_view key,
                        int64_t min, int64_t max) const;
  Result<bool> Bool(const YAML::Node& map, const YamlPath& path, std::string_view key,
                    bool default_value) const;
  // A list of non-empty strings; empty when the key is absent.
  Result<std::vector<std::string>> StringList(const YAML::Node& map, const YamlPath& path,
                                              std::string_view key) const;

 private:
  Result<YAML::Node> Scalar(const YAML::Node& map, const YamlPath& path,
                            std::string_view key) const;

  std::string source_;
};

// Parses a non-negative decimal with at most three places into thousandths: "989.5" → 989500.
// Returns false on anything else (signs, exponents, more places, overflow).
bool ParseDecimalMilli(std::string_view text, int64_t* out);

}  // namespace gpupool
