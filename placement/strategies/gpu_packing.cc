#include "placement/strategies/gpu_packing.h"

#include <algorithm>

#include "placement/fit.h"

namespace gpupool::placement {
namespace {

class GpuPacking final : public StrategyPlugin {
 public:
  bool Score(const NodeState& node, const CompiledRequest& req, const DeviceSet& candidates,
             Scored* out) const override {
    out->score = GpuPackingScore(node, req, candidates, &out->devices);
    return SpillFits(node, req, out->devices);
  }
};

}  // namespace

int64_t GpuPackingScore(const NodeState& node, const CompiledRequest& req,
                        const DeviceSet& candidates, DeviceSet* chosen) {
  // ChooseDevices already prefers the fullest device, i.e. a partly used one when any fits.
  ChooseDevices(node, req, candidates, chosen);
  if (!req.NeedsDevices()) return 0;  // CPU-only: no preference, the tie order decides
  const bool node_in_use = node.full_devices < node.gpu_count;
  if (req.kind == RequestKind::kFractional && req.gpu_count == 1 && chosen->n == 1) {
    const DeviceState& d = node.devices[static_cast<size_t>(chosen->idx[0])];
    if (!d.allocated.IsZero()) return std::max<int64_t>(50, 100 - d.free_milli / 100);
  }
  if (node_in_use) return std::max<int64_t>(33, 50 - chosen->n);
  return 33 - node.gpu_count;
}

std::unique_ptr<StrategyPlugin> MakeGpuPacking() { return std::make_unique<GpuPacking>(); }

}  // namespace gpupool::placement
