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

  // Per GPU shape (per-device share g, device count, allowed models — classes that differ only
  // in CPU or memory share one), what the node's devices offer it.
  struct Agg {
    uint64_t version = ~uint64_t{0};
    double f = 0;                    // FGD's F_n
    double h = 0;                    // the counting measure H_n
    std::vector<int32_t> count_fit;  // per shape: allowed devices with free ≥ g
    std::vector<int32_t> sliver;     // per shape: idle share the shape cannot use (if it fits)
    std::vector<int32_t> units;      // per shape: Σ ⌊free / g⌋ over allowed devices
  };
  struct Deltas {
    double f = 0;         // ΔF
    double h = 0;         // ΔH
    double s = 0;         // Δ stranded GPU (set_cpu_per_gpu)
    double waste = 0;     // Δ expected share waste (set_share_waste)
    double pressure = 0;  // pressured share consumed (set_pinned_pressure)
  };

  // Optional terms, off until set. Stranded GPU: of the node's idle share, what its free CPU
  // cannot feed at `gpu_per_cpu` milli-GPU per milli-core (a typical task's ratio):
  // max(0, G − cpu_free · gpu_per_cpu). Expected share waste: Σ over the changed devices of
  // waste[free after] − waste[free before] (share_patterns.h; a free share ≥ 1000 counts 0).
  void set_gpu_per_cpu(double gpu_per_cpu) { gpu_per_cpu_ = gpu_per_cpu; }
  void set_share_waste(std::vector<double> waste) { waste_ = std::move(waste); }
  // Pinned pressure: per node type (NodeState::type) and model id (0..63), what a milli-GPU of
  // such a device costs because pinned classes lean on it (fgd_pack.h, PinnedLoad). Delta's
  // `pressure` is Σ over the changed devices of (free before − free after) · that. Empty (or a
  // type beyond the table): 0.
  void set_pinned_pressure(std::vector<std::vector<double>> by_type) {
    pressure_ = std::move(by_type);
  }

  const Agg& Of(const NodeState& node) const;
  // F (and H) after the changes minus now.
  Deltas Delta(const NodeState& node, const FragChange* changes, int n, int64_t cpu_after,
               int64_t mem_after) const;
  // F_n itself (for reports and tests).
  double F(const NodeState& node) const { return Of(node).f; }
  // Call when the workload changed.
  void Clear() {
    cache_.clear();
    built_ = false;
  }

 private:
  // The workload compiled: per GPU shape, its classes (terms) and their summed weights.
  struct Term {
    int64_t cpu_milli = 0, memory_mib = 0;
    double f_weight = 0;  // p
    double h_demand = 0;  // p / reach × g k
    double inv_cpu = 0, inv_mem = 0;
  };
  struct Shape {
    int32_t gpu_milli = 0;
    int gpu_count = 0;
    uint64_t model_mask = 0;
    double inv_gpu = 0;
    double f_weight = 0, h_weight = 0, h_demand = 0;  // Σ p, Σ p / reach, Σ p / reach × g k
    int64_t max_memory = 0;                           // of its classes
    int begin = 0, end = 0;                           // its terms, by CPU ascending
  };
  void BuildShapes() const;
  void Measures(const int32_t* count, const int32_t* sliver, const int32_t* units, int32_t idle,
                int64_t cpu_free, int64_t mem_free, double* f, double* h) const;
  double Waste(int32_t free) const;

  const std::vector<FragClass>* workload_;
  mutable std::vector<Agg> cache_;
  mutable bool built_ = false;  // shapes_, terms_, idle_f_ and idle_h_ (first use after Clear)
  mutable std::vector<Shape> shapes_;
  mutable std::vector<Term> terms_;  // the GPU classes
  // CPU-only classes count all idle share, whatever the node: Σ p (in F), Σ p / reach (in H).
  mutable double idle_f_ = 0, idle_h_ = 0;
  mutable std::vector<int32_t> scratch_count_, scratch_sliver_, scratch_units_;
  double gpu_per_cpu_ = 0;
  std::vector<double> waste_;
  std::vector<std::vector<double>> pressure_;  // by node type, then model id
};

// FGD's quantised score: int(100 · sigmoid(−ΔF / 1000)), ΔF in milli-GPU.
int64_t FgdQuantised(double delta);

// The device changes a placement of `req` on `chosen` makes: new free share per device.
int MakeChanges(const NodeState& node, const CompiledRequest& req, const DeviceSet& chosen,
                FragChange* out);

}  // namespace gpupool::placement
