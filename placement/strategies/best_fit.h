// best-fit: the node left with the least CPU and GPU after the placement, as FGD's artifact
// scores it: 100 × (1 − [½ (cpu_free − cpu_req)/128000 + ½ (gpu_free − gpu_req)/8000]), higher
// wins. (The artifact then min–max normalises over the feasible nodes; that keeps the order, so
// the engine compares the raw value, kept exact in micro-units.) Devices: best fit in the node.
//
// A StrategyPlugin (plugin.h); MakePlugin(Strategy::kBestFit) returns it. Thread safety: none.
#pragma once

#include "placement/plugin.h"

namespace gpupool::placement {

// The raw score × 10^6 (integer, so ties are exact).
int64_t BestFitScore(int64_t cpu_free, int64_t cpu_req, int64_t gpu_free_milli,
                     int64_t gpu_req_milli);

}  // namespace gpupool::placement
