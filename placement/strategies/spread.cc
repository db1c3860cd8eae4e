#include "placement/strategies/spread.h"

#include "placement/fit.h"

namespace gpupool::placement {
namespace {

class Spread final : public StrategyPlugin {
 public:
  bool Score(const NodeState& node, const CompiledRequest& req, const DeviceSet& candidates,
             Scored* out) const override {
    if (!ChooseDevices(node, req, candidates, &out->devices)) return false;
    out->score = SpreadScore(node, req, out->devices);
    return true;
  }
};

}  // namespace

int64_t SpreadScore(const NodeState& node, const CompiledRequest& req, const DeviceSet& chosen) {
  int64_t idle_after = node.idle_milli;
  for (int k = 0; k < chosen.n; ++k) {
    const DeviceState& d = node.devices[static_cast<size_t>(chosen.idx[static_cast<size_t>(k)])];
    idle_after -= req.kind == RequestKind::kFractional
                      ? std::min<int64_t>(d.free_milli, NeedMilli(d, req))
                      : d.free_milli;
  }
  // Idle GPU first; CPU left (in whole cores, < 2^20) breaks ties between equally idle nodes.
  return idle_after * (int64_t{1} << 20) + (node.cpu_free() - req.cpu_milli) / 1000;
}

std::unique_ptr<StrategyPlugin> MakeSpread() { return std::make_unique<Spread>(); }

}  // namespace gpupool::placement
