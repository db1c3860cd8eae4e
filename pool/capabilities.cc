#include "pool/capabilities.h"

#include <array>

namespace gpupool {

namespace {

constexpr std::array<std::string_view, 6> kRequirable = {"vram_cap", "compute_share", "spill",
                                                         "sandbox",  "vram_scrub",    "mps"};

}  // namespace

std::span<const std::string_view> RequirableCapabilities() { return kRequirable; }

CapabilityMask CapabilityBit(std::string_view name) {
  for (size_t i = 0; i < kRequirable.size(); ++i) {
    if (kRequirable[i] == name) return CapabilityMask{1} << i;
  }
  return 0;
}

Result<CapabilityMask> CapabilityMaskOf(const std::vector<std::string>& names) {
  CapabilityMask mask = 0;
  for (const std::string& n : names) {
    const CapabilityMask bit = CapabilityBit(n);
    if (bit == 0) {
      std::string known;
      for (std::string_view k : kRequirable) known += (known.empty() ? "" : ", ") + std::string(k);
      return Status::InvalidArgument("unknown capability '" + n + "' (known: " + known + ")");
    }
    mask |= bit;
  }
  return mask;
}

std::vector<std::string> CapabilityNames(CapabilityMask mask) {
  std::vector<std::string> out;
  for (size_t i = 0; i < kRequirable.size(); ++i) {
    if ((mask >> i) & 1) out.emplace_back(kRequirable[i]);
  }
  return out;
}

std::string CapabilityList(CapabilityMask mask) {
  std::string out;
  for (const std::string& n : CapabilityNames(mask)) out += (out.empty() ? "" : ", ") + n;
  return out;
}

CapabilityMask DefaultRequiredCapabilities() {
  return CapabilityBit("vram_cap") | CapabilityBit("compute_share") | CapabilityBit("sandbox");
}

Result<std::vector<std::string>> RequirementAsWritten(std::vector<std::string> names,
                                                      bool empty_is_default) {
  if (names.empty()) {
    return empty_is_default ? CapabilityNames(DefaultRequiredCapabilities())
                            : std::vector<std::string>{};
  }
  for (const std::string& n : names) {
    if (n != kNoRequirement) continue;
    if (names.size() > 1) {
      return Status::InvalidArgument("'none' stands alone: it means no requirement");
    }
    return std::vector<std::string>{};
  }
  return names;
}

}  // namespace gpupool
