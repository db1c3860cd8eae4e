#include "pool/catalog_check.h"

#include <string>

namespace gpupool {
namespace {

Status Contradicts(std::string_view field, std::string_view key, const std::string& what) {
  return Status::InvalidArgument(std::string(field) + "." + std::string(key) + ": " + what);
}

}  // namespace

Status CheckDevice(const Catalog& catalog, const ReportedDevice& d, std::string_view field) {
  const GpuModel* model = catalog.Find(d.model);
  if (model == nullptr) {
    return Contradicts(field, "model",
                       "'" + std::string(d.model) +
                           "' is not in the catalog (add it to the catalog file of the daemon "
                           "and the agent)");
  }
  std::string what = model->name;
  Resources want = model->resources();
  if (!d.mig_profile.empty()) {
    const MigProfile* p = model->FindMig(d.mig_profile);
    if (p == nullptr) {
      return Contradicts(field, "mig_profile",
                         "'" + std::string(d.mig_profile) + "' is not a MIG profile of " +
                             model->name + " in the catalog");
    }
    what += " " + p->name;
    want = p->resources();
  }
  if (d.milli_tflops != want.milli_tflops) {
    return Contradicts(field, "milli_tflops",
                       std::to_string(d.milli_tflops) + " contradicts the catalog: " + what +
                           " has " + std::to_string(want.milli_tflops) + " milli-TFLOPS");
  }
  const int64_t low = want.vram_mib * kMinReportedVramPermille / 1000;
  if (d.vram_mib > want.vram_mib || d.vram_mib < low) {
    return Contradicts(field, "vram_mib",
                       std::to_string(d.vram_mib) + " MiB contradicts the catalog: " + what +
                           " has " + std::to_string(want.vram_mib) + " MiB (a device may report " +
                           std::to_string(low) + " to " + std::to_string(want.vram_mib) + ")");
  }
  return Status::Ok();
}

}  // namespace gpupool
