// FragModel: the fragmentation measure of FGD (Weng et al., ATC '23), incrementally.
//
// For a workload class m (cpu, g milli-GPU per device, k devices, allowed models) and a node
// with idle share G: f_n(m) = G when m cannot run there (CPU-only class, CPU short, fewer than k
// allowed devices with ≥ g free); otherwise the idle slivers m cannot use (Σ free < g over the
// allowed devices, plus everything on devices of other models). F_n = Σ_m p_m f_n(m).
//
// A second measure, used by fgd-pack, counts instead of testing: with n_m = how many class-m
// tasks the node can still host (by GPU share, CPU and memory), the share m cannot use is
// H_n(m) = G − n_m · g · k, and H_n = Σ_m w_m H_n(m) with w_m = p_m / reach_m, so classes that
// few nodes can take at all weigh more. H sees the leftover on a GPU that can host one task but
// not two, and CPU or memory that runs out before the GPUs do.
//
// Per node the model caches, per class, the devices with ≥ g free, the sliver sum and Σ ⌊free/g⌋;
// the change of F and H for moving a few devices' free share (and the node's CPU and memory) is
// then O(#classes × #changed devices), not a rescan. Cached by node slot and version.
// Thread safety: none.
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
    double f = 0;                    // FGD's F_n
    double h = 0;                    // the counting measure H_n
    std::vector<int32_t> count_fit;  // per class: allowed devices with free ≥ g
    std::vector<int32_t> sliver;     // per class: idle share the class cannot use (if it fits)
    std::vector<int32_t> units;      // per class: Σ ⌊free / g⌋ over allowed devices
  };
  struct Deltas {
    double f = 0;  // ΔF
    double h = 0;  // ΔH
  };

  const Agg& Of(const NodeState& node) const;
  // F (and H) after the changes minus now.
  Deltas Delta(const NodeState& node, const FragChange* changes, int n, int64_t cpu_after,
               int64_t mem_after) const;
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
