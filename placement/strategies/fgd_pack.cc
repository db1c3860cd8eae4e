#include "placement/strategies/fgd_pack.h"

#include <cmath>

#include "placement/frag.h"
#include "placement/strategies/fgd.h"

namespace gpupool::placement {
namespace {

// Weight of FGD's term and the score's quantum; chosen by replaying the Alibaba trace
// (docs/placement.md has the sweep).
constexpr double kFgdWeight = 2.0;
constexpr double kQuantumMilli = 40.0;

class FgdPack final : public StrategyPlugin {
 public:
  explicit FgdPack(const PluginEnv& env) : model_(env.workload) {}
  bool Score(const NodeState& node, const CompiledRequest& req, const DeviceSet& candidates,
             Scored* out) const override {
    auto cost = [](const FragModel::Deltas& d) { return FgdPackCost(d.h, d.f); };
    double c = 0;
    if (!FragChoose(model_, cost, node, req, candidates, &out->devices, &c)) return false;
    out->score = FgdPackScore(c);
    return true;
  }
  void WorkloadChanged() override { model_.Clear(); }
  bool ScoresMemory() const override { return true; }

 private:
  FragModel model_;
};

}  // namespace

double FgdPackCost(double delta_h, double delta_f) { return delta_h + kFgdWeight * delta_f; }

int64_t FgdPackScore(double cost) {
  return static_cast<int64_t>(std::floor(-cost / kQuantumMilli));
}

std::unique_ptr<StrategyPlugin> MakeFgdPack(const PluginEnv& env) {
  return std::make_unique<FgdPack>(env);
}

}  // namespace gpupool::placement
