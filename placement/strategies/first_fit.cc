#include "placement/strategies/first_fit.h"

#include "placement/fit.h"

namespace gpupool::placement {
namespace {

// Every feasible node scores 0, so the index's tie order alone decides: the earliest node.
class FirstFit final : public StrategyPlugin {
 public:
  bool Score(const NodeState& node, const CompiledRequest& req, const DeviceSet& candidates,
             Scored* out) const override {
    out->score = 0;
    return ChooseDevices(node, req, candidates, &out->devices);
  }
};

}  // namespace

std::unique_ptr<StrategyPlugin> MakeFirstFit() { return std::make_unique<FirstFit>(); }

}  // namespace gpupool::placement
