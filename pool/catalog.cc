#include "pool/catalog.h"

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <utility>

#include "pool/yaml_error.h"

namespace gpupool {

namespace {

constexpr int64_t kMaxMilliTflops = 100'000'000;     // 100,000 TFLOPS: far above any card
constexpr int64_t kMaxVramMib = 16LL * 1024 * 1024;  // 16 TiB
constexpr int64_t kMaxBoardFigure = 100'000;         // watts or GB/s: far above any card

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i]))) {
      return false;
    }
  }
  return true;
}

// "3g.40gb" → 3; 0 when the name does not start with "<digits>g.".
int SlicesInName(std::string_view name) {
  int n = 0;
  size_t i = 0;
  for (; i < name.size() && i < 2 && std::isdigit(static_cast<unsigned char>(name[i])); ++i) {
    n = n * 10 + (name[i] - '0');
  }
  if (i == 0 || i + 1 >= name.size() || name[i] != 'g' || name[i + 1] != '.') return 0;
  return n;
}

// The optional placement rule of a MIG profile: memory_slices and starts, both or neither.
Status ParsePlacement(const YamlDoc& doc, const YAML::Node& node, const YamlPath& path,
                      MigProfile& p) {
  const bool has_slices = node["memory_slices"].IsDefined();
  const bool has_starts = node["starts"].IsDefined();
  if (!has_slices && !has_starts) return Status::Ok();
  if (has_slices != has_starts) {
    const char* missing = has_slices ? "starts" : "memory_slices";
    return doc.Error(node, path.Key(missing),
                     std::string("missing required key (memory_slices and starts go together)"));
  }
  GPUPOOL_ASSIGN_OR_RETURN(int64_t slices,
                           doc.Int(node, path, "memory_slices", 1, kMigMemorySlices));
  p.memory_slices = static_cast<int>(slices);
  GPUPOOL_ASSIGN_OR_RETURN(std::vector<std::string> starts, doc.StringList(node, path, "starts"));
  if (starts.empty()) return doc.Error(node["starts"], path.Key("starts"), "must not be empty");
  for (const std::string& text : starts) {
    char* end = nullptr;
    const long v = std::strtol(text.c_str(), &end, 10);
    if (end == text.c_str() || *end != '\0' || v < 0 || v + slices > kMigMemorySlices) {
      return doc.Error(node["starts"], path.Key("starts"),
                       "start '" + text + "' must be an integer from 0 to " +
                           std::to_string(kMigMemorySlices - slices) + " (an instance of " +
                           std::to_string(slices) + " memory slices ends within the GPU's " +
                           std::to_string(kMigMemorySlices) + ")");
    }
    if (!p.starts.empty() && v <= p.starts.back()) {
      return doc.Error(node["starts"], path.Key("starts"), "must be ascending and distinct");
    }
    p.starts.push_back(static_cast<int>(v));
  }
  return Status::Ok();
}

// Parses one MIG profile of `model` (whose compute and VRAM are already set).
Result<MigProfile> ParseMig(const YamlDoc& doc, const YAML::Node& node, const YamlPath& path,
                            const GpuModel& model) {
  GPUPOOL_RETURN_IF_ERROR(doc.CheckKeys(
      node, path,
      {"name", "compute_slices", "vram_mib", "max_instances", "memory_slices", "starts"}));
  MigProfile p;
  GPUPOOL_ASSIGN_OR_RETURN(p.name, doc.String(node, path, "name"));
  GPUPOOL_ASSIGN_OR_RETURN(int64_t slices,
                           doc.Int(node, path, "compute_slices", 1, kMigComputeSlices));
  GPUPOOL_ASSIGN_OR_RETURN(p.vram_mib,
                           doc.Int(node, path, "vram_mib", 1, std::numeric_limits<int64_t>::max()));
  GPUPOOL_ASSIGN_OR_RETURN(int64_t instances,
                           doc.Int(node, path, "max_instances", 1, kMigComputeSlices));
  p.compute_slices = static_cast<int>(slices);
  p.max_instances = static_cast<int>(instances);
  p.milli_tflops = model.ComputeMilliTflops() * p.compute_slices / kMigComputeSlices;

  const int named = SlicesInName(p.name);
  if (named != 0 && named != p.compute_slices) {
    return doc.Error(node["compute_slices"], path.Key("compute_slices"),
                     "is " + std::to_string(p.compute_slices) + " but profile \"" + p.name +
                         "\" names " + std::to_string(named) + " slices");
  }
  if (p.vram_mib > model.vram_mib) {
    return doc.Error(node["vram_mib"], path.Key("vram_mib"),
                     "profile \"" + p.name + "\" has " + std::to_string(p.vram_mib) +
                         " MiB, more than its card " + model.name + " (" +
                         std::to_string(model.vram_mib) + " MiB)");
  }
  if (static_cast<int64_t>(p.max_instances) * p.compute_slices > kMigComputeSlices) {
    return doc.Error(node["max_instances"], path.Key("max_instances"),
                     std::to_string(p.max_instances) + " instances of " +
                         std::to_string(p.compute_slices) + " slices exceed the card's " +
                         std::to_string(kMigComputeSlices) + " compute slices");
  }
  GPUPOOL_RETURN_IF_ERROR(ParsePlacement(doc, node, path, p));
  return p;
}

Result<GpuModel> ParseModel(const YamlDoc& doc, const YAML::Node& node, const YamlPath& path) {
  GPUPOOL_RETURN_IF_ERROR(doc.CheckKeys(
      node, path,
      {"name", "vendor", "form_factor", "aliases", "bf16_tflops", "fp16_tflops", "vram_mib",
       "tdp_watts", "gpu_link_gb_per_s", "pcie_gb_per_s", "mig_profiles"}));
  GpuModel m;
  GPUPOOL_ASSIGN_OR_RETURN(m.name, doc.String(node, path, "name"));
  GPUPOOL_ASSIGN_OR_RETURN(m.vendor, doc.String(node, path, "vendor"));
  GPUPOOL_ASSIGN_OR_RETURN(std::optional<std::string> form,
                           doc.OptionalString(node, path, "form_factor"));
  m.form_factor = form.value_or("");
  if (node["bf16_tflops"].IsDefined()) {  // absent = 0 = the card has no bf16
    GPUPOOL_ASSIGN_OR_RETURN(m.bf16_milli_tflops,
                             doc.Milli(node, path, "bf16_tflops", 0, kMaxMilliTflops));
  }
  GPUPOOL_ASSIGN_OR_RETURN(m.fp16_milli_tflops,
                           doc.Milli(node, path, "fp16_tflops", 1, kMaxMilliTflops));
  GPUPOOL_ASSIGN_OR_RETURN(m.vram_mib, doc.Int(node, path, "vram_mib", 1, kMaxVramMib));
  // Optional board figures; absent = 0 = not stated.
  for (auto [key, out] :
       {std::pair{"tdp_watts", &m.tdp_watts}, std::pair{"gpu_link_gb_per_s", &m.gpu_link_gb_per_s},
        std::pair{"pcie_gb_per_s", &m.pcie_gb_per_s}}) {
    if (!node[key].IsDefined()) continue;
    GPUPOOL_ASSIGN_OR_RETURN(int64_t v, doc.Int(node, path, key, 0, kMaxBoardFigure));
    *out = static_cast<int32_t>(v);
  }

  GPUPOOL_ASSIGN_OR_RETURN(m.aliases, doc.StringList(node, path, "aliases"));
  if (const YAML::Node migs = node["mig_profiles"]; migs.IsDefined()) {
    const YamlPath mpath = path.Key("mig_profiles");
    GPUPOOL_RETURN_IF_ERROR(doc.RequireSequence(migs, mpath));
    for (size_t i = 0; i < migs.size(); ++i) {
      GPUPOOL_ASSIGN_OR_RETURN(MigProfile p, ParseMig(doc, migs[i], mpath.Index(i), m));
      if (m.FindMig(p.name) != nullptr) {
        return doc.Error(migs[i]["name"], mpath.Index(i).Key("name"),
                         "duplicate MIG profile \"" + p.name + "\" in model " + m.name);
      }
      m.mig_profiles.push_back(std::move(p));
    }
  }
  return m;
}

}  // namespace

const MigProfile* GpuModel::FindMig(std::string_view profile) const {
  for (const MigProfile& p : mig_profiles) {
    if (EqualsIgnoreCase(p.name, profile)) return &p;
  }
  return nullptr;
}

std::string Catalog::NormalizeName(std::string_view name) {
  std::string out;
  out.reserve(name.size());
  for (char c : name) {
    if (c == ' ' || c == '-' || c == '_' || c == '.') continue;
    out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return out;
}

Result<Catalog> Catalog::Parse(std::string_view yaml_text, std::string_view source_name) {
  GPUPOOL_ASSIGN_OR_RETURN(YAML::Node root, ParseYaml(yaml_text, source_name));
  const YamlDoc doc{std::string(source_name)};
  if (root.IsNull() || !root.IsDefined()) {
    return Status::InvalidArgument(
        FormatYamlError(source_name, 0, "", "empty catalog (expected a \"models\" list)"));
  }
  // yaml-cpp may throw on odd documents (e.g. anchors to nothing); keep it inside this module.
  try {
    GPUPOOL_RETURN_IF_ERROR(doc.CheckKeys(root, YamlPath{}, {"models"}));
    const YamlPath mpath = YamlPath{}.Key("models");
    const YAML::Node models = root["models"];
    if (!models.IsDefined()) return doc.Error(root, mpath, "missing required key");
    GPUPOOL_RETURN_IF_ERROR(doc.RequireSequence(models, mpath));
    if (models.size() == 0) return doc.Error(models, mpath, "must list at least one model");

    Catalog catalog;
    catalog.source_ = std::string(source_name);
    for (size_t i = 0; i < models.size(); ++i) {
      const YAML::Node node = models[i];
      GPUPOOL_ASSIGN_OR_RETURN(GpuModel m, ParseModel(doc, node, mpath.Index(i)));
      std::vector<std::pair<std::string, YAML::Node>> names = {{m.name, node["name"]}};
      for (size_t a = 0; a < m.aliases.size(); ++a)
        names.emplace_back(m.aliases[a], node["aliases"][a]);
      for (const auto& [name, at] : names) {
        const std::string key = NormalizeName(name);
        auto [it, inserted] = catalog.index_.emplace(key, catalog.models_.size());
        if (!inserted && it->second != catalog.models_.size()) {
          const std::string& other = catalog.models_[it->second].name;
          return doc.Error(at, mpath.Index(i).Key(name == m.name ? "name" : "aliases"),
                           "duplicate model name \"" + name + "\" (already used by " + other + ")");
        }
      }
      catalog.models_.push_back(std::move(m));
    }
    return catalog;
  } catch (const YAML::Exception& e) {
    const int line = e.mark.is_null() ? 0 : e.mark.line + 1;
    return Status::InvalidArgument(FormatYamlError(source_name, line, "", e.msg));
  }
}

Result<Catalog> Catalog::LoadFile(const std::string& path) {
  GPUPOOL_ASSIGN_OR_RETURN(std::string text, ReadTextFile(path));
  return Parse(text, path);
}

const Catalog& Catalog::Builtin() {
  static const Catalog* const builtin = [] {
    Result<Catalog> parsed = Parse(BuiltinYaml(), "builtin:pool/catalog.yaml");
    if (!parsed.ok()) {
      std::fprintf(stderr, "gpupool: the builtin GPU catalog is invalid: %s\n",
                   parsed.status().ToString().c_str());
      std::abort();
    }
    return new Catalog(std::move(parsed).value());
  }();
  return *builtin;
}

const GpuModel* Catalog::Find(std::string_view name) const {
  auto it = index_.find(NormalizeName(name));
  return it == index_.end() ? nullptr : &models_[it->second];
}

const MigProfile* Catalog::FindMig(std::string_view model, std::string_view profile) const {
  const GpuModel* m = Find(model);
  return m == nullptr ? nullptr : m->FindMig(profile);
}

}  // namespace gpupool
