#include "placement/strategies/fgd.h"

#include "placement/fit.h"

namespace gpupool::placement {
namespace {

class Fgd final : public StrategyPlugin {
 public:
  explicit Fgd(const PluginEnv& env) : model_(env.workload) {}
  bool Score(const NodeState& node, const CompiledRequest& req, const DeviceSet& candidates,
             Scored* out) const override {
    double delta = 0;
    if (!FgdChoose(model_, node, req, candidates, &out->devices, &delta)) return false;
    out->score = FgdQuantised(delta);
    return true;
  }
  void WorkloadChanged() override { model_.Clear(); }

 private:
  FragModel model_;
};

}  // namespace

bool FgdChoose(const FragModel& model, const NodeState& node, const CompiledRequest& req,
               const DeviceSet& candidates, DeviceSet* chosen, double* delta) {
  const int64_t cpu_after = node.cpu_free() - req.cpu_milli;
  FragChange changes[kMaxDevicesPerNode];
  if (req.kind != RequestKind::kFractional || req.gpu_count != 1) {
    if (!ChooseDevices(node, req, candidates, chosen)) return false;
    const int n = MakeChanges(node, req, *chosen, changes);
    *delta = model.Delta(node, changes, n, cpu_after);
    return true;
  }
  int best = -1;
  double best_delta = 0;
  for (int k = 0; k < candidates.n; ++k) {
    const int i = candidates.idx[static_cast<size_t>(k)];
    const DeviceState& d = node.devices[static_cast<size_t>(i)];
    if (best >= 0) {
      const DeviceState& b = node.devices[static_cast<size_t>(best)];
      if (d.free_milli == b.free_milli && d.model == b.model) continue;  // same outcome
    }
    DeviceSet one;
    one.Push(i);
    if (!SpillFits(node, req, one)) continue;
    MakeChanges(node, req, one, changes);
    const double dl = model.Delta(node, changes, 1, cpu_after);
    const bool better =
        best < 0 || dl < best_delta ||
        (dl == best_delta && d.free_milli < node.devices[static_cast<size_t>(best)].free_milli);
    if (better) best = i, best_delta = dl;
  }
  if (best < 0) return false;
  chosen->n = 0;
  chosen->Push(best);
  *delta = best_delta;
  return true;
}

std::unique_ptr<StrategyPlugin> MakeFgd(const PluginEnv& env) { return std::make_unique<Fgd>(env); }

}  // namespace gpupool::placement
