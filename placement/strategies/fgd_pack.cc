#include "placement/strategies/fgd_pack.h"

#include "placement/fit.h"
#include "placement/strategies/fgd.h"

namespace gpupool::placement {
namespace {

class FgdPack final : public StrategyPlugin {
 public:
  explicit FgdPack(const PluginEnv& env) : model_(env.workload) {}
  bool Score(const NodeState& node, const CompiledRequest& req, const DeviceSet& candidates,
             Scored* out) const override {
    double delta = 0;
    if (!FgdChoose(model_, node, req, candidates, &out->devices, &delta)) return false;
    const int64_t idle_after = node.idle_milli;  // before placing: fullest node first
    out->score = FgdQuantised(delta) * (int64_t{1} << 32) - idle_after;
    return true;
  }
  void WorkloadChanged() override { model_.Clear(); }

 private:
  FragModel model_;
};

}  // namespace

std::unique_ptr<StrategyPlugin> MakeFgdPack(const PluginEnv& env) {
  return std::make_unique<FgdPack>(env);
}

}  // namespace gpupool::placement
