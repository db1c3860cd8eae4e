#include "placement/strategies/gpu_clustering.h"

#include "placement/fit.h"

namespace gpupool::placement {
namespace {

class GpuClustering final : public StrategyPlugin {
 public:
  bool Score(const NodeState& node, const CompiledRequest& req, const DeviceSet& candidates,
             Scored* out) const override {
    if (!ChooseDevices(node, req, candidates, &out->devices)) return false;
    out->score = GpuClusteringScore(node, RequestKindClass(req));
    return true;
  }
};

}  // namespace

int RequestKindClass(const CompiledRequest& req) {
  if (!req.NeedsDevices()) return -1;
  if (req.kind == RequestKind::kFractional || req.kind == RequestKind::kTimeSlice) return 0;
  if (req.gpu_count <= 2) return req.gpu_count;
  return req.gpu_count <= 4 ? 3 : 4;
}

int64_t GpuClusteringScore(const NodeState& node, int kind) {
  if (kind < 0) return 0;  // CPU-only: no preference, the tie order decides
  int32_t same = 0, other = 0;
  for (int k = 0; k < 5; ++k) (k == kind ? same : other) += node.kinds[static_cast<size_t>(k)];
  int64_t band = 0;
  if (same > 0 && other == 0)
    band = 75;
  else if (same > 0)
    band = 50;
  else if (other == 0)
    band = 25;
  return band + 25 * (8000 - static_cast<int64_t>(node.idle_milli)) / 8000;
}

std::unique_ptr<StrategyPlugin> MakeGpuClustering() { return std::make_unique<GpuClustering>(); }

}  // namespace gpupool::placement
