// FragModel: the fragmentation measure of FGD (Weng et al., ATC '23), incrementally.
//
// For a workload class m (cpu, g milli-GPU per device, k devices, allowed models) and a node
// with idle share G: f_n(m) = G when m cannot run there (CPU-only class, CPU short, fewer than k
// allowed devices with ≥ g free); otherwise the idle slivers m cannot use (Σ free < g over the
// allowed devices, plus everything on devices of other models). F_n = Σ_m p_m f_n(m).
//
// Per node the model caches, for each class, the count of devices with ≥ g free and the sliver
// sum; the change of F for moving a few devices' free share (and the node's CPU) is then O(#classes
// × #changed devices), not a rescan. Cached by node slot and version. Thread safety: none.
#pragma once

#include <cstdint>
#include <vector>

#include "placement/plugin.h"
#include "placement/state.h"

namespace gpupool::placement {

struct FragChange {
  int device = 0;
  int32_t new_free = 0;
};

class FragModel {
 public:
  explicit FragModel(const std::vector<FragClass>* workload) : workload_(workload) {}

  struct Agg {
    uint64_t version = ~uint64_t{0};
    double f = 0;
    std::vector<int32_t> count_fit;  // per class: allowed devices with free ≥ g
    std::vector<int32_t> sliver;     // per class: idle share the class cannot use (if it fits)
  };

  const Agg& Of(const NodeState& node) const;
  // F after the changes minus F now.
  double Delta(const NodeState& node, const FragChange* changes, int n, int64_t cpu_after) const;
  // F_n itself (for reports and tests).
  double F(const NodeState& node) const { return Of(node).f; }
  void Clear() { cache_.clear(); }

 private:
  const std::vector<FragClass>* workload_;
  mutable std::vector<Agg> cache_;
};

// FGD's quantised score: int(100 · sigmoid(−ΔF / 1000)), ΔF in milli-GPU.
int64_t FgdQuantised(double delta);

// The device changes a placement of `req` on `chosen` makes: new free share per device.
int MakeChanges(const NodeState& node, const CompiledRequest& req, const DeviceSet& chosen,
                FragChange* out);

}  // namespace gpupool::placement
