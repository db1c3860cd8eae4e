#include "agent/catalog.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <vector>

namespace gpupool::agent {
namespace {

ModelSpec Spec(std::string name, std::string vendor, int64_t milli_tflops, int64_t vram_gib,
               int32_t tdp, int32_t idle, bool mig, int32_t nvlink_gbps, int32_t pcie_gbps) {
  ModelSpec s;
  s.name = std::move(name);
  s.vendor = std::move(vendor);
  s.milli_tflops = milli_tflops;
  s.vram_mib = vram_gib * 1024;
  s.tdp_watts = tdp;
  s.idle_watts = idle;
  s.mig_capable = mig;
  s.nvlink_gbps = nvlink_gbps;
  s.pcie_gbps = pcie_gbps;
  return s;
}

std::string Lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

bool Contains(const std::string& hay, std::string_view needle) {
  return hay.find(needle) != std::string::npos;
}

std::string Where(const std::string& path, const YAML::Node& n, std::string_view key) {
  return path + ":" + std::to_string(n.Mark().line + 1) + ": key '" + std::string(key) + "'";
}

// Reads a non-negative decimal ("989", "989.4") into thousandths.
bool ReadMilli(const YAML::Node& n, int64_t* out) {
  if (!n.IsScalar()) return false;
  try {
    double v = n.as<double>();
    if (!(v >= 0) || v > 1e9) return false;
    *out = static_cast<int64_t>(std::llround(v * 1000.0));
    return true;
  } catch (const YAML::Exception&) {
    return false;
  }
}

Status ReadModel(const std::string& path, const std::string& name, const YAML::Node& m,
                 ModelTable* table) {
  if (!m.IsMap()) return Status::InvalidArgument(Where(path, m, name) + ": expected a map");
  ModelSpec spec;
  if (const ModelSpec* base = table->Find(name)) spec = *base;
  spec.name = name;
  int64_t bf16 = -1, fp16 = -1;  // compute = bf16 when > 0, else fp16
  for (const auto& kv : m) {
    const std::string key = kv.first.as<std::string>();
    const YAML::Node& v = kv.second;
    int64_t milli = 0;
    if (key == "tflops" || key == "bf16_tflops" || key == "dense_bf16_tflops" ||
        key == "fp16_tflops") {
      if (!ReadMilli(v, &milli)) {
        return Status::InvalidArgument(Where(path, v, name + "." + key) + ": expected a number");
      }
      (key == "fp16_tflops" ? fp16 : bf16) = milli;
    } else if (key == "milli_tflops") {
      if (!ReadMilli(v, &milli)) {
        return Status::InvalidArgument(Where(path, v, name + "." + key) + ": expected a number");
      }
      spec.milli_tflops = milli / 1000;
    } else if (key == "vram_mib" || key == "vram_gib" || key == "vram_gb" || key == "memory_mib") {
      if (!ReadMilli(v, &milli)) {
        return Status::InvalidArgument(Where(path, v, name + "." + key) + ": expected a number");
      }
      spec.vram_mib = (key == "vram_gib" || key == "vram_gb") ? milli * 1024 / 1000 : milli / 1000;
    } else if (key == "vendor" && v.IsScalar()) {
      spec.vendor = v.as<std::string>();
    }
    // Other catalog keys (MIG profiles, aliases…) are the scheduler's business.
  }
  if (bf16 > 0) {
    spec.milli_tflops = bf16;
  } else if (fp16 > 0) {
    spec.milli_tflops = fp16;
  }
  if (spec.milli_tflops <= 0 || spec.vram_mib <= 0) {
    return Status::InvalidArgument(Where(path, m, name) +
                                   ": needs positive TFLOPS and VRAM (tflops:, vram_mib:)");
  }
  table->Put(std::move(spec));
  return Status::Ok();
}

}  // namespace

ModelTable ModelTable::BuiltIn() {
  ModelTable t;
  // name, vendor, dense bf16 milli-TFLOPS (values of pool/catalog.yaml), VRAM GiB, TDP W, idle W,
  // MIG, NVLink Gbps, PCIe Gbps.
  t.Put(Spec("H200", "nvidia", 989'500, 141, 700, 90, true, 7200, 512));
  t.Put(Spec("H100-SXM", "nvidia", 989'500, 80, 700, 90, true, 7200, 512));
  t.Put(Spec("H100-PCIe", "nvidia", 756'500, 80, 350, 50, true, 4800, 512));
  t.Put(Spec("A100-40GB", "nvidia", 312'000, 40, 400, 55, true, 4800, 256));
  t.Put(Spec("A100-80GB", "nvidia", 312'000, 80, 400, 55, true, 4800, 256));
  t.Put(Spec("L40S", "nvidia", 362'050, 48, 350, 40, false, 0, 256));
  t.Put(Spec("L4", "nvidia", 121'000, 24, 72, 16, false, 0, 128));
  t.Put(Spec("A10", "nvidia", 125'000, 24, 150, 20, false, 0, 256));
  t.Put(Spec("T4", "nvidia", 65'000, 16, 70, 10, false, 0, 128));              // fp16: no bf16
  t.Put(Spec("V100-16GB", "nvidia", 125'000, 16, 300, 40, false, 2400, 128));  // fp16
  t.Put(Spec("V100-32GB", "nvidia", 125'000, 32, 300, 40, false, 2400, 128));  // fp16
  t.Put(Spec("MI300X", "amd", 1'307'400, 192, 750, 120, false, 8192, 512));
  t.Put(Spec("MI250X", "amd", 383'000, 128, 560, 90, false, 6400, 256));
  return t;
}

const ModelSpec* ModelTable::Find(std::string_view model) const {
  auto it = models_.find(std::string(model));
  return it == models_.end() ? nullptr : &it->second;
}

Status ModelTable::LoadCatalogFile(const std::string& path) {
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const YAML::BadFile&) {
    return Status::NotFound(path + ": cannot open catalog file");
  } catch (const YAML::ParserException& e) {
    return Status::InvalidArgument(path + ":" + std::to_string(e.mark.line + 1) + ": " + e.msg);
  }
  YAML::Node models = root.IsMap() && root["models"] ? root["models"] : root;
  if (models.IsSequence()) {
    for (const auto& m : models) {
      YAML::Node name = m.IsMap() ? (m["name"] ? m["name"] : m["model"]) : YAML::Node();
      if (!name || !name.IsScalar()) {
        return Status::InvalidArgument(Where(path, m, "models[]") + ": each model needs name:");
      }
      GPUPOOL_RETURN_IF_ERROR(ReadModel(path, name.as<std::string>(), m, this));
    }
    return Status::Ok();
  }
  if (models.IsMap()) {
    for (const auto& kv : models) {
      GPUPOOL_RETURN_IF_ERROR(ReadModel(path, kv.first.as<std::string>(), kv.second, this));
    }
    return Status::Ok();
  }
  return Status::InvalidArgument(path + ":1: expected `models:` with a list of GPU models");
}

std::optional<std::string> ModelFromNvmlName(std::string_view nvml_name) {
  const std::string n = Lower(nvml_name);
  if (Contains(n, "h200")) return "H200";
  if (Contains(n, "h100")) {
    if (Contains(n, "pcie")) return "H100-PCIe";
    return "H100-SXM";  // "NVIDIA H100 80GB HBM3", "NVIDIA H100-SXM5-80GB"
  }
  if (Contains(n, "a100")) {
    if (Contains(n, "80gb")) return "A100-80GB";
    return "A100-40GB";
  }
  if (Contains(n, "l40s")) return "L40S";
  if (Contains(n, " l4") || n == "l4") return "L4";
  if (Contains(n, "a10") && !Contains(n, "a100")) return "A10";
  if (Contains(n, "t4")) return "T4";
  if (Contains(n, "v100")) return Contains(n, "16gb") ? "V100-16GB" : "V100-32GB";
  if (Contains(n, "mi300x")) return "MI300X";
  if (Contains(n, "mi250x")) return "MI250X";
  return std::nullopt;
}

Result<MigProfile> ParseMigProfile(std::string_view profile) {
  // "<g>g.<m>gb" with optional "+me" style suffixes, which we reject to stay simple.
  auto bad = [&] {
    return Status::InvalidArgument("MIG profile '" + std::string(profile) +
                                   "': expected <slices>g.<memory>gb, e.g. 3g.40gb");
  };
  const size_t g = profile.find("g.");
  if (g == std::string_view::npos || g == 0) return bad();
  if (profile.size() < g + 5 || profile.substr(profile.size() - 2) != "gb") return bad();
  int slices = 0;
  int64_t gb = 0;
  auto r1 = std::from_chars(profile.data(), profile.data() + g, slices);
  auto mem = profile.substr(g + 2, profile.size() - g - 4);
  auto r2 = std::from_chars(mem.data(), mem.data() + mem.size(), gb);
  if (r1.ec != std::errc() || r1.ptr != profile.data() + g || r2.ec != std::errc() ||
      r2.ptr != mem.data() + mem.size() || slices < 1 || slices > 7 || gb < 1) {
    return bad();
  }
  return MigProfile{slices, gb * 1024};
}

}  // namespace gpupool::agent
