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
    const FragCost cost{0, 1};
    if (!FragChoose(model_, cost, node, req, candidates, &out->devices, &delta)) return false;
    out->score = FgdQuantised(delta);
    return true;
  }
  void WorkloadChanged() override { model_.Clear(); }

 private:
  FragModel model_;
};

}  // namespace

bool FragChoose(const FragModel& model, FragCost cost, const NodeState& node,
                const CompiledRequest& req, const DeviceSet& candidates, DeviceSet* chosen,
                double* best_cost) {
  const int64_t cpu_after = node.cpu_free() - req.cpu_milli;
  const int64_t mem_after = node.mem_free() - req.memory_mib;
  FragChange changes[kMaxDevicesPerNode];
  if (req.kind != RequestKind::kFractional || req.gpu_count != 1) {
    if (!ChooseDevices(node, req, candidates, chosen)) return false;
    const int n = MakeChanges(node, req, *chosen, changes);
    *best_cost = cost(model.Delta(node, changes, n, cpu_after, mem_after));
    return true;
  }
  int best = -1;
  DeviceSet seen;  // devices already tried: an equal free share and model gives the same outcome
  for (int k = 0; k < candidates.n; ++k) {
    const int i = candidates.idx[static_cast<size_t>(k)];
    const DeviceState& d = node.devices[static_cast<size_t>(i)];
    bool same = false;
    for (int j = 0; j < seen.n && !same; ++j) {
      const DeviceState& o = node.devices[static_cast<size_t>(seen.idx[static_cast<size_t>(j)])];
      same = o.free_milli == d.free_milli && o.model == d.model;
    }
    if (same) continue;
    seen.Push(i);
    DeviceSet one;
    one.Push(i);
    if (!SpillFits(node, req, one)) continue;
    MakeChanges(node, req, one, changes);
    const double c = cost(model.Delta(node, changes, 1, cpu_after, mem_after)) +
                     cost.best_fit * changes[0].new_free;
    const bool better =
        best < 0 || c < *best_cost ||
        (c == *best_cost && d.free_milli < node.devices[static_cast<size_t>(best)].free_milli);
    if (better) best = i, *best_cost = c;
  }
  if (best < 0) return false;
  chosen->n = 0;
  chosen->Push(best);
  return true;
}

std::unique_ptr<StrategyPlugin> MakeFgd(const PluginEnv& env) { return std::make_unique<Fgd>(env); }

}  // namespace gpupool::placement
