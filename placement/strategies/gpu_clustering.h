// gpu-clustering: keep tasks of one kind (GPU share, 1, 2, ≤4, more whole GPUs) together, as
// FGD's artifact scores it (higher wins): the node hosts only this kind 75–100, this kind and
// others 50–75, nothing yet 25–50, only other kinds 0–25; within a band
// 25 × (8000 − idle milli-GPU) / 8000, so fuller nodes come first. CPU-only tasks score 0
// everywhere (the tie order decides), as in the artifact.
//
// A StrategyPlugin (plugin.h); MakePlugin(Strategy::kGpuClustering) returns it. Thread safety:
// none.
#pragma once

#include "placement/plugin.h"

namespace gpupool::placement {

// Kind of a request: 0 share, 1/2/3/4 for 1, 2, ≤4, more whole GPUs; -1 CPU-only.
int RequestKindClass(const CompiledRequest& req);
int64_t GpuClusteringScore(const NodeState& node, int kind);

}  // namespace gpupool::placement
