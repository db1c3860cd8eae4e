// Bound: how much GPU any placement policy could have allocated — a proven lower bound on the
// replay's metric, for the exact arrival sequence of a seed.
//
// The question: of a set of GPU tasks, what is the most milli-GPU that fits on the nodes at once
// (tasks never depart; any subset may be left out)? Whatever a policy does, online or offline,
// what it has allocated after task i is a packing of some subset of tasks 0…i, so this maximum
// bounds it. Its upper bound here is a weak-duality certificate of a configuration LP:
//
//   UB = Σ_t m_t · π_t  +  Σ_j n_j · max(0, s_j − w_j)
//
// for task classes j (count n_j, GPU demand s_j = num_gpu × gpu_milli) with any credit w_j ≥ 0,
// node types t (m_t identical nodes), and π_t ≥ the largest Σ w_j over tasks one node of type t
// can host together. For a packing P: Σ_{i∈P} s_i ≤ Σ_{i∈P} w_i + Σ_{i∈P} max(0, s_i − w_i); the
// first sum, node by node, is ≤ Σ_t m_t π_t, the second ≤ Σ_j n_j max(0, s_j − w_j). Every
// choice of w is therefore a valid bound; the search only makes it small.
//
// π_t is itself bounded from above by Lagrangian relaxation of the node's CPU and memory: with
// prices β, γ ≥ 0, Σ w ≤ β·cpu_t + γ·mem_t + max over GPU-feasible sets of Σ (w_j − β cpu_j −
// γ mem_j) whenever the set also fits CPU and memory. The GPU-feasible maximum is exact: each GPU
// is a knapsack of 1000 milli over the share classes (unbounded counts, a relaxation), whole-GPU
// tasks take whole GPUs, and a dynamic program over the node's GPUs places k-GPU tasks. Classes a
// node cannot host alone (model, CPU, memory, too few GPUs) are left out of its π_t. CPU-only
// tasks demand no GPU and are left out (dropping them never lowers allocated GPU).
//
// Thread safety: plain functions and values.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "placement/sim/trace.h"

namespace gpupool::placement::sim {

struct PackingNodeType {
  int64_t count = 0;
  int64_t cpu_milli = 0, memory_mib = 0;
  int gpus = 0;
  std::string model;
};

struct PackingClass {
  int64_t count = 0;
  int64_t cpu_milli = 0, memory_mib = 0;
  int num_gpu = 0;
  int32_t gpu_milli = 0;  // per GPU; < 1000 only when num_gpu = 1
  std::string gpu_spec;   // "|"-separated allowed models; empty: any

  int64_t Demand() const { return int64_t{num_gpu} * gpu_milli; }
};

struct PackingInstance {
  std::vector<PackingNodeType> types;
  std::vector<PackingClass> classes;
};

// Node types (identical hardware) of `nodes`; classes of the GPU tasks of `tasks` (CPU-only
// tasks are left out), each with count 0 — SetCounts fills them.
PackingInstance MakeInstance(const std::vector<TraceNode>& nodes,
                             const std::vector<TraceTask>& tasks);
// The class of each task of `tasks` in `instance` (−1 for CPU-only tasks).
std::vector<int> ClassOf(const PackingInstance& instance, const std::vector<TraceTask>& tasks);

// The multipliers of the certificate: w per class (milli-GPU), and per node type the price of
// the node's whole CPU and whole memory (milli-GPU), i.e. β·cpu_t and γ·mem_t.
struct PackingDual {
  std::vector<double> w;
  std::vector<double> cpu_price, mem_price;
};

// The trivial dual: w_j = s_j, no CPU or memory price (it certifies at most the capacity).
PackingDual StartDual(const PackingInstance& instance);

// UB for this dual (formula above), in milli-GPU. Negative entries are read as 0.
double DualBound(const PackingInstance& instance, const PackingDual& dual);

// The least UB of this family: the configuration LP whose dual the certificate is, solved by
// column generation (lp.h) — each node type's best set for the current duals is the column to
// add. Leaves the LP's dual in *dual and returns min(DualBound(*dual), Σ n_j s_j).
double PackingUpperBound(const PackingInstance& instance, PackingDual* dual);

struct MetricBound {
  double unallocated_pct = 0;  // lower bound on 100 − mean allocated % over the bin's events
  double packable_pct = 0;     // UB of the bin's last prefix, % of capacity
  int events = 0;              // events in the bin
};

// The lower bound on the replay metric at arrived = x% (replay.h) for this arrival sequence:
// after event i, allocated ≤ min(arrived_i, UB(prefix_c) for checkpoints c ≥ i, UB(prefix_c) +
// arrived_i − arrived_c for checkpoints c ≤ i); checkpoints every `stride` events of the bin.
MetricBound UnallocatedLowerBound(const std::vector<TraceNode>& nodes,
                                  const std::vector<TraceTask>& arrivals, int x = 100,
                                  int stride = 5);

}  // namespace gpupool::placement::sim
