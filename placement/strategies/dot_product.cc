#include "placement/strategies/dot_product.h"

#include "placement/fit.h"

namespace gpupool::placement {
namespace {

class DotProduct final : public StrategyPlugin {
 public:
  bool Score(const NodeState& node, const CompiledRequest& req, const DeviceSet& candidates,
             Scored* out) const override {
    if (!ChooseDevices(node, req, candidates, &out->devices)) return false;
    int64_t gpu_req = 0;
    for (int k = 0; k < out->devices.n; ++k)
      gpu_req += NeedMilli(
          node.devices[static_cast<size_t>(out->devices.idx[static_cast<size_t>(k)])], req);
    out->score = DotProductScore(node.cpu_free(), req.cpu_milli, node.idle_milli, gpu_req);
    return true;
  }
};

}  // namespace

int64_t DotProductScore(int64_t cpu_free, int64_t cpu_req, int64_t gpu_free_milli,
                        int64_t gpu_req_milli) {
  const double dot =
      static_cast<double>(cpu_free) / 128000.0 * static_cast<double>(cpu_req) / 128000.0 +
      static_cast<double>(gpu_free_milli) / 8000.0 * static_cast<double>(gpu_req_milli) / 8000.0;
  return static_cast<int64_t>(100.0 * (1.0 - 0.5 * dot));
}

std::unique_ptr<StrategyPlugin> MakeDotProduct() { return std::make_unique<DotProduct>(); }

}  // namespace gpupool::placement
