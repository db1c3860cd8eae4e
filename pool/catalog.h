// Catalog: the GPU models gpupool knows — vendor, dense bf16/fp16 TFLOPS, VRAM and MIG profiles.
//
// The catalog normalizes cards across vendors into the two numbers the scheduler counts:
// compute in milli-TFLOPS (dense bf16, or fp16 where the card has no bf16 — see
// GpuModel::ComputeMilliTflops) and memory in MiB. The shipped table lives in pool/catalog.yaml
// (every figure cites its datasheet) and is compiled into the binary: Catalog::Builtin() needs
// no file. Operators may load their own file with LoadFile(); validation errors name the file,
// the key and the line ("catalog.yaml:42: models[3].vram_mib: must be a positive integer, …").
//
// Lookup by model name ignores case, spaces, '-', '_' and '.', and accepts each model's aliases
// ("h100" → H100-SXM, "NVIDIA A100-SXM4-40GB" → A100-40GB); see docs/catalog.md.
//
// Invariants of a loaded Catalog: at least one model; names and aliases unique after
// normalization; fp16 > 0, bf16 >= 0, vram > 0; every MIG profile has 1..7 compute slices,
// vram ≤ the card's, 1..7 instances, and a unique name within its model; a placement rule, where
// stated, has 1..8 memory slices and ascending starts that keep the instance within the 8.
//
// Thread safety: immutable after construction; Builtin() is initialized once, thread-safely.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "pool/resources.h"

namespace gpupool {

// A MIG profile: an isolated slice of one GPU.
struct MigProfile {
  std::string name;          // "1g.10gb"
  int compute_slices = 0;    // the "1g" part; a full GPU has kMigComputeSlices
  int64_t milli_tflops = 0;  // card compute × compute_slices / 7, rounded down
  int64_t vram_mib = 0;
  int max_instances = 0;  // how many fit on one GPU
  // Placement rule (NVIDIA MIG User Guide; see pool/catalog.yaml): an instance occupies
  // `memory_slices` contiguous memory slices of the GPU's kMigMemorySlices, beginning at one of
  // `starts` (ascending). 0 and empty when the catalog does not state it; pool/mig_layout.h
  // lays out only profiles that have it.
  int memory_slices = 0;
  std::vector<int> starts;

  Resources resources() const { return {milli_tflops, vram_mib}; }
};

inline constexpr int kMigComputeSlices = 7;
inline constexpr int kMigMemorySlices = 8;

struct GpuModel {
  std::string name;         // canonical, e.g. "H100-SXM"
  std::string vendor;       // "NVIDIA", "AMD"
  std::string form_factor;  // "SXM5", "PCIe", "OAM"; informational
  std::vector<std::string> aliases;
  int64_t bf16_milli_tflops = 0;  // 0 = no bf16
  int64_t fp16_milli_tflops = 0;
  int64_t vram_mib = 0;
  std::vector<MigProfile> mig_profiles;
  // From the datasheet, 0 = not stated. Informational for the scheduler; the agent's simulated
  // backend draws power and link bandwidth from them.
  int32_t tdp_watts = 0;
  int32_t gpu_link_gb_per_s = 0;  // NVLink / Infinity Fabric per GPU, both directions; 0 = none
  int32_t pcie_gb_per_s = 0;      // host interface x16, both directions

  // What the scheduler counts: bf16 if the card has it, else fp16.
  int64_t ComputeMilliTflops() const {
    return bf16_milli_tflops > 0 ? bf16_milli_tflops : fp16_milli_tflops;
  }
  Resources resources() const { return {ComputeMilliTflops(), vram_mib}; }
  // Exact, case-insensitive profile name; nullptr if the model has no such profile.
  const MigProfile* FindMig(std::string_view profile) const;
};

class Catalog {
 public:
  // Reads and parses a catalog file; errors name `path`.
  static Result<Catalog> LoadFile(const std::string& path);
  // Parses catalog YAML; `source_name` is used in error messages.
  static Result<Catalog> Parse(std::string_view yaml_text, std::string_view source_name);
  // The catalog compiled from pool/catalog.yaml. Aborts at first use if that file is invalid
  // (a build defect the tests catch).
  static const Catalog& Builtin();
  // The text of pool/catalog.yaml as compiled in.
  static std::string_view BuiltinYaml();

  // By name or alias, ignoring case and separators; nullptr when unknown.
  const GpuModel* Find(std::string_view name) const;
  // The profile of a model (both looked up as above); nullptr when either is unknown.
  const MigProfile* FindMig(std::string_view model, std::string_view profile) const;

  // In file order.
  const std::vector<GpuModel>& models() const { return models_; }
  const std::string& source() const { return source_; }

  // "H100 SXM5" → "h100sxm5": the key Find() compares.
  static std::string NormalizeName(std::string_view name);

 private:
  Catalog() = default;

  std::string source_;
  std::vector<GpuModel> models_;
  std::unordered_map<std::string, size_t> index_;  // normalized name/alias → models_ index
};

}  // namespace gpupool
