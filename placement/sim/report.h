// Report: what gpupool-sim prints and writes — a side-by-side table, JSON for other tools, and an
// SVG plot of unallocated GPU % against arrived GPU % (the paper's figure). Pure string builders.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "placement/sim/bound.h"
#include "placement/sim/replay.h"

namespace gpupool::placement::sim {

struct Summary {
  Strategy strategy = Strategy::kFirstFit;
  std::string label;  // printed instead of the strategy's name when set (the bound's row)
  double mean = 0, sd = 0, min = 0, max = 0;  // unallocated % at arrived = 100, over seeds
  int runs = 0;
  double seconds_per_replay = 0;      // wall time, measured by the caller
  double cpu_seconds_per_replay = 0;  // process CPU time (steadier on a shared machine)
  double decisions_per_second = 0;    // by CPU time
};

// The bound (bound.h) of one seed's arrival sequence.
struct SeedBound {
  uint64_t seed = 0;
  MetricBound bound;
};

// Mean ± sample sd of UnallocatedAt(100) over the results of one strategy.
Summary Summarize(Strategy s, const std::vector<ReplayResult>& results);
// The same over the seeds' bounds; label "bound".
Summary SummarizeBound(const std::vector<SeedBound>& bounds);

// `mode`: "online" (the model learned from the arrivals so far, as gpupoold) or "oracle" (the
// model from the whole trace, for comparison); printed in the title and written as "mode".
std::string Table(const std::string& workload, const std::vector<Summary>& rows,
                  const std::string& mode = "oracle");
// One row per seed: each strategy's unallocated % at arrived = 100, the bound, and the gap from
// the best strategy of that seed to the bound.
std::string PerSeedTable(const std::string& workload, const std::vector<ReplayResult>& results,
                         const std::vector<SeedBound>& bounds);
std::string Json(const std::string& workload, double tune, const std::vector<ReplayResult>& results,
                 const std::vector<Summary>& rows, const std::vector<SeedBound>& bounds = {},
                 const std::string& mode = "oracle");
// Mean unallocated % per strategy over its seeds, arrived 0…130 %.
std::string Svg(const std::string& workload, const std::vector<ReplayResult>& results);

}  // namespace gpupool::placement::sim
