#include "placement/strategies/best_fit.h"

#include "placement/fit.h"

namespace gpupool::placement {
namespace {

// GPU demand of the request on the chosen devices, in milli-GPU.
int64_t GpuReq(const NodeState& node, const CompiledRequest& req, const DeviceSet& chosen) {
  int64_t m = 0;
  for (int k = 0; k < chosen.n; ++k)
    m += NeedMilli(node.devices[static_cast<size_t>(chosen.idx[static_cast<size_t>(k)])], req);
  return m;
}

class BestFit final : public StrategyPlugin {
 public:
  bool Score(const NodeState& node, const CompiledRequest& req, const DeviceSet& candidates,
             Scored* out) const override {
    if (!ChooseDevices(node, req, candidates, &out->devices)) return false;
    out->score = BestFitScore(node.cpu_free(), req.cpu_milli, node.idle_milli,
                              GpuReq(node, req, out->devices));
    return true;
  }
};

}  // namespace

int64_t BestFitScore(int64_t cpu_free, int64_t cpu_req, int64_t gpu_free_milli,
                     int64_t gpu_req_milli) {
  // 10^6 × 100 × (1 − ½ Δcpu/128000 − ½ Δgpu/8000) = 10^8 − 390.625 Δcpu − 6250 Δgpu.
  // ×8 keeps it integral: compare 8·10^8 − 3125 Δcpu − 50000 Δgpu.
  return 800'000'000 - 3125 * (cpu_free - cpu_req) - 50'000 * (gpu_free_milli - gpu_req_milli);
}

std::unique_ptr<StrategyPlugin> MakeBestFit() { return std::make_unique<BestFit>(); }

}  // namespace gpupool::placement
