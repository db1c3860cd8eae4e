// Replay: FGD's evaluation protocol (traces/alibaba-gpu-v2023/PROTOCOL.md) over the engine.
//
// Per seed: shuffle the task list, append uniform resamples (with replacement) until the GPU
// request reaches tune × capacity, place tasks online one by one (a task that fits nowhere is
// dropped), and after each task add 100 × used / capacity to bin round(100 × arrived /
// capacity). The metric is 100 − the bin mean at arrived = 100%.
//
// Pure and deterministic: the seed drives the shuffle, the resamples, the engine's tie order and
// the Random strategy. Thread safety: plain functions.
#pragma once

#include <cstdint>
#include <vector>

#include "placement/placement.h"
#include "placement/sim/trace.h"

namespace gpupool::placement::sim {

inline constexpr int kMaxArrivedPct = 140;

struct ReplayResult {
  Strategy strategy = Strategy::kFirstFit;
  uint64_t seed = 0;
  // alloc_pct[x]: mean allocated GPU % over the events with round(arrived %) = x; < 0 if none.
  std::vector<double> alloc_pct;
  int64_t tasks = 0, placed = 0, dropped = 0;

  // 100 − alloc_pct[x]; NaN when bin x saw no event.
  double UnallocatedAt(int x) const;
};

int64_t CapacityMilli(const std::vector<TraceNode>& nodes);

// The seed's arrival sequence: the shuffled trace plus resamples up to tune × capacity.
std::vector<TraceTask> Arrivals(const std::vector<TraceTask>& trace, uint64_t seed, double tune,
                                int64_t capacity_milli);

// FGD's target workload: classes (cpu, gpu_milli, num_gpu, gpu_spec), most frequent first, until
// they cover `coverage` of the tasks; weights are the class counts.
std::vector<WorkloadClass> TargetWorkload(const std::vector<TraceTask>& trace,
                                          double coverage = 0.95);

// The workload a strategy is given: FGD's top-95% classes, except fgd-pack, which gets every
// class (it weighs rare shapes by how few nodes can host them, so it needs to see them).
std::vector<WorkloadClass> WorkloadFor(Strategy s, const std::vector<TraceTask>& trace);

// Runs one replay in oracle mode: the engine is given `workload` (usually WorkloadFor the whole
// trace, a peek at the future no daemon has) before the first arrival. `limit` > 0 stops after
// that many arrivals (for quick tests).
Result<ReplayResult> Replay(const std::vector<TraceNode>& nodes,
                            const std::vector<TraceTask>& arrivals,
                            const std::vector<WorkloadClass>& workload, Strategy strategy,
                            uint64_t seed, size_t limit = 0);

// Runs one replay the way gpupoold places: the engine learns the workload online through a
// WorkloadFeed (workload_feed.h) — each arrival is observed, the feed synced, then the task
// placed — so a decision sees only the arrivals so far. The tie order is gpupoold's
// (ReplayTieSeed: `seed` for fgd and fgd-pack, where the daemon hashes the pool's name;
// registration order for the others).
// `decisions`, when given, receives each arrival's node ("" when dropped).
Result<ReplayResult> ReplayOnline(const std::vector<TraceNode>& nodes,
                                  const std::vector<TraceTask>& arrivals, Strategy strategy,
                                  uint64_t seed, size_t limit = 0,
                                  std::vector<std::string>* decisions = nullptr);

}  // namespace gpupool::placement::sim
