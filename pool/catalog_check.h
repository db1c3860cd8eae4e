// CheckDevice: does what an agent reports for one device agree with the catalog?
//
// The catalog is the one source of truth for what a GPU model offers; an agent reports what it
// sees. The daemon runs this on every registered device (api/agent_hub) and refuses a node whose
// report contradicts the catalog, naming the field — a wrong catalog file on the agent, a
// mislabelled card, or a forged report would otherwise be scheduled as if it were true.
//
// Rules, for a whole GPU (the model's figures) or a MIG instance (its profile's figures):
//  * the model is in the catalog (by name or alias), and a MIG instance's profile is one of the
//    model's profiles;
//  * compute equals the catalog's exactly (agents derive it from the same catalog);
//  * VRAM is at most the catalog's and at least 90% of it: the driver reports what is usable,
//    which is less than the marketing size (ECC and reserved memory: an L4 shows 23034 of its
//    24576 MiB, an H100 81559 of 81920), never more.
//
// Pure: no I/O. Thread safety: a function of values.
#pragma once

#include <cstdint>
#include <string_view>

#include "base/status.h"
#include "pool/catalog.h"

namespace gpupool {

struct ReportedDevice {
  std::string_view model;
  std::string_view mig_profile;  // empty: a whole GPU
  int64_t milli_tflops = 0;
  int64_t vram_mib = 0;
};

// Smallest share of the catalog's VRAM an agent may report, in per-mille.
inline constexpr int64_t kMinReportedVramPermille = 900;

// OK, or INVALID_ARGUMENT "<field>.vram_mib: 40960 MiB contradicts the catalog: H100-SXM has
// 81920 MiB (a device may report 73728 to 81920)". `field` names the device, e.g.
// "register.devices[3]".
Status CheckDevice(const Catalog& catalog, const ReportedDevice& device, std::string_view field);

}  // namespace gpupool
