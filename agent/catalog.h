// ModelTable: what the agent knows about GPU models — dense bf16 TFLOPS (fp16 where a card has
// no bf16), VRAM, board power, MIG support — and how NVML product names map onto catalog model
// names ("NVIDIA H100 80GB HBM3" → "H100-SXM").
//
// The built-in table covers the catalog's models (H200, H100-SXM, H100-PCIe, A100-40GB,
// A100-80GB, L40S, L4, A10, T4, V100-16GB, V100-32GB, MI300X, MI250X) with the numbers of
// pool/catalog.yaml. A catalog YAML (pool/catalog.yaml) may
// override or extend it: LoadCatalogFile() accepts a list of models under `models:` (or a map
// keyed by model name) with `bf16_tflops`/`fp16_tflops` (compute = bf16 when > 0, else fp16) and
// `vram_mib`.
//
// MIG profiles are parsed from their names: "<g>g.<m>gb" is g of 7 compute slices and m GB of
// memory; an instance's compute is the GPU's × g / 7 (integer milli-TFLOPS, rounded down).
//
// Thread safety: a ModelTable is a value; const methods are safe from any thread.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "base/status.h"

namespace gpupool::agent {

struct ModelSpec {
  std::string name;  // catalog model name, e.g. "H100-SXM"
  std::string vendor;
  int64_t milli_tflops = 0;
  int64_t vram_mib = 0;
  int32_t tdp_watts = 300;
  int32_t idle_watts = 60;
  bool mig_capable = false;
  int32_t nvlink_gbps = 0;  // per-pair NVLink bandwidth; 0 = no NVLink
  int32_t pcie_gbps = 256;
};

struct MigProfile {
  int32_t compute_slices = 0;  // of 7
  int64_t vram_mib = 0;
};

class ModelTable {
 public:
  // The built-in table.
  static ModelTable BuiltIn();

  // Loads a catalog YAML over the built-in table. Errors name the file, key and line.
  Status LoadCatalogFile(const std::string& path);

  const ModelSpec* Find(std::string_view model) const;
  void Put(ModelSpec spec) { models_[spec.name] = std::move(spec); }
  const std::map<std::string, ModelSpec>& models() const { return models_; }

 private:
  std::map<std::string, ModelSpec> models_;
};

// Maps an NVML product name to a catalog model name; nullopt when unknown.
// "NVIDIA H100 80GB HBM3" → "H100-SXM", "NVIDIA H100 PCIe" → "H100-PCIe",
// "NVIDIA A100-SXM4-40GB" → "A100-40GB", "Tesla T4" → "T4", …
std::optional<std::string> ModelFromNvmlName(std::string_view nvml_name);

// Parses "3g.40gb" → {3, 40960}. Error for anything else.
Result<MigProfile> ParseMigProfile(std::string_view profile);

}  // namespace gpupool::agent
