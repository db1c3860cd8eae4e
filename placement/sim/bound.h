// Bound: how much GPU any placement policy could have allocated — a proven lower bound on the
// replay's metric, for the exact arrival sequence of a seed.
//
// 1. Packing. What a policy has allocated after task i is a packing of some subset of tasks
// 0…i (tasks never depart). Its upper bound is a weak-duality certificate of a configuration LP:
//
//   UB = Σ_t m_t · π_t  +  Σ_j n_j · max(0, s_j − w_j)
//
// for task classes j (count n_j, GPU demand s_j = num_gpu × gpu_milli) with any credit w_j ≥ 0,
// node types t (m_t identical nodes), and π_t ≥ the largest Σ w_j over tasks one node of type t
// can host together. For a packing P: Σ_{i∈P} s_i = Σ_{i∈P} w_i + Σ_{i∈P} (s_i − w_i); the
// first sum, node by node, is ≤ Σ_t m_t π_t, the second ≤ Σ_j n_j max(0, s_j − w_j). Every
// choice of w is therefore a valid bound; the LP's dual only makes it small. π_t is bounded by
// Lagrangian relaxation of the node's CPU and memory: with prices β, γ ≥ 0 and a set that fits
// them, Σ w ≤ β·cpu_t + γ·mem_t + Σ (w_j − β cpu_j − γ mem_j), and the last sum is maximised
// exactly over GPU-feasible sets: each GPU a knapsack of 1000 milli over the share classes
// (unbounded counts), whole-GPU tasks on whole GPUs, a dynamic program over the node's GPUs for
// k-GPU tasks, CPU-only classes as many as the node holds of each alone. Classes a node cannot
// host alone (model, CPU, memory, GPUs) are left out of its π_t; memory is rounded down to a
// power of two (more packings, still a bound). CPU-only nodes are node types too (no GPU: only
// CPU-only classes fit them); every node of the list is in Σ_t, so no packing escapes the sum.
//
// 2. The protocol's drop rule. A task is dropped only when no node can host it, and then no later
// task that needs at least as much (GPU share or whole GPUs, CPU, memory, a subset of its models:
// it "covers" it) fits either. So for "keys" — tasks whose cover is large — split on the first
// key dropped, T: every key before T was placed (the certificate's term for a forced task is
// (s_j − w_j), without the max), and every task after T that covers T was dropped. With T in a
// bucket [a, b) of arrivals and in one group of its keys (BoundOptions::group_keys): keys before
// a forced, tasks from b on that cover every key of the group left out; plus the scenario "no
// key dropped". used ≤ the largest LP over these
// scenarios, each LP again certified by its dual. Offline policies that may refuse a task that
// fits are not bound by this part; part 1 holds for them.
//
// 3. Forced arrivals (forced.h): a task that the arrivals before it cannot keep out of every node
// is placed by every protocol-following policy; it is forced in every scenario's LP, and a
// scenario that would drop it cannot happen and is skipped. This is what makes the bound see CPU
// run out (CPU-only and CPU-heavy tasks take their cores before the GPU-dense ones arrive).
//
// 4. Time-indexed scenarios (BoundOptions::timed, off by default). When the first key T is
// dropped, every node that could host T when empty is full at T in CPU (used > C − c), memory
// (> M − m) or GPUs (as in forced.h), so what arrives later fits in what was left, and what
// arrived before filled it. A further key set (the first one's keys and every CPU-only task) has
// each scenario that would raise the maximum also bounded by an LP with the classes split at T's
// bucket and each node type's nodes split over those modes (bound.cc, TimedColumnGeneration);
// its certificate is Σ_t m_t · max over modes of π + the class terms. Measured, it leaves cpu300
// as it was and lifts cpu-scarce by at most 0.03 point (docs/placement.md): a diagnosis aid.
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
  // Of those, how many a scenario says were placed (≤ count): the certificate's term for them
  // is (s_j − w_j) · forced_j, without the max(0, ·) — part 2 above.
  int64_t forced = 0;
  int64_t cpu_milli = 0, memory_mib = 0;
  int num_gpu = 0;
  int32_t gpu_milli = 0;  // per GPU; < 1000 only when num_gpu = 1
  std::string gpu_spec;   // "|"-separated allowed models; empty: any

  int64_t Demand() const { return int64_t{num_gpu} * gpu_milli; }
};

struct PackingInstance {
  std::vector<PackingNodeType> types;
  std::vector<PackingClass> classes;
  // How coarsely MakeInstance grouped tasks into classes (bound.cc, ClassKey): 0 exact; higher
  // levels (up to 4) leave out memory and round CPU down (by ≤ 2 cores, to two significant bits,
  // to a power of two), then leave CPU out — only ever lowering what a class needs, never its GPU
  // demand, so the bound stays valid and the LP stays small.
  int coarse = 0;
  // Host memory exact in the classes (asked for, coarse = 0, at most kMaxExactMemoryClasses
  // classes); otherwise rounded down to a power of two. The time-indexed LP (part 4) counts memory
  // towards filling a node only when it is exact.
  bool exact_memory = false;
};

// Node types (identical hardware) of `nodes`; classes of `tasks` (CPU, memory rounded down to a
// power of two, GPUs, share, models; CPU-only tasks by CPU and memory alone; coarser when there
// are too many, see `coarse`), each with count 0 — the caller fills counts.
// The LP has a row per class: the trace's workloads have 63–403 exact classes, the synthetic
// generators up to 3,571 (CPU and memory drawn per task); with CLP (lp.h) every one of them is
// solved on exact classes, the slowest (cpu-scarce, 1,649 classes) in about a CPU minute per
// seed. Coarser classes are the fallback for workloads beyond that.
constexpr size_t kMaxBoundClasses = 4000;
// With `exact_memory` (part 4 asks for it), exact memory is tried first, while it gives at most
// kMaxExactMemoryClasses classes (cpu300: 150 instead of 120; the generators draw memory per task
// and stay at powers of two).
constexpr size_t kMaxExactMemoryClasses = 1000;
PackingInstance MakeInstance(const std::vector<TraceNode>& nodes,
                             const std::vector<TraceTask>& tasks,
                             size_t max_classes = kMaxBoundClasses, bool exact_memory = false);
// The class of each task of `tasks` in `instance` (−1 for a task that needs nothing).
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
// add. Leaves the LP's dual in *dual (and, if asked, the LP's tasks placed per class — what the
// relaxed optimum leaves out shows where the loss is) and returns min(DualBound(*dual), Σ n_j s_j).
double PackingUpperBound(const PackingInstance& instance, PackingDual* dual,
                         std::vector<double>* placed = nullptr);

struct MetricBound {
  double unallocated_pct = 0;  // lower bound on 100 − mean allocated % over the bin's events
  double packable_pct = 0;     // UB of the bin's last prefix, % of capacity
  int events = 0;              // events in the bin
  // Non-empty: the bound was refused (BoundRefusal) and the numbers above are the trivial ones
  // (unallocated ≥ 0, packable ≤ 100 %).
  std::string refused;
};

// Why the bound is not offered for `nodes`, or "" when it is: only a node list without any GPU
// is refused (no capacity, no metric). CPU-only nodes are node types of the LP that only CPU-only
// classes may use, so a scenario that forces a CPU-only task may put it there
// (tests/placement/bound_test.cc brute-forces every protocol-following policy on tiny instances
// with and without them).
std::string BoundRefusal(const std::vector<TraceNode>& nodes);

struct BoundOptions {
  // Checkpoints: an LP every `stride` events of the bin (and at its last event).
  int stride = 40;
  // Use the protocol's drop rule (part 2 above); false: the packing bound alone (part 1).
  bool protocol = true;
  // Key sets: tasks whose drop would force the drop of at least this share of capacity among
  // all arrivals (what covers them). Only keys are forced, and only their first drop splits the
  // scenarios. Each share gives a valid bound; the least is kept. 0.7 binds on most workloads;
  // 0.95 (only the smallest tasks are keys, so forcing every key placed until the first one drops
  // asks the most of the LP) where CPU runs out early: cpu-scarce seed 42 33.69 → 34.53, the
  // trace's workloads and the other generators within 0.01 (docs/benchmarks-archive.md).
  std::vector<double> key_covers = {0.7, 0.95};
  // Split each bucket of first-drop scenarios by kind of need (CPU-only, share, whole GPUs) and
  // CPU's power of two, one scenario per group (bound.cc, GroupOf): tighter, and as valid. False:
  // one scenario per bucket, its meet over all of the bucket's keys (as before; for comparison).
  bool group_keys = true;
  // Part 4 (off by default: measured, it moves the bound where CPU runs out by at most 0.03
  // point, at 3× the CPU time on cpu-scarce; docs/placement.md): a further key set — the first
  // one's keys (none if key_covers is empty) and every CPU-only task — each of whose scenarios,
  // when its plain LP would raise the maximum, is also bounded by the time-indexed LP (needs
  // group_keys); classes then keep exact memory where they stay few. The least over key sets is
  // kept, so this never loosens the bound.
  bool timed = false;
  // Classes beyond this make the instance coarser (PackingInstance::coarse): a looser bound that
  // is computed in minutes rather than hours.
  size_t max_classes = kMaxBoundClasses;
  // Where the scenarios of the first drop split the arrivals, in % of capacity arrived: every 1%
  // from 30% to 70% (where CPU runs out, the first key drops come early: cpu-scarce's bound on
  // seed 42 25.4 → 27.4 with steps of 2%, 34.53 → 34.70 with steps of 1%, at a few % more LPs on
  // the trace), finer towards 100% (where GPU fragmentation drops them).
  std::vector<double> splits_pct = {
      30, 31, 32, 33,   34, 35,   36, 37,   38, 39,    40,   41,    42,  43,    44,
      45, 46, 47, 48,   49, 50,   51, 52,   53, 54,    55,   56,    57,  58,    59,
      60, 61, 62, 63,   64, 65,   66, 67,   68, 69,    70,   80,    85,  90,    92,
      94, 95, 96, 96.5, 97, 97.5, 98, 98.5, 99, 99.25, 99.5, 99.75, 100, 100.25};
};

// The lower bound on the replay metric at arrived = x% (replay.h) for this arrival sequence:
// after event i, allocated ≤ min(arrived_i, UB(prefix_c) for checkpoints c ≥ i, UB(prefix_c) +
// arrived_i − arrived_c for checkpoints c ≤ i).
// UB on the milli-GPU any policy has allocated once every task of `arrivals` has arrived (with
// options.protocol, any policy that follows the protocol's drop rule): the quantity the metric
// bound is made of, for tests that compare it with an exhaustive search.
double AllocatedUpperBound(const std::vector<TraceNode>& nodes,
                           const std::vector<TraceTask>& arrivals,
                           const BoundOptions& options = {});

MetricBound UnallocatedLowerBound(const std::vector<TraceNode>& nodes,
                                  const std::vector<TraceTask>& arrivals, int x = 100,
                                  const BoundOptions& options = {});

}  // namespace gpupool::placement::sim
